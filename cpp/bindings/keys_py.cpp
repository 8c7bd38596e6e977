#include "keys_py.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>

#include "bloomline/resp.hpp"

namespace bloomline::py_keys {

const NumpyTypes& numpy_types() {
    // Looked up once NumPy is imported, by whoever imports it: bloomline
    // never imports it for a check (`bloomline dedup` runs without it).
    // Until then no object can be one of its types, and every type is null.
    static NumpyTypes t;
    static const NumpyTypes none;
    if (t.ndarray) return t;
    static PyObject* const name = PyUnicode_InternFromString("numpy");
    py::object np = py::reinterpret_steal<py::object>(PyImport_GetModule(name));
    if (!np) {
        if (PyErr_Occurred()) throw py::error_already_set();
        return none;
    }
    NumpyTypes found;
    const std::pair<PyObject**, const char*> fields[] = {{&found.ndarray, "ndarray"},   {&found.generic, "generic"},
                                                         {&found.integer, "integer"},   {&found.bool_, "bool_"},
                                                         {&found.floating, "floating"}, {&found.longdouble, "longdouble"},
                                                         {&found.timedelta64, "timedelta64"}};
    for (const auto& field : fields) {
        *field.first = PyObject_GetAttrString(np.ptr(), field.second);
        if (!*field.first) {  // NumPy half imported (by another thread): looked up again next time
            PyErr_Clear();
            for (const auto& got : fields) Py_XDECREF(*got.first);
            return none;
        }
    }
    t = found;  // held for the life of the process, like NumPy's own C API table
    return t;
}

std::string type_name(PyObject* o) { return Py_TYPE(o)->tp_name; }

namespace {

[[noreturn]] void throw_current() { throw py::error_already_set(); }

// The last error raised here, per thread: hash_item tells the key rules'
// own error from one a key's own code raised (which may have called
// bloomline itself, and caught or passed on what it raised), by identity.
// hash_item clears it first: an error raised and freed before could share
// its address with a key's own error made later (CI saw it).
thread_local const PyObject* last_rule_error = nullptr;

[[noreturn]] void throw_py(PyObject* exc_type, const std::string& msg) {
    PyObject* exc = PyObject_CallFunction(exc_type, "s", msg.c_str());
    if (exc == nullptr) throw py::error_already_set();  // (no memory for it: that error instead)
    last_rule_error = exc;
    PyErr_SetObject(exc_type, exc);
    Py_DECREF(exc);
    throw py::error_already_set();
}

bool is_instance(PyObject* o, PyObject* type) {
    if (type == nullptr) return false;  // a NumPy type before NumPy is imported
    const int r = PyObject_IsInstance(o, type);
    if (r < 0) throw_current();
    return r == 1;
}

[[noreturn]] void bad_type(PyObject* key, const char* what) {
    throw_py(PyExc_TypeError, std::string(what) + " must be str, bytes-like, int, float, tuple or frozenset, got " +
                                  type_name(key));
}

// The 64-bit pattern of an int in [-2**63, 2**64), or false beyond.
bool int_key64(PyObject* o, std::uint64_t* v) {
    if (small_int_key(o, v)) return true;
    int overflow = 0;
    const long long s = PyLong_AsLongLongAndOverflow(o, &overflow);
    if (overflow == 0) {
        if (s == -1 && PyErr_Occurred()) throw_current();
        *v = static_cast<std::uint64_t>(s);
        return true;
    }
    if (overflow > 0) {
        const unsigned long long u = PyLong_AsUnsignedLongLong(o);
        if (!(u == static_cast<unsigned long long>(-1) && PyErr_Occurred())) {
            *v = u;
            return true;
        }
        PyErr_Clear();
    }
    return false;
}

// The big-int form of an int beyond 64 bits (keys.hpp): kBigIntTag, then its
// shortest two's-complement bytes, LE.
std::string big_int_key(PyObject* o) {
    const auto bits = static_cast<std::size_t>(_PyLong_NumBits(o));
    py::object b = py::handle(o).attr("to_bytes")(bits / 8 + 2, "little", py::arg("signed") = true);
    const char* p = PyBytes_AS_STRING(b.ptr());
    const auto n = static_cast<std::size_t>(PyBytes_GET_SIZE(b.ptr()));
    std::string out(1, static_cast<char>(kBigIntTag));
    out.append(p, shortest_twos_complement(reinterpret_cast<const unsigned char*>(p), n));
    return out;
}

[[noreturn]] void nan_key(const char* what) {
    throw_py(PyExc_ValueError, std::string(what) +
                                   " is NaN, which equals nothing, not even itself: it is not a key (in a batch it "
                                   "is a null; nulls='skip' leaves it out)");
}

// A Python int or float (or a NumPy float scalar), by the key rules:
// on_int(v) or on_bytes(p, n).
template <class OnBytes, class OnInt>
auto visit_number(PyObject* key, const char* what, OnBytes& on_bytes, OnInt& on_int) {
    if (PyLong_Check(key)) {
        std::uint64_t v = 0;
        if (int_key64(key, &v)) return on_int(v);
        const std::string big = big_int_key(key);
        return on_bytes(big.data(), big.size());
    }
    const double d = PyFloat_AsDouble(key);
    if (d == -1.0 && PyErr_Occurred()) throw_current();
    if (std::isnan(d)) nan_key(what);
    std::uint64_t v = 0;
    unsigned char bytes[kMaxFloatKeyBytes];
    std::size_t n = 0;
    if (float_key(d, &v, bytes, &n)) return on_int(v);
    return on_bytes(bytes, n);
}

std::string composite_key(PyObject* key, const char* what);

// A str with no UTF-8 form (a lone surrogate), named as the array paths name
// theirs: Python's own UnicodeEncodeError says neither the key nor its place.
[[noreturn]] void not_utf8(PyObject* key, const char* what) {
    if (!PyErr_ExceptionMatches(PyExc_UnicodeEncodeError)) throw_current();
    PyErr_Clear();
    Py_UCS4 bad = 0;
    for (Py_ssize_t i = 0, n = PyUnicode_GET_LENGTH(key); i < n && bad == 0; ++i) {
        const Py_UCS4 c = PyUnicode_READ_CHAR(key, i);
        if (c >= 0xD800 && c <= 0xDFFF) bad = c;
    }
    char hex[16];
    std::snprintf(hex, sizeof hex, "0x%x", static_cast<unsigned>(bad));
    throw_py(PyExc_ValueError, std::string(what) + " is not encodable as UTF-8 (code point " + hex + ")");
}

// The one reading of a key by the key rules: on_bytes(p, n) for str (its
// UTF-8), bytes and other buffers, and the tagged forms (floats that are not
// whole, ints beyond 64 bits, tuples, frozensets: keys.hpp), on_int(v) for
// ints, whole floats, NumPy integer and bool scalars (v is the 64-bit
// pattern, 8 bytes little-endian as bytes). Hashing and the key bytes sent
// to a server's BF commands both go through it.
template <class OnBytes, class OnInt>
auto visit_key(PyObject* key, const char* what, OnBytes&& on_bytes, OnInt&& on_int) {
    // Most common first: crawler URLs are str.
    if (PyUnicode_Check(key)) {
        // ASCII str (nearly every URL): its bytes are its UTF-8, in place.
        if (PyUnicode_IS_COMPACT_ASCII(key))
            return on_bytes(PyUnicode_DATA(key), static_cast<std::size_t>(PyUnicode_GET_LENGTH(key)));
        Py_ssize_t len = 0;
        const char* s = PyUnicode_AsUTF8AndSize(key, &len);
        if (s == nullptr) not_utf8(key, what);  // (lone surrogates)
        return on_bytes(s, static_cast<std::size_t>(len));
    }
    if (PyBytes_Check(key)) return on_bytes(PyBytes_AS_STRING(key), static_cast<std::size_t>(PyBytes_GET_SIZE(key)));
    if (PyLong_Check(key) || PyFloat_Check(key)) return visit_number(key, what, on_bytes, on_int);
    if (PyTuple_Check(key) || PyFrozenSet_Check(key)) {
        const std::string c = composite_key(key, what);
        return on_bytes(c.data(), c.size());
    }
    if (key == Py_None) bad_type(key, what);

    const NumpyTypes& np = numpy_types();
    auto index = [&]() {
        py::object as_int = py::reinterpret_steal<py::object>(PyNumber_Index(key));
        if (!as_int) throw_current();
        return visit_number(as_int.ptr(), what, on_bytes, on_int);
    };
    if (is_instance(key, np.generic)) {
        // NumPy scalars export buffers; only integer, bool and float ones
        // are keys (np.str_, np.bytes_ and np.float64 were caught above as
        // str, bytes and float).
        if (is_instance(key, np.bool_)) return on_int(PyObject_IsTrue(key) ? 1 : 0);
        if (is_instance(key, np.timedelta64)) bad_type(key, what);  // as a datetime64 is
        if (is_instance(key, np.integer)) return index();
        if (is_instance(key, np.floating)) {
            if (is_instance(key, np.longdouble))
                throw_py(PyExc_TypeError, std::string(what) + " is a numpy.longdouble, whose values a float key "
                                                              "cannot hold exactly; pass float(" + what + ")");
            return visit_number(key, what, on_bytes, on_int);  // float16 and float32: exact as a double
        }
        bad_type(key, what);
    }
    if (is_instance(key, np.ndarray))
        throw_py(PyExc_TypeError, std::string(what) +
                                      " is a numpy.ndarray: pass arrays to add_many/contains_many, or arr.tobytes() "
                                      "for one key of raw bytes");
    if (PyObject_CheckBuffer(key)) {
        Py_buffer view;
        if (PyObject_GetBuffer(key, &view, PyBUF_SIMPLE) != 0) {
            PyErr_Clear();
            throw_py(PyExc_ValueError, std::string(what) + " of type " + type_name(key) +
                                           " is not a C-contiguous buffer; pass bytes(" + what + ") instead");
        }
        std::unique_ptr<Py_buffer, void (*)(Py_buffer*)> hold(&view, PyBuffer_Release);
        return on_bytes(view.buf, static_cast<std::size_t>(view.len));
    }
    if (PyIndex_Check(key)) return index();
    bad_type(key, what);
}

void append_u64_le(std::string* out, std::uint64_t v) {
    for (int b = 0; b < 8; ++b) out->push_back(static_cast<char>(v >> (8 * b)));
}

}  // namespace

std::string key_bytes(PyObject* key, const char* what) {
    std::string out;
    visit_key(
        key, what, [&](const void* p, std::size_t n) { out.assign(static_cast<const char*>(p), n); },
        [&](std::uint64_t v) { append_u64_le(&out, v); });
    return out;
}

namespace {

// A tuple: kTupleTag, then each element's key bytes after their length (u64
// LE), in order. A frozenset: kFrozensetTag, then the same for its elements
// in the byte order of their encodings, so that equal sets are one key. The
// lengths make the encoding unambiguous. Nesting is bounded by
// kMaxKeyNesting and by Python's recursion limit: each level is a C++ frame,
// and a limit raised for deep Python code (sys.setrecursionlimit) would
// otherwise let a deep enough key overflow the C stack.
constexpr int kMaxKeyNesting = 256;
thread_local int key_nesting = 0;

std::string composite_key(PyObject* key, const char* what) {
    if (key_nesting >= kMaxKeyNesting) {
        const std::string root(what, std::strcspn(what, "[ "));  // (key, not key[0][0]... 256 times)
        throw_py(PyExc_RecursionError, root + " nests tuples or frozensets more than " + std::to_string(kMaxKeyNesting) +
                                       " deep");
    }
    if (Py_EnterRecursiveCall(" while reading a tuple or frozenset key") != 0) throw_current();
    ++key_nesting;
    struct Leave {
        ~Leave() {
            --key_nesting;
            Py_LeaveRecursiveCall();
        }
    } leave;
    const bool tuple = PyTuple_Check(key);
    std::vector<std::string> parts;
    py::object iter = py::reinterpret_steal<py::object>(PyObject_GetIter(key));
    if (!iter) throw_current();
    for (std::size_t i = 0;; ++i) {
        PyObject* item = PyIter_Next(iter.ptr());
        if (item == nullptr) {
            if (PyErr_Occurred()) throw_current();
            break;
        }
        py::object hold = py::reinterpret_steal<py::object>(item);
        const std::string name = std::string(what) + (tuple ? "[" + std::to_string(i) + "]" : " element");
        parts.push_back(key_bytes(item, name.c_str()));
    }
    if (!tuple) std::sort(parts.begin(), parts.end());
    std::string out(1, static_cast<char>(tuple ? kTupleTag : kFrozensetTag));
    for (const std::string& part : parts) {
        append_u64_le(&out, part.size());
        out += part;
    }
    return out;
}

}  // namespace

Hash128 hash_key(PyObject* key, std::uint64_t seed, const char* what) {
    return visit_key(
        key, what, [seed](const void* p, std::size_t n) { return murmur3_128(p, n, seed); },
        [seed](std::uint64_t v) { return murmur3_128_u64(v, seed); });
}

// ---------------------------------------------------------------------------
// Batches

// The name of element i is built only on failure, by hashing again: the
// same error recurs.
Hash128 hash_item(PyObject* item, std::uint64_t seed, const char* param, std::size_t index) {
    last_rule_error = nullptr;
    try {
        return hash_key(item, seed, "key");
    } catch (py::error_already_set& e) {
        // The key rules' own errors name the key "key": named again by its
        // place, the same error. Any other (a key's own __index__ or
        // __float__ that raised) goes on as it was raised, once: converting
        // the key again ran its code twice, and a second try that passed
        // added a key whose first conversion failed.
        const std::string msg = py::str(e.value());
        const bool ours = e.value().ptr() == last_rule_error && msg.size() > 3 && msg.compare(0, 3, "key") == 0 &&
                          (msg[3] == ' ' || msg[3] == '[');
        if (!ours) throw;
        throw_py(e.type().ptr(), std::string(param) + "[" + std::to_string(index) + "]" + msg.substr(3));
    }
}

void throw_current_error() { throw_current(); }

void raise_value_error(const std::string& msg) { throw_py(PyExc_ValueError, msg); }

bool is_ndarray(py::handle keys) { return is_instance(keys.ptr(), numpy_types().ndarray); }

namespace {
// Native-endian: the array holds the core's Hash128 values as they are.
py::list hash_fields() {
    py::list fields;
    fields.append(py::make_tuple("h1", "=u8"));
    fields.append(py::make_tuple("h2", "=u8"));
    return fields;
}
}  // namespace

py::dtype hash_dtype(std::uint64_t seed) {
    py::list fields = hash_fields();
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
    // The hashes are read as they lie: h1 then h2, native unsigned 64-bit
    // (an astype to another byte order or field order keeps the names and
    // the seed, and read raw would be other hashes).
    py::object native = py::module_::import("numpy").attr("dtype")(hash_fields());
    if (!arr.dtype().attr("__eq__")(native).cast<bool>())
        throw_py(PyExc_ValueError, "keys holds hashes of hash_many in another layout (dtype " +
                                       py::repr(arr.dtype()).cast<std::string>() +
                                       "): pass them as hash_many returned them (fields h1, h2, native uint64)");
    *seed = s.cast<std::uint64_t>();
    return true;
}
}  // namespace

