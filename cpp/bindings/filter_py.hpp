// What every bound filter kind shares: construction arguments, the scalar
// fast paths, batches, compatibility checks, set estimates, the capacity
// warning, properties, bytes, files, pickle, copies, display and repr. Each
// kind's file (bloom_py.cpp, counting_py.cpp) binds only what is its own,
// then calls bind_common, which binds the rest in the one order that works.
// T is a core filter class with geometry(), capacity(), error_rate(),
// insert_count(), approx_count(), expected_fp_rate(), add(), contains(),
// add_keys(), contains_keys(), union_with(), clear(), copy().
//
// The Python object holds a Handle<T>: the filter, and the mapped file
// behind its memory when it was opened from one (file.hpp). The filter
// itself knows nothing of files.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cmath>
#if defined(__GLIBCXX__)
#include <cxxabi.h>
#endif
#include <sstream>
#include <string>
#include <thread>
#include <type_traits>

#include "args_py.hpp"
#include "bloomline/bloom_filter.hpp"
#include "bloomline/counting_filter.hpp"
#include "bloomline/file.hpp"
#include "bloomline/filter_io.hpp"
#include "bloomline/parallel.hpp"
#include "bloomline/sizing.hpp"
#include "files_py.hpp"
#include "keys_py.hpp"
#include "register.hpp"

namespace bloomline::py_filter {

namespace py = pybind11;

template <class T>
struct Handle {
    std::unique_ptr<T> f;
    std::shared_ptr<MappedFile> file;  // null: plain memory
    bool capacity_warned = false;      // note_capacity has warned (once per filter object)

    Handle() = default;
    explicit Handle(std::unique_ptr<T> filter, std::shared_ptr<MappedFile> mapped = {})
        : f(std::move(filter)), file(std::move(mapped)) {}
    T* operator->() const { return f.get(); }
    T& operator*() const { return *f; }
};

constexpr std::uint64_t kU64Max = ~std::uint64_t{0};

// The arguments every constructor shares, checked and named in errors.
struct Target {
    std::uint64_t capacity;
    double error_rate;
    Layout layout;
    std::uint64_t seed;
    Params params;
};

inline Target parse_target(py::handle capacity, py::handle error_rate, py::handle layout, py::handle seed) {
    Target t{};
    t.capacity = py_args::to_count(capacity, "capacity", 1, kMaxBits, "[1, 2**48]");
    t.error_rate = py_args::to_double(error_rate, "error_rate");
    check_error_rate(t.error_rate);
    t.layout = py_args::to_layout(layout);
    t.seed = py_args::to_u64(seed, "seed", 0, kU64Max, "[0, 2**64)");
    t.params = optimal_params(static_cast<double>(t.capacity), t.error_rate, t.layout);
    return t;
}

inline Geometry parse_geometry(py::handle num_bits, py::handle num_hashes, py::handle layout, py::handle seed,
                               const char* size_name = "num_bits") {
    const std::uint64_t m = py_args::to_u64(num_bits, size_name, 1, kMaxBits, "[1, 2**48]");
    const auto k = static_cast<std::uint32_t>(py_args::to_u64(num_hashes, "num_hashes", 1, kMaxHashes, "[1, 64]"));
    const Layout l = py_args::to_layout(layout);
    const std::uint64_t s = py_args::to_u64(seed, "seed", 0, kU64Max, "[0, 2**64)");
    if (l == Layout::blocked && m % kBlockBits != 0)
        throw std::invalid_argument(std::string(size_name) + " must be a multiple of 512 for layout 'blocked', got " +
                                    fmt(m));
    check_geometry(m, k, l);
    return Geometry{l, m, k, s};
}

[[noreturn]] inline void differ(const char* field, const std::string& l, const std::string& r) {
    throw std::invalid_argument(std::string("filters differ in ") + field + " (" + l + " != " + r + ")");
}

}  // namespace bloomline::py_filter

// A filter object whose __init__ never ran (BloomFilter.__new__(BloomFilter))
// has no filter behind it: every method refuses it with a TypeError instead
// of reading a filter that is not there.
namespace pybind11::detail {
template <class T>
struct type_caster<bloomline::py_filter::Handle<T>> : type_caster_base<bloomline::py_filter::Handle<T>> {
    bool load(handle src, bool convert) {
        // None is not a filter: the argument does not match (an operator
        // answers NotImplemented, so bf == None is False), rather than
        // pybind11's null holder, which would read as uninitialised.
        if (src.is_none()) return false;
        if (!type_caster_base<bloomline::py_filter::Handle<T>>::load(src, convert)) return false;
        // Constructed by __init__ (or returned from C++) means a holder exists.
        auto* inst = reinterpret_cast<instance*>(src.ptr());
        if (this->value == nullptr || !inst->get_value_and_holder().holder_constructed())
            throw type_error("the filter is not initialised (call __init__ first)");
        return true;
    }
};
}  // namespace pybind11::detail

