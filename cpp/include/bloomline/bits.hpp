// Bit storage: an array of bits over raw, 64-byte-aligned memory.
//
// Byte order: bit i is bit (i % 8) of byte i / 8, on every machine, so the
// payload bytes are portable and the buffer protocol shows the same bytes a
// file holds. Words are read as 64-bit little-endian values (free on x86 and
// ARM; a byte swap of the mask on big-endian hosts).
//
// Threads: sets use an atomic fetch-or with relaxed order, so threads adding
// at once never lose each other's bits, and fetch-or's old value tells
// exactly which bits this call changed (that is how `add` knows a key was
// new and how bits_set stays exact without a popcount). A word is only
// written when it lacks a bit, so re-adding known keys costs plain loads.
// Reads are relaxed atomic loads: a reader racing a writer sees each word
// either before or after, never torn.
#pragma once

#include <cstdint>
#include <cstring>

#include "bloomline/common.hpp"
#include "bloomline/memory.hpp"

namespace bloomline {

// The native-order mask of a little-endian-numbered bit pattern.
inline std::uint64_t native_mask(std::uint64_t le) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    return __builtin_bswap64(le);
#else
    return le;
#endif
}

inline std::uint64_t atomic_load(const std::uint64_t* p) { return __atomic_load_n(p, __ATOMIC_RELAXED); }
inline std::uint64_t atomic_fetch_or(std::uint64_t* p, std::uint64_t v) {
    return __atomic_fetch_or(p, v, __ATOMIC_RELAXED);
}

inline unsigned popcount64(std::uint64_t x) { return static_cast<unsigned>(__builtin_popcountll(x)); }

// The k bits of one key in a 512-bit block, as 8 words of mask.
struct BlockMask {
    std::uint64_t w[kBlockWords];
};

class BitArray {
public:
    BitArray() = default;
    explicit BitArray(Memory mem) : mem_(std::move(mem)) {}

    static BitArray zeroed(std::uint64_t num_bits) { return BitArray(Memory::zeroed(payload_bytes(num_bits, 1))); }

    unsigned char* bytes() const { return mem_.data; }
    std::size_t nbytes() const { return mem_.size; }
    const Memory& memory() const { return mem_; }

    bool test(std::uint64_t i) const { return (atomic_load(word(i)) & bit(i)) != 0; }

    // Set bit i; true when it was clear before.
    bool set(std::uint64_t i) {
        std::uint64_t* w = word(i);
        const std::uint64_t b = bit(i);
        if (atomic_load(w) & b) return false;
        return (atomic_fetch_or(w, b) & b) == 0;
    }

    bool test_block(std::uint64_t block, const BlockMask& m) const {
        const std::uint64_t* w = block_words(block);
        std::uint64_t missing = 0;
        for (unsigned i = 0; i < kBlockWords; ++i) missing |= m.w[i] & ~atomic_load(w + i);
        return missing == 0;
    }

    // Set the mask's bits in a block; returns how many were clear before.
    unsigned set_block(std::uint64_t block, const BlockMask& m) {
        std::uint64_t* w = block_words(block);
        unsigned changed = 0;
        for (unsigned i = 0; i < kBlockWords; ++i) {
            if (m.w[i] == 0) continue;
            if ((atomic_load(w + i) & m.w[i]) == m.w[i]) continue;
            changed += popcount64(m.w[i] & ~atomic_fetch_or(w + i, m.w[i]));
        }
        return changed;
    }

    void prefetch_read(std::uint64_t i) const { __builtin_prefetch(word(i), 0, 3); }
    void prefetch_write(std::uint64_t i) const { __builtin_prefetch(word(i), 1, 3); }

    std::uint64_t popcount() const {
        std::uint64_t total = 0;
        const std::uint64_t* w = words();
        for (std::size_t i = 0, n = mem_.size / 8; i < n; ++i) total += popcount64(w[i]);
        return total;
    }

    void clear() { std::memset(mem_.data, 0, mem_.size); }

    std::uint64_t* words() const { return reinterpret_cast<std::uint64_t*>(mem_.data); }

private:
    std::uint64_t* word(std::uint64_t i) const { return words() + (i >> 6); }
    static std::uint64_t bit(std::uint64_t i) { return native_mask(std::uint64_t{1} << (i & 63)); }
    std::uint64_t* block_words(std::uint64_t block) const { return words() + block * kBlockWords; }

    Memory mem_;
};

}  // namespace bloomline
