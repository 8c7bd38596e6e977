// Bit storage: an array of bits over raw, 64-byte-aligned memory, and the
// operations on one 512-bit block that the blocked layout needs.
//
// Byte order: bit i is bit (i % 8) of byte i / 8, on every machine, so the
// payload bytes are portable and the buffer protocol shows the same bytes a
// file holds. Words are read as 64-bit little-endian values (free on x86 and
// ARM; a byte swap on big-endian hosts).
//
// Threads: readers use relaxed atomic loads and never wait; a reader racing
// a writer sees each word before or after, never torn. Writers within one
// process are serialised by the filter's writer mutex, so a set is a plain
// load, or, store with no locked instruction (an atomic fetch-or per word
// was several times slower for new keys; benchmarks/NOTES.md). The old word
// value tells exactly which bits a set changed, so an add knows whether a
// key was new and the count of set bits stays exact without a popcount.
#pragma once

#include <cstdint>
#include <cstring>

#include "bloomline/common.hpp"
#include "bloomline/index.hpp"
#include "bloomline/memory.hpp"

namespace bloomline {

inline std::uint64_t to_le64(std::uint64_t v) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    return __builtin_bswap64(v);
#else
    return v;
#endif
}

inline std::uint64_t atomic_load(const std::uint64_t* p) { return __atomic_load_n(p, __ATOMIC_RELAXED); }
inline void atomic_store(std::uint64_t* p, std::uint64_t v) { __atomic_store_n(p, v, __ATOMIC_RELAXED); }
inline std::uint64_t load_le(const std::uint64_t* p) { return to_le64(atomic_load(p)); }

inline unsigned popcount64(std::uint64_t x) { return static_cast<unsigned>(__builtin_popcountll(x)); }

class BitArray {
public:
    BitArray() = default;
    explicit BitArray(Memory mem) : mem_(std::move(mem)) {}

    static BitArray zeroed(std::uint64_t num_bits) { return BitArray(Memory::zeroed(payload_bytes(num_bits, 1))); }

    unsigned char* bytes() const { return mem_.data; }
    std::size_t nbytes() const { return mem_.size; }
    std::uint64_t* words() const { return reinterpret_cast<std::uint64_t*>(mem_.data); }

    std::uint64_t popcount() const {
        std::uint64_t total = 0;
        const std::uint64_t* w = words();
        for (std::size_t i = 0, n = mem_.size / 8; i < n; ++i) total += popcount64(load_le(w + i));
        return total;
    }

    void clear() { std::memset(mem_.data, 0, mem_.size); }

private:
    Memory mem_;
};

// The operations below are free functions on raw words: batch loops call
// them with the words pointer and the geometry held in locals. Through
// members, every store to the bits (a uint64_t) may alias the geometry
// (uint64_t too), and the compiler must reload it after each store.

inline bool test_bit(const std::uint64_t* words, std::uint64_t i) { return (load_le(words + (i >> 6)) >> (i & 63)) & 1; }

// Set bit i (writers serialised); true when it was clear.
inline bool set_bit(std::uint64_t* words, std::uint64_t i) {
    std::uint64_t* w = words + (i >> 6);
    const std::uint64_t old = load_le(w);
    const std::uint64_t bit = std::uint64_t{1} << (i & 63);
    if (old & bit) return false;
    atomic_store(w, to_le64(old | bit));
    return true;
}

// Blocked layout, one key: are the k offsets of h2 (index.hpp) all set in
// `block` (its 8 words)? Branch-free: the line is in cache by now and the k
// loads overlap. The offsets are computed in the loop, not gathered into an
// array first, which was slower in the batch loops.
inline bool block_has_all(const std::uint64_t* block, std::uint64_t h2, std::uint32_t k) {
    std::uint64_t all = 1;
    for (std::uint32_t j = 0; j < k; ++j) {
        const unsigned off = offset_in_block(h2, j);
        all &= load_le(block + (off >> 6)) >> (off & 63);
    }
    return all != 0;
}

// Blocked layout, one key, "look first" (writers serialised): a key whose
// bits are all set writes nothing, so its cache line (and a mapped file's
// page) stays clean; otherwise each bit is a load/or/store. Returns how many
// bits were clear. (The "blind" form, which sets without looking, is the
// batch add's: block_add.hpp.)
inline unsigned block_set_look_first(std::uint64_t* block, std::uint64_t h2, std::uint32_t k) {
    if (block_has_all(block, h2, k)) return 0;
    unsigned changed = 0;
    for (std::uint32_t j = 0; j < k; ++j) {
        const unsigned off = offset_in_block(h2, j);
        std::uint64_t* p = block + (off >> 6);
        const std::uint64_t old = load_le(p);
        const std::uint64_t bit = std::uint64_t{1} << (off & 63);
        changed += (old & bit) == 0;
        atomic_store(p, to_le64(old | bit));
    }
    return changed;
}

// Shared writers (bits that other handles or processes may set at the same
// time, outside our mutex): each bit by an atomic fetch-or, whose old value
// says whether this writer changed it. Two writers setting the same key's
// bits at once may both see some bit change, so both may call the key new;
// no bit is ever lost.
inline bool set_bit_shared(std::uint64_t* words, std::uint64_t i) {
    const std::uint64_t bit = to_le64(std::uint64_t{1} << (i & 63));
    return (__atomic_fetch_or(words + (i >> 6), bit, __ATOMIC_RELAXED) & bit) == 0;
}

inline unsigned block_set_shared(std::uint64_t* block, std::uint64_t h2, std::uint32_t k) {
    if (block_has_all(block, h2, k)) return 0;  // a known key writes nothing, and takes no lock prefix
    unsigned changed = 0;
    for (std::uint32_t j = 0; j < k; ++j) {
        const unsigned off = offset_in_block(h2, j);
        const std::uint64_t bit = to_le64(std::uint64_t{1} << (off & 63));
        changed += (__atomic_fetch_or(block + (off >> 6), bit, __ATOMIC_RELAXED) & bit) == 0;
    }
    return changed;
}

}  // namespace bloomline
