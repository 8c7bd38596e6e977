// Batch lookups in the blocked layout: for each precomputed hash, are the k
// bits of its block all set? The loop behind BloomFilter::contains_batch
// (and so contains_many) for layout "blocked".
//
// What: the same answers as BloomFilter::contains key by key (index.hpp
// draws the block and the k offsets), with the block of key i + 16
// prefetched while key i is tested. Two versions, chosen at run time like
// the integer batch hash (hash_batch.hpp, BLOOMLINE_SIMD=portable forces
// the portable one):
//  - AVX2: the k offsets of a key, eight at a time, come from h2 times
//    eight remix powers at once (the top 9 bits of each 64-bit product,
//    from 32-bit lane multiplies); the 64-byte block is held in two
//    registers, each offset's 32-bit word is picked out of them with a
//    lane permute, and one compare tells which bits are clear.
//  - portable: one multiply, shift and load per bit.
//
// Why: at 10 bits/key (k = 6) the bit tests, not the line read, were most
// of a lookup on the development VM (2-core AMD EPYC under KVM, about
// 1.7 GHz effective). C++ harness, pre-hashed keys, the versions
// alternated 7 times: an L2-sized filter (248 KB) 14.0 (scalar) against
// 9.2 ns/key (AVX2); 12 MB 19.2 against 14.3; 124 MB 30.4 against 21.6,
// where a bare prefetched line read costs 15 ns. The loop also keeps the
// geometry and offsets in registers: the generic pipelined loop (index.hpp)
// with an offsets array on the stack measured 22-51 ns/key on the same data.
//
// Threads: a lookup may race a writer (lookups never lock). The portable
// loop reads words with relaxed atomic loads; the AVX2 loop reads the
// block with two aligned 32-byte loads, each of whose 32-bit elements is
// read whole, so a racing add's bits are seen or not, never torn.
#pragma once

#include <cstddef>
#include <cstdint>

#include "bloomline/murmur3.hpp"

namespace bloomline {

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
