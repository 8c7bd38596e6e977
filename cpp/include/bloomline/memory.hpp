// Zeroed, 64-byte-aligned memory that filters keep their bits or counters in,
// owned by a shared_ptr so a view (the buffer protocol, a mapped file) can
// keep it alive. Large blocks come from calloc, which on Linux maps fresh
// zero pages lazily: a 1.2 GB filter is created in microseconds and costs
// memory only as its pages are touched.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <new>

#include "bloomline/common.hpp"

namespace bloomline {

struct Memory {
    unsigned char* data = nullptr;
    std::size_t size = 0;
    std::shared_ptr<void> owner;  // frees (or unmaps) the block when the last user goes

    static Memory zeroed(std::size_t size) {
        void* raw = std::calloc(size + kBlockBytes, 1);
        if (raw == nullptr) throw std::bad_alloc();
        Memory m;
        const auto addr = reinterpret_cast<std::uintptr_t>(raw);
        m.data = reinterpret_cast<unsigned char*>((addr + kBlockBytes - 1) & ~std::uintptr_t{kBlockBytes - 1});
        m.size = size;
        m.owner = std::shared_ptr<void>(raw, [](void* p) { std::free(p); });
        return m;
    }
};

// Bytes of payload for num_slots slots of slot_bits each: whole 64-byte
// blocks, so every layout's blocks are cache-line aligned and the file
// payload is the same bytes as memory.
inline std::size_t payload_bytes(std::uint64_t num_slots, unsigned slot_bits) {
    const std::uint64_t bits = num_slots * slot_bits;
    return static_cast<std::size_t>((bits + kBlockBits - 1) / kBlockBits * kBlockBytes);
}

}  // namespace bloomline
