// Python face of the windowed filter's core parts (bloomline/windowed.py
// builds the ring on them): its generation rate (sizing.hpp), its kind-4
// codec (filter_io.hpp) and its ring mapped from a shared file
// (window_file.hpp).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include <pybind11/numpy.h>

#include "args_py.hpp"
#include "bloomline/filter_io.hpp"
#include "bloomline/window_file.hpp"
#include "bloomline/window_ring.hpp"
#include "keys_py.hpp"
#include "files_py.hpp"
#include "filter_py.hpp"
#include "register.hpp"

namespace bloomline {

namespace py = pybind11;
using py_filter::Handle;

namespace {

// A windowed filter's parameters as both encoders take them, each checked
// and named.
WindowHeader window_params(py::handle capacity, py::handle error_rate, py::handle generations, double window,
                           py::handle layout, py::handle seed) {
    WindowHeader p;
    p.capacity = py_args::to_count(capacity, "capacity", 1, kMaxBits, "[1, 2**48]");
    p.error_rate = py_args::to_double(error_rate, "error_rate");
    p.generations =
        static_cast<std::uint32_t>(py_args::to_u64(generations, "generations", 1, kMaxGenerations, "[1, 64]"));
    p.window = window;
    p.layout = py_args::to_layout(layout);
    p.seed = py_args::to_u64(seed, "seed", 0, ~std::uint64_t{0}, "[0, 2**64)");
    return p;
}

// The generations' filters, each refused if closed.
std::vector<const BloomFilter*> open_generations(const std::vector<const Handle<BloomFilter>*>& filters) {
    std::vector<const BloomFilter*> gens;
    for (const auto* h : filters) {
        (*h)->check_open();
        gens.push_back(h->f.get());
    }
    return gens;
}

// A windowed filter's single-key calls in the common case: the clock's
// generation is the one the ring was last read at (or older: the current one
// never goes back) and the current generation is within its capacity. Then
// `add` and `in` are one C call (the clock read, the generation's check, the
// hash, the probes), where Python's way over the ring cost several times the
// probes (benchmarks/NOTES.md). In every other case the cursor has no answer,
// and windowed.py goes its whole way (rotation, expiry, the capacity warning,
// shared files) and arms the cursor again. The clock's reading is handed on,
// so that a call reads the clock once whichever way it goes.
struct WindowCursor {
    double span = 1.0;  // seconds a generation
    std::uint64_t capacity = 0;
    std::uint64_t seed = 0;
    std::uint64_t generations = 0;  // G: a reading more than G generations back is Python's (it refuses)
    bool armed = false;
    bool has_floor = false;
    std::int64_t floor = 0;  // the newest generation seen: never armed at an older one
    std::int64_t now = 0;
    py::object held;  // (the probes and the current generation, kept alive while armed)
    const WindowProbe* live = nullptr;
    const WindowProbe* older = nullptr;
    Handle<BloomFilter>* current = nullptr;  // null: the current generation is not started

    void disarm() {
        armed = false;
        held = py::object();
        live = older = nullptr;
        current = nullptr;
    }

