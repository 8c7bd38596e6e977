// Batch lookups in the blocked layout: for each key, are the k bits of its
// block all set? The loop behind contains_many (and BloomFilter::
// contains_batch) for layout "blocked".
//
// What: the same answers as BloomFilter::contains key by key (index.hpp
// draws the block and the k offsets). Keys are hashed 16 at a time into a
// ring, 32 to 48 keys before they are tested, and each key's block is
// prefetched as soon as its hash exists, so the memory of the keys ahead is
// being fetched while later keys are hashed and earlier ones tested. The
// bit tests come in two versions, chosen at run time like the integer batch
// hash (hash_batch.hpp; BLOOMLINE_SIMD=portable forces the portable one):
//  - AVX2: the k offsets of a key, eight at a time, come from h2 times
//    eight remix powers at once (the top 9 bits of each 64-bit product,
//    from 32-bit lane multiplies); the 64-byte block is held in two
//    registers, each offset's 32-bit word is picked out of them with a
//    lane permute, and one compare tells which bits are clear.
//  - portable: one multiply, shift and load per bit.
//
// Why: at 10 bits/key (k = 6) the bit tests, not the line read, were most
// of a lookup on the development VM (2-core AMD EPYC under KVM, about
// 1.7 GHz effective). C++ harness, the versions alternated 5-7 times:
//  - bit tests, pre-hashed keys: an L2-sized filter (248 KB) 11.2 ns/key
//    (portable) against 6.4 (AVX2); 12 MB 21.9 against 18.6; 124 MB 30-38
//    against 22-31, where a bare prefetched line read costs 13-15 ns;
//  - hashing inside the loop, against hashing a 512-key chunk and then
//    probing it (memory idle during the hashing): 19.2 against 23.9 ns/key
//    at 124 MB, 17.8 against 23.7 at 12 MB.
// benchmarks/NOTES.md ("Fourth round") has the variants that lost.
//
// Threads: a lookup may race a writer (lookups never lock). The portable
// loop reads words with relaxed atomic loads; the AVX2 loop reads the
// block with two aligned 32-byte loads, each of whose 32-bit elements is
// read whole, so a racing add's bits are seen or not, never torn.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "bloomline/bits.hpp"
#include "bloomline/index.hpp"
#include "bloomline/murmur3.hpp"

namespace bloomline {

// One key, scalar: are the k offsets of h2 all set in `block` (a block's 8
// words)? BloomFilter::contains and the portable batch loop both use it.
// The offsets are computed in the loop, not gathered into an array first:
// through a stack array the batch loop took 31 ns/key where this form took
// 23 (124 MB, pre-hashed; benchmarks/NOTES.md, "Fourth round").
inline bool block_has_all(const std::uint64_t* block, std::uint64_t h2, std::uint32_t k) {
    std::uint64_t all = 1;
    for (std::uint32_t j = 0; j < k; ++j) {
        const unsigned off = offset_in_block(h2, j);
        all &= BitArray::test_word_bit(block + (off >> 6), off & 63);
    }
    return all != 0;
}

// One key, scalar, for adds: set the k offsets of h2 in `block` without
// looking first, and return how many were clear. Each bit is a load, or,
// store on the (prefetched) line, with no branch; a key already present
// still writes its line (with the same values), which is why adds of keys
// mostly known use BitArray::set_in instead (bloom_filter.hpp).
// kFixedK > 0 is k known at compile time: the loop unrolls and the remix
// powers become immediates. C++ harness, 10M new keys, pre-hashed, k = 6:
// 124 MB 36 ns/key unrolled against 50 with k at run time, and 70 for
// set_in (look first, then set); 12 MB 30 against 35 and 52
// (benchmarks/NOTES.md, "Fifth round").
template <std::uint32_t kFixedK>
inline unsigned block_set_all(std::uint64_t* block, std::uint64_t h2, std::uint32_t k) {
    unsigned changed = 0;
    auto set = [&](std::uint32_t j) {
        const unsigned off = offset_in_block(h2, j);
        changed += BitArray::or_word_bit(block + (off >> 6), off & 63);
    };
    if constexpr (kFixedK != 0) {
        // GCC 12 left even k = 6 rolled inside the add loop without this
        // (29.6 against about 40 ns/key at 124 MB in the harness).
#pragma GCC unroll 16
        for (std::uint32_t j = 0; j < kFixedK; ++j) set(j);
    } else {
        for (std::uint32_t j = 0; j < k; ++j) set(j);
    }
    return changed;
}

// f(std::integral_constant<std::uint32_t, K>{}) with K = k when k is one of
// the unrolled counts 1..kMaxUnrolledK, else K = 0 (k at run time).
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

// Where the keys of a stream come from: hash(ctx, first, m, out) writes the
// hashes of keys [first, first + m) to out (m <= 16). Called on the calling
// thread, in order, about every 16 keys.
struct KeyHasher {
    const void* ctx;
    void (*hash)(const void* ctx, std::size_t first, std::size_t m, Hash128* out);
};

// out[i] = every one of the k offsets of key i's hash (index.hpp) is set in
// block mul_hi(h1, num_blocks) of words, for keys [0, n) of `keys`, which
// are hashed a few at a time while the blocks of the keys before them are
// being fetched. k in [1, kMaxHashes].
void contains_blocked_stream(const std::uint64_t* words, std::uint64_t num_blocks, std::uint32_t k, KeyHasher keys,
                             std::size_t n, bool* out);

// The same over hashes computed beforehand.
void contains_blocked_many(const std::uint64_t* words, std::uint64_t num_blocks, std::uint32_t k,
                           const Hash128* hashes, std::size_t n, bool* out);

}  // namespace bloomline
