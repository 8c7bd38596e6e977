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
            // The output is sized, allocated, then filled, with the GIL
            // released around both passes, while other Python threads may
            // write to the mask (a NumPy array is not copied) or to the data
            // (a bytearray): both passes read one copy of the mask and one
            // reading of the last byte, so the copy writes exactly the size.
            const auto* mask_bytes = reinterpret_cast<const unsigned char*>(mask.data());
            std::unique_ptr<bool[]> keep(new bool[lines.size()]);
            const bool add_newline = last_line_needs_newline(p, n);
            // Each thread a range of lines: their sizes first, then each
            // copies its own into its place in one bytes object.
            const unsigned t = useful_threads(asked, lines.size());
            std::vector<std::size_t> offset(t + 1, 0);
            {
                py::gil_scoped_release nogil;
                run_on_threads(t, [&](unsigned k) {
                    const std::size_t lo = part_begin(lines.size(), t, k), hi = part_begin(lines.size(), t, k + 1);
                    for (std::size_t i = lo; i < hi; ++i) keep[i] = mask_bytes[i] != 0;
                    offset[k + 1] = selected_bytes(n, lines, keep.get(), add_newline, lo, hi);
                });
            }
            for (unsigned k = 0; k < t; ++k) offset[k + 1] += offset[k];
            py::bytes out(nullptr, offset[t]);
            auto* dst = reinterpret_cast<unsigned char*>(PyBytes_AS_STRING(out.ptr()));
            {
                py::gil_scoped_release nogil;
                run_on_threads(t, [&](unsigned k) {
                    copy_selected(p, n, lines, keep.get(), add_newline, part_begin(lines.size(), t, k),
                                  part_begin(lines.size(), t, k + 1), dst + offset[k]);
                });
            }
            return out;
        },
        py::arg("data"), py::arg("mask"), py::kw_only(), py::arg("threads") = 1,
        "The lines of data where mask is True, each with its own ending (a last line without one gets \\n). "
        "threads=N copies on N threads (0: one per CPU).");
}

}  // namespace bloomline
