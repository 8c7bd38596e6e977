// bloomline._core: the compiled half of bloomline. The public package
// (python/bloomline/__init__.py) re-exports it.
#include <pybind11/pybind11.h>

#include <system_error>

#include "bloomline/hash_batch.hpp"
#include "bloomline/murmur3.hpp"
#include "args_py.hpp"
#include "filter_py.hpp"
#include "keys_py.hpp"
#include "register.hpp"

#ifndef BLOOMLINE_VERSION
#error "BLOOMLINE_VERSION must be defined by the build (from pyproject.toml)"
#endif

namespace py = pybind11;

namespace bloomline {

namespace {
Reader readers[4] = {};
}

void register_reader(Kind kind, Reader reader) { readers[static_cast<int>(kind)] = reader; }

void register_from_bytes(py::module_& m) {
    m.def(
        "from_bytes",
        [](py::handle data) {
            Header h;
            {
                const py_args::BytesView view(data, "data");
                h = decode_header(view.data(), view.size());
            }
            const Reader r = readers[static_cast<int>(h.kind)];
            if (r == nullptr) throw std::invalid_argument(std::string("this bloomline cannot read a ") + kind_name(h.kind));
            return r(data);
        },
        py::arg("data"),
        "Read any filter written by to_bytes (or a saved file's bytes); the kind comes from the header.");
    m.attr("from_bytes").attr("__module__") = "bloomline";

    // Scalable filters are assembled in Python (bloomline/scalable.py).
    register_reader(Kind::scalable, [](py::handle data) -> py::object {
        return py::module_::import("bloomline.scalable").attr("ScalableBloomFilter").attr("from_bytes")(data);
    });

    m.def(
        "read_header",
        [](py::handle data) {
            const py_args::BytesView view(data, "data");
            const Header h = decode_header(view.data(), view.size());
            checked_payload(view.data(), view.size(), h);
            py::dict d;
            d["format_version"] = kFormatVersion;
            d["kind"] = kind_name(h.kind);
            d["layout"] = layout_name(h.layout);
            d["hash"] = "murmur3_x64_128";
            d["slot_bits"] = h.slot_bits;
            d["seed"] = h.seed;
            d["num_slots"] = h.num_slots;
            d["num_hashes"] = h.num_hashes;
            d["capacity"] = h.capacity;
            d["error_rate"] = h.error_rate;
            d["insert_count"] = h.insert_count;
            d["payload_offset"] = kHeaderSize;
            d["payload_len"] = h.payload_len;
            d["dirty"] = (h.flags & kFlagDirty) != 0;
            if (h.kind != Kind::scalable) d["fill"] = h.fill;
            if (h.kind == Kind::scalable) d["tightening"] = scalable_tightening(view.data());
            return d;
        },
        py::arg("data"),
        "The header of bloomline bytes as a dict, after every check a reader makes (checksums included).");

    m.def(
        "key_positions",
        [](py::handle keys, py::handle num_bits, py::handle num_hashes, py::handle layout, py::handle seed) {
            // The slot indices each key sets, as a (n, k) uint64 array: what
            // a filter of this geometry touches, for stores kept elsewhere
            // (bloomline.redis).
            const Geometry g = py_filter::parse_geometry(num_bits, num_hashes, layout, seed);
            std::vector<Hash128> hashes;
            py_keys::run_batch(keys, g.seed, "keys", [&hashes](const Hash128* h, std::size_t n, bool*) {
                hashes.insert(hashes.end(), h, h + n);
            });
            py::array_t<std::uint64_t> out({static_cast<py::ssize_t>(hashes.size()), static_cast<py::ssize_t>(g.num_hashes)});
            std::uint64_t* o = out.mutable_data();
            {
                py::gil_scoped_release nogil;
                for (const Hash128& h : hashes) for_each_slot(g, h, [&o](std::uint64_t s) { *o++ = s; });
            }
            return out;
        },
        py::arg("keys"), py::arg("num_bits"), py::arg("num_hashes"), py::kw_only(), py::arg("layout") = "blocked",
        py::arg("seed") = 0, "The k slot indices of each key for this geometry, as an (n, k) uint64 array.");

    m.def(
        "_write_container",
        [](py::handle kind_code, std::uint64_t num_slots, std::uint32_t num_hashes, const std::string& layout,
           std::uint64_t seed, std::uint64_t capacity, double error_rate, std::uint64_t insert_count,
           double tightening, py::handle payload) {
            // Used by ScalableBloomFilter.to_bytes: the kind-3 envelope around
            // its stages' own encodings.
            if (kind_code.cast<int>() != static_cast<int>(Kind::scalable))
                throw std::invalid_argument("only kind 3 containers are written here");
            const py_args::BytesView body(payload, "payload");
            Header h;
            h.kind = Kind::scalable;
            h.layout = parse_layout(layout);
            h.slot_bits = 1;
            h.seed = seed;
            h.num_slots = num_slots;
            h.num_hashes = num_hashes;
            h.capacity = capacity;
            h.error_rate = error_rate;
            h.insert_count = insert_count;
            h.payload_len = body.size();
            py::bytes out(nullptr, static_cast<py::ssize_t>(h.total_size()));
            auto* o = reinterpret_cast<unsigned char*>(PyBytes_AS_STRING(out.ptr()));
            write_filter(h, body.data(), o);
            set_scalable_tightening(o, tightening);
            return out;
        });
}

}  // namespace bloomline

PYBIND11_MODULE(_core, m) {
    m.doc() = "bloomline's C++ core (use the bloomline package, not this module)";
    // I/O errors from the core carry errno: raise them as OSError.
    py::register_exception_translator([](std::exception_ptr p) {
        try {
            if (p) std::rethrow_exception(p);
        } catch (const std::system_error& e) {
            py::object err = py::reinterpret_borrow<py::object>(PyExc_OSError)(e.code().value(), e.what());
            PyErr_SetObject(PyExc_OSError, err.ptr());
        }
    });
    m.attr("__version__") = BLOOMLINE_VERSION;
    // The SIMD code this process uses for the integer batch hash
    // (hash_batch.hpp) and blocked lookups (block_probe.hpp): "avx2" or
    // "portable" (no AVX2, not x86, or BLOOMLINE_SIMD=portable).
    m.attr("simd_level") = bloomline::simd_level_name(bloomline::simd_level());
    bloomline::py_keys::init_numpy_types();

    m.def(
        "murmur3_128",
        [](py::handle data, py::handle seed) {
            const std::uint64_t s =
                bloomline::py_args::to_u64(seed, "seed", 0, ~std::uint64_t{0}, "[0, 2**64)");
            const bloomline::Hash128 h = bloomline::py_keys::hash_key(data.ptr(), s, "data");
            // h1 | h2 << 64, as mmh3.hash128(..., x64arch=True, signed=False)
            py::int_ lo(h.h1), hi(h.h2);
            return py::reinterpret_steal<py::int_>(
                PyNumber_Or(lo.ptr(), py::reinterpret_steal<py::object>(PyNumber_Lshift(hi.ptr(), py::int_(64).ptr())).ptr()));
        },
        py::arg("data"), py::arg("seed") = 0,
        R"doc(MurmurHash3_x64_128 of a key, as one unsigned 128-bit int.

The key is turned into bytes by bloomline's key rules (str as UTF-8, int as 8
little-endian bytes); for bytes and seeds below 2**32 this equals
mmh3.hash128(data, seed, x64arch=True, signed=False).)doc");

    bloomline::register_sizing(m);
    bloomline::register_bloom(m);
    bloomline::register_counting(m);
    bloomline::register_from_bytes(m);
}
