// Python keys -> 128-bit hashes, by the key rules (README.md, "Keys"). The one place
// that knows Python's types; everything after it works on Hash128.
//
// Scalar keys: str (UTF-8), bytes, int (8 bytes LE in [-2**63, 2**64), a
// tagged form beyond), float (Python's equality: 42.0 is 42; NaN is no
// key), tuple and frozenset (tagged, length-prefixed element keys), NumPy
// integer, bool and float scalars, any other C-contiguous buffer (raw
// bytes). docs/FORMAT.md, "Keys", has the bytes; keys.hpp the fixed-width ones.
// Batches (read_batch, below): NumPy arrays of integer/bool/float/S/U dtype,
// and Arrow columns (any object with __arrow_c_array__ or
// __arrow_c_stream__: pyarrow, pandas, polars, DuckDB; arrow_keys.hpp reads
// them) are hashed and probed with the GIL released, with no allocation
// beyond the result; object arrays, lists and other iterables are hashed
// with the GIL held and probed without it. Arrays of hashes made by
// hash_many (dtype HASH_DTYPE, carrying their seed) are used as they are: a
// scalable chain hashes a batch once for all its stages.
//
// Nulls: an Arrow column's nulls; None, pd.NA and pd.NaT in any batch; and a
// float NaN anywhere (it equals nothing, not even itself; pandas marks
// missing values with it). Refused with a ValueError naming the first, or
// with nulls="skip" left out of the batch, their answers False (0).
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "args_py.hpp"
#include "bloomline/arrow_keys.hpp"
#include "bloomline/hash_batch.hpp"
#include "bloomline/keys.hpp"
#include "bloomline/key_source.hpp"
#include "bloomline/lines.hpp"
#include "bloomline/murmur3.hpp"
#include "bloomline/parallel.hpp"

