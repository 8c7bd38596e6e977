// bloomline._core: the compiled half of bloomline. The public package
// (python/bloomline/__init__.py) re-exports it.
#include <pybind11/pybind11.h>

#include "bloomline/murmur3.hpp"
#include "args_py.hpp"
#include "keys_py.hpp"
#include "register.hpp"

#ifndef BLOOMLINE_VERSION
#error "BLOOMLINE_VERSION must be defined by the build (from pyproject.toml)"
#endif

namespace py = pybind11;

namespace bloomline {

namespace {
Reader readers[4] = {};
}

void register_reader(Kind kind, Reader reader) { readers[static_cast<int>(kind)] = reader; }

void register_from_bytes(py::module_& m) {
    m.def(
        "from_bytes",
        [](py::handle data) {
            Header h;
            {
                const py_args::BytesView view(data, "data");
                h = decode_header(view.data(), view.size());
            }
            const Reader r = readers[static_cast<int>(h.kind)];
            if (r == nullptr) throw std::invalid_argument(std::string("this bloomline cannot read a ") + kind_name(h.kind));
            return r(data);
        },
        py::arg("data"),
        "Read any filter written by to_bytes (or a saved file's bytes); the kind comes from the header.");
    m.attr("from_bytes").attr("__module__") = "bloomline";
}

}  // namespace bloomline

PYBIND11_MODULE(_core, m) {
    m.doc() = "bloomline's C++ core (use the bloomline package, not this module)";
    m.attr("__version__") = BLOOMLINE_VERSION;
    bloomline::py_keys::init_numpy_types();

    m.def(
        "murmur3_128",
        [](py::handle data, py::handle seed) {
            const std::uint64_t s =
                bloomline::py_args::to_u64(seed, "seed", 0, ~std::uint64_t{0}, "[0, 2**64)");
            const bloomline::Hash128 h = bloomline::py_keys::hash_key(data.ptr(), s, "data");
            // h1 | h2 << 64, as mmh3.hash128(..., x64arch=True, signed=False)
            py::int_ lo(h.h1), hi(h.h2);
            return py::reinterpret_steal<py::int_>(
                PyNumber_Or(lo.ptr(), py::reinterpret_steal<py::object>(PyNumber_Lshift(hi.ptr(), py::int_(64).ptr())).ptr()));
        },
        py::arg("data"), py::arg("seed") = 0,
        R"doc(MurmurHash3_x64_128 of a key, as one unsigned 128-bit int.

The key is turned into bytes by bloomline's key rules (str as UTF-8, int as 8
little-endian bytes); for bytes and seeds below 2**32 this equals
mmh3.hash128(data, seed, x64arch=True, signed=False).)doc");

    bloomline::register_sizing(m);
    bloomline::register_bloom(m);
    bloomline::register_from_bytes(m);
}