    // Is t (the clock's reading) in generation now or at most G before?
    // Anything but an exact float or int, or a reading Python would refuse
    // (a clock more than a window behind the newest generation among them),
    // is left to Python.
    bool at_now(PyObject* t) const {
        double x = 0;
        if (PyFloat_CheckExact(t)) {
            x = PyFloat_AS_DOUBLE(t);
        } else if (PyLong_CheckExact(t)) {
            x = PyLong_AsDouble(t);  // (as Python's int / float converts it)
            if (x == -1.0 && PyErr_Occurred()) {
                PyErr_Clear();
                return false;
            }
        } else {
            return false;
        }
        const double g = std::floor(x / span);  // (math.floor(t / span), exactly)
        if (!std::isfinite(g) || g < -9223372036854775808.0 || g >= 9223372036854775808.0) return false;
        const auto n = static_cast<std::int64_t>(g);
        // (now >= n: the difference in unsigned arithmetic is exact)
        return n <= now && static_cast<std::uint64_t>(now) - static_cast<std::uint64_t>(n) <= generations;
    }
};

[[noreturn]] void type_error(const char* what) {
    PyErr_SetString(PyExc_TypeError, what);
    throw py::error_already_set();
}

// The cursor of a `_cursor` attribute: null for anything else (a test's
// stand-in, a filter not initialised), which sends every call Python's way.
WindowCursor* cursor_in(PyObject* obj) {
    static PyTypeObject* type = nullptr;
    if (type == nullptr) type = py::detail::get_type_info(typeid(WindowCursor))->type;
    if (Py_TYPE(obj) != type) return nullptr;
    return py_filter::bound_value<WindowCursor>(obj);
}

// Keys the cursor hashes itself: exact str, bytes, int and float, whose
// hashing runs no Python code. Between reading the cursor's state and using
// it nothing may (a key's __index__ or __iter__ could clear the ring and free
// the probes the cursor points at): other keys go Python's way.
bool plain_key(PyObject* key) {
    return PyUnicode_CheckExact(key) || PyBytes_CheckExact(key) || PyLong_CheckExact(key) || PyFloat_CheckExact(key);
}

// What the cursor answers: 1 or 0, or -1 where Python must go its way. A
// refresh other than True or False goes Python's way too (pybind11's rules
// for a bool take some values and refuse others).
int try_add(const WindowCursor& c, PyObject* key, PyObject* t, PyObject* refresh) {
    if ((refresh != Py_True && refresh != Py_False) || !plain_key(key)) return -1;
    if (!c.armed || c.current == nullptr || !c.current->f || !c.at_now(t)) return -1;
    BloomFilter& cur = **c.current;
    if (cur.insert_count() >= c.capacity) return -1;  // (Python warns of the capacity)
    return c.older->add(cur, py_keys::hash_scalar_key(key, c.seed), refresh == Py_True) ? 1 : 0;
}

int try_contains(const WindowCursor& c, PyObject* key, PyObject* t) {
    if (!plain_key(key) || !c.armed || !c.at_now(t)) return -1;
    return c.live->contains(py_keys::hash_scalar_key(key, c.seed)) ? 1 : 0;
}

PyObject* answer(int yes) {
    if (yes < 0) Py_RETURN_NONE;
    PyObject* a = yes ? Py_True : Py_False;
    Py_INCREF(a);
    return a;
}

WindowCursor& cursor_of(PyObject* self) {
    auto* c = py_filter::bound_value<WindowCursor>(self);
    if (c == nullptr) type_error("the cursor is not initialised");
    return *c;
}

// cursor.contains(key, t): True/False, or None where Python must go its way.
PyObject* cursor_contains(PyObject* self, PyObject* const* args, Py_ssize_t nargs) {
    return py_filter::guarded(
        [&]() -> PyObject* {
            if (nargs != 2) type_error("contains takes (key, t)");
            return answer(try_contains(cursor_of(self), args[0], args[1]));
        },
        nullptr);
}

// ---- WindowedBloomFilter's own `add` and `in` ----------------------------------
// The Python methods (windowed.py) cost more than the probes: a frame, the
// attribute loads, and for `in` the slot's trip to a Python __contains__.
// install_window_calls puts these in their place on that class, as
// install_fast_paths does for the other kinds: the clock read, the cursor's
// answer, and Python's way (_add_at, _contains_at) with the same reading
// where the cursor has none. Subclasses reach the Python __contains__.

PyObject* interned(const char* s) {
    PyObject* o = PyUnicode_InternFromString(s);  // (kept for the process's life)
    if (o == nullptr) throw py::error_already_set();
    return o;
}

// A call's clock reading and, read after it, the filter's cursor (held for
// the call: a clock may rebind it) or null (Python's way).
struct Reading {
    py::object t;
    py::object held;
    WindowCursor* cursor = nullptr;
};

Reading read_clock(PyObject* self) {
    static PyObject* const clock_name = interned("_clock");
    static PyObject* const cursor_name = interned("_cursor");
    Reading r;
    py::object clock = py::reinterpret_steal<py::object>(PyObject_GetAttr(self, clock_name));
    if (!clock) throw py::error_already_set();
    r.t = py::reinterpret_steal<py::object>(PyObject_CallNoArgs(clock.ptr()));
    if (!r.t) throw py::error_already_set();
    r.held = py::reinterpret_steal<py::object>(PyObject_GetAttr(self, cursor_name));
    if (!r.held) throw py::error_already_set();
    r.cursor = cursor_in(r.held.ptr());
    return r;
}

// The Python `add` the C one replaced: it is called with the arguments the
// C one does not take, so that its errors are Python's own, word for word.
PyObject*& python_add() {
    static PyObject* f = nullptr;  // (kept for the process's life)
    return f;
}

PyObject* windowed_add(PyObject* self, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
    return py_filter::guarded(
        [&]() -> PyObject* {
            static PyObject* const refresh_name = interned("refresh");
            static PyObject* const add_at = interned("_add_at");
            PyObject* refresh = Py_True;
            const Py_ssize_t nkw = kwnames == nullptr ? 0 : PyTuple_GET_SIZE(kwnames);
            bool fits = nargs == 1 && nkw <= 1;
            if (fits && nkw == 1) {
                fits = PyTuple_GET_ITEM(kwnames, 0) == refresh_name;  // (interned: the call's names are too)
                if (!fits) {
                    const int same = PyObject_RichCompareBool(PyTuple_GET_ITEM(kwnames, 0), refresh_name, Py_EQ);
                    if (same < 0) throw py::error_already_set();
                    fits = same == 1;
                }
                refresh = args[1];
            }
            if (!fits) {  // (Python's own message: call the method this replaced, with self first)
                std::vector<PyObject*> all(static_cast<std::size_t>(nargs + nkw) + 1);
                all[0] = self;
                std::copy(args, args + nargs + nkw, all.begin() + 1);
                return PyObject_Vectorcall(python_add(), all.data(), static_cast<std::size_t>(nargs) + 1, kwnames);
            }
            Reading r = read_clock(self);
            const int yes = r.cursor == nullptr ? -1 : try_add(*r.cursor, args[0], r.t.ptr(), refresh);
            if (yes >= 0) return answer(yes);
            return PyObject_CallMethodObjArgs(self, add_at, r.t.ptr(), args[0], refresh, nullptr);
        },
        nullptr);
}

int windowed_contains(PyObject* self, PyObject* key) {
    return py_filter::guarded(
        [&]() -> int {
            static PyObject* const contains_at = interned("_contains_at");
            Reading r = read_clock(self);
            const int yes = r.cursor == nullptr ? -1 : try_contains(*r.cursor, key, r.t.ptr());
            if (yes >= 0) return yes;
            py::object got = py::reinterpret_steal<py::object>(
                PyObject_CallMethodObjArgs(self, contains_at, r.t.ptr(), key, nullptr));
            if (!got) throw py::error_already_set();
            const int truth = PyObject_IsTrue(got.ptr());
            if (truth < 0) throw py::error_already_set();
            return truth;
        },
        -1);
}

}  // namespace

void register_window(py::module_& m) {
    m.def(
        "parse_threads", [](py_args::Int threads) { return parse_threads(threads); }, py::arg("threads"),
        "threads= as the core's batch calls read it (an int in [0, 1024], 0 for one per CPU): the count it means. "
        "The windowed filter's own batch calls check theirs with it.");
    m.def(
        "window_generation_error_rate",
        [](py::handle error_rate, py::handle generations) {
            const double e = py_args::to_double(error_rate, "error_rate");
            check_error_rate(e);
            const auto g = py_args::to_u64(generations, "generations", 1, kMaxGenerations, "[1, 64]");
            return window_generation_error_rate(e, static_cast<std::uint32_t>(g));
        },
        py::arg("error_rate"), py::arg("generations"),
        "The rate of each generation: 1 - (1 - error_rate) ** (1 / (generations + 1)).");

    m.def(
        "encode_window",
        [](py::handle capacity, py::handle error_rate, py::handle generations, double window, py::handle layout,
           py::handle seed, const std::vector<const Handle<BloomFilter>*>& filters,
           const std::vector<std::uint64_t>& counts, const std::vector<std::int64_t>& numbers) {
            const WindowHeader p = window_params(capacity, error_rate, generations, window, layout, seed);
            const std::vector<const BloomFilter*> gens = open_generations(filters);
            const std::size_t len = window_encoded_size(gens);
            py::bytes out = py_args::new_bytes(len);
            encode_window(p, gens, counts, numbers, reinterpret_cast<unsigned char*>(PyBytes_AS_STRING(out.ptr())),
                          len);
            return out;
        },
        py::arg("capacity"), py::arg("error_rate"), py::arg("generations"), py::arg("window"), py::arg("layout"),
        py::arg("seed"), py::arg("filters"), py::arg("counts"), py::arg("numbers"),
        "The kind-4 bytes of a windowed filter: its parameters, and its live generations (oldest first) with their "
        "counts of new keys and generation numbers.");

    m.def(
        "encode_window_ring",
        [](py::handle capacity, py::handle error_rate, py::handle generations, double window, py::handle layout,
           py::handle seed, const std::vector<const Handle<BloomFilter>*>& filters,
           const std::vector<std::uint64_t>& counts, const std::vector<std::optional<std::int64_t>>& numbers) {
            const WindowHeader p = window_params(capacity, error_rate, generations, window, layout, seed);
            const std::vector<const BloomFilter*> gens = open_generations(filters);
            std::vector<std::int64_t> nums;
            for (const auto& n : numbers) nums.push_back(n ? *n : kGenerationNone);
            const std::size_t len = window_encoded_size(gens, true);
            py::bytes out = py_args::new_bytes(len);
            encode_window_ring(p, gens, counts, nums, reinterpret_cast<unsigned char*>(PyBytes_AS_STRING(out.ptr())),
                               len);
            return out;
        },
        py::arg("capacity"), py::arg("error_rate"), py::arg("generations"), py::arg("window"), py::arg("layout"),
        py::arg("seed"), py::arg("filters"), py::arg("counts"), py::arg("numbers"),
        "The kind-4 bytes of a windowed filter in its ring form: every place of the ring (generations + 1 filters, "
        "in place order), its count and its generation number (None: holds none).");

    // A ring mapped from a shared file: the places' filters are handed out
    // once (Python owns them); the numbers are read and rotations made here.
    using MW = MappedWindow;
    py::class_<MW, std::shared_ptr<MW>>(m, "MappedWindow")
        .def(py::init([](py::handle path, bool writable, bool verify) {
                 const std::string p = py_files::fs_path(path);
                 py::gil_scoped_release nogil;
                 return std::make_shared<MW>(p, writable, verify);
             }),
             py::arg("path"), py::arg("writable"), py::arg("verify"))
        .def_property_readonly("params",
                               [](const MW& w) {
                                   const WindowHeader& p = w.params();
                                   return py::make_tuple(p.capacity, p.error_rate, p.generations, p.window,
                                                         layout_name(p.layout), p.seed);
                               })
        .def("place_filters",
             [](const MW& w) {
                 py::list out;
                 for (std::size_t i = 0; i < w.places(); ++i) out.append(Handle<BloomFilter>(w.place_filter(i)));
                 return out;
             })
        .def("numbers",
             [](const MW& w) {
                 py::list out;
                 for (std::size_t i = 0; i < w.places(); ++i) {
                     const std::int64_t n = w.number(i);
                     if (n == kGenerationNone || n == kGenerationStarting)
                         out.append(py::none());
                     else
                         out.append(n);
                 }
                 return out;
             })
        .def("start", &MW::start_generation, py::arg("number"), py::arg("adds"),
             py::call_guard<py::gil_scoped_release>())
        .def("clear", &MW::clear, py::arg("adds"), py::call_guard<py::gil_scoped_release>())
        .def("flush", &MW::flush, py::arg("adds"), py::arg("final"), py::call_guard<py::gil_scoped_release>())
        .def(
            "encode",
            [](const MW& w, bool ring, std::int64_t now, const std::vector<std::uint64_t>& adds) {
                py::object out;  // (made, and released on an error, with the GIL held)
                {
                    py::gil_scoped_release nogil;  // (the lock may wait for another process)
                    w.encode(ring, now, adds, [&out](std::size_t len) {
                        py::gil_scoped_acquire gil;
                        out = py_args::new_bytes(len);
                        return reinterpret_cast<unsigned char*>(PyBytes_AS_STRING(out.ptr()));
                    });
                }
                return out;
            },
            py::arg("ring"), py::arg("now"), py::arg("adds"),
            "The file's generations in one kind-4 encoding, read under its header lock (no handle starts a "
            "generation meanwhile): every place (ring) or those live at now, oldest first.")
        .def("is_file", [](const MW& w, py::handle path) { return w.file().is(py_files::fs_path(path)); })
        .def_property_readonly("path", [](const MW& w) { return w.file().path(); })
        .def_property_readonly("writable", &MW::writable)
        .def_property_readonly("released", &MW::released);

    // The one loop of the ring's lookups and adds (window_ring.hpp): a probe
    // over some generations (the live ones, or the older ones for an add),
    // kept by windowed.py until the ring changes. Batches take the hashes of
    // hash_valid; single keys are hashed here, once.
    py::class_<WindowProbe>(m, "WindowProbe")
        .def(py::init([](const std::vector<Handle<BloomFilter>*>& gens) {
                 std::vector<const BloomFilter*> fs;
                 for (auto* h : gens) fs.push_back(h->f.get());
                 return WindowProbe(std::move(fs));
             }),
             py::arg("generations"), py::keep_alive<1, 2>())
        .def("__len__", &WindowProbe::size)
        .def(
            "contains",
            [](const WindowProbe& p, py::handle key, std::uint64_t seed) {
                return p.contains(py_keys::hash_scalar_key(key.ptr(), seed));
            },
            py::arg("key"), py::arg("seed"))
        .def(
            "add",
            [](const WindowProbe& p, Handle<BloomFilter>& cur, py::handle key, bool refresh) {
                return p.add(*cur, py_keys::hash_scalar_key(key.ptr(), cur->geometry().seed), refresh);
            },
            py::arg("current"), py::arg("key"), py::arg("refresh"))
        .def(
            "add_keys",
            [](const WindowProbe& p, Handle<BloomFilter>& cur, py_args::Keys keys, bool refresh,
               py_args::NullsName nulls) {
                BloomFilter& f = *cur;
                return py_keys::with_batch_hashes(
                    keys, f.geometry().seed, "keys",
                    [&p, &f, refresh](auto& src, std::size_t n, bool* out) { p.add_keys(f, src, n, refresh, out); },
                    py_keys::parse_nulls(nulls));
            },
            py::arg("current"), py::arg("keys"), py::arg("refresh"), py::arg("nulls"))
        .def(
            "contains_keys",
            [](const WindowProbe& p, py_args::Keys keys, py_args::Int seed, py_args::NullsName nulls) {
                const std::uint64_t s = py_args::to_u64(seed, "seed", 0, ~std::uint64_t{0}, "[0, 2**64)");
                return py_keys::with_batch_hashes(
                    keys, s, "keys", [&p](auto& src, std::size_t n, bool* out) { p.contains_keys(src, n, out); },
                    py_keys::parse_nulls(nulls));
            },
            py::arg("keys"), py::arg("seed"), py::arg("nulls"));

    // The single-key calls' way around Python (WindowCursor above): armed by
    // windowed.py each time it reads the ring, disarmed when the ring changes.
    py::class_<WindowCursor> cursor(m, "WindowCursor");
    cursor
        .def(py::init([](double span, std::uint64_t capacity, std::uint64_t seed, std::uint64_t generations) {
                 WindowCursor c;
                 c.span = span;
                 c.capacity = capacity;
                 c.seed = seed;
                 c.generations = generations;
                 return c;
             }),
             py::arg("span"), py::arg("capacity"), py::arg("seed"), py::arg("generations"))
        .def(
            "arm",
            [](WindowCursor& c, std::int64_t now, py::object current, py::object live, py::object older) {
                if (c.has_floor && now < c.floor) return false;  // (a newer generation was seen meanwhile)
                c.disarm();
                c.live = live.cast<const WindowProbe*>();
                c.older = older.cast<const WindowProbe*>();
                c.current = current.is_none() ? nullptr : current.cast<Handle<BloomFilter>*>();
                c.held = py::make_tuple(current, live, older);
                c.now = now;
                c.armed = true;
                return true;
            },
            py::arg("now"), py::arg("current"), py::arg("live"), py::arg("older"),
            "Answer single keys at generation now (and older readings) from these probes and the current "
            "generation (None: not started, adds go to Python); False if a newer generation was seen.")
        .def("disarm", &WindowCursor::disarm, "Every call goes to Python until the next arm.")
        .def(
            "advance",
            [](WindowCursor& c, std::int64_t newest) {
                if (!c.has_floor || newest > c.floor) c.floor = newest;
                c.has_floor = true;
                if (c.armed && c.now < c.floor) c.disarm();
            },
            py::arg("newest"), "The newest generation seen is now newest: never armed at an older one again.")
        .def_property_readonly("armed", [](const WindowCursor& c) { return c.armed; });
    {  // (a subclass's Python __contains__ asks it: a plain C method, as the class's own `in`)
        static PyMethodDef contains_def = {
            "contains", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(cursor_contains)), METH_FASTCALL,
            "contains(key, t): True/False, or None: Python's way."};
        py::object method = py::reinterpret_steal<py::object>(
            PyDescr_NewMethod(reinterpret_cast<PyTypeObject*>(cursor.ptr()), &contains_def));
        if (!method) throw py::error_already_set();
        cursor.attr("contains") = method;
    }