namespace bloomline::py_keys {

namespace py = pybind11;

// NumPy's scalar and array types, looked up once NumPy is imported (all
// null before: no object is an instance of them then).
struct NumpyTypes {
    PyObject* ndarray = nullptr;
    PyObject* generic = nullptr;
    PyObject* integer = nullptr;
    PyObject* bool_ = nullptr;
    PyObject* floating = nullptr;
    PyObject* longdouble = nullptr;
    PyObject* timedelta64 = nullptr;  // (an np.integer, but a duration: no key)
};
const NumpyTypes& numpy_types();

std::string type_name(PyObject* o);


// Hash one key. `what` names it in errors ("key", "keys[3]").
Hash128 hash_key(PyObject* key, std::uint64_t seed, const char* what = "key");

// The 64-bit pattern of an int read in place when its magnitude fits in the
// digits read here (below 2**64, and at most 2**63 when negative); false
// sends it to the general reader. Saves the call into libpython that
// PyLong_AsLongLongAndOverflow is, on every int key.
inline bool small_int_key(PyObject* o, std::uint64_t* v) {
#if PY_VERSION_HEX < 0x030C0000 && PYLONG_BITS_IN_DIGIT == 30
    const Py_ssize_t size = Py_SIZE(o);
    if (size < -3 || size > 3) return false;
    const digit* d = reinterpret_cast<PyLongObject*>(o)->ob_digit;
    const std::size_t n = static_cast<std::size_t>(size < 0 ? -size : size);
    std::uint64_t mag = 0;
    if (n >= 1) mag = d[0];
    if (n >= 2) mag |= static_cast<std::uint64_t>(d[1]) << 30;
    if (n == 3) {
        if (d[2] >= 16) return false;  // 2**64 or more
        mag |= static_cast<std::uint64_t>(d[2]) << 60;
    }
    if (size < 0) {
        if (mag > (std::uint64_t{1} << 63)) return false;  // below -2**63
        mag = std::uint64_t{0} - mag;
    }
    *v = mag;
    return true;
#elif PY_VERSION_HEX >= 0x030C0000
    if (!PyUnstable_Long_IsCompact(reinterpret_cast<PyLongObject*>(o))) return false;
    *v = static_cast<std::uint64_t>(static_cast<std::int64_t>(
        PyUnstable_Long_CompactValue(reinterpret_cast<PyLongObject*>(o))));
    return true;
#else
    (void)o;
    (void)v;
    return false;
#endif
}

// hash_key for the forms one call per key mostly takes (an ASCII str, bytes,
// an int), inline in the scalar add and lookup, with the same hashes; every
// other key goes through hash_key and its rules.
inline Hash128 hash_scalar_key(PyObject* key, std::uint64_t seed) {
    if (PyUnicode_CheckExact(key) && PyUnicode_IS_COMPACT_ASCII(key))
        return murmur3_128(PyUnicode_DATA(key), static_cast<std::size_t>(PyUnicode_GET_LENGTH(key)), seed);
    if (PyBytes_CheckExact(key))
        return murmur3_128(PyBytes_AS_STRING(key), static_cast<std::size_t>(PyBytes_GET_SIZE(key)), seed);
    std::uint64_t v = 0;
    if (PyLong_CheckExact(key) && small_int_key(key, &v)) return murmur3_128_u64(v, seed);
    return hash_key(key, seed);
}
// The bytes of one key by the key rules (an int's 8 bytes LE, a tuple's
// tagged encoding, ...): what hash_key hashes.
std::string key_bytes(PyObject* key, const char* what = "key");

// ---- batches ----------------------------------------------------------------

// nulls=: "raise" (the default) or "skip".
enum class Nulls { raise, skip };

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
// Has keys __arrow_c_array__ or __arrow_c_stream__?
bool offers_arrow(py::handle keys);
// seed: the filter's; arrays of hashes made with another seed are refused.
ArrayKeys prepare_array(py::handle keys, std::uint64_t seed, const char* param);
// The dtype of hash_many's arrays: {h1: <u8, h2: <u8}, its metadata
// {"bloomline_seed": seed}.
py::dtype hash_dtype(std::uint64_t seed);
// The hashes of a U array's elements (their UTF-8) into out, reading the
// array once, in slices on `threads` threads: "" or, for the first element
// UTF-8 cannot encode, an error message. Runs without the GIL, before the
// filter is touched, so a bad element changes nothing.
std::string hash_unicode(const ArrayKeys& a, std::uint64_t seed, const char* param, Hash128* out,
                         unsigned threads = 1);
// Is item a null (the rule above)?
bool is_null(PyObject* item);
// A str, bytes or int where a batch belongs: TypeError saying so.
void refuse_single_key(PyObject* obj, const char* param);
// An iterator over keys (TypeError if keys is not iterable, or is one key).
py::object iterate(py::handle keys, const char* param);
// Up to max more keys of iter hashed into out; *index counts the items
// taken (their places, for errors). False once iter is exhausted. With
// nulls="skip", nulls are taken but left out; else a null raises.
bool hash_next(py::handle iter, std::uint64_t seed, const char* param, std::size_t max, std::size_t* index,
               std::vector<Hash128>* out, Nulls nulls = Nulls::raise);
[[noreturn]] void raise_value_error(const std::string& msg);

Nulls parse_nulls(py::handle nulls);
std::string null_error(const char* param, std::size_t index);

// An Arrow input, its chunks moved out of the producer's capsules (and
// released with this object): one column, in one or more chunks.
struct ArrowInput {
    ArrowSchema schema{};
    std::vector<ArrowArray> arrays;
    std::vector<ArrowColumn> columns;
    std::vector<std::size_t> starts{0};  // starts[c]: chunk c's first key; back(): the total
    ArrowInput() = default;
    ArrowInput(const ArrowInput&) = delete;
    ArrowInput& operator=(const ArrowInput&) = delete;
    ~ArrowInput();
    std::size_t size() const { return starts.back(); }
    // The first null's index, or size().
    std::size_t first_null() const;
    // One byte per key: 1 where it is not null.
    std::vector<std::uint8_t> valid() const;
    // f(source) over every key, for one chunk or many.
    template <class F>
    void with_source(std::uint64_t seed, F&& f) const {
        if (columns.size() == 1) {
            ArrowKeys src{columns.data(), seed};
            return f(src);
        }
        ArrowChunkedKeys src{columns.data(), starts.data(), columns.size(), seed};
        f(src);
    }
};
// keys read through the Arrow PyCapsule interface, or null if keys offer
// none (or their producer cannot export them, such as pandas without
// pyarrow: those keys are iterated instead).
std::unique_ptr<ArrowInput> read_arrow(py::handle keys, const char* param);

// Hash one element of a batch; errors name its place ("keys[3] must be ...").
Hash128 hash_item(PyObject* item, std::uint64_t seed, const char* param, std::size_t index);

// ---- the one batch reader ---------------------------------------------------
//
// read_batch walks a batch of any input kind by the key rules and hands
// each part to a visitor. The two visitors (hash the keys: with_batch_hashes;
// collect their bytes for a server that takes keys: key_items) differ only
// in what they do with a key; the walking, the null rule and the errors are
// the same for both because they are written once, here. A visitor has:
//   R array(ArrayKeys&)       a NumPy array of fixed-width keys, or of hashes ('H')
//   R arrow(ArrowInput&)      an Arrow column (its nulls are in its validity)
//   void reserve(n)           the element count, when it is known up front
//   void key(PyObject*, i)    element i of a list, tuple, object array or iterable
//   void null(i)              element i is a null and nulls="skip" (with "raise", the reader raises)
//   R objects(shape)          after the last element
[[noreturn]] void throw_current_error();

// How many elements a list, a tuple or an array has (an array's of every
// dimension: a 0-d array has one).
Py_ssize_t element_count(PyObject* seq, bool array);
[[noreturn]] void raise_changed_size(const char* param, Py_ssize_t from, Py_ssize_t to);

// Visit each element of a list or tuple, or an object array's, as fn(item, i)
// with a strong reference held: reading a key may run Python code (a
// subclass's methods, __index__, __class__, a buffer export) that changes
// the container, so the item array and the length are read afresh for each
// element, and a list whose length changed is an error, never a stale
// pointer. The key objects of a large list lie scattered over the heap, and
// reading each is a cache miss: object i + 8 is asked for while i is read.
template <class Fn>
void for_each_element(PyObject* seq, bool array, const char* param, Fn&& fn) {
    const Py_ssize_t n = element_count(seq, array);
    constexpr Py_ssize_t kAhead = 8;
    for (Py_ssize_t i = 0;; ++i) {
        const Py_ssize_t now = element_count(seq, array);
        if (now != n) raise_changed_size(param, n, now);
        if (i == n) return;
        PyObject** items = array ? reinterpret_cast<PyObject**>(py::detail::array_proxy(seq)->data)
                                 : PySequence_Fast_ITEMS(seq);
        if (i + kAhead < n) {
            const char* ahead = reinterpret_cast<const char*>(items[i + kAhead]);
            __builtin_prefetch(ahead, 0, 3);
            __builtin_prefetch(ahead + 64, 0, 3);
        }
        PyObject* const raw = items[i];
        // An exact str, bytes or int is read without running Python code,
        // so the list holds it throughout: no reference of our own, which
        // would write to every key object's cache line twice.
        if (PyUnicode_CheckExact(raw) || PyBytes_CheckExact(raw) || PyLong_CheckExact(raw)) {
            fn(raw, static_cast<std::size_t>(i));
            continue;
        }
        const py::object item = py::reinterpret_borrow<py::object>(raw);
        fn(item.ptr(), static_cast<std::size_t>(i));
    }
}

// One element by the null rule: v.key, or v.null (nulls="skip"), or a
// ValueError naming it.
template <class V>
void read_element(PyObject* item, std::size_t i, const char* param, Nulls nulls, V& v) {
    if (!is_null(item)) return v.key(item, i);
    if (nulls == Nulls::raise) raise_value_error(null_error(param, i));
    v.null(i);
}

// The elements of a list, tuple, object array or other iterable, in order;
// returns how many were read.
template <class V>
std::size_t read_objects(py::handle keys, const char* param, Nulls nulls, V& v) {
    PyObject* obj = keys.ptr();
    const bool array = is_ndarray(keys);  // object arrays: made C-contiguous
    if (array || PyList_Check(obj) || PyTuple_Check(obj)) {
        const auto n = static_cast<std::size_t>(element_count(obj, array));
        v.reserve(n);
        for_each_element(obj, array, param,
                         [&](PyObject* item, std::size_t i) { read_element(item, i, param, nulls, v); });
        return n;
    }
    py::object iter = iterate(keys, param);
    for (std::size_t i = 0;; ++i) {
        PyObject* item = PyIter_Next(iter.ptr());
        if (item == nullptr) {
            if (PyErr_Occurred()) throw_current_error();
            return i;
        }
        py::object hold = py::reinterpret_steal<py::object>(item);
        read_element(item, i, param, nulls, v);
    }
}

// seed: the filter's (arrays of hashes made with another are refused).
template <class V>
auto read_batch(py::handle keys, std::uint64_t seed, const char* param, Nulls nulls, V& v) {
    if (is_ndarray(keys)) {
        ArrayKeys a = prepare_array(keys, seed, param);
        if (a.kind != 'O') return v.array(a);
        read_objects(a.arr, param, nulls, v);
        return v.objects(a.shape);
    }
    if (std::unique_ptr<ArrowInput> arrow = read_arrow(keys, param)) return v.arrow(*arrow);
    refuse_single_key(keys.ptr(), param);
    const std::size_t n = read_objects(keys, param, nulls, v);
    return v.objects({static_cast<py::ssize_t>(n)});
}

// The bytes of each key of a batch by the key rules, as RESP bulk strings
// in batch order (for a server that takes keys, not hashes: RedisBloom's
// BF.*), nulls left out: valid[i] is 0 where key i is null (nulls="skip";
// with "raise" a null is a ValueError naming it). shape: the batch's.
struct KeyItems {
    std::string body;
    std::vector<std::size_t> ends;  // where each key's argument ends in body
    std::vector<std::uint8_t> valid;
    std::vector<py::ssize_t> shape;
};
KeyItems key_items(py::handle keys, const char* param, Nulls nulls);

// body(src, n, out) over the valid keys only (valid[i] != 0), the answers
// put back in place; out is 0 (False) for the others.
template <class Out, class Src, class Body>
void skip_nulls(Src& src, std::size_t n, const std::uint8_t* valid, Out* out, Body& body) {
    std::vector<Hash128> kept;
    std::vector<std::size_t> where;
    for (std::size_t i = 0; i < n; ++i) {
        if (!valid[i]) continue;
        where.push_back(i);
        kept.push_back(src(i));
    }
    std::unique_ptr<Out[]> answers(new Out[kept.size()]());
    Prehashed hashed{kept.data()};
    body(hashed, kept.size(), answers.get());
    std::fill(out, out + n, Out{});
    for (std::size_t j = 0; j < where.size(); ++j) out[where[j]] = answers[j];
}

// A float64 array's elements that are not NaN (1), and the first NaN's
// index in *first (a.n when there is none).
inline std::vector<std::uint8_t> not_nan(const ArrayKeys& a, std::size_t* first) {
    const auto* d = reinterpret_cast<const double*>(a.data());
    std::vector<std::uint8_t> ok(a.n, 1);
    *first = a.n;
    for (std::size_t i = 0; i < a.n; ++i) {
        if (d[i] != d[i]) {
            ok[i] = 0;
            if (*first == a.n) *first = i;
        }
    }
    return ok;
}

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
    switch (a.kind) {
        case 'b':
        case 'u':
        case 'i':
            return with_int_keys(p, w, a.kind == 'i', seed, [&f](auto source) { f(source); });
        case 'f': {  // float64, no NaN (the caller's nulls)
            const auto* d = reinterpret_cast<const double*>(p);
            return f([d, seed](std::size_t i) { return hash_float_key(d[i], seed); });
        }
        default:  // 'S' ('U' arrays are hashed first: hash_unicode)
            return f([p, w, seed](std::size_t i) {
                const unsigned char* e = p + i * w;
                return murmur3_128(e, strip_trailing_nuls(e, w), seed);
            });
    }
}

