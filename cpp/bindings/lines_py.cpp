// Python face of lines of text (lines.hpp): each line's hash, as add_lines
// reads it (hash_lines), and the lines a mask keeps (select_lines).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <memory>
#include <string>
#include <vector>

#include "args_py.hpp"
#include "bloomline/lines.hpp"
#include "bloomline/parallel.hpp"
#include "keys_py.hpp"
#include "register.hpp"

namespace bloomline {

namespace py = pybind11;

void register_lines(py::module_& m) {
    m.def(
        "hash_lines",
        [](py_args::Buffer data, py_args::Int seed) {
            const std::uint64_t s = py_args::to_u64(seed, "seed", 0, ~std::uint64_t{0}, "[0, 2**64)");
            return py_keys::hashes_into_array(s, [&](auto body) { py_keys::with_line_hashes(data, s, "data", body); });
        },
        py::arg("data"), py::arg("seed") = 0,
        "The hashes of each line of a block of text (as add_lines reads it), like hash_many's.");

    m.def(
        "select_lines",
        [](py_args::Buffer data, py::array_t<bool, py::array::c_style | py::array::forcecast> mask,
           py_args::Int threads) {
            const py_args::BytesView view(data, "data");
            const unsigned asked = parse_threads(threads);
            const unsigned char* p = view.data();
            const std::size_t n = view.size();
            LineSpans lines;
            {
                py::gil_scoped_release nogil;
                split_lines_on(p, n, &lines, asked);
            }
            if (static_cast<std::size_t>(mask.size()) != lines.size())
                throw std::invalid_argument("mask has " + std::to_string(mask.size()) + " entries, data has " +
                                            std::to_string(lines.size()) + " lines");
            // A copy of the mask, taken once: other Python threads may write
            // to it (a NumPy array is not copied) while the GIL is released.
            const auto* mask_bytes = reinterpret_cast<const unsigned char*>(mask.data());
            std::unique_ptr<bool[]> keep(new bool[lines.size()]);
            for (std::size_t i = 0; i < lines.size(); ++i) keep[i] = mask_bytes[i] != 0;
            return py_keys::selected_lines(p, n, lines, keep.get(), asked);
        },
        py::arg("data"), py::arg("mask"), py::kw_only(), py::arg("threads") = 1,
        "The lines of data where mask is True, each with its own ending (a last line without one gets \\n). "
        "threads=N copies on N threads (0: one per CPU).");
}

}  // namespace bloomline
