// Python face of bloomline::BloomFilter: what is its own (bits from raw
// bytes, the buffer of bits); the shared parts, set algebra among them, are
// in filter_py.hpp.
#include "bloomline/bloom_filter.hpp"
#include "filter_py.hpp"
#include "register.hpp"

namespace bloomline {

namespace py = pybind11;
using namespace py_filter;

namespace {

using H = Handle<BloomFilter>;

}  // namespace

void register_bloom(py::module_& m) {
    py::class_<H> cls(m, "BloomFilter", py::buffer_protocol(), R"doc(
A Bloom filter: a set that may answer "present" for a key it never saw (with
probability about error_rate at capacity) but never "absent" for a key it saw.

BloomFilter(capacity, error_rate=0.01, *, layout="blocked", seed=0)

Keys are str (hashed as UTF-8), bytes-like (raw bytes) or int (8 bytes,
little-endian, in [-2**63, 2**64)); "abc" and b"abc" are the same key, and so
are 5 and np.int32(5). layout="blocked" keeps all of a key's bits in one
64-byte block (one cache line per key); "standard" spreads them over the
whole array (k cache lines, ~3% less memory at 1%).
)doc");

    cls.def(py::init([](py_args::Int capacity, py_args::Float error_rate, py_args::LayoutName layout, py_args::Int seed) {
                const Target t = parse_target(capacity, error_rate, layout, seed);
                return H(std::make_unique<BloomFilter>(
                    Geometry{t.layout, t.params.num_bits, t.params.num_hashes, t.seed}, t.capacity, t.error_rate));
            }),
            py::arg("capacity"), py::arg("error_rate") = 0.01, py::kw_only(), py::arg("layout") = "blocked",
            py::arg("seed") = 0)
        .def_static(
            "from_params",
            [](py_args::Int num_bits, py_args::Int num_hashes, py_args::LayoutName layout, py_args::Int seed) {
                return H(std::make_unique<BloomFilter>(parse_geometry(num_bits, num_hashes, layout, seed), 0, 0.0));
            },
            py::arg("num_bits"), py::arg("num_hashes"), py::kw_only(), py::arg("layout") = "blocked",
            py::arg("seed") = 0, "A filter with explicit num_bits (m) and num_hashes (k); capacity and error_rate are None.")
        .def_static(
            "from_buffer",
            [](py_args::Buffer payload, py_args::Int num_bits, py_args::Int num_hashes, py_args::LayoutName layout,
               py_args::Int seed, py_args::OptInt capacity, py_args::OptFloat error_rate, py_args::Int insert_count) {
                const Geometry g = parse_geometry(num_bits, num_hashes, layout, seed);
                const std::uint64_t inserted =
                    py_args::to_u64(insert_count, "insert_count", 0, kMaxCount, "[0, 2**56]");
                std::uint64_t cap = 0;
                double rate = 0.0;
                if (capacity.is_none() && !error_rate.is_none())
                    throw py::type_error("error_rate needs capacity (the two go together: the rate is the one at "
                                         "capacity), got error_rate=" + py::repr(error_rate).cast<std::string>() +
                                         " and capacity=None");
                if (!capacity.is_none() && error_rate.is_none())
                    throw py::type_error("capacity needs error_rate (the two go together: the rate is the one at "
                                         "capacity), got capacity=" + py::repr(capacity).cast<std::string>() +
                                         " and error_rate=None");
                if (!capacity.is_none()) {
                    cap = py_args::to_count(capacity, "capacity", 1, kMaxBits, "[1, 2**48]");
                    rate = py_args::to_double(error_rate, "error_rate");
                    check_error_rate(rate);
                }
                const py_args::BytesView view(payload, "payload");
                const std::size_t want = payload_bytes(g.num_slots, 1);
                if (view.size() != want)
                    throw std::invalid_argument("payload must be " + std::to_string(want) + " bytes for num_bits " +
                                                fmt(g.num_slots) + ", got " + std::to_string(view.size()));
                Header h;
                h.num_slots = g.num_slots;
                h.payload_len = want;
                const std::uint64_t bits_set = payload_fill(h, view.data());  // no bits past num_bits
                Memory mem = Memory::zeroed(want);
                std::memcpy(mem.data, view.data(), want);
                return H(std::make_unique<BloomFilter>(g, cap, rate, std::move(mem), inserted, bits_set));
            },
            py::arg("payload"), py::arg("num_bits"), py::arg("num_hashes"), py::kw_only(),
            py::arg("layout") = "blocked", py::arg("seed") = 0, py::arg("capacity") = py::none(),
            py::arg("error_rate") = py::none(), py::arg("insert_count") = 0,
            "A filter holding a copy of raw bits (bit i = bit i % 8 of byte i // 8, as memoryview(bf) shows them); "
            "payload must be exactly nbytes long. Bits of a standard filter made by a bloomline before the layout's second index take "
            "layout='standard-v1', the index they were set by. insert_count: the adds that found their key new, as its source "
            "counted them (a filter copied from Redis).")
        .def_property_readonly(
            "num_bits", [](const H& h) { return h->geometry().num_slots; }, "m, the number of bits.")
        .def_property_readonly(
            "bits_set", [](const H& h) { return h->bits_set(); }, "Number of bits that are 1 (exact, O(1)).")
        .def_property_readonly(
            "fill_ratio", [](const H& h) { return static_cast<double>(h->bits_set()) / static_cast<double>(h->geometry().num_slots); },
            "The fraction of bits that are 1.")
        .def_property_readonly(
            "nbytes", [](const H& h) { return h->bits().nbytes(); }, "Bytes of bit storage (whole 64-byte blocks).")
        .def("__repr__", [](const H& h) { return repr(*h, "BloomFilter", "num_bits", ""); })
        .def_buffer([](const H& h) {
            const BloomFilter& f = open_memory(h);
            // Read-only bytes of the bits, no copy; the exporter (the filter)
            // stays alive while a view exists and its memory never moves.
            return py::buffer_info(f.bits().bytes(), 1, py::format_descriptor<std::uint8_t>::format(), 1,
                                   {static_cast<py::ssize_t>(f.bits().nbytes())}, {1}, /*readonly=*/true);
        });
    bind_common(cls, "add(key) -> bool\n\nAdd a key. Returns True if it was new (some bit changed), "
                     "False if it may have been seen.");

    // For the Python kinds built on a BloomFilter (a windowed filter's
    // generations, DedupQueue's seen-set) that give its capacity warning
    // themselves: warnings.catch_warnings around the add swapped the filters
    // of the whole process, and two threads leaving it out of order left
    // CapacityWarning ignored everywhere, for good.
    m.def(
        "quiet_capacity",
        [](H& h, bool quiet) {
            const bool given = h.capacity_warned;
            h.capacity_warned = quiet;
            return given;
        },
        py::arg("filter"), py::arg("quiet") = true,
        "The filter's capacity warning taken as given (quiet: it never warns itself), or as not given yet; "
        "returns whether it had been.");
    m.def(
        "note_capacity",
        [](H& h) {
            h.capacity_warned = false;
            py_filter::note_capacity(h);
        },
        py::arg("filter"),
        "The filter's capacity warning, now, where it is past its capacity (and taken as given from then on).");
}

}  // namespace bloomline