// The batch driver: body(src, n, out) runs with the GIL released, where src
// is a key source (key_source.hpp; callable from any thread) and out[i]
// receives the answer for key i. The result has the input's shape for NumPy
// arrays, else 1-D. Fixed-width NumPy keys and Arrow columns are hashed
// inside body, without the GIL (by every thread of a threads= batch); U
// arrays are hashed first without it, on up to `threads` threads; lists,
// iterables and object arrays are hashed first, with it. body is called
// once, with every key (or every key that is not null, nulls="skip").
// This is read_batch's hashing visitor.
template <class Out, class Body>
struct HashVisitor {
    std::uint64_t seed;
    const char* param;
    Nulls nulls;
    unsigned threads;
    Body& body;
    std::vector<Hash128> hashes;  // of the elements read one by one
    std::vector<std::uint8_t> valid;
    bool any_null = false;

    py::array_t<Out> array(ArrayKeys& a) {
        py::array_t<Out> result(a.shape);
        Out* out = result.mutable_data();
        std::string error;
        if (a.kind == 'f') {  // NaN is a null (the rule above)
            std::size_t nan_at = a.n;
            {
                py::gil_scoped_release nogil;
                const std::vector<std::uint8_t> ok = not_nan(a, &nan_at);
                if (nan_at == a.n) {
                    with_array_source(a, seed, [&](auto source) { body(source, a.n, out); });
                } else if (nulls == Nulls::skip) {
                    with_array_source(a, seed, [&](auto source) { skip_nulls(source, a.n, ok.data(), out, body); });
                }
            }
            if (nan_at < a.n && nulls == Nulls::raise) raise_value_error(null_error(param, nan_at));
            return result;
        }
        {
            // Safe without the GIL: `a.arr` keeps the keys' memory alive,
            // and a filter's memory never moves.
            py::gil_scoped_release nogil;
            if (a.kind == 'U') {
                // Hashed in one pass, then used in place: the array is
                // four times its text, and is read once.
                hashes.resize(a.n);
                error = hash_unicode(a, seed, param, hashes.data(), useful_threads(threads, a.n));
                Prehashed hashed{hashes.data()};
                if (error.empty()) body(hashed, a.n, out);
            } else {
                with_array_source(a, seed, [&](auto source) { body(source, a.n, out); });
            }
        }
        if (!error.empty()) raise_value_error(error);
        return result;
    }

