// Batch lookups of the blocked layout: for each key, are the k bits of its
// block all set? The loop behind BloomFilter::contains_keys for layout
// "blocked"; the same answers as block_has_all (bits.hpp) key by key.
//
// Keys go through the stream (stream.hpp), and the bit tests come in two
// versions, chosen at run time like the integer batch hash (hash_batch.hpp;
// BLOOMLINE_SIMD=portable forces the portable one):
//  - AVX2: the k offsets of a key, eight at a time, come from h2 times
//    eight remix powers at once (the top 9 bits of each 64-bit product,
//    from 32-bit lane multiplies); the 64-byte block is held in two
//    registers, each offset's 32-bit word is picked out of them with a
//    lane permute, and one compare tells which bits are clear.
//  - portable: one multiply, shift and load per bit.
// Why: at 10 bits/key (k = 6) the bit tests, not the line read, were most of
// a lookup (benchmarks/NOTES.md, "Lookups").
//
// Threads: a lookup may race a writer (lookups never lock). The portable
// loop reads words with relaxed atomic loads; the AVX2 loop reads the block
// with two aligned 32-byte loads, each of whose 32-bit elements is read
// whole, so a racing add's bits are seen or not, never torn.
#pragma once

#include <cstddef>
#include <cstdint>

#include "bloomline/key_source.hpp"

namespace bloomline {

// out[i] = every one of the k offsets of key i (index.hpp) is set in block
// block_index(h1, num_blocks) of words, for keys [0, n). k in [1, 64].
void contains_blocked(const std::uint64_t* words, std::uint64_t num_blocks, std::uint32_t k, const BatchKeys& keys,
                      std::size_t n, bool* out);

}  // namespace bloomline
