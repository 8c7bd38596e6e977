#include "keys_py.hpp"

#include <cstring>

namespace bloomline::py_keys {

NumpyTypes& numpy_types() {
    static NumpyTypes t;
    return t;
}

void init_numpy_types() {
    py::module_ np = py::module_::import("numpy");
    NumpyTypes& t = numpy_types();
    // Held for the life of the process, like NumPy's own C API table.
    t.ndarray = py::object(np.attr("ndarray")).release().ptr();
    t.generic = py::object(np.attr("generic")).release().ptr();
    t.integer = py::object(np.attr("integer")).release().ptr();
    t.bool_ = py::object(np.attr("bool_")).release().ptr();
}

std::string type_name(PyObject* o) { return Py_TYPE(o)->tp_name; }

namespace {

[[noreturn]] void throw_current() { throw py::error_already_set(); }

[[noreturn]] void throw_py(PyObject* exc_type, const std::string& msg) {
    PyErr_SetString(exc_type, msg.c_str());
    throw py::error_already_set();
}

bool is_instance(PyObject* o, PyObject* type) {
    const int r = PyObject_IsInstance(o, type);
    if (r < 0) throw_current();
    return r == 1;
}

Hash128 hash_u64(std::uint64_t v, std::uint64_t seed) { return murmur3_128_u64(v, seed); }

Hash128 hash_buffer(PyObject* key, std::uint64_t seed, const char* what) {
    Py_buffer view;
    if (PyObject_GetBuffer(key, &view, PyBUF_SIMPLE) != 0) {
        PyErr_Clear();
        throw_py(PyExc_ValueError, std::string(what) + " of type " + type_name(key) +
                                       " is not a C-contiguous buffer; pass bytes(" + what + ") instead");
    }
    const Hash128 h = murmur3_128(view.buf, static_cast<std::size_t>(view.len), seed);
    PyBuffer_Release(&view);
    return h;
}

[[noreturn]] void bad_type(PyObject* key, const char* what) {
    throw_py(PyExc_TypeError, std::string(what) + " must be str, bytes-like or int, got " + type_name(key));
}

}  // namespace

std::uint64_t int_key(PyObject* o, const char* what) {
    int overflow = 0;
    const long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
    if (overflow == 0) {
        if (v == -1 && PyErr_Occurred()) throw_current();
        return static_cast<std::uint64_t>(v);
    }
    if (overflow > 0) {
        const unsigned long long u = PyLong_AsUnsignedLongLong(o);
        if (!(u == static_cast<unsigned long long>(-1) && PyErr_Occurred())) return u;
        PyErr_Clear();
    }
    // Show the value unless it is enormous (str() of a huge int is slow).
    std::string shown;
    if (_PyLong_NumBits(o) <= 256) {
        shown = py::str(py::handle{o}).cast<std::string>();
    } else {
        shown = "an integer of " + std::to_string(_PyLong_NumBits(o)) + " bits";
    }
    throw_py(PyExc_OverflowError, std::string(what) + " must be in [-2**63, 2**64) as an int key, got " + shown);
}

Hash128 hash_key(PyObject* key, std::uint64_t seed, const char* what) {
    // Most common first: crawler URLs are str.
    if (PyUnicode_Check(key)) {
        // ASCII str (nearly every URL): its bytes are its UTF-8, in place.
        if (PyUnicode_IS_COMPACT_ASCII(key))
            return murmur3_128(PyUnicode_DATA(key), static_cast<std::size_t>(PyUnicode_GET_LENGTH(key)), seed);
        Py_ssize_t len = 0;
        const char* s = PyUnicode_AsUTF8AndSize(key, &len);
        if (s == nullptr) throw_current();  // lone surrogates: UnicodeEncodeError
        return murmur3_128(s, static_cast<std::size_t>(len), seed);
    }
    if (PyBytes_Check(key)) return murmur3_128(PyBytes_AS_STRING(key), static_cast<std::size_t>(PyBytes_GET_SIZE(key)), seed);
    if (PyLong_Check(key)) return hash_u64(int_key(key, what), seed);
    if (PyFloat_Check(key) || key == Py_None) bad_type(key, what);

    const NumpyTypes& np = numpy_types();
    if (is_instance(key, np.generic)) {
        // NumPy scalars export buffers; only integer and bool ones are keys
        // (np.str_ and np.bytes_ were caught above as str and bytes).
        if (is_instance(key, np.bool_)) return hash_u64(PyObject_IsTrue(key) ? 1 : 0, seed);
        if (is_instance(key, np.integer)) {
            py::object as_int = py::reinterpret_steal<py::object>(PyNumber_Index(key));
            if (!as_int) throw_current();
            return hash_u64(int_key(as_int.ptr(), what), seed);
        }
        bad_type(key, what);
    }
    if (is_instance(key, np.ndarray))
        throw_py(PyExc_TypeError, std::string(what) +
                                      " is a numpy.ndarray: pass arrays to add_many/contains_many, or arr.tobytes() "
                                      "for one key of raw bytes");
    if (PyObject_CheckBuffer(key)) return hash_buffer(key, seed, what);
    if (PyIndex_Check(key)) {
        py::object as_int = py::reinterpret_steal<py::object>(PyNumber_Index(key));
        if (!as_int) throw_current();
        return hash_u64(int_key(as_int.ptr(), what), seed);
    }
    bad_type(key, what);
}

// ---------------------------------------------------------------------------
// Batches

namespace {

// Hash one element of a batch. Errors name its place ("keys[3] must be ...");
// the name is built only on failure, by hashing again: the same error recurs.
Hash128 hash_item(PyObject* item, std::uint64_t seed, const char* param, std::size_t index) {
    try {
        return hash_key(item, seed, "key");
    } catch (py::error_already_set&) {
        const std::string what = std::string(param) + "[" + std::to_string(index) + "]";
        return hash_key(item, seed, what.c_str());
    }
}

}  // namespace

void raise_value_error(const std::string& msg) { throw_py(PyExc_ValueError, msg); }

bool is_ndarray(py::handle keys) { return is_instance(keys.ptr(), numpy_types().ndarray); }

py::dtype hash_dtype(std::uint64_t seed) {
    // Native-endian: the array holds the core's Hash128 values as they are.
    py::list fields;
    fields.append(py::make_tuple("h1", "=u8"));
    fields.append(py::make_tuple("h2", "=u8"));
    py::dict meta;
    meta["bloomline_seed"] = seed;
    return py::module_::import("numpy").attr("dtype")(fields, py::arg("metadata") = meta).cast<py::dtype>();
}

namespace {
// Is arr made by hash_many? Then *seed is the seed it was hashed with.
bool hash_array_seed(const py::array& arr, std::uint64_t* seed) {
    py::object names = arr.dtype().attr("names");
    if (names.is_none() || !names.equal(py::make_tuple("h1", "h2")) || arr.itemsize() != 16) return false;
    py::object meta = arr.dtype().attr("metadata");  // a read-only mapping, or None
    if (meta.is_none()) return false;
    py::object s = meta.attr("get")("bloomline_seed");
    if (!py::isinstance<py::int_>(s)) return false;
    *seed = s.cast<std::uint64_t>();
    return true;
}
}  // namespace

ArrayKeys prepare_array(py::handle keys, std::uint64_t seed, const char* param) {
    ArrayKeys a;
    a.arr = py::reinterpret_borrow<py::array>(keys);
    a.kind = a.arr.dtype().kind();
    std::uint64_t hashed_with = 0;
    if (a.kind == 'V' && hash_array_seed(a.arr, &hashed_with)) {
        if (hashed_with != seed)
            throw_py(PyExc_ValueError, std::string(param) + " were hashed with seed " + std::to_string(hashed_with) +
                                           ", the filter's seed is " + std::to_string(seed));
        a.kind = 'H';
        if (!(a.arr.flags() & py::array::c_style) || !(a.arr.flags() & py::detail::npy_api::NPY_ARRAY_ALIGNED_))
            a.arr = py::module_::import("numpy").attr("ascontiguousarray")(a.arr);
        a.itemsize = 16;
        a.n = static_cast<std::size_t>(a.arr.size());
        a.shape.assign(a.arr.shape(), a.arr.shape() + a.arr.ndim());
        return a;
    }
    if (a.kind != 'b' && a.kind != 'i' && a.kind != 'u' && a.kind != 'S' && a.kind != 'U' && a.kind != 'O')
        throw_py(PyExc_TypeError, std::string(param) + " array dtype " + py::str(a.arr.dtype()).cast<std::string>() +
                                      " is not a key type; use integer, bool, S (bytes), U (str) or object");
    if (!a.arr.dtype().attr("isnative").cast<bool>())
        a.arr = a.arr.attr("astype")(a.arr.dtype().attr("newbyteorder")("="));
    if (!(a.arr.flags() & py::array::c_style)) a.arr = py::module_::import("numpy").attr("ascontiguousarray")(a.arr);
    a.itemsize = static_cast<std::size_t>(a.arr.itemsize());
    a.n = static_cast<std::size_t>(a.arr.size());
    a.shape.assign(a.arr.shape(), a.arr.shape() + a.arr.ndim());
    return a;
}

std::string check_unicode(const ArrayKeys& a, const char* param) {
    const std::size_t chars = a.itemsize / 4;
    const auto* cps = reinterpret_cast<const std::uint32_t*>(a.data());
    // A branch-free pass first (vectorised); the slow search only on failure.
    std::uint32_t bad_seen = 0;
    for (std::size_t i = 0; i < a.n * chars; ++i)
        bad_seen |= static_cast<std::uint32_t>(cps[i] > 0x10FFFF) | static_cast<std::uint32_t>(cps[i] - 0xD800 < 0x800);
    if (!bad_seen) return {};
    for (std::size_t i = 0; i < a.n * chars; ++i) {
        const std::uint32_t c = cps[i];
        if (c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) {
            char hex[16];
            std::snprintf(hex, sizeof hex, "0x%x", c);
            return std::string(param) + "[" + std::to_string(i / chars) + "] is not encodable as UTF-8 (code point " +
                   hex + ")";
        }
    }
    return {};
}

std::vector<Hash128> hash_iterable(py::handle keys, std::uint64_t seed, const char* param) {
    PyObject* obj = keys.ptr();
    std::vector<Hash128> hashes;
    if (is_ndarray(keys)) {  // object array, already C-contiguous
        auto arr = py::reinterpret_borrow<py::array>(keys);
        auto** items = static_cast<PyObject**>(const_cast<void*>(arr.data()));
        hashes.resize(static_cast<std::size_t>(arr.size()));
        for (std::size_t i = 0; i < hashes.size(); ++i) hashes[i] = hash_item(items[i], seed, param, i);
        return hashes;
    }
    refuse_single_key(obj, param);
    if (PyList_Check(obj) || PyTuple_Check(obj)) {
        const Py_ssize_t n = PySequence_Fast_GET_SIZE(obj);
        PyObject** items = PySequence_Fast_ITEMS(obj);
        hashes.resize(static_cast<std::size_t>(n));
        // The key objects of a large list are scattered over the heap, and
        // reading each is a cache miss: ask for object i + 8 (its header and
        // the first bytes of an ASCII str's data) while hashing object i.
        constexpr Py_ssize_t kAhead = 8;
        for (Py_ssize_t i = 0; i < n; ++i) {
            if (i + kAhead < n) {
                const char* ahead = reinterpret_cast<const char*>(items[i + kAhead]);
                __builtin_prefetch(ahead, 0, 3);
                __builtin_prefetch(ahead + 64, 0, 3);
            }
            hashes[static_cast<std::size_t>(i)] = hash_item(items[i], seed, param, static_cast<std::size_t>(i));
        }
        return hashes;
    }
    py::object iter = iterate(keys, param);
    hash_next(iter, seed, param, ~std::size_t{0}, 0, &hashes);
    return hashes;
}

void refuse_single_key(PyObject* obj, const char* param) {
    if (PyUnicode_Check(obj) || PyBytes_Check(obj) || PyByteArray_Check(obj) || PyLong_Check(obj))
        throw_py(PyExc_TypeError, std::string(param) + " must be an iterable of keys or a NumPy array, got " +
                                      type_name(obj) + " (use add()/in for a single key)");
}

py::object iterate(py::handle keys, const char* param) {
    refuse_single_key(keys.ptr(), param);
    PyObject* it = PyObject_GetIter(keys.ptr());
    if (it == nullptr) {
        PyErr_Clear();
        throw_py(PyExc_TypeError,
                 std::string(param) + " must be an iterable of keys or a NumPy array, got " + type_name(keys.ptr()));
    }
    return py::reinterpret_steal<py::object>(it);
}

bool hash_next(py::handle iter, std::uint64_t seed, const char* param, std::size_t max, std::size_t first,
               std::vector<Hash128>* out) {
    out->clear();
    while (out->size() < max) {
        PyObject* item = PyIter_Next(iter.ptr());
        if (item == nullptr) {
            if (PyErr_Occurred()) throw_current();
            return false;
        }
        py::object hold = py::reinterpret_steal<py::object>(item);
        out->push_back(hash_item(item, seed, param, first + out->size()));
    }
    return true;
}

}  // namespace bloomline::py_keys