    py::array_t<Out> arrow(ArrowInput& in) {
        const std::size_t n = in.size();
        py::array_t<Out> result(static_cast<py::ssize_t>(n));
        Out* out = result.mutable_data();
        std::size_t null_at = n;
        {
            py::gil_scoped_release nogil;
            null_at = in.first_null();
            if (null_at == n) {
                in.with_source(seed, [&](auto& src) { body(src, n, out); });
            } else if (nulls == Nulls::skip) {
                const std::vector<std::uint8_t> ok = in.valid();
                in.with_source(seed, [&](auto& src) { skip_nulls(src, n, ok.data(), out, body); });
            }
        }
        if (null_at < n && nulls == Nulls::raise) raise_value_error(null_error(param, null_at));
        return result;
    }

    void reserve(std::size_t n) {
        hashes.reserve(n);
        valid.reserve(n);
    }
    void key(PyObject* item, std::size_t i) {
        // (an ASCII str, bytes or a 64-bit int inline, as a scalar add's)
        hashes.push_back(PyUnicode_CheckExact(item) && PyUnicode_IS_COMPACT_ASCII(item)
                             ? murmur3_128(PyUnicode_DATA(item), static_cast<std::size_t>(PyUnicode_GET_LENGTH(item)), seed)
                             : hash_item(item, seed, param, i));
        valid.push_back(1);
    }
    void null(std::size_t) {
        hashes.emplace_back();
        valid.push_back(0);
        any_null = true;
    }

