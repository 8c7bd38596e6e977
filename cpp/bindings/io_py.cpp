// Python face of persistence and keys: bloomline._core.from_bytes (kinds 1
// and 2; bloomline.from_bytes adds scalable chains), read_header,
// key_positions, hash_many, the lines helpers, read_file (a whole file
// under its header lock) and AtomicWriter (the one atomic writer, file.hpp,
// for bytes written from Python, with the refusals every save shares).
// Redis's batches are redis_py.cpp's.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include "args_py.hpp"
#include "bloomline/file.hpp"
#include "bloomline/filter_io.hpp"
#include "filter_py.hpp"
#include "keys_py.hpp"
#include "register.hpp"

namespace bloomline {

namespace py = pybind11;

namespace {

// The hashes of a batch as hash_many's array (its dtype carrying the seed):
// run(body) calls a batch driver (with_batch_hashes, with_line_hashes) with
// the body that fills it, without the GIL. The body answers True for each
// key it is given, so the driver's own result says which keys were hashed
// (False: a null left out with nulls='skip').
template <class Run>
py::array hashes_into_array(std::uint64_t seed, Run run) {
    py::array hashed;
    run([&](auto& src, std::size_t n, bool* given) {
        Hash128* out = nullptr;
        {
            py::gil_scoped_acquire gil;
            hashed = py::array(py_keys::hash_dtype(seed), std::vector<py::ssize_t>{static_cast<py::ssize_t>(n)});
            out = static_cast<Hash128*>(hashed.mutable_data());
        }
        hash_range(src, 0, n, out);
        std::fill(given, given + n, true);
    });
    return hashed;
}

class PyAtomicWriter {
public:
    explicit PyAtomicWriter(py::handle path) : file_(std::make_unique<AtomicFile>(py_filter::fs_path(path))) {}
    void write(py::handle data) {
        const py_args::BytesView view(data, "data");
        live().write(view.data(), view.size());
    }
    void commit() {
        AtomicFile& f = live();
        py::gil_scoped_release nogil;
        f.commit();
        file_.reset();
    }
    void abort() { file_.reset(); }

private:
    AtomicFile& live() {
        if (!file_) throw std::invalid_argument("the AtomicWriter is committed or aborted");
        return *file_;
    }
    std::unique_ptr<AtomicFile> file_;
};

}  // namespace

void register_io(py::module_& m) {
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

    m.def(
        "key_positions",
        [](py::handle keys, py::handle num_bits, py::handle num_hashes, py::handle layout, py::handle seed) {
            // The slot indices each key sets, as an (n, k) uint64 array: what
            // a filter of this geometry touches (for study, or a store of
            // one's own).
            const Geometry g = py_filter::parse_geometry(num_bits, num_hashes, layout, seed);
            const std::vector<Hash128> hashes = py_keys::batch_hashes(keys, g.seed);
            py::array_t<std::uint64_t> out(
                {static_cast<py::ssize_t>(hashes.size()), static_cast<py::ssize_t>(g.num_hashes)});
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
        "hash_many",
        [](py::handle keys, py::handle seed) {
            const std::uint64_t s = py_args::to_u64(seed, "seed", 0, ~std::uint64_t{0}, "[0, 2**64)");
            // Hashed once by the key rules; the result is a batch of keys
            // like any other, for filters with the same seed.
            return hashes_into_array(s, [&](auto body) { py_keys::with_batch_hashes(keys, s, "keys", body); });
        },
        py::arg("keys"), py::arg("seed") = 0,
        "The 128-bit hashes of a batch of keys (1-D), as an array that every batch call of a filter with this "
        "seed takes in place of the keys; slicing and masking it keep it so.");

    m.def(
        "hash_valid",
        [](py::handle keys, py::handle seed, py::handle nulls) {
            const std::uint64_t s = py_args::to_u64(seed, "seed", 0, ~std::uint64_t{0}, "[0, 2**64)");
            py::array valid;
            py::array hashed = hashes_into_array(s, [&](auto body) {
                valid = py_keys::with_batch_hashes(keys, s, "keys", body, py_keys::parse_nulls(nulls));
            });
            return py::make_tuple(hashed, valid);
        },
        py::arg("keys"), py::arg("seed") = 0, py::kw_only(), py::arg("nulls") = "raise",
        "(hashes, valid): hash_many's hashes of the keys that are not null, and a bool array of the batch's "
        "shape, True where the key is not null. With nulls='raise' (the default), valid is all True.");

    m.def(
        "offers_arrow", [](py::handle keys) { return py_keys::offers_arrow(keys); }, py::arg("keys"),
        "Whether keys offer the Arrow PyCapsule interface (__arrow_c_array__ or __arrow_c_stream__).");

    m.def(
        "hash_lines",
        [](py::handle data, py::handle seed) {
            const std::uint64_t s = py_args::to_u64(seed, "seed", 0, ~std::uint64_t{0}, "[0, 2**64)");
            return hashes_into_array(s, [&](auto body) { py_keys::with_line_hashes(data, s, "data", body); });
        },
        py::arg("data"), py::arg("seed") = 0,
        "The hashes of each line of a block of text (as add_lines reads it), like hash_many's.");

    m.def(
        "select_lines",
        [](py::handle data, py::array_t<bool, py::array::c_style | py::array::forcecast> mask) {
            const py_args::BytesView view(data, "data");
            LineSpans lines;
            std::string out;
            {
                py::gil_scoped_release nogil;
                split_lines(view.data(), view.size(), &lines);
            }
            if (static_cast<std::size_t>(mask.size()) != lines.size())
                throw std::invalid_argument("mask has " + std::to_string(mask.size()) + " entries, data has " +
                                            std::to_string(lines.size()) + " lines");
            const bool* keep = mask.data();
            {
                py::gil_scoped_release nogil;
                std::size_t total = 0;
                for (std::size_t i = 0; i < lines.size(); ++i)
                    if (keep[i]) total += lines.end_with_newline(i, view.size()) - lines.begin[i] + 1;
                out.reserve(total);
                for (std::size_t i = 0; i < lines.size(); ++i) {
                    if (!keep[i]) continue;
                    const std::uint64_t b = lines.begin[i], e = lines.end_with_newline(i, view.size());
                    out.append(reinterpret_cast<const char*>(view.data()) + b, e - b);
                    if (e == view.size() && (e == b || view.data()[e - 1] != '\n')) out.push_back('\n');
                }
            }
            return py::bytes(out);
        },
        py::arg("data"), py::arg("mask"),
        "The lines of data where mask is True, each with its own ending (a last line without one gets \\n).");

    m.def(
        "read_file",
        [](py::handle path) {
            const std::string p = py_filter::fs_path(path);
            py::bytes out;
            {
                py::gil_scoped_release nogil;
                read_whole_file(p, [&out](std::size_t size) {
                    py::gil_scoped_acquire gil;
                    out = py::bytes(nullptr, static_cast<py::ssize_t>(size));
                    return reinterpret_cast<unsigned char*>(PyBytes_AS_STRING(out.ptr()));
                });
            }
            return out;
        },
        py::arg("path"),
        "A whole file's bytes, read as load() reads a filter file: holding its header lock shared, so that a file "
        "writers share is read clean or marked dirty, never half of each.");

    py::class_<PyAtomicWriter>(m, "AtomicWriter",
                               "Write a file atomically: a temporary file beside path, renamed over it by commit() "
                               "after fsync (and the directory fsynced). Leaving a with-block without commit(), or "
                               "by an exception, removes the temporary file and leaves path untouched.")
        .def(py::init<py::handle>(), py::arg("path"))
        .def_static(
            "check",
            [](py::handle path) {
                const std::string p = py_filter::fs_path(path);
                py::gil_scoped_release nogil;
                check_save_target(p);
            },
            py::arg("path"),
            "Raise what a save to path would refuse before writing anything: ValueError if a handle maps it for "
            "writing, PermissionError if it is read-only.")
        .def("write", &PyAtomicWriter::write, py::arg("data"))
        .def("commit", &PyAtomicWriter::commit)
        .def("abort", &PyAtomicWriter::abort)
        .def("__enter__", [](py::object self) { return self; })
        .def("__exit__", [](PyAtomicWriter& w, py::args) {
            w.abort();
            return false;
        });
}

}  // namespace bloomline