ArrayKeys prepare_array(py::handle keys, std::uint64_t seed, const char* param) {
    // A masked array's data holds values behind its mask: hashing them
    // would add keys the caller masked out. (An exact ndarray is never one.)
    if (Py_TYPE(keys.ptr()) != reinterpret_cast<PyTypeObject*>(numpy_types().ndarray) &&
        is_instance(keys.ptr(), py::module_::import("numpy.ma").attr("MaskedArray").ptr()))
        throw_py(PyExc_TypeError, std::string(param) +
                                      " is a numpy masked array: its masked elements would be read by their hidden "
                                      "values; pass " + param + ".compressed() to leave them out, or " + param +
                                      ".filled(value)");
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
    if (a.kind != 'b' && a.kind != 'i' && a.kind != 'u' && a.kind != 'f' && a.kind != 'S' && a.kind != 'U' &&
        a.kind != 'O')
        throw_py(PyExc_TypeError, std::string(param) + " array dtype " + py::str(a.arr.dtype()).cast<std::string>() +
                                      " is not a key type; use integer, bool, float, S (bytes), U (str) or object");
    if (a.kind == 'f') {
        // Keys are doubles: float16 and float32 widen exactly; a longdouble
        // would be rounded, and two unequal values could become one key.
        if (a.arr.itemsize() > 8)
            throw_py(PyExc_TypeError, std::string(param) + " array dtype " +
                                          py::str(a.arr.dtype()).cast<std::string>() +
                                          " holds values a float key cannot hold exactly; cast it to float64");
        if (a.arr.itemsize() < 8) a.arr = a.arr.attr("astype")("float64");
    }
    if (!a.arr.dtype().attr("isnative").cast<bool>())
        a.arr = a.arr.attr("astype")(a.arr.dtype().attr("newbyteorder")("="));
    if (!(a.arr.flags() & py::array::c_style)) a.arr = py::module_::import("numpy").attr("ascontiguousarray")(a.arr);
    if (a.kind == 'b') {
        // A bool is the key 1 or 0, whatever byte holds it: a view of other
        // bytes as bool (arr.view(bool)) is True where NumPy says so.
        const auto* b = static_cast<const unsigned char*>(a.arr.data());
        const auto n = static_cast<std::size_t>(a.arr.size());
        if (std::any_of(b, b + n, [](unsigned char c) { return c > 1; }))
            a.arr = py::array(a.arr.attr("view")("u1").attr("__ne__")(0));
    }
    a.itemsize = static_cast<std::size_t>(a.arr.itemsize());
    a.n = static_cast<std::size_t>(a.arr.size());
    a.shape.assign(a.arr.shape(), a.arr.shape() + a.arr.ndim());
    return a;
}

