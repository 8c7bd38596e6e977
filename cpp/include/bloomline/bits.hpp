// Bit storage: an array of bits over raw, 64-byte-aligned memory. Where a
// key's bits are, and how they are tested and set, is its layout's
// (layout_blocked.hpp, layout_standard.hpp).
//
// Byte order: bit i is bit (i % 8) of byte i / 8, on every machine, so the
// payload bytes are portable and the buffer protocol shows the same bytes a
// file holds (words.hpp).
//
// Threads: readers use relaxed atomic loads and never wait. Writers within
// one process are serialised by the filter's writer mutex, so a set is a
// plain load, or, store with no locked instruction (an atomic fetch-or per
// word was several times slower for new keys; benchmarks/NOTES.md). The old
// word value tells exactly which bits a set changed, so an add knows whether
// a key was new and the count of set bits stays exact without a popcount.
#pragma once

#include <cstdint>
#include <cstring>

#include "bloomline/common.hpp"
#include "bloomline/memory.hpp"
#include "bloomline/words.hpp"

namespace bloomline {

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

}  // namespace bloomline
