// Python face of persistence (format.hpp, filter_io.hpp): either C++ kind
// from its bytes (bloomline.from_bytes adds scalable chains), and a header
// as a dict. What a pickle holds is Python's (bloomline._pickling).
#include <pybind11/pybind11.h>

#include "args_py.hpp"
#include "bloomline/filter_io.hpp"
#include "bloomline/format.hpp"
#include "filter_py.hpp"
#include "register.hpp"

namespace bloomline {

namespace py = pybind11;

void register_persistence(py::module_& m) {
    m.def(
        "from_bytes",
        [](py_args::Buffer data) -> py::object {
            Kind kind;
            {
                const py_args::BytesView view(data, "data");
                kind = decode_header(view.data(), view.size()).kind;
            }
            if (kind == Kind::bloom) return py::cast(py_filter::from_bytes<BloomFilter>(data));
            if (kind == Kind::counting) return py::cast(py_filter::from_bytes<CountingBloomFilter>(data));
            throw std::invalid_argument(std::string("this holds a ") + kind_name(kind) +
                                        ": read it with bloomline.from_bytes");
        },
        py::arg("data"), "Read a BloomFilter or CountingBloomFilter written by to_bytes; the kind comes from the header.");

    m.def(
        "read_header",
        [](py_args::Buffer data) {
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
            if (h.kind == Kind::scalable) {
                d["tightening"] = chain_tightening(h);
            } else if (h.kind == Kind::windowed) {
                d["generations"] = h.num_hashes;
                d["window"] = window_seconds(h);
                d["shared"] = (h.flags & kFlagRing) != 0;  // the ring form, save(shared=True): open(path, "r+") maps it
            } else {
                d["fill"] = h.fill;
            }
            return d;
        },
        py::arg("data"),
        "The header of bloomline bytes as a dict, after every check a reader makes (checksums included).");
}

}  // namespace bloomline