namespace {

// Elements [lo, hi) of a U array: hash_unicode on one thread.
std::string hash_unicode_slice(const ArrayKeys& a, std::size_t lo, std::size_t hi, std::uint64_t seed,
                               const char* param, Hash128* out) {
    const std::size_t chars = a.itemsize / 4;
    std::vector<unsigned char> utf8(4 * chars + 1);  // 4 bytes per code point at most
    const auto* cps = reinterpret_cast<const std::uint32_t*>(a.data());
    for (std::size_t i = lo; i < hi; ++i) {
        const std::uint32_t* e = cps + i * chars;
        // ASCII (nearly every URL): the whole element narrowed in one
        // vectorised pass, its padding then dropped from the bytes.
        std::uint32_t any = 0;
        for (std::size_t c = 0; c < chars; ++c) {
            any |= e[c];
            utf8[c] = static_cast<unsigned char>(e[c]);
        }
        if (any < 0x80) {
            out[i] = murmur3_128(utf8.data(), strip_trailing_nuls(utf8.data(), chars), seed);
            continue;
        }
        std::uint32_t bad = 0;
        const std::ptrdiff_t len = utf32_to_utf8(e, strip_trailing_nuls(e, chars), utf8.data(), &bad);
        if (len < 0) {
            char hex[16];
            std::snprintf(hex, sizeof hex, "0x%x", bad);
            return std::string(param) + "[" + std::to_string(i) + "] is not encodable as UTF-8 (code point " + hex +
                   ")";
        }
        out[i] = murmur3_128(utf8.data(), static_cast<std::size_t>(len), seed);
    }
    return {};
}

}  // namespace

