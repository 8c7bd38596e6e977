// The blocked layout, whole: where a key's slots are, how its bits are
// tested and set in every form, what a batch prefetches, the batch add and
// lookup, and its false-positive rate. Like RocksDB's FastLocalBloomImpl,
// one class holds all of it, so that a change to the layout is made in one
// place; the filters, the Redis encoders (positions.hpp) and the sizing
// maths call it.
//
// Index: h1 picks one 512-bit block by multiply-shift; k offsets inside the
// block come from h2 multiplied again and again by an odd constant (the
// 64-bit golden ratio), each offset being the top 9 bits. Offsets are drawn
// with replacement, which fp_rate accounts for; benchmarks/RESULTS.md, E,
// measures the achieved rate. Slots are bits for BloomFilter and counters
// for the counting filter: a block is always 512 slots.
//
// Bits: one key's bits are tested branch-free (the line is in cache by then
// and the k loads overlap), and set in one of three forms:
//  - blind: load, or, store per bit with no branch and k unrolled, even when
//    the bit is set already. About twice as fast for new keys. Two keys of
//    different blocks go together, their bits interleaved, so that one key's
//    chain of load/or/store through a word overlaps the other's; two keys of
//    one block are never interleaved (the later could set a bit the earlier
//    then finds set, and the earlier would be called known). Batches only.
//  - look first: a key whose bits are all set writes nothing, so a
//    deduplicating stream keeps its cache lines, and a mapped file's pages,
//    clean.
//  - shared: look first, each bit set by an atomic fetch-or, for memory that
//    other processes write at the same time. Two writers setting one key's
//    bits at once may both see some bit change, so both may call the key
//    new; no bit is ever lost.
// The answers, the bits and the counts are the same for blind and look
// first (tests/test_add_forms.py). Writers of one process are serialised by
// the filter's mutex, so blind and look-first sets take no locked
// instruction.
//
// Batch lookups come in two versions, chosen at run time like the integer
// batch hash (hash_batch.hpp; BLOOMLINE_SIMD=portable forces the portable
// one): AVX2 tests eight offsets at once (layout_blocked.cpp says how);
// portable tests one per multiply, shift and load. At 10 bits/key (k = 6)
// the bit tests, not the line read, were most of a lookup
// (benchmarks/NOTES.md, "Lookups").
#pragma once

#include <cstddef>
#include <cstdint>

#include "bloomline/common.hpp"
#include "bloomline/key_source.hpp"
#include "bloomline/murmur3.hpp"
#include "bloomline/stream.hpp"
#include "bloomline/words.hpp"

namespace bloomline {

enum class AddForm : std::uint8_t { blind, look_first, shared };



class BlockedLayout {
public:
    static constexpr unsigned kBits = kBlockBits;  // slots per block: one cache line of bits
    static constexpr unsigned kWords = kBlockWords;

    // Batches hash 16 keys at a time and prefetch a key's block 32 keys
    // before it is used (stream.hpp; benchmarks/NOTES.md has the distances
    // that were tried).
    using Stream = StreamShape<16, 32, 16>;

    // ---- index --------------------------------------------------------
    // The block a key lives in.
    static std::uint64_t block(std::uint64_t h1, std::uint64_t num_blocks) { return mul_hi(h1, num_blocks); }
    // Offset i (0..511) inside the key's block. (The AVX2 lookup computes
    // eight at once from the same powers; tests/test_simd.py holds it to
    // these.)
    static unsigned offset(std::uint64_t h2, std::uint32_t i) {
        return static_cast<unsigned>((h2 * kRemixPowers.p[i]) >> 55);
    }
    // f(slot) for each of the k slots of a key, in [0, num_blocks * 512).
    template <class F>
    static void for_each_slot(std::uint64_t num_blocks, std::uint32_t k, const Hash128& h, F&& f) {
        const std::uint64_t base = block(h.h1, num_blocks) * kBits;
        unsigned offs[kMaxHashes];
        for (std::uint32_t i = 0; i < k; ++i) offs[i] = offset(h.h2, i);
        for (std::uint32_t i = 0; i < k; ++i) f(base + offs[i]);
    }
    // The words of a key's block: the one line a batch prefetches.
    static std::uint64_t* block_words(std::uint64_t* words, std::uint64_t num_blocks, std::uint64_t h1) {
        return words + block(h1, num_blocks) * kWords;
    }
    static const std::uint64_t* block_words(const std::uint64_t* words, std::uint64_t num_blocks, std::uint64_t h1) {
        return words + block(h1, num_blocks) * kWords;
    }

