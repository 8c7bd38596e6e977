// Python face of the windowed filter's core parts (bloomline/windowed.py
// builds the ring on them): its generation rate (sizing.hpp), its kind-4
// codec (filter_io.hpp) and its ring mapped from a shared file
// (window_file.hpp).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <optional>

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

// The keys' hashes of a hash_valid array (16 bytes each, contiguous).
const Hash128* hashes_of(const py::array& hashed) {
    if (hashed.ndim() != 1 || hashed.itemsize() != 16 || !(hashed.flags() & py::array::c_style))
        throw std::invalid_argument("hashed must be a 1-D contiguous array of 16-byte hashes (hash_valid's)");
    return reinterpret_cast<const Hash128*>(hashed.data());
}

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

}  // namespace

void register_window(py::module_& m) {
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
            py::bytes out(nullptr, static_cast<py::ssize_t>(len));
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
            py::bytes out(nullptr, static_cast<py::ssize_t>(len));
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
            "contains_many",
            [](const WindowProbe& p, const py::array& hashed) {
                const auto* hs = hashes_of(hashed);
                const auto n = static_cast<std::size_t>(hashed.size());
                py::array_t<bool> out(static_cast<py::ssize_t>(n));
                bool* o = out.mutable_data();
                {
                    py::gil_scoped_release nogil;
                    p.contains_batch(hs, n, o);
                }
                return out;
            },
            py::arg("hashed"))
        .def(
            "add",
            [](const WindowProbe& p, Handle<BloomFilter>& cur, py::handle key, bool refresh) {
                return p.add(*cur, py_keys::hash_scalar_key(key.ptr(), cur->geometry().seed), refresh);
            },
            py::arg("current"), py::arg("key"), py::arg("refresh"))
        .def(
            "add_many",
            [](const WindowProbe& p, Handle<BloomFilter>& cur, const py::array& hashed, bool refresh) {
                const auto* hs = hashes_of(hashed);
                const auto n = static_cast<std::size_t>(hashed.size());
                py::array_t<bool> out(static_cast<py::ssize_t>(n));
                bool* o = out.mutable_data();
                BloomFilter& f = *cur;
                {
                    py::gil_scoped_release nogil;
                    p.add_batch(f, hs, n, refresh, o);
                }
                return out;
            },
            py::arg("current"), py::arg("hashed"), py::arg("refresh"));

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
