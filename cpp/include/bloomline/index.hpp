// The index generator: a key's 128-bit hash -> its k slots. One generator
// serves every filter kind; bit storage and counter storage differ, the way
// positions are drawn does not.
//
// standard: enhanced double hashing (Dillinger & Manolios 2004, as in
//   Kirsch & Mitzenmacher's "less hashing, same performance"):
//   g_0 = h1, g_i = g_(i-1) + y_(i-1), y_i = y_(i-1) + i, y_0 = h2; the cubic
//   term breaks the cycles plain double hashing has when h2 is small. Each
//   g_i is mapped onto [0, m) by multiply-shift (no %): any m works.
// blocked: h1 picks one 512-bit block by multiply-shift; k offsets inside
//   the block come from h2 multiplied again and again by an odd constant
//   (the 64-bit golden ratio), each offset being the top 9 bits. Offsets
//   are drawn with replacement, which the blocked rate formula accounts for.
//   Measured at 10 bits/key, k = 6: 0.965% (theory 0.9665%, sizing.hpp);
//   a per-probe splitmix64 instead of the remix measured the same (0.969%).
//
// Slots are counted in bits for BloomFilter and in counters for the
// counting filter: a "block" is always 512 slots.
#pragma once

#include <cstdint>

#include "bloomline/common.hpp"
#include "bloomline/murmur3.hpp"

namespace bloomline {

struct Geometry {
    Layout layout = Layout::blocked;
    std::uint64_t num_slots = 0;   // m: bits, or counters
    std::uint32_t num_hashes = 0;  // k
    std::uint64_t seed = 0;

    std::uint64_t num_blocks() const { return num_slots / kBlockBits; }
    bool operator==(const Geometry& o) const {
        return layout == o.layout && num_slots == o.num_slots && num_hashes == o.num_hashes && seed == o.seed;
    }
};

constexpr std::uint64_t kBlockRemix = 0x9E3779B97F4A7C15ULL;  // odd: a bijection on 64 bits

// kRemixPowers[i] = kBlockRemix^(i+1) mod 2^64, so offset i is the top 9 bits
// of h2 * kBlockRemix^(i+1): the same values as multiplying again and again,
// but k independent multiplies instead of a chain of k (3 cycles each).
struct RemixPowers {
    std::uint64_t p[kMaxHashes];
    constexpr RemixPowers() : p() {
        std::uint64_t x = 1;
        for (std::uint32_t i = 0; i < kMaxHashes; ++i) {
            x *= kBlockRemix;
            p[i] = x;
        }
    }
};
inline constexpr RemixPowers kRemixPowers{};

// Blocked layout: the block a key lives in.
inline std::uint64_t block_index(std::uint64_t h1, std::uint64_t num_blocks) { return mul_hi(h1, num_blocks); }
inline std::uint64_t block_of(const Geometry& g, const Hash128& h) { return block_index(h.h1, g.num_blocks()); }

// Blocked layout: offset i (0..511) inside the key's block, and all k of
// them. (block_probe.cpp computes eight at once in AVX2 from the same
// powers; its tests hold it to these.)
inline unsigned offset_in_block(std::uint64_t h2, std::uint32_t i) {
    return static_cast<unsigned>((h2 * kRemixPowers.p[i]) >> 55);
}
inline void offsets_in_block(std::uint32_t k, std::uint64_t h2, unsigned* out) {
    for (std::uint32_t i = 0; i < k; ++i) out[i] = offset_in_block(h2, i);
}

// Every layout: the k slot indices of a key, in [0, num_slots).
template <class F>
inline void for_each_slot(const Geometry& g, const Hash128& h, F&& f) {
    if (g.layout == Layout::blocked) {
        const std::uint64_t base = block_of(g, h) * kBlockBits;
        unsigned offs[kMaxHashes];
        offsets_in_block(g.num_hashes, h.h2, offs);
        for (std::uint32_t i = 0; i < g.num_hashes; ++i) f(base + offs[i]);
    } else {
        std::uint64_t x = h.h1, y = h.h2;
        f(mul_hi(x, g.num_slots));
        for (std::uint32_t i = 1; i < g.num_hashes; ++i) {
            x += y;
            y += i;
            f(mul_hi(x, g.num_slots));
        }
    }
}

// Run op(i) over a batch of hashes while the memory of key i + D is being
// fetched: step i asks for the line(s) of key i + D (addr(slot) gives a
// slot's address), so by the time op reaches a key its line is (usually) in
// cache. A random DRAM line read costs 36-49 ns here alone and about 15 ns
// when prefetched 16 ahead (benchmarks/limit_probe.cpp). The blocked layout
// needs one line per key, the standard layout k. This loop serves adds (all
// layouts) and the standard layout's lookups; blocked lookups have their
// own loop, which also hashes the keys in it (block_probe.hpp). For adds,
// hashing in the loop was tried twice and was no faster (55 vs 55 ns/key;
// later 51 chunked against 56-70 fused, 124 MB).
//
// __builtin_prefetch is written out in this loop on purpose: GCC 12 finds a
// helper whose only statement is a prefetch "const" and deletes the call
// (no prefetch was emitted at all when it sat in a lambda, and a batch ran
// 8x slower than the memory allows).
//
// kOneLinePerBlock: a block of 512 one-bit slots is one cache line, so one
// prefetch per key covers it; a counter block (4 to 16 lines) is prefetched
// slot by slot like the standard layout.
template <bool kForWrite, bool kOneLine, std::size_t kDistance, class Addr, class Op>
inline void pipelined_loop(const Geometry& g, const Hash128* hashes, std::size_t n, Addr& addr, Op& op) {
    constexpr int kRw = kForWrite ? 1 : 0;
    std::uint64_t slots[kMaxHashes];
    for (std::size_t i = 0; i < n + kDistance; ++i) {
        if (i < n) {
            if (kOneLine) {
                __builtin_prefetch(addr(block_of(g, hashes[i]) * kBlockBits), kRw, 3);
            } else {
                std::uint32_t count = 0;
                for_each_slot(g, hashes[i], [&](std::uint64_t s) { slots[count++] = s; });
                for (std::uint32_t j = 0; j < count; ++j) __builtin_prefetch(addr(slots[j]), kRw, 3);
            }
        }
        if (i >= kDistance) op(i - kDistance);
    }
}

// The distance is a constant of each loop (16 keys ahead for one line per
// key, 4 for k lines per key): as a run-time value it cost about 3 ns/key.
template <bool kForWrite, bool kOneLinePerBlock = true, class Addr, class Op>
inline void pipelined(const Geometry& g, const Hash128* hashes, std::size_t n, Addr&& addr, Op&& op) {
    if (kOneLinePerBlock && g.layout == Layout::blocked)
        pipelined_loop<kForWrite, true, 16>(g, hashes, n, addr, op);
    else
        pipelined_loop<kForWrite, false, 4>(g, hashes, n, addr, op);
}

}  // namespace bloomline
