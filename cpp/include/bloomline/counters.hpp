// Counter storage: an array of 4-, 8- or 16-bit saturating counters over
// raw, 64-byte-aligned memory, for the counting Bloom filter.
//
// Layout (portable, the file payload as is): 4-bit counter i is the low
// nibble of byte i / 2 when i is even, the high nibble when odd; 8-bit
// counter i is byte i; 16-bit counter i is the little-endian pair at 2i.
//
// Saturation: a counter that reaches its maximum (15, 255, 65535) sticks
// there: it is never incremented past it nor decremented, because once it
// has overflowed the true count is unknown, and decrementing it could reach
// zero while keys that set it are still present (a false negative).
//
// Threads: like BitArray, readers use relaxed atomic loads; writers are
// serialised by the owner's mutex and write with relaxed atomic stores. When
// other writers may share the memory (a file mapped for writing by several
// processes), step() changes one counter by a compare-and-swap on the byte
// or 16-bit unit that holds it, so no writer's change is lost.
#pragma once

#include <cstdint>
#include <cstring>

#include "bloomline/common.hpp"
#include "bloomline/memory.hpp"

namespace bloomline {

class CounterArray {
public:
    CounterArray() = default;
    CounterArray(Memory mem, unsigned counter_bits) : mem_(std::move(mem)), bits_(counter_bits) {}

    static CounterArray zeroed(std::uint64_t num_counters, unsigned counter_bits) {
        return CounterArray(Memory::zeroed(payload_bytes(num_counters, counter_bits)), counter_bits);
    }

    unsigned counter_bits() const { return bits_; }
    std::uint32_t max_value() const { return (std::uint32_t{1} << bits_) - 1; }
    unsigned char* bytes() const { return mem_.data; }
    std::size_t nbytes() const { return mem_.size; }
    const Memory& memory() const { return mem_; }

    std::uint32_t get(std::uint64_t i) const {
        switch (bits_) {
            case 4: {
                const unsigned char b = load8(mem_.data + (i >> 1));
                return (i & 1) ? (b >> 4) : (b & 0x0F);
            }
            case 8: return load8(mem_.data + i);
            default: return load8(mem_.data + 2 * i) | (std::uint32_t{load8(mem_.data + 2 * i + 1)} << 8);
        }
    }

    // Writers serialised by the owner.
    void put(std::uint64_t i, std::uint32_t v) {
        switch (bits_) {
            case 4: {
                unsigned char* p = mem_.data + (i >> 1);
                const unsigned char b = load8(p);
                store8(p, static_cast<unsigned char>((i & 1) ? ((b & 0x0F) | (v << 4)) : ((b & 0xF0) | v)));
                break;
            }
            case 8: store8(mem_.data + i, static_cast<unsigned char>(v)); break;
            default:
                store8(mem_.data + 2 * i, static_cast<unsigned char>(v & 0xFF));
                store8(mem_.data + 2 * i + 1, static_cast<unsigned char>(v >> 8));
        }
    }

    // Shared writers: counter i plus delta (+1 or -1) unless it is at
    // stop_a or stop_b (0, or the maximum where it sticks), as one atomic
    // step. Returns the value it had.
    std::uint32_t step(std::uint64_t i, int delta, std::uint32_t stop_a, std::uint32_t stop_b) {
        if (bits_ == 16) {
            auto* p = reinterpret_cast<std::uint16_t*>(mem_.data + 2 * i);
            std::uint16_t old = __atomic_load_n(p, __ATOMIC_RELAXED);
            for (;;) {
                const std::uint32_t c = from_le16(old);
                if (c == stop_a || c == stop_b) return c;
                const auto next = to_le16(static_cast<std::uint16_t>(static_cast<int>(c) + delta));
                if (__atomic_compare_exchange_n(p, &old, next, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) return c;
            }
        }
        unsigned char* p = mem_.data + (bits_ == 8 ? i : i >> 1);
        const unsigned shift = bits_ == 4 && (i & 1) ? 4 : 0;
        const unsigned mask = bits_ == 8 ? 0xFF : 0x0F;
        unsigned char old = __atomic_load_n(p, __ATOMIC_RELAXED);
        for (;;) {
            const std::uint32_t c = (old >> shift) & mask;
            if (c == stop_a || c == stop_b) return c;
            const auto next = static_cast<unsigned char>((old & ~(mask << shift)) |
                                                         ((static_cast<unsigned>(static_cast<int>(c) + delta) & mask) << shift));
            if (__atomic_compare_exchange_n(p, &old, next, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) return c;
        }
    }

    const void* address_of(std::uint64_t i) const { return mem_.data + ((i * bits_) >> 3); }

    void clear() { std::memset(mem_.data, 0, mem_.size); }

private:
    static std::uint16_t to_le16(std::uint16_t v) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
        return __builtin_bswap16(v);
#else
        return v;
#endif
    }
    static std::uint16_t from_le16(std::uint16_t v) { return to_le16(v); }
    static unsigned char load8(const unsigned char* p) { return __atomic_load_n(p, __ATOMIC_RELAXED); }
    static void store8(unsigned char* p, unsigned char v) { __atomic_store_n(p, v, __ATOMIC_RELAXED); }

    Memory mem_;
    unsigned bits_ = 4;
};

}  // namespace bloomline