    m.def(
        "install_window_calls",
        [](py::type cls) {
            auto* type = reinterpret_cast<PyTypeObject*>(cls.ptr());
            if (!(type->tp_flags & Py_TPFLAGS_HEAPTYPE) || type->tp_as_sequence == nullptr)
                throw std::invalid_argument("install_window_calls takes WindowedBloomFilter");
            if (python_add() != nullptr) throw std::logic_error("install_window_calls runs once");
            py::object replaced = cls.attr("add");
            python_add() = replaced.inc_ref().ptr();
            // (the Python method's docstring, kept for the process's life: the method table points at it)
            static std::string doc;
            doc = "add($self, key, /, *, refresh=True)\n--\n\n";
            py::object text = replaced.attr("__doc__");
            if (!text.is_none()) doc += text.cast<std::string>();  // (None under python -OO)
            static PyMethodDef add_def = {
                "add", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(windowed_add)),
                METH_FASTCALL | METH_KEYWORDS, nullptr};
            add_def.ml_doc = doc.c_str();
            py::object add = py::reinterpret_steal<py::object>(PyDescr_NewMethod(type, &add_def));
            if (!add) throw py::error_already_set();
            cls.attr("add") = add;
            type->tp_as_sequence->sq_contains = windowed_contains;
            PyType_Modified(type);
        },
        py::arg("cls"),
        "WindowedBloomFilter's `add` and `in` as C entry points over its cursor (windowed.py calls it once).");

    m.def(
        "recount_fill", [](Handle<BloomFilter>& h) { h->locked([&h] { h->recount_fill_locked(); }); },
        py::arg("filter"),
        "A shared windowed file's place: its bits set counted anew from the file (other processes' adds too), its "
        "count of new keys kept (a flush: docs/design/sharing.md, Counts of a shared handle).");

    m.def(
        "restart_counts", [](Handle<BloomFilter>& h) { h->restart_counts(); }, py::arg("filter"),
        "A shared windowed file's place started afresh by a rotation: its bits set counted anew, its count of new "
        "keys from zero (the bits untouched).");

    m.def(
        "decode_window",
        [](py::handle data) {
            Window w;
            {
                const py_args::BytesView view(data, "data");
                w = decode_window(view.data(), view.size());
            }
            py::list gens;
            for (WindowGeneration& g : w.generations)
                gens.append(py::make_tuple(g.number, Handle<BloomFilter>(std::move(g.filter)), g.count));
            const WindowHeader& p = w.params;
            return py::make_tuple(p.capacity, p.error_rate, p.generations, p.window, layout_name(p.layout), p.seed, gens);
        },
        py::arg("data"),
        "(capacity, error_rate, generations, window, layout, seed, [(number, filter, count), ...]) of kind-4 bytes, "
        "every part checked.");
}

}  // namespace bloomline
