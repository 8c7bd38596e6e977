// Batches of precomputed positions, for a filter whose bits live elsewhere
// (Redis): the client hashes the keys and computes their positions here,
// with the same index generator as a local filter; the server (bloomline's
// Redis module, or the plain-Redis script) only tests and sets bits. A shard
// is a run of whole 512-bit blocks, the same bytes as that part of a local
// filter's payload.
//
// Two encodings of a shard's part of a batch, both documented in
// docs/FORMAT.md ("Positions"): a positions blob (one bytes argument, for
// the module) and BITFIELD operands in RESP (for plain Redis, whose own
// command parses them), each framed by resp.hpp. The command around them is
// framed by the client (bloomline/redis/_wire.py); this header only encodes
// and applies operands.
//
// The blob (little-endian):
//   byte 0  'B' (blocked layout) or 'S' (standard layout)
//   byte 1  k, the bits per key (1..64)
//   bytes 2..3  0
//   then one record per key, in batch order:
//     'B': u32 byte offset of the key's 64-byte block in its shard, then k
//          u16 bit offsets within the block (0..511);
//     'S': k u32 bit offsets within the shard (the standard layout has one).
//   Bit b of a region is bit b % 8 of its byte b / 8 (as in a payload).
// A stage of a chain in Redis adds to all its shards in one command: its
// positions are each shard's blob in turn, each preceded by its length (u32).
#pragma once

#include <charconv>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "bloomline/index.hpp"
#include "bloomline/resp.hpp"

namespace bloomline {

constexpr std::size_t kPositionsHeader = 4;
constexpr unsigned char kPositionsBlocked = 'B', kPositionsStandard = 'S';

inline std::size_t position_record_size(Layout layout, std::uint32_t k) {
    return layout == Layout::blocked ? 4 + 2 * static_cast<std::size_t>(k) : 4 * static_cast<std::size_t>(k);
}

// A batch's keys grouped by shard: part p holds the keys
// keys[starts[p] .. starts[p + 1]) (indices into the batch, in batch order),
// all of shard shards[p]; parts are in shard order.
struct ShardGroups {
    std::vector<std::uint64_t> shards;
    std::vector<std::uint64_t> starts;
    std::vector<std::uint64_t> keys;
    std::size_t parts() const { return shards.size(); }
};

// shard_bits: the bits of every shard but the last (a multiple of 512).
inline std::uint64_t shard_of(const Geometry& g, std::uint64_t shard_bits, const Hash128& h) {
    return g.layout == Layout::blocked ? BlockedLayout::block(h.h1, g.num_blocks()) / (shard_bits / kBlockBits) : 0;
}

inline ShardGroups group_by_shard(const Geometry& g, std::uint64_t shard_bits, const Hash128* hashes, std::size_t n) {
    ShardGroups out;
    std::vector<std::uint64_t> shard(n);
    std::uint64_t max_shard = 0;
    for (std::size_t i = 0; i < n; ++i) {
        shard[i] = shard_of(g, shard_bits, hashes[i]);
        max_shard = shard[i] > max_shard ? shard[i] : max_shard;
    }
    // Counting sort by shard: stable, so each shard's keys stay in batch order.
    std::vector<std::uint64_t> count(n ? max_shard + 2 : 1, 0);
    for (std::size_t i = 0; i < n; ++i) ++count[shard[i] + 1];
    for (std::size_t s = 1; s < count.size(); ++s) count[s] += count[s - 1];
    out.keys.resize(n);
    {
        std::vector<std::uint64_t> next(count.begin(), count.end() - 1);
        for (std::size_t i = 0; i < n; ++i) out.keys[next[shard[i]]++] = i;
    }
    for (std::uint64_t s = 0; s + 1 < count.size(); ++s) {
        if (count[s] == count[s + 1]) continue;
        out.shards.push_back(s);
        out.starts.push_back(count[s]);
    }
    out.starts.push_back(n);
    return out;
}

// The positions blob of part p of a grouping.
inline std::string encode_positions(const Geometry& g, std::uint64_t shard_bits, const Hash128* hashes,
                                    const ShardGroups& groups, std::size_t p) {
    const std::uint64_t first = groups.starts[p], last = groups.starts[p + 1];
    const std::size_t rec = position_record_size(g.layout, g.num_hashes);
    std::string blob(kPositionsHeader + rec * (last - first), '\0');
    blob[0] = static_cast<char>(g.layout == Layout::blocked ? kPositionsBlocked : kPositionsStandard);
    blob[1] = static_cast<char>(g.num_hashes);
    auto* w = reinterpret_cast<unsigned char*>(&blob[kPositionsHeader]);
    auto put = [&w](std::uint64_t v, int bytes) {
        for (int b = 0; b < bytes; ++b) *w++ = static_cast<unsigned char>(v >> (8 * b));
    };
    const std::uint64_t base_block = groups.shards[p] * (shard_bits / kBlockBits);
    for (std::uint64_t j = first; j < last; ++j) {
        const Hash128& h = hashes[groups.keys[j]];
        if (g.layout == Layout::blocked) {
            put((BlockedLayout::block(h.h1, g.num_blocks()) - base_block) * kBlockBytes, 4);
            for (std::uint32_t i = 0; i < g.num_hashes; ++i) put(BlockedLayout::offset(h.h2, i), 2);
        } else {
            for_each_slot(g, h, [&](std::uint64_t slot) { put(slot, 4); });
        }
    }
    return blob;
}

// Part p as BITFIELD operands in RESP ("SET u1 <offset> 1", or "GET u1
// <offset>", k per key, offsets in Redis's bit order: from the top bit of
// each byte), appended to *out; returns how many arguments were written.
inline std::uint64_t append_bitfield_operands(const Geometry& g, std::uint64_t shard_bits, const Hash128* hashes,
                                              const ShardGroups& groups, std::size_t p, bool set, std::string* out) {
    const std::uint64_t first = groups.starts[p], last = groups.starts[p + 1];
    // Into one reserved buffer: a batch of 10,000 keys is 60,000 operations.
    // The constant operands are framed once; each offset as it comes.
    static const std::string set_head = resp::bulk("SET") + resp::bulk("u1");
    static const std::string get_head = resp::bulk("GET") + resp::bulk("u1");
    static const std::string set_tail = resp::bulk("1");
    const std::string& head = set ? set_head : get_head;
    const std::size_t tail_len = set ? set_tail.size() : 0;
    const std::size_t at = out->size();
    out->resize(at + (last - first) * g.num_hashes * (head.size() + tail_len + resp::max_bulk_size(20)));
    char* w = &(*out)[at];
    const std::uint64_t base_bit = groups.shards[p] * shard_bits;
    auto emit = [&](std::uint64_t bit) {
        const std::uint64_t redis_bit = bit - bit % 8 + 7 - bit % 8;
        char digits[24];
        const auto len = static_cast<std::size_t>(std::to_chars(digits, digits + sizeof digits, redis_bit).ptr - digits);
        std::memcpy(w, head.data(), head.size());
        w = resp::put_bulk(w + head.size(), digits, len);
        std::memcpy(w, set_tail.data(), tail_len);
        w += tail_len;
    };
    for (std::uint64_t j = first; j < last; ++j) {
        const Hash128& h = hashes[groups.keys[j]];
        if (g.layout == Layout::blocked) {
            const std::uint64_t block_bit = (BlockedLayout::block(h.h1, g.num_blocks()) * kBlockBits) - base_bit;
            for (std::uint32_t i = 0; i < g.num_hashes; ++i) emit(block_bit + BlockedLayout::offset(h.h2, i));
        } else {
            for_each_slot(g, h, emit);
        }
    }
    out->resize(static_cast<std::size_t>(w - out->data()));
    return (last - first) * g.num_hashes * (set ? 4 : 3);
}

// Server side (the module): a blob's records, checked whole against the
// string they address before any bit is read or set (a bad batch changes
// nothing), then read key by key.
struct PositionRecords {
    Layout layout = Layout::blocked;
    std::uint32_t k = 0;
    std::size_t record = 0, n = 0;
    const unsigned char* first = nullptr;