std::string hash_unicode(const ArrayKeys& a, std::uint64_t seed, const char* param, Hash128* out,
                         unsigned threads) {
    threads = std::max(1u, threads);
    std::vector<std::string> errors(threads);
    run_on_threads(threads, [&](unsigned t) {
        errors[t] = hash_unicode_slice(a, part_begin(a.n, threads, t), part_begin(a.n, threads, t + 1), seed, param, out);
    });
    // The slices are in order: the first error found is the first bad element's.
    for (std::string& e : errors)
        if (!e.empty()) return e;
    return {};
}

namespace {

// pandas' missing-value singletons (pd.NA, pd.NaT), known by their type's
// name and module, so that pandas is never imported here.
bool is_pandas_missing(PyObject* item) {
    const char* full = Py_TYPE(item)->tp_name;
    const char* dot = std::strrchr(full, '.');
    const char* name = dot != nullptr ? dot + 1 : full;
    if (std::strcmp(name, "NAType") != 0 && std::strcmp(name, "NaTType") != 0) return false;
    py::object module = py::handle(reinterpret_cast<PyObject*>(Py_TYPE(item))).attr("__module__");
    return py::isinstance<py::str>(module) && module.cast<std::string>().rfind("pandas", 0) == 0;
}

}  // namespace

bool is_null(PyObject* item) {
    if (item == Py_None) return true;
    if (PyUnicode_CheckExact(item) || PyBytes_CheckExact(item) || PyLong_CheckExact(item)) return false;
    // NaN equals nothing, not even itself: a missing value wherever it is
    // (pandas marks missing values with it), never a key.
    if (PyFloat_Check(item)) return std::isnan(PyFloat_AS_DOUBLE(item));
    if (is_instance(item, numpy_types().floating)) {
        const double d = PyFloat_AsDouble(item);
        if (d == -1.0 && PyErr_Occurred()) throw_current();
        return std::isnan(d);
    }
    return is_pandas_missing(item);
}

