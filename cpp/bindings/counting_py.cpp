// Python face of bloomline::CountingBloomFilter: removal, counts, to_bloom
// and the buffer of counters; the shared parts are in filter_py.hpp (set
// algebra among them: | saturates, & keeps the smaller counter).
#include "bloomline/counting_filter.hpp"
#include "filter_py.hpp"
#include "register.hpp"

namespace bloomline {

namespace py = pybind11;
using namespace py_filter;

namespace {

unsigned parse_counter_bits(py::handle v) {
    return static_cast<unsigned>(py_args::to_u64(v, "counter_bits", 0, 64, "{4, 8, 16}"));
}

using H = Handle<CountingBloomFilter>;

[[noreturn]] void raise_key_error(py::handle key) {
    PyErr_SetObject(PyExc_KeyError, key.ptr());
    throw py::error_already_set();
}

}  // namespace

void register_counting(py::module_& m) {
    py::class_<H> cls(m, "CountingBloomFilter", py::buffer_protocol(), R"doc(
A counting Bloom filter: a Bloom filter whose keys can be removed.

CountingBloomFilter(capacity, error_rate=0.01, *, counter_bits=4, layout="blocked", seed=0)

Each of the m slots is a saturating counter of 4, 8 or 16 bits (memory is
counter_bits times a BloomFilter's). remove() raises KeyError for a key that
is certainly absent, changing nothing. A counter that reaches its maximum
sticks there and is never decremented, so removals never cause a false
negative; saturated_counters tells how many stuck. With the same geometry
a key's counters sit where a BloomFilter puts its bits: to_bloom() gives
the BloomFilter of the same keys.
)doc");

    cls.def(py::init([](py_args::Int capacity, py_args::Float error_rate, py_args::CounterBits counter_bits,
                        py_args::LayoutName layout, py_args::Int seed) {
                const unsigned bits = parse_counter_bits(counter_bits);
                check_counter_bits(bits);
                const Target t = parse_target(capacity, error_rate, layout, seed);
                return H(std::make_unique<CountingBloomFilter>(
                    Geometry{t.layout, t.params.num_bits, t.params.num_hashes, t.seed}, bits, t.capacity, t.error_rate));
            }),
            py::arg("capacity"), py::arg("error_rate") = 0.01, py::kw_only(), py::arg("counter_bits") = 4,
            py::arg("layout") = "blocked", py::arg("seed") = 0)
        .def_static(
            "from_params",
            [](py_args::Int num_counters, py_args::Int num_hashes, py_args::CounterBits counter_bits,
               py_args::LayoutName layout, py_args::Int seed) {
                const unsigned bits = parse_counter_bits(counter_bits);
                check_counter_bits(bits);
                return H(std::make_unique<CountingBloomFilter>(
                    parse_geometry(num_counters, num_hashes, layout, seed, "num_counters"), bits, 0, 0.0));
            },
            py::arg("num_counters"), py::arg("num_hashes"), py::kw_only(), py::arg("counter_bits") = 4,
            py::arg("layout") = "blocked", py::arg("seed") = 0, "A filter with explicit m and k.")
        .def(
            "remove",
            [](H& h, py_args::Key key) {
                if (!h->remove(py_keys::hash_key(key.ptr(), h->geometry().seed))) raise_key_error(key);
            },
            py::arg("key"),
            "Remove one occurrence of a key; KeyError (and no change) if it is certainly absent. Remove only keys "
            "that were added: a false positive removed lowers counters that other keys share (they may then test "
            "absent), and no filter can tell it from an added key. When the key "
            "leaves (one of its counters reaches 0), insert_count goes down by one, as an add that finds the key "
            "absent raises it.")
        .def(
            "discard",
            [](H& h, py_args::Key key) { return h->remove(py_keys::hash_key(key.ptr(), h->geometry().seed)); },
            py::arg("key"), "Remove one occurrence if present. Returns whether something was removed.")
        .def(
            "count",
            [](const H& h, py_args::Key key) { return h->count(py_keys::hash_key(key.ptr(), h->geometry().seed)); },
            py::arg("key"),
            "The smallest of the key's counters: an upper bound on its adds minus removes (0: certainly absent).")
        .def(
            "remove_many",
            [](H& h, py_args::Keys keys, py_args::NullsName nulls) {
                CountingBloomFilter& f = *h;
                return py_keys::with_batch_hashes(
                    keys, f.geometry().seed, "keys",
                    [&f](auto& src, std::size_t n, bool* out) { f.remove_keys(src, n, out); },
                    py_keys::parse_nulls(nulls));
            },
            py::arg("keys"), py::kw_only(), py::arg("nulls") = "raise",
            "Remove a batch, one occurrence per element. Returns a bool array: True where removed, False where the "
            "key was certainly absent (nothing changed for it) or null (nulls='skip').")
        .def(
            "count_many",
            [](const H& h, py_args::Keys keys, py_args::NullsName nulls) {
                const CountingBloomFilter& f = *h;
                return py_keys::with_batch_hashes<std::uint32_t>(
                    keys, f.geometry().seed, "keys",
                    [&f](auto& src, std::size_t n, std::uint32_t* out) { f.count_keys(src, 0, n, out); },
                    py_keys::parse_nulls(nulls));
            },
            py::arg("keys"), py::kw_only(), py::arg("nulls") = "raise",
            "count() of each key, as a uint32 array (0 for nulls, nulls='skip').")
        .def(
            "to_bloom", [](const H& h) { return Handle<BloomFilter>(h->to_bloom()); },
            "The BloomFilter of the same keys (bit set where counter > 0).")
        .def_property_readonly(
            "num_counters", [](const H& h) { return h->geometry().num_slots; }, "m, the number of counters.")
        .def_property_readonly(
            "counter_bits", [](const H& h) { return h->counter_bits(); }, "Bits per counter: 4, 8 or 16.")
        .def_property_readonly(
            "saturated_counters", [](const H& h) { return h->saturated_counters(); },
            "Counters stuck at their maximum (never decremented again).")
        .def_property_readonly(
            "nonzero_counters", [](const H& h) { return h->nonzero_counters(); }, "Counters above zero (exact, O(1)).")
        .def_property_readonly(
            "fill_ratio",
            [](const H& h) { return static_cast<double>(h->nonzero_counters()) / static_cast<double>(h->geometry().num_slots); },
            "The fraction of counters above zero.")
        .def_property_readonly(
            "nbytes", [](const H& h) { return h->counters().nbytes(); }, "Bytes of counter storage (whole 64-byte blocks).")
        .def("__repr__",
             [](const H& h) {
                 return repr(*h, "CountingBloomFilter", "num_counters", " counter_bits=" + std::to_string(h->counter_bits()));
             })
        .def_buffer([](const H& h) {
            const CountingBloomFilter& f = open_memory(h);
            // Read-only, no copy. 8- and 16-bit counters are shown as uint8 /
            // little-endian uint16 arrays of the counters; 4-bit counters as
            // the packed bytes (two counters per byte, low nibble first).
            const auto* p = f.counters().bytes();
            const auto nbytes = static_cast<py::ssize_t>(f.counters().nbytes());
            // (memoryview reads only native formats: "H" where native is
            // little-endian, "<H" where it is not.)
            if (f.counter_bits() == 16)
                return py::buffer_info(const_cast<unsigned char*>(p), 2, kLittleEndianHost ? "H" : "<H", 1,
                                       {nbytes / 2}, {2}, true);
            return py::buffer_info(const_cast<unsigned char*>(p), 1, "B", 1, {nbytes}, {1}, true);
        });
    bind_common(cls, "add(key) -> bool\n\nAdd a key (one more occurrence). Returns True if it was absent "
                     "before (some counter was 0).");
}

}  // namespace bloomline