    py::array_t<Out> objects(const std::vector<py::ssize_t>& shape) {
        py::array_t<Out> result(shape);
        Out* out = result.mutable_data();
        py::gil_scoped_release nogil;
        Prehashed hash_at{hashes.data()};
        if (any_null)
            skip_nulls(hash_at, hashes.size(), valid.data(), out, body);
        else
            body(hash_at, hashes.size(), out);
        return result;
    }
};

template <class Out = bool, class Body>
py::array_t<Out> with_batch_hashes(py::handle keys, std::uint64_t seed, const char* param, Body body,
                                   Nulls nulls = Nulls::raise, unsigned threads = 1) {
    HashVisitor<Out, Body> v{seed, param, nulls, threads, body, {}, {}, false};
    return read_batch(keys, seed, param, nulls, v);
}

// The hashes of a batch as hash_many's array (its dtype carrying the seed):
// run(body) calls a batch driver (with_batch_hashes, with_line_hashes) with
// the body that fills it. The driver calls its body once, without the GIL;
// the body only hashes into memory of its own (no Python object is made
// there, so the GIL is never taken back inside it), and the array is made
// around that memory once the driver has returned. The body answers True
// for each key it is given, so the driver's own result says which keys were
// hashed (False: a null left out with nulls='skip').
template <class Run>
py::array hashes_into_array(std::uint64_t seed, Run run) {
    std::unique_ptr<Hash128[]> hashes;
    std::size_t count = 0;
    bool ran = false;
    run([&](auto& src, std::size_t n, bool* given) {
        if (ran) throw std::logic_error("hashes_into_array: the batch driver ran its body twice");
        ran = true;
        hashes.reset(new Hash128[n]);
        count = n;
        hash_range(src, 0, n, hashes.get());
        std::fill(given, given + n, true);
    });
    if (!hashes) hashes.reset(new Hash128[0]);
    // The array owns the hashes from here: a capsule frees them with it.
    py::capsule owner(hashes.get(), [](void* p) { delete[] static_cast<Hash128*>(p); });
    Hash128* data = hashes.release();
    return py::array(hash_dtype(seed), {static_cast<py::ssize_t>(count)}, {static_cast<py::ssize_t>(sizeof(Hash128))},
                     data, owner);
}

