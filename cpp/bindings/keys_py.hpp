// Python keys -> 128-bit hashes, by the key rules (README.md, "Keys"). The one place
// that knows Python's types; everything after it works on Hash128.
//
// Scalar keys: str (UTF-8), bytes, int (8 bytes LE, [-2**63, 2**64)), NumPy
// integer and bool scalars, any other C-contiguous buffer (raw bytes).
// Batches (with_batch_hashes): NumPy arrays of integer/bool/S/U dtype are
// hashed and probed with the GIL released, with no allocation beyond the
// result; object arrays, lists and other iterables are hashed with the GIL
// held and probed without it. Arrays of hashes made by hash_many (dtype
// HASH_DTYPE, carrying their seed) are used as they are: a scalable chain
// hashes a batch once for all its stages.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "bloomline/hash_batch.hpp"
#include "bloomline/keys.hpp"
#include "bloomline/key_source.hpp"
#include "bloomline/lines.hpp"
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

// ---- batches ----------------------------------------------------------------

// A NumPy array of keys, made C-contiguous and native-endian.
struct ArrayKeys {
    py::array arr;
    char kind = 0;  // 'b', 'i', 'u', 'S', 'U', 'O', or 'H' (hashes from hash_many)
    std::size_t itemsize = 0;
    std::size_t n = 0;
    std::vector<py::ssize_t> shape;
    const unsigned char* data() const { return static_cast<const unsigned char*>(arr.data()); }
};

bool is_ndarray(py::handle keys);
// seed: the filter's; arrays of hashes made with another seed are refused.
ArrayKeys prepare_array(py::handle keys, std::uint64_t seed, const char* param);
// The dtype of hash_many's arrays: {h1: <u8, h2: <u8}, its metadata
// {"bloomline_seed": seed}.
py::dtype hash_dtype(std::uint64_t seed);
// First element of a U array that UTF-8 cannot encode, as an error message
// ("" if none). Runs without the GIL, before anything is changed.
std::string check_unicode(const ArrayKeys& a, const char* param);
// Hash lists, tuples, iterables and object arrays (GIL held).
std::vector<Hash128> hash_iterable(py::handle keys, std::uint64_t seed, const char* param);
// A str, bytes or int where a batch belongs: TypeError saying so.
void refuse_single_key(PyObject* obj, const char* param);
// An iterator over keys (TypeError if keys is not iterable, or is one key).
py::object iterate(py::handle keys, const char* param);
// Up to max more keys of iter hashed into out (their places counted from
// first, for errors); false once iter is exhausted.
bool hash_next(py::handle iter, std::uint64_t seed, const char* param, std::size_t max, std::size_t first,
               std::vector<Hash128>* out);
[[noreturn]] void raise_value_error(const std::string& msg);

// The keys of an integer array: key i alone, or a run of keys through the
// batch hash (AVX2 where the CPU has it). Narrower integers are widened to
// 64 bits (sign-extended when signed) a few hundred at a time.
template <class T>
struct IntKeys {
    const T* v;
    std::uint64_t seed;

    Hash128 operator()(std::size_t i) const { return hash_int(v[i], seed); }

    void range(std::size_t first, std::size_t m, Hash128* out) const {
        if constexpr (sizeof(T) == 8) {
            murmur3_128_u64_many(reinterpret_cast<const std::uint64_t*>(v + first), m, seed, out);
        } else {
            using Wide = typename std::conditional<std::is_signed<T>::value, std::int64_t, std::uint64_t>::type;
            constexpr std::size_t kStep = 256;
            std::uint64_t wide[kStep];
            for (std::size_t s = 0; s < m; s += kStep) {
                const std::size_t c = std::min(kStep, m - s);
                for (std::size_t i = 0; i < c; ++i)
                    wide[i] = static_cast<std::uint64_t>(static_cast<Wide>(v[first + s + i]));
                murmur3_128_u64_many(wide, c, seed, out + s);
            }
        }
    }
};

// Call f(source) with source(i) = hash of element i of a fixed-width array.
// A source may be called from several threads at once.
template <class F>
void with_array_source(const ArrayKeys& a, std::uint64_t seed, F&& f) {
    const unsigned char* p = a.data();
    const std::size_t w = a.itemsize;
    if (a.kind == 'H') {
        Prehashed source{reinterpret_cast<const Hash128*>(p)};
        return f(source);
    }
    auto ints = [&](auto tag) {
        using T = decltype(tag);
        IntKeys<T> source{reinterpret_cast<const T*>(p), seed};
        f(source);
    };
    switch (a.kind) {
        case 'b':
        case 'u':
            if (w == 1) return ints(std::uint8_t{});
            if (w == 2) return ints(std::uint16_t{});
            if (w == 4) return ints(std::uint32_t{});
            return ints(std::uint64_t{});
        case 'i':
            if (w == 1) return ints(std::int8_t{});
            if (w == 2) return ints(std::int16_t{});
            if (w == 4) return ints(std::int32_t{});
            return ints(std::int64_t{});
        case 'S':
            return f([p, w, seed](std::size_t i) {
                const unsigned char* e = p + i * w;
                return murmur3_128(e, strip_trailing_nuls(e, w), seed);
            });
        default:  // 'U', already checked by check_unicode
            return f([p, w, seed](std::size_t i) {
                // One buffer per thread: sources are called from every
                // thread of a threads= batch. 4 bytes per code point at most.
                thread_local std::vector<unsigned char> utf8;
                if (utf8.size() < w) utf8.resize(w);
                const auto* cps = reinterpret_cast<const std::uint32_t*>(p + i * w);
                std::uint32_t bad = 0;
                const std::ptrdiff_t len = utf32_to_utf8(cps, strip_trailing_nuls(cps, w / 4), utf8.data(), &bad);
                return murmur3_128(utf8.data(), static_cast<std::size_t>(len < 0 ? 0 : len), seed);
            });
    }
}

