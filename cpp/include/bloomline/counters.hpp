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
// serialised by the owner's mutex and write with relaxed atomic stores.
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

    const void* address_of(std::uint64_t i) const { return mem_.data + ((i * bits_) >> 3); }

    void clear() { std::memset(mem_.data, 0, mem_.size); }

private:
    static unsigned char load8(const unsigned char* p) { return __atomic_load_n(p, __ATOMIC_RELAXED); }
    static void store8(unsigned char* p, unsigned char v) { __atomic_store_n(p, v, __ATOMIC_RELAXED); }

    Memory mem_;
    unsigned bits_ = 4;
};

}  // namespace bloomline
