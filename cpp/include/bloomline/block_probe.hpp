// Batch loops of the blocked layout: lookups (for each key, are the k bits
// of its block all set?) and the bit sets of adds. The loops behind
// contains_many and add_many (BloomFilter::contains_keys, add_keys) for
// layout "blocked".
//
// The stream: keys are hashed 16 at a time into a ring, 32 to 48 keys
// before they are tested or added, and each key's block is prefetched as
// soon as its hash exists, so the memory of the keys ahead is being fetched
// while later keys are hashed and earlier ones tested. Hashing a 512-key
// chunk first and then probing it left memory idle during the hashing
// (C++ harness, hash included: lookups 19.2 against 23.9 ns/key at 124 MB,
// 17.8 against 23.7 at 12 MB; adds of new keys 25 against 33 at 124 MB,
// 26-29 against 33 at 12 MB).
//
// Lookups: the same answers as BloomFilter::contains key by key (index.hpp
// draws the block and the k offsets). The bit tests come in two versions,
// chosen at run time like the integer batch hash (hash_batch.hpp;
// BLOOMLINE_SIMD=portable forces the portable one):
//  - AVX2: the k offsets of a key, eight at a time, come from h2 times
//    eight remix powers at once (the top 9 bits of each 64-bit product,
//    from 32-bit lane multiplies); the 64-byte block is held in two
//    registers, each offset's 32-bit word is picked out of them with a
//    lane permute, and one compare tells which bits are clear.
//  - portable: one multiply, shift and load per bit.
// Why: at 10 bits/key (k = 6) the bit tests, not the line read, were most
// of a lookup on the development VM (2-core AMD EPYC under KVM, about
// 1.7 GHz effective). Pre-hashed keys, the versions alternated 5-7 times:
// an L2-sized filter (248 KB) 11.2 ns/key (portable) against 6.4 (AVX2);
// 12 MB 21.9 against 18.6; 124 MB 30-38 against 22-31, where a bare
// prefetched line read costs 13-15 ns.
//
// Adds: block_set_all below, scalar (an AVX2 add, building the 512-bit
// mask lane by lane, measured slower: benchmarks/NOTES.md, "Fifth round").
// benchmarks/NOTES.md ("Fourth round", "Fifth round") has the variants
// that lost.
//
// Threads: a lookup may race a writer (lookups never lock). The portable
// loop reads words with relaxed atomic loads; the AVX2 loop reads the
// block with two aligned 32-byte loads, each of whose 32-bit elements is
// read whole, so a racing add's bits are seen or not, never torn.
#pragma once

#include <algorithm>
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

// f(j) for j in [0, k): unrolled when kFixedK (= k) is known at compile time.
template <std::uint32_t kFixedK, class F>
inline void for_each_probe(std::uint32_t k, F&& f) {
    if constexpr (kFixedK != 0) {
        // GCC 12 left even k = 6 rolled inside the add loop without this
        // (29.6 against about 40 ns/key at 124 MB in the harness).
#pragma GCC unroll 16
        for (std::uint32_t j = 0; j < kFixedK; ++j) f(j);
    } else {
        for (std::uint32_t j = 0; j < k; ++j) f(j);
    }
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
    for_each_probe<kFixedK>(k, [&](std::uint32_t j) {
        const unsigned off = offset_in_block(h2, j);
        BitArray::or_word_bit(block + (off >> 6), off, changed);
    });
    return changed;
}

