// Python face of the Redis batches (positions.hpp): a batch of keys grouped
// by shard and encoded as the operands of the module's or plain Redis's
// commands, and a batch's key bytes for a server's BF commands. The client
// (python/bloomline/redis/_wire.py) frames the commands around them: the
// operands come from here already in RESP, each with its argument count.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include "args_py.hpp"
#include "bloomline/positions.hpp"
#include "bloomline/resp.hpp"
#include "filter_py.hpp"
#include "keys_py.hpp"
#include "register.hpp"

namespace bloomline {

namespace py = pybind11;

namespace {

py::array_t<std::int64_t> int64_array(const std::vector<std::uint64_t>& v) {
    py::array_t<std::int64_t> a(static_cast<py::ssize_t>(v.size()));
    std::copy(v.begin(), v.end(), a.mutable_data());
    return a;
}

enum class Form { positions, set, get };

// shard_bits= of the Redis layouts: whole blocks, at most 2**32 bits.
std::uint64_t parse_shard_bits(py::handle shard_bits) {
    const std::uint64_t sb =
        py_args::to_u64(shard_bits, "shard_bits", kBlockBits, std::uint64_t{1} << 32, "[512, 2**32]");
    if (sb % kBlockBits != 0) throw std::invalid_argument("shard_bits must be a multiple of 512, got " + fmt(sb));
    return sb;
}

Form parse_form(py::handle form) {
    const std::string f = py::str(form).cast<std::string>();
    if (f == "positions") return Form::positions;
    if (f == "set") return Form::set;
    if (f == "get") return Form::get;
    throw std::invalid_argument("form must be 'positions', 'set' or 'get', got " + py::repr(form).cast<std::string>());
}

}  // namespace

void register_redis(py::module_& m) {
    m.def(
        "redis_batch",
        [](py::handle keys, py::handle num_bits, py::handle num_hashes, py::handle layout, py::handle seed,
           py::handle shard_bits, py::handle form, bool joined) {
            const Geometry g = py_filter::parse_geometry(num_bits, num_hashes, layout, seed);
            const std::uint64_t sb = parse_shard_bits(shard_bits);
            const Form f = parse_form(form);
            const std::vector<Hash128> hashes = py_keys::batch_hashes(keys, g.seed);
            ShardGroups groups;
            std::vector<std::string> bodies;
            std::vector<std::uint64_t> counts;
            {
                py::gil_scoped_release nogil;
                groups = group_by_shard(g, sb, hashes.data(), hashes.size());
                std::string joined_blobs;
                for (std::size_t p = 0; p < groups.parts(); ++p) {
                    if (!joined || bodies.empty()) {
                        bodies.emplace_back();
                        counts.push_back(0);
                    }
                    if (f != Form::positions) {
                        counts.back() += append_bitfield_operands(g, sb, hashes.data(), groups, p, f == Form::set,
                                                                  &bodies.back());
                        continue;
                    }
                    const std::string blob = encode_positions(g, sb, hashes.data(), groups, p);
                    if (!joined) {
                        resp::append_bulk(&bodies.back(), blob);
                        counts.back() = 1;
                        continue;
                    }
                    // A stage's shards in one argument: each blob after its length.
                    for (int b = 0; b < 4; ++b) joined_blobs.push_back(static_cast<char>(blob.size() >> (8 * b)));
                    joined_blobs += blob;
                }
                if (joined && f == Form::positions && !bodies.empty()) {
                    resp::append_bulk(&bodies.back(), joined_blobs);
                    counts.back() = 1;
                }
            }
            py::list out_bodies;
            for (const std::string& b : bodies) out_bodies.append(py::bytes(b));
            return py::make_tuple(int64_array(groups.shards), int64_array(groups.starts), int64_array(groups.keys),
                                  out_bodies, int64_array(counts));
        },
        py::arg("keys"), py::arg("num_bits"), py::arg("num_hashes"), py::kw_only(), py::arg("layout") = "blocked",
        py::arg("seed") = 0, py::arg("shard_bits") = std::uint64_t{1} << 31, py::arg("form") = "positions",
        py::arg("joined") = false,
        "(shards, starts, order, bodies, counts): a batch grouped by shard, part p the keys "
        "order[starts[p]:starts[p+1]] of shard shards[p]; bodies[p] its operands in RESP (form 'positions': one "
        "positions blob; 'set'/'get': BITFIELD operations) and counts[p] how many arguments that is. With "
        "joined, one body for all parts (positions: each blob after its u32 length). docs/FORMAT.md, Positions.");

    m.def(
        "redis_key",
        [](py::handle key, py::handle num_bits, py::handle num_hashes, py::handle layout, py::handle seed,
           py::handle shard_bits, py::handle form) {
            // One key, for a single add or lookup: redis_batch's part for it,
            // without arrays.
            const Geometry g = py_filter::parse_geometry(num_bits, num_hashes, layout, seed);
            const std::uint64_t sb = parse_shard_bits(shard_bits);
            const Form f = parse_form(form);
            const Hash128 h = py_keys::hash_key(key.ptr(), g.seed, "key");
            ShardGroups one;
            one.shards = {shard_of(g, sb, h)};
            one.starts = {0, 1};
            one.keys = {0};
            // The operands in RESP and their count, as a batch's part.
            std::string body;
            std::uint64_t count = 1;
            if (f == Form::positions)
                resp::append_bulk(&body, encode_positions(g, sb, &h, one, 0));
            else
                count = append_bitfield_operands(g, sb, &h, one, 0, f == Form::set, &body);
            return py::make_tuple(one.shards[0], py::bytes(body), count);
        },
        // (positional: a single add pays for parsing keywords on every call)
        py::arg("key"), py::arg("num_bits"), py::arg("num_hashes"), py::arg("layout") = "blocked",
        py::arg("seed") = 0, py::arg("shard_bits") = std::uint64_t{1} << 31, py::arg("form") = "positions",
        "(shard, body, count): redis_batch's part for one key: its shard, its operands in RESP and how many they "
        "are.");

    m.def(
        "key_bytes", [](py::handle key) { return py::bytes(py_keys::key_bytes(key.ptr(), "key")); }, py::arg("key"),
        "The bytes of one key by the key rules (docs/FORMAT.md, Keys): what a server that takes keys is sent.");

    m.def(
        "redis_items",
        [](py::handle keys, py::handle nulls, py::handle chunk) {
            const std::uint64_t per = py_args::to_u64(chunk, "chunk", 1, ~std::uint64_t{0} >> 1, ">= 1");
            py_keys::KeyItems items = py_keys::key_items(keys, "keys", py_keys::parse_nulls(nulls));
            // Cut the arguments into bodies of at most `per` keys each.
            py::list bodies, counts;
            for (std::size_t first = 0; first < items.ends.size(); first += per) {
                const std::size_t last = std::min<std::size_t>(items.ends.size(), first + per);
                const std::size_t from = first ? items.ends[first - 1] : 0;
                bodies.append(py::bytes(items.body.data() + from, items.ends[last - 1] - from));
                counts.append(last - first);
            }
            py::array_t<bool> valid(items.shape);
            std::copy(items.valid.begin(), items.valid.end(), valid.mutable_data());
            return py::make_tuple(bodies, counts, valid);
        },
        py::arg("keys"), py::kw_only(), py::arg("nulls") = "raise", py::arg("chunk") = std::uint64_t{1} << 62,
        "(bodies, counts, valid): the bytes of each key that is not null, by the key rules (str as UTF-8, int as 8 "
        "little-endian bytes), as RESP arguments in batch order, in bodies of at most `chunk` keys (counts[i] "
        "in bodies[i]); valid has the batch's shape, False where a key was null (nulls='skip').");
}

}  // namespace bloomline