    static std::uint64_t get(const unsigned char* p, int bytes) {
        std::uint64_t v = 0;
        for (int b = bytes - 1; b >= 0; --b) v = (v << 8) | p[b];
        return v;
    }
    // Calls f(byte, bit) for each of key i's k bits (bit = 0..7 of that byte).
    template <class F>
    void each_bit(std::size_t i, F&& f) const {
        const unsigned char* r = first + i * record;
        const bool blocked = layout == Layout::blocked;
        const std::uint64_t base = blocked ? get(r, 4) : 0;
        const unsigned char* bits = blocked ? r + 4 : r;
        const int width = blocked ? 2 : 4;
        for (std::uint32_t j = 0; j < k; ++j) {
            const std::uint64_t b = get(bits + width * j, width);
            if (!f(base + b / 8, static_cast<unsigned>(b % 8))) return;
        }
    }
    bool all_set(std::size_t i, const unsigned char* shard) const {
        bool all = true;
        each_bit(i, [&](std::uint64_t byte, unsigned bit) { return all = (shard[byte] >> bit & 1) != 0; });
        return all;
    }
    // Sets key i's bits; true where one of them was clear (the key was new).
    bool set(std::size_t i, unsigned char* shard) const {
        bool changed = false;
        each_bit(i, [&](std::uint64_t byte, unsigned bit) {
            changed = changed || !(shard[byte] >> bit & 1);
            shard[byte] = static_cast<unsigned char>(shard[byte] | (1u << bit));
            return true;
        });
        return changed;
    }
};

// The records of a blob whose every position lies inside a string of
// shard_len bytes; false (and *error) for a malformed blob or one outside.
inline bool read_positions(const unsigned char* blob, std::size_t blob_len, std::size_t shard_len,
                           PositionRecords* out, std::string* error) {
    if (blob_len < kPositionsHeader || (blob[0] != kPositionsBlocked && blob[0] != kPositionsStandard) ||
        blob[1] < 1 || blob[1] > kMaxHashes || blob[2] != 0 || blob[3] != 0) {
        *error = "ERR bloomline: malformed positions (bad header)";
        return false;
    }
    PositionRecords& p = *out;
    p.layout = blob[0] == kPositionsBlocked ? Layout::blocked : Layout::standard;
    p.k = blob[1];
    p.record = position_record_size(p.layout, p.k);
    if ((blob_len - kPositionsHeader) % p.record != 0) {
        *error = "ERR bloomline: malformed positions (length)";
        return false;
    }
    p.n = (blob_len - kPositionsHeader) / p.record;
    p.first = blob + kPositionsHeader;
    for (std::size_t i = 0; i < p.n; ++i) {
        const unsigned char* r = p.first + i * p.record;
        if (p.layout == Layout::blocked) {
            if (PositionRecords::get(r, 4) + kBlockBytes > shard_len) {
                *error = "ERR bloomline: a block lies past the end of the shard";
                return false;
            }
            for (std::uint32_t j = 0; j < p.k; ++j)
                if (PositionRecords::get(r + 4 + 2 * j, 2) >= kBlockBits) {
                    *error = "ERR bloomline: a bit offset lies past its block";
                    return false;
                }
        } else {
            for (std::uint32_t j = 0; j < p.k; ++j)
                if (PositionRecords::get(r + 4 * j, 4) / 8 >= shard_len) {
                    *error = "ERR bloomline: a bit lies past the end of the shard";
                    return false;
                }
        }
    }
    return true;
}

// What an apply does with each key.
//   test: answer '1' where every bit is set, else '0'.
//   add: set the bits; answer '1' where a bit changed (the key was new),
//        else '0'.
//   add_unsure: the same for a re-sent batch whose first send may have run
//        and whose kept answer is gone: a key found present may have been set
//        by that first send, so it is answered '?' (unknown), never '0'.
enum class Apply { test, add, add_unsure };

// Apply one shard's blob. Adds stop before the key that would be new past
// `room` new keys (a stage of a chain at its capacity); *processed says how
// many keys were answered, and one answer byte per processed key is
// appended to *answer. Returns false (and sets *error) for a malformed blob
// or a position outside the shard; nothing is changed then.
inline bool apply_positions(const unsigned char* blob, std::size_t blob_len, unsigned char* shard,
                            std::size_t shard_len, Apply mode, std::uint64_t room, std::string* answer,
                            std::size_t* processed, std::uint64_t* news, std::string* error) {
    PositionRecords p;
    if (!read_positions(blob, blob_len, shard_len, &p, error)) return false;
    std::size_t i = 0;
    for (; i < p.n; ++i) {
        if (mode != Apply::test && *news == room) break;
        const bool all = p.all_set(i, shard);
        if (mode == Apply::test) {
            answer->push_back(all ? '1' : '0');
        } else if (all) {  // present: not new, or unknown when the first send may have set it
            answer->push_back(mode == Apply::add_unsure ? '?' : '0');
        } else {
            p.set(i, shard);
            answer->push_back('1');
            ++*news;
        }
    }
    *processed = i;
    return true;
}

// A windowed filter's generations (each a string of the same length): an
// add tests each key in the older live generations and test-and-sets it in
// the current one, as the plain backend's script does. A key is new ('1')
// where no older generation had it and the current one changed; present is
// '0', or '?' for a re-send whose kept answer is gone (mode add_unsure).
// refresh=false leaves a key seen in an older generation where it is.
// *added counts keys new to the current generation (its count).
inline void apply_window_add(const PositionRecords& p, unsigned char* current,
                             const std::vector<const unsigned char*>& older, bool refresh, Apply mode,
                             std::string* answer, std::uint64_t* added) {
    for (std::size_t i = 0; i < p.n; ++i) {
        bool seen = false;
        for (const unsigned char* g : older)
            if ((seen = p.all_set(i, g))) break;
        const bool fresh = (refresh || !seen) && p.set(i, current);
        *added += fresh;
        answer->push_back(fresh && !seen ? '1' : mode == Apply::add_unsure ? '?' : '0');
    }
}

// A lookup over the live generations: '1' where one of them has the key.
inline void apply_window_test(const PositionRecords& p, const std::vector<const unsigned char*>& live,
                              std::string* answer) {
    for (std::size_t i = 0; i < p.n; ++i) {
        bool hit = false;
        for (const unsigned char* g : live)
            if ((hit = p.all_set(i, g))) break;
        answer->push_back(hit ? '1' : '0');
    }
}

}  // namespace bloomline