// The hashes of a batch (the key rules of with_batch_hashes), in order.
inline std::vector<Hash128> batch_hashes(py::handle keys, std::uint64_t seed) {
    std::vector<Hash128> hashes;
    with_batch_hashes(keys, seed, "keys", [&hashes](auto& src, std::size_t n, bool*) {
        hashes.resize(n);
        hash_range(src, 0, n, hashes.data());
    });
    return hashes;
}

// The lines of a bytes-like block (lines.hpp): body(p, n, lines) with the
// GIL held and the buffer held, after the block was split into lines on
// up to `threads` threads with the GIL released.
template <class Body>
auto with_lines(py::handle data, const char* param, unsigned threads, Body body) {
    Py_buffer view{};
    if (PyObject_GetBuffer(data.ptr(), &view, PyBUF_SIMPLE) != 0) {
        PyErr_Clear();
        Py_buffer strided{};
        const bool is_buffer = PyObject_GetBuffer(data.ptr(), &strided, PyBUF_FULL_RO) == 0;
        if (is_buffer) PyBuffer_Release(&strided);
        PyErr_Clear();
        throw py::type_error(std::string(param) + (is_buffer ? " must be one contiguous block of bytes (text lines), "
                                                               "got a non-contiguous "
                                                             : " must be bytes-like (a block of text lines), got ") +
                             type_name(data.ptr()));
    }
    std::unique_ptr<Py_buffer, void (*)(Py_buffer*)> hold(&view, PyBuffer_Release);
    // Lines are bytes: a buffer of wider items (a NumPy U or int array, an
    // array('u')) would be split at its raw bytes, its keys junk.
    if (view.itemsize != 1)
        throw py::type_error(std::string(param) + " must be a block of bytes (text lines), got a " +
                             type_name(data.ptr()) + " of " + std::to_string(view.itemsize) +
                             "-byte items; pass bytes (for text: '\\n'.join(lines).encode())");
    const auto* p = static_cast<const unsigned char*>(view.buf);
    const auto n = static_cast<std::size_t>(view.len);
    LineSpans lines;
    {
        py::gil_scoped_release nogil;
        split_lines_on(p, n, &lines, threads);
    }
    return body(p, n, lines);
}

