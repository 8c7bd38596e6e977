// Python face of persistence (format.hpp, filter_io.hpp): either C++ kind
// from its bytes (bloomline.from_bytes adds scalable chains), a header as
// a dict, and what a pickle of any filter holds (reduction).
#include <pybind11/pybind11.h>

#include "args_py.hpp"
#include "bloomline/filter_io.hpp"
#include "bloomline/format.hpp"
#include "filter_py.hpp"
#include "register.hpp"

namespace bloomline {

namespace py = pybind11;

namespace py_filter {

// Pickle stores only our checked bytes, restored by a module-level Python
// function (bloomline._pickling.restore): a pybind11 function such as
// _core.from_bytes pickles as a call to builtins.eval. This is the one place
// that names it, looked up when a pickle is made, never at import, so the
// compiled module never depends on the package above it at import time.
// Protocols 0-2 have no bytes type (pickle would write bytes as a call to
// _codecs.encode, a name outside bloomline), so they carry the bytes as
// latin-1 text, one character per byte; restore() turns them back.
py::tuple reduction(py::bytes data, int protocol) {
    py::object restore = py::module_::import("bloomline._pickling").attr("restore");
    if (protocol >= 3) return py::make_tuple(restore, py::make_tuple(std::move(data)));
    char* p = nullptr;
    py::ssize_t n = 0;
    PyBytes_AsStringAndSize(data.ptr(), &p, &n);
    py::object text = py::reinterpret_steal<py::object>(PyUnicode_DecodeLatin1(p, n, nullptr));
    if (!text) throw py::error_already_set();
    return py::make_tuple(restore, py::make_tuple(text));
}

}  // namespace py_filter

void register_persistence(py::module_& m) {
    m.def(
        "from_bytes",
        [](py::handle data) -> py::object {
            Kind kind;
            {
                const py_args::BytesView view(data, "data");
                kind = decode_header(view.data(), view.size()).kind;
            }
            if (kind == Kind::bloom) return py::cast(py_filter::from_bytes<BloomFilter>(data));
            if (kind == Kind::counting) return py::cast(py_filter::from_bytes<CountingBloomFilter>(data));
            throw std::invalid_argument("this holds a ScalableBloomFilter: read it with bloomline.from_bytes");
        },
        py::arg("data"), "Read a BloomFilter or CountingBloomFilter written by to_bytes; the kind comes from the header.");

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
            if (h.kind == Kind::scalable)
                d["tightening"] = chain_tightening(h);
            else
                d["fill"] = h.fill;
            return d;
        },
        py::arg("data"),
        "The header of bloomline bytes as a dict, after every check a reader makes (checksums included).");

    m.def("reduction", &py_filter::reduction, py::arg("data"), py::arg("protocol"),
          "__reduce_ex__'s answer for a filter whose to_bytes() is data: (bloomline._pickling.restore, (data,)), "
          "the bytes as latin-1 text for protocols 0-2.");
}

}  // namespace bloomline
