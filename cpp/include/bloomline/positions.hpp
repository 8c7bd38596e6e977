// Batches of precomputed positions, for a filter whose bits live elsewhere
// (Redis): the client hashes the keys and computes their positions here,
// with the same index generator as a local filter, and sends one bytes
// argument per shard; the server (bloomline's Redis module, or the plain
// Redis script) only tests and sets bits. A shard is a run of whole 512-bit
// blocks, the same bytes as that part of a local filter's payload.
//
// The batch format (little-endian), documented in docs/FORMAT.md:
//   byte 0  'B' (blocked layout) or 'S' (standard layout)
//   byte 1  k, the bits per key (1..64)
//   bytes 2..3  0
//   then one record per key, in batch order:
//     'B': u32 byte offset of the key's 64-byte block in its shard, then k
//          u16 bit offsets within the block (0..511);
//     'S': k u32 bit offsets within the shard (the standard layout has one).
//   Bit b of a region is bit b % 8 of its byte b / 8 (as in a payload).
#pragma once

#include <cstddef>
#include <cstdint>
#include <charconv>
#include <cstring>
#include <string>
#include <vector>

#include "bloomline/index.hpp"

namespace bloomline {

constexpr std::size_t kPositionsHeader = 4;
constexpr unsigned char kPositionsBlocked = 'B', kPositionsStandard = 'S';

inline std::size_t position_record_size(Layout layout, std::uint32_t k) {
    return layout == Layout::blocked ? 4 + 2 * static_cast<std::size_t>(k) : 4 * static_cast<std::size_t>(k);
}

// The keys of a batch grouped by shard: for shard shards[s], the keys
// keys[starts[s] .. starts[s + 1]) (indices into the batch, in batch order)
// and their records in blobs[s].
struct ShardedPositions {
    std::vector<std::uint64_t> shards;
    std::vector<std::uint64_t> starts;
    std::vector<std::uint64_t> keys;
    std::vector<std::string> blobs;
};

// shard_bits: the bits of every shard but the last (a multiple of 512).
inline ShardedPositions shard_positions(const Geometry& g, std::uint64_t shard_bits, const Hash128* hashes,
                                        std::size_t n) {
    ShardedPositions out;
    const std::uint64_t num_blocks = g.num_blocks();
    const std::uint64_t blocks_per_shard = shard_bits / kBlockBits;
    std::vector<std::uint64_t> shard_of(n);
    std::uint64_t max_shard = 0;
    for (std::size_t i = 0; i < n; ++i) {
        shard_of[i] = g.layout == Layout::blocked ? block_index(hashes[i].h1, num_blocks) / blocks_per_shard : 0;
        max_shard = shard_of[i] > max_shard ? shard_of[i] : max_shard;
    }
    // Counting sort by shard: stable, so each shard's keys stay in batch order.
    std::vector<std::uint64_t> count(n ? max_shard + 2 : 1, 0);
    for (std::size_t i = 0; i < n; ++i) ++count[shard_of[i] + 1];
    for (std::size_t s = 1; s < count.size(); ++s) count[s] += count[s - 1];
    std::vector<std::uint64_t> order(n);
    {
        std::vector<std::uint64_t> next(count.begin(), count.end() - 1);
        for (std::size_t i = 0; i < n; ++i) order[next[shard_of[i]]++] = i;
    }
    const std::size_t rec = position_record_size(g.layout, g.num_hashes);
    unsigned char head[kPositionsHeader] = {g.layout == Layout::blocked ? kPositionsBlocked : kPositionsStandard,
                                            static_cast<unsigned char>(g.num_hashes), 0, 0};
    for (std::uint64_t s = 0; s + 1 < count.size(); ++s) {
        if (count[s] == count[s + 1]) continue;
        out.shards.push_back(s);
        out.starts.push_back(out.keys.size());
        std::string blob(kPositionsHeader + rec * (count[s + 1] - count[s]), '\0');
        std::memcpy(&blob[0], head, kPositionsHeader);
        auto* p = reinterpret_cast<unsigned char*>(&blob[kPositionsHeader]);
        auto put = [&p](std::uint64_t v, int bytes) {
            for (int b = 0; b < bytes; ++b) *p++ = static_cast<unsigned char>(v >> (8 * b));
        };
        for (std::uint64_t j = count[s]; j < count[s + 1]; ++j) {
            const Hash128& h = hashes[order[j]];
            out.keys.push_back(order[j]);
            if (g.layout == Layout::blocked) {
                const std::uint64_t block = block_index(h.h1, num_blocks);
                put((block - s * blocks_per_shard) * kBlockBytes, 4);
                for (std::uint32_t i = 0; i < g.num_hashes; ++i) put(offset_in_block(h.h2, i), 2);
            } else {
                for_each_slot(g, h, [&](std::uint64_t slot) { put(slot, 4); });
            }
        }
        out.blobs.push_back(std::move(blob));
    }
    out.starts.push_back(out.keys.size());
    return out;
}

// The same batch as Redis BITFIELD operations, for plain Redis: for each key
// k "SET u1 <offset> 1" (or "GET u1 <offset>") in RESP, offsets in Redis's
// bit order (from the top bit of each byte), per shard. args[s] is the RESP
// encoding of those arguments alone (the caller writes the command's head),
// arg_counts[s] how many there are.
struct ShardedOps {
    ShardedPositions keys;  // shards, starts, keys (blobs unused)
    std::vector<std::string> args;
    std::vector<std::uint64_t> arg_counts;
};

inline ShardedOps shard_bitfield_ops(const Geometry& g, std::uint64_t shard_bits, const Hash128* hashes, std::size_t n,
                                     bool set) {
    ShardedOps out;
    out.keys = shard_positions(g, shard_bits, hashes, n);
    const std::size_t rec = position_record_size(g.layout, g.num_hashes);
    const bool blocked = g.layout == Layout::blocked;
    // "$3\r\nSET\r\n$2\r\nu1\r\n$" <len> "\r\n" <offset> "\r\n$1\r\n1\r\n", written by hand: a
    // batch of 10,000 keys is 60,000 of them.
    const char* head = set ? "$3\r\nSET\r\n$2\r\nu1\r\n$" : "$3\r\nGET\r\n$2\r\nu1\r\n$";
    const std::size_t head_len = std::strlen(head);
    const char* tail = set ? "\r\n$1\r\n1\r\n" : "\r\n";
    const std::size_t tail_len = std::strlen(tail);
    for (std::size_t s = 0; s < out.keys.shards.size(); ++s) {
        const std::string& blob = out.keys.blobs[s];
        const std::size_t count = (blob.size() - kPositionsHeader) / rec;
        std::string resp(count * g.num_hashes * (head_len + tail_len + 24), '\0');
        char* w = &resp[0];
        const auto* r = reinterpret_cast<const unsigned char*>(blob.data()) + kPositionsHeader;
        auto get = [](const unsigned char* p, int bytes) {
            std::uint64_t v = 0;
            for (int b = bytes - 1; b >= 0; --b) v = (v << 8) | p[b];
            return v;
        };
        for (std::size_t i = 0; i < count; ++i, r += rec) {
            const std::uint64_t base = blocked ? get(r, 4) * 8 : 0;
            for (std::uint32_t j = 0; j < g.num_hashes; ++j) {
                const std::uint64_t bit = base + (blocked ? get(r + 4 + 2 * j, 2) : get(r + 4 * j, 4));
                const std::uint64_t redis_bit = bit - bit % 8 + 7 - bit % 8;
                char digits[24];
                const auto end = std::to_chars(digits, digits + sizeof digits, redis_bit).ptr;
                const auto len = static_cast<std::size_t>(end - digits);
                std::memcpy(w, head, head_len);
                w += head_len;
                const auto len_end = std::to_chars(w, w + 4, len).ptr;
                w = len_end;
                *w++ = '\r';
                *w++ = '\n';
                std::memcpy(w, digits, len);
                w += len;
                std::memcpy(w, tail, tail_len);
                w += tail_len;
            }
        }
        resp.resize(static_cast<std::size_t>(w - resp.data()));
        out.args.push_back(std::move(resp));
        out.arg_counts.push_back(count * g.num_hashes * (set ? 4 : 3));
    }
    return out;
}

// Server side: apply a batch to a shard's bytes (the module). For each
// record, answer[i] = '1' when the key was new (add) or is present (test),
// else '0'. Returns false (and sets *error) for a malformed batch or a
// position outside the shard; nothing is changed then. changed(offset,
// len) is called for each region an add wrote (for replication).
template <class Changed>
bool apply_positions(const unsigned char* blob, std::size_t blob_len, unsigned char* shard, std::size_t shard_len,
                     bool add, std::string* answer, std::string* error, Changed&& changed) {
    if (blob_len < kPositionsHeader || (blob[0] != kPositionsBlocked && blob[0] != kPositionsStandard) ||
        blob[1] < 1 || blob[1] > kMaxHashes) {
        *error = "ERR bloomline: malformed positions (bad header)";
        return false;
    }
    const Layout layout = blob[0] == kPositionsBlocked ? Layout::blocked : Layout::standard;
    const std::uint32_t k = blob[1];
    const std::size_t rec = position_record_size(layout, k);
    if ((blob_len - kPositionsHeader) % rec != 0) {
        *error = "ERR bloomline: malformed positions (length)";
        return false;
    }
    const std::size_t n = (blob_len - kPositionsHeader) / rec;
    auto get = [](const unsigned char* p, int bytes) {
        std::uint64_t v = 0;
        for (int b = bytes - 1; b >= 0; --b) v = (v << 8) | p[b];
        return v;
    };
    // Check every position first: a bad batch changes nothing.
    for (std::size_t i = 0; i < n; ++i) {
        const unsigned char* r = blob + kPositionsHeader + i * rec;
        if (layout == Layout::blocked) {
            if (get(r, 4) + kBlockBytes > shard_len) {
                *error = "ERR bloomline: a block lies past the end of the shard";
                return false;
            }
            for (std::uint32_t j = 0; j < k; ++j)
                if (get(r + 4 + 2 * j, 2) >= kBlockBits) {
                    *error = "ERR bloomline: a bit offset lies past its block";
                    return false;
                }
        } else {
            for (std::uint32_t j = 0; j < k; ++j)
                if (get(r + 4 * j, 4) / 8 >= shard_len) {
                    *error = "ERR bloomline: a bit lies past the end of the shard";
                    return false;
                }
        }
    }
    answer->assign(n, '0');
    for (std::size_t i = 0; i < n; ++i) {
        const unsigned char* r = blob + kPositionsHeader + i * rec;
        const std::uint64_t base = layout == Layout::blocked ? get(r, 4) : 0;
        const unsigned char* bits = layout == Layout::blocked ? r + 4 : r;
        const int width = layout == Layout::blocked ? 2 : 4;
        bool all = true;
        for (std::uint32_t j = 0; j < k; ++j) {
            const std::uint64_t b = get(bits + width * j, width);
            all = all && (shard[base + b / 8] >> (b % 8) & 1);
        }
        if (!add) {
            (*answer)[i] = all ? '1' : '0';
            continue;
        }
        if (all) continue;
        (*answer)[i] = '1';
        for (std::uint32_t j = 0; j < k; ++j) {
            const std::uint64_t b = get(bits + width * j, width);
            shard[base + b / 8] = static_cast<unsigned char>(shard[base + b / 8] | (1u << (b % 8)));
            if (layout == Layout::standard) changed(b / 8, 1);
        }
        if (layout == Layout::blocked) changed(base, kBlockBytes);
    }
    return true;
}

}  // namespace bloomline
