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
//   are drawn with replacement, which the blocked rate formula accounts for
//   (sizing.hpp); benchmarks/RESULTS.md, E, measures the achieved rate.
//
// Slots are counted in bits for BloomFilter and in counters for the
// counting filter: a "block" is always 512 slots.
#pragma once

#include <cstdint>
#include <type_traits>
#include <utility>

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
// them. (block_lookup.cpp computes eight at once in AVX2 from the same
// powers; tests/test_simd.py holds it to these.)
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

// f(std::integral_constant<std::uint32_t, K>{}) with K = k when k is one of
// 1..kMaxUnrolledK, else K = 0 (k known only at run time). Loops over a
// key's k bits unroll, and the remix powers become immediates, when k is a
// compile-time constant; 16 covers every k that optimal_params picks down
// to an error rate of about 1e-5 per block.
constexpr std::uint32_t kMaxUnrolledK = 16;
template <class F, std::uint32_t... Ks>
inline void with_fixed_k_of(std::uint32_t k, F& f, std::integer_sequence<std::uint32_t, Ks...>) {
    const bool fixed = ((k == Ks + 1 && (f(std::integral_constant<std::uint32_t, Ks + 1>{}), true)) || ...);
    if (!fixed) f(std::integral_constant<std::uint32_t, 0>{});
}
template <class F>
inline void with_fixed_k(std::uint32_t k, F&& f) {
    with_fixed_k_of(k, f, std::make_integer_sequence<std::uint32_t, kMaxUnrolledK>{});
}

// f(j) for j in [0, k): unrolled when kFixedK (= k) is known at compile time.
template <std::uint32_t kFixedK, class F>
inline void for_each_probe(std::uint32_t k, F&& f) {
    if constexpr (kFixedK != 0) {
        // GCC 12 leaves even k = 6 rolled without this pragma.
#pragma GCC unroll 16
        for (std::uint32_t j = 0; j < kFixedK; ++j) f(j);
    } else {
        for (std::uint32_t j = 0; j < k; ++j) f(j);
    }
}

}  // namespace bloomline