namespace bloomline::py_filter {

// |, &: the same layout, size, k and seed, or a ValueError naming the
// first field that differs (== answers False: comparable()).
inline void check_same_geometry(const Geometry& x, const Geometry& y, const char* size_name = "num_bits") {
    if (x.layout != y.layout) differ("layout", layout_name(x.layout), layout_name(y.layout));
    if (x.num_slots != y.num_slots) differ(size_name, fmt(x.num_slots), fmt(y.num_slots));
    if (x.num_hashes != y.num_hashes) differ("num_hashes", fmt(x.num_hashes), fmt(y.num_hashes));
    if (x.seed != y.seed) differ("seed", fmt(x.seed), fmt(y.seed));
}

// Both kinds: the same geometry and seed (and counter width), or a
// ValueError naming the first field that differs.
inline void check_compatible(const BloomFilter& a, const BloomFilter& b) {
    check_same_geometry(a.geometry(), b.geometry());
}
inline void check_compatible(const CountingBloomFilter& a, const CountingBloomFilter& b) {
    check_same_geometry(a.geometry(), b.geometry(), "num_counters");
    if (a.counter_bits() != b.counter_bits())
        differ("counter_bits", std::to_string(a.counter_bits()), std::to_string(b.counter_bits()));
}

// Whether two filters of a kind can be compared bit for bit (==): the
// checks of check_compatible, answered instead of raised.
template <class T>
bool comparable(const T& a, const T& b) {
    try {
        check_compatible(a, b);
        return true;
    } catch (const std::invalid_argument&) {
        return false;
    }
}

// == of two filters: both open (a closed filter's memory is not read, as
// its keys are not), then comparable and bit for bit the same.
template <class T>
bool same_filter(const T& a, const T& b) {
    // A closed filter's memory may be gone: it equals itself only, and ==
    // never raises (a list's `in` and `count` compare with every item).
    if (a.access() == Access::closed || b.access() == Access::closed) return &a == &b;
    return comparable(a, b) && a.same_content(b);
}

// A filter whose memory is read (a buffer view of it): refused once it is
// closed, as its keys are. (Its counts, kept by the handle, still answer:
// they are a closed handle's last word, for a summary or a shared file's
// final flush.)
template <class H>
const auto& open_memory(const H& h) {
    h->check_open();
    return *h;
}

inline const char* kind_of(const BloomFilter&) { return "BloomFilter"; }
inline const char* kind_of(const CountingBloomFilter&) { return "CountingBloomFilter"; }

// a | b and a & b as new filters, a |= b and a &= b in place: `combine`
// is union_with or intersect_with (bits OR and AND; counters saturating sum
// and minimum), after the check that names what differs.
template <class T, class Combine>
void def_set_operator(py::class_<Handle<T>>& cls, const char* name, const char* in_place_name, Combine combine) {
    using H = Handle<T>;
    cls.def(
        name,
        [combine](const H& a, const H& b) {
            check_compatible(*a, *b);
            auto r = a->copy();
            combine(*r, *b);
            return H(std::move(r));
        },
        py::is_operator());
    cls.def(
        in_place_name,
        [combine](py::object self, const H& b) {
            T& a = *self.cast<H&>();
            check_compatible(a, *b);
            combine(a, *b);
            return self;
        },
        py::is_operator());
}

// union(), intersection() and issubset(): set's names for |, & and a
// containment test, with the same checks (a ValueError naming what differs).
template <class T>
void def_set_names(py::class_<Handle<T>>& cls) {
    using H = Handle<T>;
    constexpr bool bits = std::is_same_v<T, BloomFilter>;
    cls.def(
        "union",
        [](const H& a, const H& b) {
            check_compatible(*a, *b);
            auto r = a->copy();
            r->union_with(*b);
            return H(std::move(r));
        },
        py::arg("other"),
        bits ? "A new filter of the keys of both: self | other (bits OR). Both must have the same layout, num_bits, "
               "num_hashes and seed (ValueError naming what differs)."
             : "A new filter of the keys of both: self | other, each counter the sum of the two (saturating at its "
               "maximum). The sum, not the larger, because it is the multiset of both filters' adds: a key added to "
               "each can then be removed once for each add, and no removal makes a key that is still in either "
               "test absent. Both must have the same geometry and counter_bits (ValueError naming what differs).");
    cls.def(
        "intersection",
        [](const H& a, const H& b) {
            check_compatible(*a, *b);
            auto r = a->copy();
            r->intersect_with(*b);
            return H(std::move(r));
        },
        py::arg("other"),
        bits ? "A new filter of the bits set in both: self & other (bits AND). Every key of both tests present in it; "
               "it may also hold bits that no common key set (a key of only one filter can still test present, more "
               "often than in a filter built from the common keys). Same geometry required, as union()."
             : "A new filter whose counters are the smaller of the two: self & other, the multiset intersection. Every "
               "key of both tests present. Same geometry and counter_bits required, as union().");
    cls.def(
        "issubset",
        [](const H& a, const H& b) {
            check_compatible(*a, *b);
            return a->within(*b);
        },
        py::arg("other"),
        bits ? "True when every bit set in self is set in other: then every key added to self tests present in "
               "other. Not a true subset test: a key of self that was never added to other answers True if other's "
               "bits happen to cover it (a false positive of other). False is certain: some key of self was never "
               "added to other. Same geometry required, as union()."
             : "True when no counter of self is above other's: then every key of self tests present in other, and "
               "counts there at least as often as here (up to the false positives of counters, as count() has). "
               "Not a true subset test (see BloomFilter.issubset); False is certain. Same geometry and counter_bits "
               "required, as union().");
}

// ---- set estimates ------------------------------------------------------------
// |A or B|, |A and B| and their Jaccard index from the fills (sizing.hpp),
// the union's fill counted without making it.

inline std::uint64_t fill_of_union(const BloomFilter& a, const BloomFilter& b) { return a.bits_set_in_union(b); }
inline std::uint64_t fill_of_union(const CountingBloomFilter& a, const CountingBloomFilter& b) {
    return a.nonzero_in_union(b);
}

template <class T>
double approx_union_count(const T& a, const T& b) {
    check_compatible(a, b);
    const Geometry& g = a.geometry();
    return estimate_count(fill_of_union(a, b), g.num_slots, g.num_hashes, g.layout);
}

// ---- capacity ------------------------------------------------------------------
// A filter sized for a capacity that has taken more new keys than it says so
// once per filter object, after the add that passed it: its false-positive
// rate now rises past its error_rate, so more new keys are reported seen.
// Every add path calls note_capacity with the GIL held, after the add; while
// the filter is within its capacity that is a load and two compares, nothing
// measurable beside an add (benchmarks/RESULTS.md, "The capacity check").
// Filters made by from_params have no capacity (0) and never warn; a
// scalable chain never gives a stage more new keys than its capacity (it
// starts the next one), so its stages never warn either.

// bloomline.CapacityWarning with its message (module.cpp, where the class is
// made); raises (error_already_set) where warnings are errors.
void warn_capacity(const char* kind, std::uint64_t new_keys, std::uint64_t capacity, double error_rate,
                   double fp_rate_now);

template <class T>
void note_capacity(Handle<T>& h) {
    if (h.capacity_warned) return;
    const T& f = *h.f;
    if (f.capacity() == 0 || f.insert_count() <= f.capacity()) return;
    h.capacity_warned = true;
    warn_capacity(kind_of(f), f.insert_count(), f.capacity(), f.error_rate(), f.expected_fp_rate());
}

// ---- scalar fast paths -------------------------------------------------------
// `f.add(key)` and `key in f` are called millions of times from Python loops,
// where pybind11's generic dispatcher (argument records, overload resolution,
// and for `in` a trip through the __contains__ slot wrapper) costs more than
// hashing and probing. Both are installed as plain CPython entry points: `add`
// as a METH_O method descriptor, `in` as the type's sq_contains slot
// (benchmarks/RESULTS.md, workload A, measures them).

// The C++ value of a bound object, for an entry point of our own (a plain
// CPython method or slot); null until __init__ has run.
template <class V>
V* bound_value(PyObject* self) {
    // pybind11 keeps a single registered C++ base in its "simple layout": the
    // value pointer sits in the instance, null until __init__ has run.
    // Its holder flag is read in place too: get_value_and_holder() is a call
    // pybind11 keeps out of line, on every add and lookup.
    auto* inst = reinterpret_cast<py::detail::instance*>(self);
    void* p = nullptr;
    bool built = false;
    if (inst->simple_layout) {
        p = inst->simple_value_holder[0];
        built = inst->simple_holder_constructed;
    } else {
        p = py::handle(self).cast<V*>();
        built = inst->get_value_and_holder().holder_constructed();
    }
    return built ? static_cast<V*>(p) : nullptr;
}

template <class T>
Handle<T>* handle_of(PyObject* self) {
    Handle<T>* h = bound_value<Handle<T>>(self);
    if (h == nullptr || !h->f) {
        PyErr_SetString(PyExc_TypeError, "the filter is not initialised (call __init__ first)");
        throw py::error_already_set();
    }
    return h;
}

// A C entry point's body, its C++ exceptions made Python's. Not noexcept:
// where the body calls Python (a key's __index__, a clock), a daemon thread
// ended at interpreter exit unwinds through it (glibc's forced unwind, which
// must pass, as pybind11 lets it).
template <class F>
auto guarded(F&& f, decltype(f()) on_error) -> decltype(f()) {
    try {
        return f();
#if defined(__GLIBCXX__)
    } catch (abi::__forced_unwind&) {
        throw;
#endif
    } catch (py::error_already_set& e) {
        e.restore();
    } catch (const std::invalid_argument& e) {
        PyErr_SetString(PyExc_ValueError, e.what());
    } catch (const std::exception& e) {
        PyErr_SetString(PyExc_RuntimeError, e.what());
    }
    return on_error;
}

template <class T>
PyObject* fast_add(PyObject* self, PyObject* key) {
    return guarded(
        [&]() -> PyObject* {
            Handle<T>& h = *handle_of<T>(self);
            const bool is_new = h->add(py_keys::hash_scalar_key(key, h->geometry().seed));
            note_capacity(h);
            PyObject* answer = is_new ? Py_True : Py_False;  // PyBool_FromLong, without the call
            Py_INCREF(answer);
            return answer;
        },
        nullptr);
}

template <class T>
int fast_contains(PyObject* self, PyObject* key) {
    return guarded(
        [&]() -> int {
            const T& f = **handle_of<T>(self);
            return f.contains(py_keys::hash_scalar_key(key, f.geometry().seed)) ? 1 : 0;
        },
        -1);
}

// Replaces `add` and the type's sq_contains slot, so it must come after
// every def of __contains__ (a def sets the slot again): bind_common calls
// it last, and it is nowhere else.
// The buffer protocol of a filter whose __init__ never ran: the same
// TypeError as every method, where pybind11 would say "Error getting buffer".
template <class T>
getbufferproc& bound_getbuffer() {
    static getbufferproc p = nullptr;
    return p;
}
template <class T>
int checked_getbuffer(PyObject* self, Py_buffer* view, int flags) {
    if (!reinterpret_cast<py::detail::instance*>(self)->get_value_and_holder().holder_constructed()) {
        view->obj = nullptr;
        PyErr_SetString(PyExc_TypeError, "the filter is not initialised (call __init__ first)");
        return -1;
    }
    // A closed filter's memory may be gone: the ValueError of every other
    // read, where pybind11 would raise BufferError("Error getting buffer").
    if ((**handle_of<T>(self)).access() == Access::closed) {
        view->obj = nullptr;
        PyErr_SetString(PyExc_ValueError, "I/O operation on a closed filter");
        return -1;
    }
    return bound_getbuffer<T>()(self, view, flags);
}

// pybind11 ignores a second __init__ on an initialised object in silence;
// a filter says so instead (a re-run __init__ that changed nothing would
// leave the caller believing it had a new, empty filter).
template <class T>
void refuse_second_init(py::class_<Handle<T>>& cls) {
    py::object init = cls.attr("__init__");
    const std::string kind = py::str(cls.attr("__name__"));
    py_args::Signature sig;
    if (!py_args::signature_of(init, kind, true, sig)) throw std::logic_error("__init__ is not a pybind11 function");
    // help() shows the constructor's own signature, not this wrapper's.
    py::options no_signature;
    no_signature.disable_function_signatures();
    cls.attr("__init__") = py::cpp_function(
        [init, kind, sig](py::handle self, py::args args, py::kwargs kwargs) {
            if (reinterpret_cast<py::detail::instance*>(self.ptr())->get_value_and_holder().holder_constructed())
                throw py::type_error(kind + ".__init__ was called on a filter that is already initialised: make a new "
                                            "filter (or clear() this one)");
            // A misspelled keyword is named as Python names it, where
            // pybind11 would print its "incompatible constructor arguments".
            py_args::check_call(sig, args, kwargs);
            init(self, *args, **kwargs);
        },
        // Not named "__init__": pybind11 treats a function of that name as a
        // constructor, and would skip it for an initialised object too.
        py::is_method(cls), py::name("init"), py::doc(py::str(init.attr("__doc__")).cast<std::string>().c_str()));
}

template <class T>
void install_fast_paths(py::class_<Handle<T>>& cls, const char* add_doc) {
    static PyMethodDef def = {"add", fast_add<T>, METH_O, add_doc};
    auto* type = reinterpret_cast<PyTypeObject*>(cls.ptr());
    py::object add = py::reinterpret_steal<py::object>(PyDescr_NewMethod(type, &def));
    if (!add) throw py::error_already_set();
    cls.attr("add") = add;
    type->tp_as_sequence->sq_contains = fast_contains<T>;
    if (type->tp_as_buffer != nullptr && type->tp_as_buffer->bf_getbuffer != nullptr) {
        bound_getbuffer<T>() = type->tp_as_buffer->bf_getbuffer;
        type->tp_as_buffer->bf_getbuffer = checked_getbuffer<T>;
    }
    PyType_Modified(type);
}

// ---- bytes and files -------------------------------------------------------------

template <class T>
py::bytes to_bytes(const T& f) {
    f.check_open();
    const Header h = header_of(f);
    py::bytes out = py_args::new_bytes(h.total_size());
    auto* into = reinterpret_cast<unsigned char*>(PyBytes_AS_STRING(out.ptr()));
    {
        py::gil_scoped_release nogil;  // a snapshot (filter_io.hpp): other threads may add meanwhile
        encode_filter(f, into);
    }
    return out;
}

template <class T>
Handle<T> from_bytes(py::handle data) {
    const py_args::BytesView view(data, "data");
    return Handle<T>(decode_filter<T>(view.data(), view.size()));
}

template <class T>
Handle<T> mapped(const std::string& path, bool writable, bool verify) {
    MappedFilter<T> m = map_filter<T>(path, writable, verify);
    return Handle<T>(std::move(m.filter), std::move(m.file));
}

// A path, or a binary file object (one filter read at its position: a
// stream may hold several); a file object cannot be mapped.
template <class T>
Handle<T> load(py_args::PathOrFile path, py_args::Bool mmap_arg, py_args::OptBool verify) {
    const bool mmap = mmap_arg.cast<bool>();
    if (!py_files::is_path(path)) {
        if (mmap) throw std::invalid_argument("mmap=True needs a path, got a file object (" +
                                        py::type::handle_of(path).attr("__name__").cast<std::string>() + ")");
        return from_bytes<T>(py_files::read_stream(path));  // a whole read: always verified
    }
    const std::string p = py_files::fs_path(path);
    const bool check = verify.is_none() ? !mmap : verify.cast<bool>();
    py::gil_scoped_release nogil;
    if (mmap) return mapped<T>(p, false, check);
    std::size_t size = 0;
    const Memory whole = read_file(p, &size);  // a whole read is always verified
    return Handle<T>(decode_filter<T>(whole.data, size));
}

// Mapped files: the header brought up to date and the pages written back;
// with final, the filter is closed too (and the last writer makes the
// checksum current).
template <class T>
void flush_or_close(Handle<T>& h, bool final) {
    T& f = *h;
    if (h.file && h.file->inherited()) {
        // A forked child: its copy of the writer mutex may be held by a
        // thread that does not exist here, so it is not taken. Nothing of
        // the parent's is released (flush_mapped); the filter is closed.
        if (final) {
            h.file->release();
            return f.close_locked();  // (access is atomic)
        }
        flush_mapped(*h.file, f.insert_count(), [] { return std::uint64_t{0}; }, false);  // raises: not the owner
    }
    f.locked([&] {
        if (f.access() == Access::closed) {
            if (!final) throw std::invalid_argument("I/O operation on a closed filter");
            return;
        }
        if (h.file && h.file->writable())
            flush_mapped(*h.file, f.insert_count(), [&f] { return f.recount_fill_locked(); }, final);
        if (final) f.close_locked();
    });
}
template <class T>
void flush(Handle<T>& h) {
    flush_or_close(h, false);
}
template <class T>
void close(Handle<T>& h) {
    flush_or_close(h, true);
}

// Saving a mapped filter over its own file flushes it in place (a rename
// over the mapped file would send later adds to the unlinked old one). A
// binary file object is written at its position.
template <class T>
void save(Handle<T>& h, py_args::PathOrFile path) {
    if (!py_files::is_path(path)) return py_files::write_stream(path, to_bytes(*h));
    const std::string p = py_files::fs_path(path);
    h->check_open();
    py::gil_scoped_release nogil;
    if (h.file && h.file->is(p)) {
        if (h.file->writable()) return flush(h);
        throw std::invalid_argument("'" + p + "' is this filter's own file, mapped read-only: nothing to save");
    }
    save_filter(*h, p);
}

// ---- repr --------------------------------------------------------------------

// slots: what the kind's slots are called ("num_bits", "num_counters"), as
// its property is.
template <class T>
std::string repr(const T& f, const char* kind, const char* slots, const std::string& extra) {
    const Geometry& g = f.geometry();
    std::ostringstream s;
    s << "<" << kind;
    if (f.capacity() != 0) s << " capacity=" << f.capacity() << " error_rate=" << fmt(f.error_rate());
    s << " layout='" << layout_name(g.layout) << "' " << slots << "=" << g.num_slots << " num_hashes=" << g.num_hashes
      << extra << " seed=" << g.seed;
    if (f.access() == Access::closed) return s.str() + " closed>";
    s << " approx_count=";
    const double n = f.approx_count();
    if (std::isfinite(n))
        s << static_cast<std::uint64_t>(std::llround(n));
    else
        s << "inf";
    s << ">";
    return s.str();
}

// ---- everything shared -----------------------------------------------------------

// Everything both kinds bind the same way, then the scalar fast paths
// (which must come last: install_fast_paths). Each kind calls it once,
// after its own defs.
template <class T>
void bind_common(py::class_<Handle<T>>& cls, const char* add_doc) {
    using H = Handle<T>;
    cls.def(
           "add_many",
           [](H& h, py_args::Keys keys, py_args::Int threads, py_args::NullsName nulls) {
               T& f = *h;
               const unsigned t = parse_threads(threads);
               py::array_t<bool> r = py_keys::with_batch_hashes(
                   keys, f.geometry().seed, "keys",
                   [&f, t](auto& src, std::size_t n, bool* out) { add_parallel(f, src, n, out, useful_threads(t, n)); },
                   py_keys::parse_nulls(nulls), t);
               note_capacity(h);
               return r;
           },
           py::arg("keys"), py::kw_only(), py::arg("threads") = 1, py::arg("nulls") = "raise",
           "Add a batch (NumPy array, Arrow column, or iterable). Returns a bool array: True where the key was new; "
           "a key repeated in the batch is new only at its first place. threads=N adds on N threads (0: one per "
           "CPU); the answers, counts and bits are the same as with one. nulls='skip' leaves nulls (None) out, False in the answer; "
           "by default a null is a ValueError.")
        .def(
            "contains_many",
            [](const H& h, py_args::Keys keys, py_args::Int threads, py_args::NullsName nulls) {
                const T& f = *h;
                const unsigned t = parse_threads(threads);
                return py_keys::with_batch_hashes(
                    keys, f.geometry().seed, "keys",
                    [&f, t](auto& src, std::size_t n, bool* out) {
                        contains_parallel(f, src, n, out, useful_threads(t, n));
                    },
                    py_keys::parse_nulls(nulls), t);
            },
            py::arg("keys"), py::kw_only(), py::arg("threads") = 1, py::arg("nulls") = "raise",
            "Test a batch (NumPy array, Arrow column, or iterable). Returns a bool array: True where maybe present. "
            "threads=N uses N threads (0: one per CPU). nulls='skip' answers False for nulls (None); by default a "
            "null is a ValueError.")
        .def(
            "add_lines",
            [](H& h, py_args::Buffer data, py_args::Int threads) {
                T& f = *h;
                const unsigned t = parse_threads(threads);
                py::array_t<bool> r = py_keys::with_line_hashes(data, f.geometry().seed, "data",
                                                                [&f, t](auto& src, std::size_t n, bool* out) {
                                                                    add_parallel(f, src, n, out, useful_threads(t, n));
                                                                },
                                                                t);
                note_capacity(h);
                return r;
            },
            py::arg("data"), py::kw_only(), py::arg("threads") = 1,
            "Add each line of a block of text (bytes-like; lines end in \\n or \\r\\n, the last may lack the \\n, and "
            "a \\r ending it is still its ending; the ending is not part of the key, any other \\r is). Returns a "
            "bool array, one per line: True where the line was new. "
            "bloomline.select_lines(data, new) gives those lines.")
        .def(
            "dedup_lines",
            [](H& h, py_args::Buffer data, py_args::Int threads) {
                T& f = *h;
                const unsigned t = parse_threads(threads);
                py::tuple r = py_keys::with_lines(
                    data, "data", t, [&f, t](const unsigned char* p, std::size_t n, const LineSpans& lines) {
                        std::unique_ptr<bool[]> added(new bool[lines.size()]);
                        std::size_t kept = 0;
                        {
                            py::gil_scoped_release nogil;
                            LineKeys src{p, &lines, f.geometry().seed};
                            add_parallel(f, src, lines.size(), added.get(), useful_threads(t, lines.size()));
                            for (std::size_t i = 0; i < lines.size(); ++i) kept += added[i];
                        }
                        py::bytes out = py_keys::selected_lines(p, n, lines, added.get(), t);
                        return py::make_tuple(std::move(out), lines.size(), kept);
                    });
                note_capacity(h);
                return r;
            },
            py::arg("data"), py::kw_only(), py::arg("threads") = 1,
            "Add each line of a block of text, as add_lines does, and return (new_lines, lines, new): the lines "
            "that were new, as select_lines(data, add_lines(data)) gives them, in one bytes object; how many lines "
            "the block has; how many were new. One split of the block serves the add and the copy. threads=N adds "
            "and copies on N threads (0: one per CPU), with one thread's answers.")
        .def(
            "contains_lines",
            [](const H& h, py_args::Buffer data, py_args::Int threads) {
                const T& f = *h;
                const unsigned t = parse_threads(threads);
                return py_keys::with_line_hashes(data, f.geometry().seed, "data",
                                                 [&f, t](auto& src, std::size_t n, bool* out) {
                                                     contains_parallel(f, src, n, out, useful_threads(t, n));
                                                 },
                                                 t);
            },
            py::arg("data"), py::kw_only(), py::arg("threads") = 1,
            "Test each line of a block of text, as add_lines reads it. Returns a bool array, one per line.")
        .def(
            "update",
            [](H& h, py::args others, py_args::NullsName nulls, py_args::Int threads) {
                T& f = *h;
                const py_keys::Nulls how = py_keys::parse_nulls(nulls);
                const unsigned t = parse_threads(threads);
                for (py::handle other : others) {
                    if (py::isinstance<H>(other)) {  // a filter of this kind: its keys, as |= takes them
                        const T& o = *other.cast<const H&>();
                        check_compatible(f, o);
                        f.union_with(o);
                        continue;
                    }
                    if (py::hasattr(other, "contains_many"))  // a filter of another kind: its keys are not listed
                        throw py::type_error(std::string("update() takes ") + kind_of(f) +
                                             "s of the same geometry or iterables of keys, got " +
                                             py::type::handle_of(other).attr("__name__").cast<std::string>());
                    // No answers asked for: a threaded add skips the step that hands them back.
                    py_keys::for_each_chunk(
                        other, f.geometry().seed, "keys",
                        [&f, t](auto& src, std::size_t n) { add_parallel(f, src, n, nullptr, useful_threads(t, n)); },
                        how, t);
                }
                note_capacity(h);
            },
            py::arg("nulls") = "raise", py::arg("threads") = 1,
            "Add every key of each argument, in order (like set.update): an iterable's keys (an iterator a chunk "
            "of 65,536 at a time as it yields them, in bounded memory: where it raises, or holds a bad key or a "
            "null, the chunks before are added and insert_count counts them), or a filter of this kind and "
            "geometry (its keys, as |= adds them). nulls='skip' leaves nulls (None) out. threads=N adds on N "
            "threads (0: one per CPU), with the bits and counts of one, as add_many does, and no answers to make.")
        .def(
            "__contains__",
            [](const H& h, py_args::Key key) { return h->contains(py_keys::hash_key(key.ptr(), h->geometry().seed)); },
            py::arg("key"))
        .def(
            "approx_union_count", [](const H& a, const H& b) { return approx_union_count(*a, *b); }, py::arg("other"),
            "Estimated number of distinct keys in either filter, from the fill of their union.")
        .def(
            "approx_intersection_count",
            [](const H& a, const H& b) {
                return approx_intersection(a->approx_count(), b->approx_count(), approx_union_count(*a, *b));
            },
            py::arg("other"),
            "Estimated number of keys in both filters: |A| + |B| - |A or B|, each estimated from the fill (at least "
            "0; NaN when a filter or their union is full: nothing can be estimated).")
        .def(
            "approx_jaccard",
            [](const H& a, const H& b) {
                return approx_jaccard(a->approx_count(), b->approx_count(), approx_union_count(*a, *b));
            },
            py::arg("other"),
            "Approximate Jaccard index of the two filters' keys, |A and B| / |A or B|, from the estimates "
            "approx_intersection_count / approx_union_count (each from the fill; not exact). 1.0 for two empty "
            "filters; nan when the union is full (every slot set).")
        // ==: filters of another geometry (or counter width) are unequal, as
        // Python's convention and sets have it; | and & refuse them.
        .def(
            "__eq__", [](const H& a, const H& b) { return same_filter(*a, *b); }, py::is_operator())
        .def(
            "__ne__", [](const H& a, const H& b) { return !same_filter(*a, *b); }, py::is_operator())
        .def(
            "__bool__", [](const H& h) { return h->approx_count() > 0; },
            "False while the filter is empty, as an empty set is: no key was added, or clear() emptied it (no bit, or "
            "counter, is set; a CountingBloomFilter whose keys were all removed is empty again, and so may be the "
            "result of & of filters with no key in common).")
        .def(
            "copy", [](const H& h) { return H(h->copy()); }, "An independent copy.")
        .def("__copy__", [](const H& h) { return H(h->copy()); })
        .def(
            "__deepcopy__", [](const H& h, py::handle) { return H(h->copy()); }, py::arg("memo"))
        .def(
            "clear", [](H& h) { h->clear(); }, "Remove every key.")
        .def_property_readonly(
            "capacity",
            [](const H& h) -> py::object { return h->capacity() ? py::int_(h->capacity()) : py::object(py::none()); },
            "Keys it was sized for (None when built by from_params).")
        .def_property_readonly(
            "error_rate",
            [](const H& h) -> py::object {
                return h->capacity() ? py::float_(h->error_rate()) : py::object(py::none());
            },
            "False-positive rate it was sized for at capacity (None when built by from_params).")
        .def_property_readonly(
            "num_hashes", [](const H& h) { return h->geometry().num_hashes; }, "k, the slots per key.")
        .def_property_readonly(
            "layout", [](const H& h) { return layout_name(h->geometry().layout); }, "'blocked' or 'standard' ('standard-v1': the standard layout's first index, of filters made with it).")
        .def_property_readonly(
            "seed", [](const H& h) { return h->geometry().seed; }, "Hash seed.")
        .def_property_readonly(
            "insert_count", [](const H& h) { return h->insert_count(); },
            "Adds that found their key new (exact for this filter's own adds; an estimate after | or &).")
        .def_property_readonly(
            "approx_count", [](const H& h) { return h->approx_count(); },
            "Estimated number of distinct keys present, from the fill (inf when full).")
        .def_property_readonly(
            "expected_fp_rate", [](const H& h) { return h->expected_fp_rate(); },
            "False-positive rate expected at the current fill (not the design target).")
        .def(
            "to_bytes", [](const H& h) { return to_bytes(*h); },
            "The filter in the versioned, checksummed bloomline format (docs/FORMAT.md).")
        .def_static("from_bytes", [](py_args::Buffer data) { return from_bytes<T>(data); }, py::arg("data"),
                    "Read a filter written by to_bytes; ValueError says what is wrong with bad data.")
        .def(
            "save", &save<T>, py::arg("path"),
            "Write the filter to path atomically (temporary file, fsync, rename, fsync of the directory): after a "
            "crash the path holds the old file or the new one, never a mix. A filter mapped for writing saved to "
            "its own path is flushed in place; a path that another handle maps for writing is refused. path may "
            "be a binary file object (open(..., 'wb'), io.BytesIO): the bytes of to_bytes() are written at its "
            "position.")
        .def_static("load", &load<T>, py::arg("path"), py::kw_only(), py::arg("mmap") = false,
                    py::arg("verify") = py::none(),
                    "Read a saved filter. mmap=True maps the file read-only instead of reading it: constant-time, "
                    "pages load on use, and the payload checksum is checked only if verify=True (the default "
                    "verifies unless mmap). path may be a binary file object (open(..., 'rb'), io.BytesIO): one "
                    "filter is read at its position, and nothing past it.")
        .def_static(
            "open",
            [](py_args::PathOrFile path, py_args::ModeName mode_arg, py_args::Bool verify_arg) {
                if (!PyUnicode_Check(mode_arg.ptr()))
                    throw py::type_error("mode must be 'r' or 'r+', got " + py_keys::type_name(mode_arg.ptr()));
                const std::string mode = mode_arg.cast<std::string>();
                const bool verify = verify_arg.cast<bool>();
                if (mode != "r+" && mode != "r")
                    throw std::invalid_argument("mode must be 'r' or 'r+', got '" + mode + "'");
                const std::string p = py_files::fs_path(path);
                py::gil_scoped_release nogil;
                return mapped<T>(p, mode == "r+", verify);
            },
            py::arg("path"), py::arg("mode") = "r+", py::kw_only(), py::arg("verify") = false,
            "Map a saved filter; with 'r+' adds go straight to the file (a killed process loses nothing it added), "
            "and other handles and processes may map it for writing too. flush() writes the header and syncs; the "
            "last writer's close() also makes the checksum current. verify=True checks the payload once (checksum, "
            "padding, fill); with 'r+' the first writer of a clean file always checks it (the last close must not "
            "bless damage), and reserves the file's disk blocks (a full disk is an OSError here, not a crash at an "
            "add). Only regular files are mapped; a handle inherited across a fork is read-only in the child. A "
            "context manager.")
        .def("flush", &flush<T>, py::call_guard<py::gil_scoped_release>(),
             "Mapped files: bring the header up to date and write pages back (msync).")
        .def("close", &close<T>, py::call_guard<py::gil_scoped_release>(),
             "Refuse further use; a mapped file is flushed and its payload checksum made current.")
        .def("__enter__", [](py::object self) { return self; })
        .def(
            "__exit__",
            [](H& h, py::args) {
                close(h);
                return false;
            })
        .def_property_readonly(
            "closed", [](const H& h) { return h->access() == Access::closed; }, "True after close().")
        .def_property_readonly(
            "mapped", [](const H& h) { return static_cast<bool>(h.file); },
            "True when the filter lives in a memory-mapped file.")
        .def_property_readonly(
            "read_only", [](const H& h) { return h->access() == Access::read_only; },
            "True when mapped read-only (load(mmap=True), open(path, 'r')).");
    // Pickling (bloomline._pickling) and Jupyter's display (bloomline.display)
    // are given to these classes from Python, which sits above them: the
    // bindings import nothing of the package.
    def_set_operator(cls, "__or__", "__ior__", [](T& r, const T& o) { r.union_with(o); });
    def_set_operator(cls, "__and__", "__iand__", [](T& r, const T& o) { r.intersect_with(o); });
    def_set_names(cls);
    cls.attr("__hash__") = py::none();
    cls.attr("__module__") = "bloomline";
    refuse_second_init(cls);
    install_fast_paths(cls, add_doc);
    py_args::explain_bad_calls(cls);
}

}  // namespace bloomline::py_filter