// block_set_all for two keys of different blocks, their bits interleaved
// (a's bit j, b's bit j, a's bit j + 1, ...); changed_a and changed_b get
// what each set. Why: a key's bits that fall in one word make a chain of
// load, or, store through that word, which the CPU must wait out (with the
// chains taken away, wrongly, pre-hashed adds at an L2-sized filter took
// 8.6 against 11.5 ns/key); the other key's bits, on another line, fill
// the wait. C++ harness, add_keys of 10M keys (a fifth of them repeats)
// into a new filter, this loop (with the mask dropped in bits.hpp) and the
// one-key loop alternated in one process, two runs of 7: 0.84-0.87x the
// time at an L2-sized filter (248 KB), 0.94-0.96x at 12 MB, 0.91-0.96x at
// 124 MB, where the memory wait dominates. Two keys of one block must not
// be interleaved: the later key could set a bit before the earlier one
// looks at it, and the earlier would be called known when it was new
// (tests/test_add_forms.py makes such pairs).
template <std::uint32_t kFixedK>
inline void block_set_all_two(std::uint64_t* block_a, std::uint64_t h2_a, std::uint64_t* block_b,
                              std::uint64_t h2_b, std::uint32_t k, unsigned& changed_a, unsigned& changed_b) {
    for_each_probe<kFixedK>(k, [&](std::uint32_t j) {
        const unsigned off_a = offset_in_block(h2_a, j);
        BitArray::or_word_bit(block_a + (off_a >> 6), off_a, changed_a);
        const unsigned off_b = offset_in_block(h2_b, j);
        BitArray::or_word_bit(block_b + (off_b >> 6), off_b, changed_b);
    });
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

// The stream's shape: kStreamGroup keys hashed per call of the key source,
// at least kStreamAhead keys between a key's hash (and prefetch) and its
// use. 32 ahead beat 16 (lookups 21.2 against 23.9 ns/key at 124 MB; the
// bare line read likewise 12.8 against 15.1 ns); groups of 8, 32 and 64
// and 64 ahead were no better than 16 and 32, for lookups and for adds.
constexpr std::size_t kStreamGroup = 16, kStreamAhead = 32, kStreamRing = 64;
static_assert(kStreamRing % kStreamGroup == 0 && kStreamAhead % kStreamGroup == 0 &&
                  kStreamAhead + kStreamGroup <= kStreamRing,
              "ring layout");

// Hashes of keys computed as the loop needs them, a group at a time, into a
// ring that holds the keys between a group's hashing and its use.
struct RingOfHashes {
    KeyHasher keys;
    alignas(64) Hash128 ring[kStreamRing];
    const Hash128* make(std::size_t first, std::size_t m) {
        Hash128* h = ring + first % kStreamRing;
        keys.hash(keys.ctx, first, m, h);
        return h;
    }
    const Hash128* at(std::size_t first) const { return ring + first % kStreamRing; }
};

// Hashes already in memory: nothing to make, nothing copied.
struct HashesInPlace {
    const Hash128* hashes;
    const Hash128* make(std::size_t first, std::size_t) const { return hashes + first; }
    const Hash128* at(std::size_t first) const { return hashes + first; }
};

// The stream over keys [0, n) of src (a RingOfHashes or HashesInPlace):
// keys are made (and their blocks prefetched, for writing when kForWrite)
// a group at a time, and use(h, m, first) gets keys [first, first + m)
// once they are kStreamAhead to kStreamAhead + kStreamGroup keys behind.
template <bool kForWrite, class Source, class Use>
void stream_blocks(const std::uint64_t* words, std::uint64_t num_blocks, Source& src, std::size_t n, Use&& use) {
    constexpr int kRw = kForWrite ? 1 : 0;
    std::size_t made = 0;  // keys [used, made) are made, their blocks prefetched
    for (std::size_t used = 0; used < n;) {
        while (made < n && made < used + kStreamAhead + kStreamGroup) {
            const std::size_t m = std::min(kStreamGroup, n - made);
            const Hash128* h = src.make(made, m);
            // Written out here, not in a helper: see index.hpp on GCC
            // deleting calls to a function whose only statement is a prefetch.
            for (std::size_t i = 0; i < m; ++i)
                __builtin_prefetch(words + block_index(h[i].h1, num_blocks) * kBlockWords, kRw, 3);
            made += m;
        }
        const std::size_t m = std::min(kStreamGroup, n - used);
        use(src.at(used), m, used);
        used += m;
    }
}

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
