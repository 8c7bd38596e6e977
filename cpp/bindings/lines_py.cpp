// Python face of lines of text (lines.hpp): each line's hash, as add_lines
// reads it (hash_lines), and the lines a mask keeps (select_lines).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <string>

#include "args_py.hpp"
#include "bloomline/lines.hpp"
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
        [](py_args::Buffer data, py::array_t<bool, py::array::c_style | py::array::forcecast> mask) {
            const py_args::BytesView view(data, "data");
            LineSpans lines;
            std::string out;
            {
                py::gil_scoped_release nogil;
                split_lines(view.data(), view.size(), &lines);
            }
            if (static_cast<std::size_t>(mask.size()) != lines.size())
                throw std::invalid_argument("mask has " + std::to_string(mask.size()) + " entries, data has " +
                                            std::to_string(lines.size()) + " lines");
            const bool* keep = mask.data();
            {
                py::gil_scoped_release nogil;
                std::size_t total = 0;
                for (std::size_t i = 0; i < lines.size(); ++i)
                    if (keep[i]) total += lines.end_with_newline(i, view.size()) - lines.begin[i] + 1;
                out.reserve(total);
                for (std::size_t i = 0; i < lines.size(); ++i) {
                    if (!keep[i]) continue;
                    const std::uint64_t b = lines.begin[i], e = lines.end_with_newline(i, view.size());
                    out.append(reinterpret_cast<const char*>(view.data()) + b, e - b);
                    if (e == view.size() && (e == b || view.data()[e - 1] != '\n')) out.push_back('\n');
                }
            }
            return py::bytes(out);
        },
        py::arg("data"), py::arg("mask"),
        "The lines of data where mask is True, each with its own ending (a last line without one gets \\n).");
}

}  // namespace bloomline