Py_ssize_t element_count(PyObject* seq, bool array) {
    if (!array) return PySequence_Fast_GET_SIZE(seq);
    const auto* a = py::detail::array_proxy(seq);
    Py_ssize_t size = 1;
    for (int d = 0; d < a->nd; ++d) size *= a->dimensions[d];
    return size;
}

void raise_changed_size(const char* param, Py_ssize_t from, Py_ssize_t to) {
    throw_py(PyExc_RuntimeError, std::string(param) + " changed size during the call (from " + std::to_string(from) +
                                     " to " + std::to_string(to) + " keys)");
}

// (any buffer but a NumPy array, read before here, is one bytes-like key to
// add(): a memoryview or array.array iterated as a batch gave other keys)
void refuse_single_key(PyObject* obj, const char* param) {
    if (PyUnicode_Check(obj) || PyBytes_Check(obj) || PyByteArray_Check(obj) || PyLong_Check(obj) ||
        PyObject_CheckBuffer(obj))
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

bool hash_next(py::handle iter, std::uint64_t seed, const char* param, std::size_t max, std::size_t* index,
               std::vector<Hash128>* out, Nulls nulls) {
    // read_batch's element rule; a null left out (nulls="skip") takes no place.
    struct Chunk {
        std::uint64_t seed;
        const char* param;
        std::vector<Hash128>* out;
        void key(PyObject* item, std::size_t i) { out->push_back(hash_item(item, seed, param, i)); }
        void null(std::size_t) {}
    } chunk{seed, param, out};
    out->clear();
    while (out->size() < max) {
        PyObject* item = PyIter_Next(iter.ptr());
        if (item == nullptr) {
            if (PyErr_Occurred()) throw_current();
            return false;
        }
        py::object hold = py::reinterpret_steal<py::object>(item);
        read_element(item, (*index)++, param, nulls, chunk);
    }
    return true;
}

Nulls parse_nulls(py::handle nulls) {
    if (py::isinstance<py::str>(nulls)) {
        const std::string v = nulls.cast<std::string>();
        if (v == "raise") return Nulls::raise;
        if (v == "skip") return Nulls::skip;
    }
    throw_py(PyExc_ValueError,
             "nulls must be 'raise' or 'skip', got " + py::repr(nulls).cast<std::string>());
}

std::string null_error(const char* param, std::size_t index) {
    return std::string(param) + "[" + std::to_string(index) +
           "] is null; pass nulls='skip' to leave null keys out (their answers are False), or drop them first "
           "where a call takes no nulls= (hash_many, DedupQueue.push_many)";
}

// ---------------------------------------------------------------------------
// Arrow (the PyCapsule interface over the C Data Interface)

ArrowInput::~ArrowInput() {
    for (ArrowArray& a : arrays)
        if (a.release != nullptr) a.release(&a);
    if (schema.release != nullptr) schema.release(&schema);
}

std::size_t ArrowInput::first_null() const {
    for (std::size_t c = 0; c < columns.size(); ++c) {
        const std::size_t i = bloomline::first_null(columns[c]);
        if (i < columns[c].length) return starts[c] + i;
    }
    return size();
}

std::vector<std::uint8_t> ArrowInput::valid() const {
    std::vector<std::uint8_t> v(size());
    for (std::size_t c = 0; c < columns.size(); ++c)
        for (std::size_t i = 0; i < columns[c].length; ++i) v[starts[c] + i] = columns[c].valid(i) ? 1 : 0;
    return v;
}

bool offers_arrow(py::handle keys) {
    PyObject* o = keys.ptr();
    if (PyList_Check(o) || PyTuple_Check(o) || PyUnicode_Check(o) || PyBytes_Check(o)) return false;
    return PyObject_HasAttrString(o, "__arrow_c_array__") || PyObject_HasAttrString(o, "__arrow_c_stream__");
}

namespace {

// The struct a capsule holds, or a TypeError naming what came instead.
template <class T>
T* capsule_pointer(py::handle capsule, const char* name, const char* param) {
    void* p = PyCapsule_IsValid(capsule.ptr(), name) ? PyCapsule_GetPointer(capsule.ptr(), name) : nullptr;
    if (p == nullptr) {
        PyErr_Clear();
        throw_py(PyExc_TypeError, std::string(param) + ": the Arrow export did not give a '" + name +
                                      "' capsule (got " + type_name(capsule.ptr()) + ")");
    }
    return static_cast<T*>(p);
}

// Move a struct out of its capsule: ours to release; the capsule's
// destructor then sees it released and does nothing.
template <class T>
void take(T* from, T* to) {
    *to = *from;
    from->release = nullptr;
}

}  // namespace

std::unique_ptr<ArrowInput> read_arrow(py::handle keys, const char* param) {
    if (is_ndarray(keys) || !offers_arrow(keys)) return nullptr;
    const bool as_array = PyObject_HasAttrString(keys.ptr(), "__arrow_c_array__") != 0;
    py::object exported;
    try {
        exported = keys.attr(as_array ? "__arrow_c_array__" : "__arrow_c_stream__")();
    } catch (py::error_already_set& e) {
        // pandas exports through pyarrow: without it, or for an object
        // Series pyarrow cannot convert (mixed types, an int past 64 bits),
        // iterate the Series, whose errors then name the offending key.
        if (e.matches(PyExc_ImportError) || e.matches(PyExc_NotImplementedError) || e.matches(PyExc_TypeError) ||
            e.matches(PyExc_ValueError) || e.matches(PyExc_OverflowError))
            return nullptr;
        throw;
    }
    auto in = std::make_unique<ArrowInput>();
    if (as_array) {
        if (!PyTuple_Check(exported.ptr()) || PyTuple_GET_SIZE(exported.ptr()) != 2)
            throw_py(PyExc_TypeError, std::string(param) + ".__arrow_c_array__() did not return (schema, array)");
        auto* schema = capsule_pointer<ArrowSchema>(PyTuple_GET_ITEM(exported.ptr(), 0), "arrow_schema", param);
        auto* array = capsule_pointer<ArrowArray>(PyTuple_GET_ITEM(exported.ptr(), 1), "arrow_array", param);
        if (schema->release == nullptr || array->release == nullptr)
            throw_py(PyExc_ValueError, std::string(param) + ": the Arrow export was already consumed");
        take(schema, &in->schema);
        in->arrays.emplace_back();
        take(array, &in->arrays.back());
    } else {
        auto* stream = capsule_pointer<ArrowArrayStream>(exported, "arrow_array_stream", param);
        if (stream->release == nullptr)
            throw_py(PyExc_ValueError, std::string(param) + ": the Arrow stream was already consumed");
        auto failed = [&](int code) {
            const char* why = stream->get_last_error != nullptr ? stream->get_last_error(stream) : nullptr;
            const std::string text = why != nullptr ? std::string(why) : "error " + std::to_string(code);
            // A Ctrl-C in a Python producer comes back as its traceback's
            // text (pyarrow's): raised as KeyboardInterrupt, never a
            // ValueError a caller skipping bad batches would swallow.
            if (PyErr_CheckSignals() != 0) throw py::error_already_set();
            for (std::size_t at = text.find("\nKeyboardInterrupt"); at != std::string::npos;
                 at = text.find("\nKeyboardInterrupt", at + 1)) {
                const std::size_t end = at + 18;
                if (end == text.size() || text[end] == '\n' || text[end] == ':')
                    throw_py(PyExc_KeyboardInterrupt, std::string(param) + ": the Arrow stream's producer was "
                                                                           "interrupted");
            }
            throw_py(PyExc_ValueError, std::string(param) + ": reading the Arrow stream failed (" + text + ")");
        };
        if (const int rc = stream->get_schema(stream, &in->schema)) failed(rc);
        for (;;) {
            ArrowArray chunk{};
            if (const int rc = stream->get_next(stream, &chunk)) failed(rc);
            if (chunk.release == nullptr) break;  // the end of the stream
            in->arrays.push_back(chunk);
        }
        // The capsule releases the stream; the chunks are ours and outlive it.
    }
    const ArrowSchema* column = nullptr;
    const std::string type_error = key_column_schema(in->schema, &column);
    if (!type_error.empty()) throw_py(PyExc_TypeError, std::string(param) + ": " + type_error);
    // A table, record batch or stream of them, of one column, is its column;
    // a struct column (a Series of dicts, a StructArray) exports the same
    // way, and its one field read as the keys would make {"a": 1} the key 1
    // without a word. Tables say what they are: their type has a schema or
    // columns (the type's, not the object's: a pandas Series answers
    // attributes from its index labels). A producer whose type says neither
    // is taken for a column.
    auto type_has = [&keys](const char* name) {
        return PyObject_HasAttrString(reinterpret_cast<PyObject*>(Py_TYPE(keys.ptr())), name) != 0;
    };
    if (column != &in->schema && !type_has("schema") && !type_has("num_columns") && !type_has("columns"))
        throw_py(PyExc_TypeError, std::string(param) + ": an Arrow struct column (records, dicts) is not a key type; "
                                                       "pass the field that holds the keys");
    for (const ArrowArray& a : in->arrays) {
        ArrowColumn c;
        const std::string error = open_column(in->schema, a, &c);
        if (!error.empty()) throw_py(PyExc_ValueError, std::string(param) + ": " + error);
        in->columns.push_back(c);
        in->starts.push_back(in->starts.back() + c.length);
    }
    return in;
}

// ---------------------------------------------------------------------------
// Key bytes (for servers that take keys, not hashes: RedisBloom's BF.*)

namespace {
void append_bulk(KeyItems* items, const void* p, std::size_t n) {
    resp::append_bulk(&items->body, p, n);
    items->ends.push_back(items->body.size());
}
void append_int_bulk(KeyItems* items, std::uint64_t v) {
    unsigned char le[8];
    for (int b = 0; b < 8; ++b) le[b] = static_cast<unsigned char>(v >> (8 * b));
    append_bulk(items, le, 8);
}
void append_float_bulk(KeyItems* items, double d) {
    std::uint64_t v = 0;
    unsigned char bytes[kMaxFloatKeyBytes];
    std::size_t n = 0;
    if (float_key(d, &v, bytes, &n)) return append_int_bulk(items, v);
    append_bulk(items, bytes, n);
}
}  // namespace

namespace {

// read_batch's visitor that collects each key's bytes by the key rules.
struct BytesVisitor {
    const char* param;
    Nulls nulls;
    KeyItems items;

    KeyItems array(ArrayKeys& a) {
        items.shape = a.shape;
        items.valid.assign(a.n, 1);
        const unsigned char* p = a.data();
        switch (a.kind) {
            case 'H':
                throw_py(PyExc_TypeError, std::string(param) + " are hashes (hash_many): a server that takes keys "
                                                               "(backend 'bf') needs the keys themselves");
            case 'b':
            case 'i':
            case 'u':
                with_int_keys(p, a.itemsize, a.kind == 'i', 0, [&](auto ints) {
                    for (std::size_t i = 0; i < a.n; ++i) append_int_bulk(&items, ints.value(i));
                });
                break;
            case 'S':
                for (std::size_t i = 0; i < a.n; ++i)
                    append_bulk(&items, p + i * a.itemsize, strip_trailing_nuls(p + i * a.itemsize, a.itemsize));
                break;
            case 'f': {
                std::size_t nan_at = a.n;
                items.valid = not_nan(a, &nan_at);
                if (nan_at < a.n && nulls == Nulls::raise) raise_value_error(null_error(param, nan_at));
                const auto* d = reinterpret_cast<const double*>(p);
                for (std::size_t i = 0; i < a.n; ++i)
                    if (items.valid[i]) append_float_bulk(&items, d[i]);
                break;
            }
            default: {  // 'U'
                const std::size_t chars = a.itemsize / 4;
                std::vector<unsigned char> utf8(4 * chars + 1);
                for (std::size_t i = 0; i < a.n; ++i) {
                    const auto* e = reinterpret_cast<const std::uint32_t*>(p) + i * chars;
                    std::uint32_t bad = 0;
                    const std::ptrdiff_t len = utf32_to_utf8(e, strip_trailing_nuls(e, chars), utf8.data(), &bad);
                    if (len < 0)
                        raise_value_error(std::string(param) + "[" + std::to_string(i) +
                                          "] is not encodable as UTF-8 (code point " + std::to_string(bad) + ")");
                    append_bulk(&items, utf8.data(), static_cast<std::size_t>(len));
                }
            }
        }
        return std::move(items);
    }

    KeyItems arrow(ArrowInput& in) {
        const std::size_t n = in.size();
        items.valid.assign(n, 1);
        items.shape = {static_cast<py::ssize_t>(n)};
        if (nulls == Nulls::raise && in.first_null() < n) raise_value_error(null_error(param, in.first_null()));
        for (std::size_t c = 0; c < in.columns.size(); ++c) {
            const ArrowColumn& col = in.columns[c];
            for (std::size_t j = 0; j < col.length; ++j) {
                const std::size_t i = in.starts[c] + j;
                if (!col.valid(j)) {
                    items.valid[i] = 0;
                } else if (col.kind == ArrowColumn::Kind::floating) {
                    append_float_bulk(&items, col.float_value(col.offset + j));
                } else if (is_bytes(col)) {
                    const ByteSpan b = bytes_at(col, col.offset + j);
                    append_bulk(&items, b.data, b.size);
                } else {
                    append_int_bulk(&items, integer_at(col, col.offset + j));
                }
            }
        }
        return std::move(items);
    }

    void reserve(std::size_t n) { items.valid.reserve(n); }
    void key(PyObject* item, std::size_t i) {
        const std::string what = std::string(param) + "[" + std::to_string(i) + "]";
        visit_key(
            item, what.c_str(), [&](const void* p, std::size_t n) { append_bulk(&items, p, n); },
            [&](std::uint64_t v) { append_int_bulk(&items, v); });
        items.valid.push_back(1);
    }
    void null(std::size_t) { items.valid.push_back(0); }

    KeyItems objects(const std::vector<py::ssize_t>& shape) {
        items.shape = shape;
        return std::move(items);
    }
};

}  // namespace

KeyItems key_items(py::handle keys, const char* param, Nulls nulls) {
    BytesVisitor v{param, nulls, {}};
    return read_batch(keys, 0, param, nulls, v);
}

}  // namespace bloomline::py_keys