// The batch driver: body(src, n, out) runs with the GIL released, where src
// is a key source (key_source.hpp; callable from any thread) and out[i]
// receives the answer for key i. The result has the input's shape for NumPy arrays,
// else 1-D. Fixed-width NumPy keys are hashed inside body, without the GIL
// (by every thread of a threads= batch); lists, iterables and object arrays
// are hashed first, with it.
template <class Out = bool, class Body>
py::array_t<Out> with_batch_hashes(py::handle keys, std::uint64_t seed, const char* param, Body body) {
    std::vector<Hash128> hashes;
    std::vector<py::ssize_t> shape;
    if (is_ndarray(keys)) {
        ArrayKeys a = prepare_array(keys, seed, param);
        if (a.kind != 'O') {
            py::array_t<Out> result(a.shape);
            Out* out = result.mutable_data();
            std::string error;
            {
                // Safe without the GIL: `a.arr` keeps the keys' memory alive,
                // and a filter's memory never moves.
                py::gil_scoped_release nogil;
                if (a.kind == 'U') error = check_unicode(a, param);
                if (error.empty()) with_array_source(a, seed, [&](auto source) { body(source, a.n, out); });
            }
            if (!error.empty()) raise_value_error(error);
            return result;
        }
        shape = a.shape;
        hashes = hash_iterable(a.arr, seed, param);
    } else {
        hashes = hash_iterable(keys, seed, param);
        shape = {static_cast<py::ssize_t>(hashes.size())};
    }
    py::array_t<Out> result(shape);
    Out* out = result.mutable_data();
    {
        py::gil_scoped_release nogil;
        Prehashed hash_at{hashes.data()};
        body(hash_at, hashes.size(), out);
    }
    return result;
}

// The lines of a bytes-like block as keys (lines.hpp): body(src, n, out)
// with the GIL released, out[i] for line i of a 1-D result.
template <class Out = bool, class Body>
py::array_t<Out> with_line_hashes(py::handle data, std::uint64_t seed, const char* param, Body body) {
    Py_buffer view{};
    if (PyObject_GetBuffer(data.ptr(), &view, PyBUF_SIMPLE) != 0) {
        PyErr_Clear();
        throw py::type_error(std::string(param) + " must be bytes-like (a block of text lines), got " +
                             type_name(data.ptr()));
    }
    std::unique_ptr<Py_buffer, void (*)(Py_buffer*)> hold(&view, PyBuffer_Release);
    const auto* p = static_cast<const unsigned char*>(view.buf);
    const auto n = static_cast<std::size_t>(view.len);
    LineSpans lines;
    {
        py::gil_scoped_release nogil;
        split_lines(p, n, &lines);
    }
    py::array_t<Out> result(static_cast<py::ssize_t>(lines.size()));
    Out* out = result.mutable_data();
    {
        py::gil_scoped_release nogil;
        LineKeys src{p, &lines, seed};
        body(src, lines.size(), out);
    }
    return result;
}

// Keys for a call that needs no answer per key (update): f(src, n) with the
// GIL released, once for an array, list or tuple, and for any other
// iterable once per chunk of kChunkKeys keys, so that a generator of any
// length takes bounded memory and its keys are added as they come.
constexpr std::size_t kChunkKeys = std::size_t{1} << 16;
template <class F>
void for_each_chunk(py::handle keys, std::uint64_t seed, const char* param, F&& f) {
    if (is_ndarray(keys) || PyList_Check(keys.ptr()) || PyTuple_Check(keys.ptr())) {
        with_batch_hashes(keys, seed, param, [&f](auto& src, std::size_t n, bool*) { f(src, n); });
        return;
    }
    py::object iter = iterate(keys, param);
    std::vector<Hash128> chunk;
    std::size_t first = 0;
    for (bool more = true; more;) {
        more = hash_next(iter, seed, param, kChunkKeys, first, &chunk);
        first += chunk.size();
        py::gil_scoped_release nogil;
        Prehashed src{chunk.data()};
        f(src, chunk.size());
    }
}

}  // namespace bloomline::py_keys