// The lines of a bytes-like block as keys: body(src, n, out) with the GIL
// released, out[i] for line i of a 1-D result.
template <class Out = bool, class Body>
py::array_t<Out> with_line_hashes(py::handle data, std::uint64_t seed, const char* param, Body body,
                                  unsigned threads = 1) {
    return with_lines(data, param, threads, [&](const unsigned char* p, std::size_t, const LineSpans& lines) {
        py::array_t<Out> result(static_cast<py::ssize_t>(lines.size()));
        Out* out = result.mutable_data();
        py::gil_scoped_release nogil;
        LineKeys src{p, &lines, seed};
        body(src, lines.size(), out);
        return result;
    });
}

// The lines of p[0, n) that keep names, as one bytes object (select_lines_on,
// parallel.hpp), copied on up to `threads` threads with the GIL released.
// Called with the GIL held.
inline py::bytes selected_lines(const unsigned char* p, std::size_t n, const LineSpans& lines, const bool* keep,
                                unsigned threads) {
    py::bytes out;
    {
        py::gil_scoped_release nogil;
        select_lines_on(p, n, lines, keep, threads, [&out](std::size_t size) {
            py::gil_scoped_acquire gil;
            out = py_args::new_bytes(size);
            return reinterpret_cast<unsigned char*>(PyBytes_AS_STRING(out.ptr()));
        });
    }
    return out;
}

// Keys for a call that needs no answer per key (update): f(src, n) with the
// GIL released, once for an array, list or tuple, and for any other
// iterable once per chunk of kChunkKeys keys, so that a generator of any
// length takes bounded memory and its keys are added as they come.
constexpr std::size_t kChunkKeys = std::size_t{1} << 16;
template <class F>
void for_each_chunk(py::handle keys, std::uint64_t seed, const char* param, F&& f, Nulls nulls = Nulls::raise,
                    unsigned threads = 1) {
    if (is_ndarray(keys) || PyList_Check(keys.ptr()) || PyTuple_Check(keys.ptr()) || offers_arrow(keys)) {
        with_batch_hashes(
            keys, seed, param, [&f](auto& src, std::size_t n, bool*) { f(src, n); }, nulls, threads);
        return;
    }
    py::object iter = iterate(keys, param);
    std::vector<Hash128> chunk;
    std::size_t taken = 0;
    for (bool more = true; more;) {
        more = hash_next(iter, seed, param, kChunkKeys, &taken, &chunk, nulls);
        py::gil_scoped_release nogil;
        Prehashed src{chunk.data()};
        f(src, chunk.size());
    }
}

}  // namespace bloomline::py_keys