    // ---- one key ------------------------------------------------------
    // Are the k offsets of h2 all set in `blk` (its 8 words)? The offsets are
    // computed in the loop, not gathered into an array first, which was
    // slower in the batch loops.
    static bool has_all(const std::uint64_t* blk, std::uint64_t h2, std::uint32_t k) {
        std::uint64_t all = 1;
        for (std::uint32_t j = 0; j < k; ++j) {
            const unsigned off = offset(h2, j);
            all &= load_le(blk + (off >> 6)) >> (off & 63);
        }
        return all != 0;
    }

    // One key, blind (writers serialised, memory not shared): load, or,
    // store per bit, no test first; returns how many bits were clear. (The
    // batch add's blind form, layout_blocked.cpp, is this unrolled and two
    // keys at a time.)
    static unsigned set_blind(std::uint64_t* blk, std::uint64_t h2, std::uint32_t k) {
        unsigned changed = 0;
        for (std::uint32_t j = 0; j < k; ++j) {
            const unsigned off = offset(h2, j);
            std::uint64_t* p = blk + (off >> 6);
            const std::uint64_t old = load_le(p);
            const std::uint64_t bit = std::uint64_t{1} << (off & 63);
            changed += (old & bit) == 0;
            atomic_store(p, to_le64(old | bit));
        }
        return changed;
    }

    // Look first (writers serialised): a key whose bits are all set writes
    // nothing; returns how many bits were clear.
    static unsigned set_look_first(std::uint64_t* blk, std::uint64_t h2, std::uint32_t k) {
        return has_all(blk, h2, k) ? 0 : set_blind(blk, h2, k);
    }

    // Shared writers (outside our mutex): each bit by an atomic fetch-or,
    // whose old value says whether this writer changed it.
    static unsigned set_shared(std::uint64_t* blk, std::uint64_t h2, std::uint32_t k) {
        if (has_all(blk, h2, k)) return 0;  // a known key writes nothing, and takes no lock prefix
        unsigned changed = 0;
        for (std::uint32_t j = 0; j < k; ++j) {
            const unsigned off = offset(h2, j);
            const std::uint64_t bit = to_le64(std::uint64_t{1} << (off & 63));
            changed += (__atomic_fetch_or(blk + (off >> 6), bit, __ATOMIC_RELAXED) & bit) == 0;
        }
        return changed;
    }

    // A key in any set form but blind.
    static unsigned set(std::uint64_t* words, std::uint64_t num_blocks, std::uint32_t k, const Hash128& h,
                        bool shared) {
        std::uint64_t* blk = block_words(words, num_blocks, h.h1);
        return shared ? set_shared(blk, h.h2, k) : set_look_first(blk, h.h2, k);
    }
    static bool contains(const std::uint64_t* words, std::uint64_t num_blocks, std::uint32_t k, const Hash128& h) {
        return has_all(block_words(words, num_blocks, h.h1), h.h2, k);
    }

    // ---- batches (layout_blocked.cpp) -----------------------------------
    // The one batch add of the layout, behind every blocked add_many,
    // update and threads= add: keys [0, n) in order, through the stream;
    // out[i] (out may be null) = key i was new. A key repeated later in the
    // batch finds its bits set there and is not new. The caller holds the
    // filter's writer mutex.
    static AddCounts add_batch(std::uint64_t* words, std::uint64_t num_blocks, std::uint32_t k, const BatchKeys& keys,
                               std::size_t n, AddForm form, bool* out);
    // out[i] = key i's k offsets are all set, for keys [0, n); k in [1, 64].
    // Lookups never lock: the portable loop reads words with relaxed atomic
    // loads; the AVX2 loop reads the block with two aligned 32-byte loads,
    // each of whose 32-bit elements is read whole, so a racing add's bits
    // are seen or not, never torn.
    static void contains_batch(const std::uint64_t* words, std::uint64_t num_blocks, std::uint32_t k,
                               const BatchKeys& keys, std::size_t n, bool* out);

    // ---- false positives (layout_blocked.cpp) ---------------------------
    // The expected rate of n keys in m bits: a Poisson mixture over block
    // loads, each load's rate from the exact occupancy of its k draws with
    // replacement (sizing.hpp says more).
    static double fp_rate(double n, double m, double k);
};

}  // namespace bloomline
