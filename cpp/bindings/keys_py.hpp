// Python keys -> 128-bit hashes, by the rules of DESIGN.md. The one place
// that knows Python's types; everything after it works on Hash128.
//
// Scalar keys: str (UTF-8), bytes, int (8 bytes LE, [-2**63, 2**64)), NumPy
// integer and bool scalars, any other C-contiguous buffer (raw bytes).
// Batches (run_batch): NumPy arrays of integer/bool/S/U dtype are hashed
// and probed with the GIL released, in chunks, with no allocation beyond
// the result; object arrays, lists and other iterables are hashed with the
// GIL held and probed without it.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstdint>
#include <string>
#include <vector>

#include "bloomline/keys.hpp"
#include "bloomline/murmur3.hpp"

namespace bloomline::py_keys {

namespace py = pybind11;

// NumPy's scalar and array types, looked up once at import.
struct NumpyTypes {
    PyObject* ndarray = nullptr;
    PyObject* generic = nullptr;
    PyObject* integer = nullptr;
    PyObject* bool_ = nullptr;
};
NumpyTypes& numpy_types();
void init_numpy_types();

std::string type_name(PyObject* o);

// 64-bit pattern of a Python int key; OverflowError outside [-2**63, 2**64).
std::uint64_t int_key(PyObject* o, const char* what);

// Hash one key. `what` names it in errors ("key", "keys[3]").
Hash128 hash_key(PyObject* key, std::uint64_t seed, const char* what = "key");

// The batch driver. `op(const Hash128* h, size_t n, bool* out)` is called on
// consecutive chunks without the GIL; out points at the answers for those
// keys in the result array (same shape as a NumPy input, 1-D otherwise).
using BatchOp = void (*)(void* ctx, const Hash128* h, std::size_t n, bool* out);
py::array_t<bool> run_batch(py::handle keys, std::uint64_t seed, const char* param, void* ctx, BatchOp op);

template <class F>
py::array_t<bool> run_batch(py::handle keys, std::uint64_t seed, const char* param, F& f) {
    return run_batch(keys, seed, param, &f, [](void* ctx, const Hash128* h, std::size_t n, bool* out) {
        (*static_cast<F*>(ctx))(h, n, out);
    });
}

}  // namespace bloomline::py_keys
