// Python face of keys and hashing (keys_py.hpp over murmur3.hpp and
// index.hpp): a batch's hashes as an array every batch call takes in place
// of the keys (hash_many, hash_valid), each key's slots for a geometry
// (key_positions), and whether a batch offers Arrow's PyCapsule interface.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include "args_py.hpp"
#include "bloomline/index.hpp"
#include "filter_py.hpp"
#include "keys_py.hpp"
#include "register.hpp"

namespace bloomline {

namespace py = pybind11;

void register_hashing(py::module_& m) {
    m.def(
        "key_positions",
        [](py_args::Keys keys, py_args::Int num_bits, py_args::Int num_hashes, py_args::LayoutName layout, py_args::Int seed) {
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
        [](py_args::Keys keys, py_args::Int seed) {
            const std::uint64_t s = py_args::to_u64(seed, "seed", 0, ~std::uint64_t{0}, "[0, 2**64)");
            // Hashed once by the key rules; the result is a batch of keys
            // like any other, for filters with the same seed.
            return py_keys::hashes_into_array(s, [&](auto body) { py_keys::with_batch_hashes(keys, s, "keys", body); });
        },
        py::arg("keys"), py::arg("seed") = 0,
        "The 128-bit hashes of a batch of keys (1-D), as an array that every batch call of a filter with this "
        "seed takes in place of the keys; slicing and masking it keep it so.");

    m.def(
        "hash_valid",
        [](py_args::Keys keys, py_args::Int seed, py_args::NullsName nulls) {
            const std::uint64_t s = py_args::to_u64(seed, "seed", 0, ~std::uint64_t{0}, "[0, 2**64)");
            py::array valid;
            py::array hashed = py_keys::hashes_into_array(s, [&](auto body) {
                valid = py_keys::with_batch_hashes(keys, s, "keys", body, py_keys::parse_nulls(nulls));
            });
            return py::make_tuple(hashed, valid);
        },
        py::arg("keys"), py::arg("seed") = 0, py::kw_only(), py::arg("nulls") = "raise",
        "(hashes, valid): hash_many's hashes of the keys that are not null, and a bool array of the batch's "
        "shape, True where the key is not null. With nulls='raise' (the default), valid is all True.");

    m.def(
        "offers_arrow", [](py_args::Keys keys) { return py_keys::offers_arrow(keys); }, py::arg("keys"),
        "Whether keys offer the Arrow PyCapsule interface (__arrow_c_array__ or __arrow_c_stream__).");
}

}  // namespace bloomline
