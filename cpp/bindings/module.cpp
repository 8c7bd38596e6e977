// bloomline._core: the compiled half of bloomline. The public package
// (python/bloomline/__init__.py) re-exports it.
#include <pybind11/pybind11.h>

#include <system_error>

#include "args_py.hpp"
#include "filter_py.hpp"
#include "bloomline/file.hpp"
#include "bloomline/hash_batch.hpp"
#include "bloomline/murmur3.hpp"
#include "keys_py.hpp"
#include "register.hpp"

#ifndef BLOOMLINE_VERSION
#error "BLOOMLINE_VERSION must be defined by the build (from pyproject.toml)"
#endif

namespace py = pybind11;

namespace bloomline::py_filter {

namespace {
// bloomline.CapacityWarning, made once below; the module keeps it alive.
PyObject* capacity_warning = nullptr;
}  // namespace

void warn_capacity(const char* kind, std::uint64_t new_keys, std::uint64_t capacity, double error_rate,
                   double fp_rate_now) {
    const py::str message = py::str(
        "{} has taken {:,} new keys, past its capacity of {:,}: its expected false-positive rate is {:.3g} now "
        "(sized for {:g} at capacity) and rises with every new key, so more and more new keys will be reported "
        "as seen. Make it with a larger capacity, or use a ScalableBloomFilter, which grows.")
        .format(kind, new_keys, capacity, fp_rate_now, error_rate);
    // stacklevel 1: the line of Python that called the add.
    if (PyErr_WarnEx(capacity_warning, message.cast<std::string>().c_str(), 1) != 0) throw py::error_already_set();
}

}  // namespace bloomline::py_filter

PYBIND11_MODULE(_core, m) {
    m.doc() = "bloomline's C++ core (use the bloomline package, not this module)";
    // I/O errors from the core carry errno: raise them as OSError.
    py::register_exception_translator([](std::exception_ptr p) {
        try {
            if (p) std::rethrow_exception(p);
        } catch (const bloomline::FileError& e) {
            // OSError(errno, message, filename): the subclass by errno
            // (FileNotFoundError, PermissionError, ...), and the path given.
            py::object name = py::module_::import("os").attr("fsdecode")(py::bytes(e.path()));
            py::object err = py::reinterpret_borrow<py::object>(PyExc_OSError)(e.code().value(), e.message(), name);
            PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(err.ptr())), err.ptr());
        } catch (const std::system_error& e) {
            py::object err = py::reinterpret_borrow<py::object>(PyExc_OSError)(e.code().value(), e.what());
            PyErr_SetObject(PyExc_OSError, err.ptr());
        }
    });
    m.attr("__version__") = BLOOMLINE_VERSION;
    // The SIMD code this process uses for the integer batch hash
    // (hash_batch.hpp) and blocked lookups (layout_blocked.hpp): "avx2" or
    // "portable" (no AVX2, not x86, or BLOOMLINE_SIMD=portable).
    m.attr("simd_level") = bloomline::simd_level_name(bloomline::simd_level());
    // The locks of files mapped for writing (file.hpp): "ofd", any number
    // of writers per file; "flock", one at a time (macOS, BLOOMLINE_FLOCK).
    m.attr("file_locks") = bloomline::file_lock_kind();
    // bloomline.CapacityWarning, shared by every fixed filter (local and in
    // Redis): one warning per filter when it passes its capacity.
    bloomline::py_filter::capacity_warning = PyErr_NewExceptionWithDoc(
        "bloomline.CapacityWarning",
        "A fixed-size filter has taken more new keys than its capacity: its false-positive rate rises past the "
        "one it was made for. Make it larger, or use a ScalableBloomFilter, which grows.",
        PyExc_UserWarning, nullptr);
    if (bloomline::py_filter::capacity_warning == nullptr) throw py::error_already_set();
    m.attr("CapacityWarning") = py::reinterpret_borrow<py::object>(bloomline::py_filter::capacity_warning);

    m.def(
        "murmur3_128",
        [](bloomline::py_args::Key data, bloomline::py_args::Int seed) {
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

    // The order matters where a signature names a bound class: pybind11
    // writes a class's Python name into the signature (and so help()) of a
    // function defined after the class is registered, its C++ name before.
    // So BloomFilter comes before what names it: CountingBloomFilter.to_bloom
    // and the chain's encode_chain.
    // Inside each filter class, bind_common installs the scalar fast paths
    // after every def (filter_py.hpp).
    bloomline::register_sizing(m);
    bloomline::register_bloom(m);
    bloomline::register_counting(m);
    bloomline::register_chain(m);
    bloomline::register_window(m);
    bloomline::register_persistence(m);
    bloomline::register_files(m);
    bloomline::register_hashing(m);
    bloomline::register_lines(m);
    bloomline::register_redis(m);
}
