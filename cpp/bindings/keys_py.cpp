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

constexpr std::size_t kChunk = 512;  // hashes per chunk: 8 KiB on the stack

// Hash one element of a batch. Errors name its place ("keys[3] must be ...");
// the name is built only on failure, by hashing again: the same error recurs.
Hash128 hash_item(PyObject* item, std::uint64_t seed, const char* param, std::size_t index) {
    try {
        return hash_key(item, seed, "key");
    } catch (py::error_already_set&) {
        const std::string what = std::string(param) + "[" + std::to_string(index) + "]";
        return hash_key(item, seed, what.c_str());
    }
}  // hashes per chunk: 8 KiB on the stack

// Fixed-width NumPy data: hash chunk by chunk and run op, GIL released.
// Returns an error message ("" if none) to raise once the GIL is back.
std::string run_fixed_width(const unsigned char* data, std::size_t n, char kind, std::size_t itemsize,
                            std::uint64_t seed, bool* out, void* ctx, BatchOp op, const char* param) {
    Hash128 hashes[kChunk];
    std::vector<unsigned char> utf8;
    if (kind == 'U') utf8.resize(itemsize);  // 4 bytes per code point at most
    for (std::size_t start = 0; start < n; start += kChunk) {
        const std::size_t m = std::min(kChunk, n - start);
        const unsigned char* p = data + start * itemsize;
        switch (kind) {
            case 'b':
            case 'u':
                switch (itemsize) {
                    case 1: hash_ints(reinterpret_cast<const std::uint8_t*>(p), m, seed, hashes); break;
                    case 2: hash_ints(reinterpret_cast<const std::uint16_t*>(p), m, seed, hashes); break;
                    case 4: hash_ints(reinterpret_cast<const std::uint32_t*>(p), m, seed, hashes); break;
                    default: hash_ints(reinterpret_cast<const std::uint64_t*>(p), m, seed, hashes); break;
                }
                break;
            case 'i':
                switch (itemsize) {
                    case 1: hash_ints(reinterpret_cast<const std::int8_t*>(p), m, seed, hashes); break;
                    case 2: hash_ints(reinterpret_cast<const std::int16_t*>(p), m, seed, hashes); break;
                    case 4: hash_ints(reinterpret_cast<const std::int32_t*>(p), m, seed, hashes); break;
                    default: hash_ints(reinterpret_cast<const std::int64_t*>(p), m, seed, hashes); break;
                }
                break;
            case 'S':
                for (std::size_t i = 0; i < m; ++i) {
                    const unsigned char* e = p + i * itemsize;
                    hashes[i] = murmur3_128(e, strip_trailing_nuls(e, itemsize), seed);
                }
                break;
            case 'U':
                for (std::size_t i = 0; i < m; ++i) {
                    const auto* cps = reinterpret_cast<const std::uint32_t*>(p + i * itemsize);
                    const std::size_t nchars = strip_trailing_nuls(cps, itemsize / 4);
                    std::uint32_t bad = 0;
                    const std::ptrdiff_t len = utf32_to_utf8(cps, nchars, utf8.data(), &bad);
                    if (len < 0) {
                        char hex[16];
                        std::snprintf(hex, sizeof hex, "0x%x", bad);
                        return std::string(param) + "[" + std::to_string(start + i) +
                               "] is not encodable as UTF-8 (code point " + hex + ")";
                    }
                    hashes[i] = murmur3_128(utf8.data(), static_cast<std::size_t>(len), seed);
                }
                break;
        }
        op(ctx, hashes, m, out + start);
    }
    return {};
}

}  // namespace

py::array_t<bool> run_batch(py::handle keys, std::uint64_t seed, const char* param, void* ctx, BatchOp op) {
    const NumpyTypes& np = numpy_types();
    PyObject* obj = keys.ptr();

    if (is_instance(obj, np.ndarray)) {
        py::array arr = py::reinterpret_borrow<py::array>(keys);
        const char kind = arr.dtype().kind();
        if (kind != 'b' && kind != 'i' && kind != 'u' && kind != 'S' && kind != 'U' && kind != 'O')
            throw_py(PyExc_TypeError, std::string(param) + " array dtype " + py::str(arr.dtype()).cast<std::string>() +
                                          " is not a key type; use integer, bool, S (bytes), U (str) or object");
        if (!arr.dtype().attr("isnative").cast<bool>())
            arr = arr.attr("astype")(arr.dtype().attr("newbyteorder")("="));
        if (!(arr.flags() & py::array::c_style)) arr = py::module_::import("numpy").attr("ascontiguousarray")(arr);

        std::vector<py::ssize_t> shape(arr.shape(), arr.shape() + arr.ndim());
        py::array_t<bool> result(shape);
        bool* out = result.mutable_data();
        const std::size_t n = static_cast<std::size_t>(arr.size());

        if (kind == 'O') {
            auto** items = static_cast<PyObject**>(const_cast<void*>(arr.data()));
            std::vector<Hash128> hashes(n);
            for (std::size_t i = 0; i < n; ++i) hashes[i] = hash_item(items[i], seed, param, i);
            py::gil_scoped_release nogil;
            op(ctx, hashes.data(), n, out);
            return result;
        }
        const auto* data = static_cast<const unsigned char*>(arr.data());
        const std::size_t itemsize = static_cast<std::size_t>(arr.itemsize());
        std::string error;
        if (itemsize > 0 || n == 0) {
            // Safe without the GIL: `arr` (and so its memory) stays referenced
            // here, and the filter's memory never moves.
            py::gil_scoped_release nogil;
            error = run_fixed_width(data, n, kind, itemsize, seed, out, ctx, op, param);
        } else {
            // Zero-width S/U elements are all the empty key.
            std::vector<Hash128> hashes(n, murmur3_128("", 0, seed));
            py::gil_scoped_release nogil;
            op(ctx, hashes.data(), n, out);
        }
        if (!error.empty()) throw_py(PyExc_ValueError, error);
        return result;
    }

    if (PyUnicode_Check(obj) || PyBytes_Check(obj) || PyByteArray_Check(obj) || PyLong_Check(obj))
        throw_py(PyExc_TypeError, std::string(param) + " must be an iterable of keys or a NumPy array, got " +
                                      type_name(obj) + " (use add()/in for a single key)");

    std::vector<Hash128> hashes;
    if (PyList_Check(obj) || PyTuple_Check(obj)) {
        const Py_ssize_t n = PySequence_Fast_GET_SIZE(obj);
        PyObject** items = PySequence_Fast_ITEMS(obj);
        hashes.resize(static_cast<std::size_t>(n));
        for (Py_ssize_t i = 0; i < n; ++i) hashes[static_cast<std::size_t>(i)] = hash_item(items[i], seed, param, i);
    } else {
        PyObject* it = PyObject_GetIter(obj);
        if (it == nullptr) {
            PyErr_Clear();
            throw_py(PyExc_TypeError, std::string(param) + " must be an iterable of keys or a NumPy array, got " +
                                          type_name(obj));
        }
        py::object iter = py::reinterpret_steal<py::object>(it);
        while (PyObject* item = PyIter_Next(it)) {
            py::object hold = py::reinterpret_steal<py::object>(item);
            hashes.push_back(hash_item(item, seed, param, hashes.size()));
        }
        if (PyErr_Occurred()) throw_current();
    }
    py::array_t<bool> result(static_cast<py::ssize_t>(hashes.size()));
    bool* out = result.mutable_data();
    {
        py::gil_scoped_release nogil;
        op(ctx, hashes.data(), hashes.size(), out);
    }
    return result;
}

}  // namespace bloomline::py_keys
