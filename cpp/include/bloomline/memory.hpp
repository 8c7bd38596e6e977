// Zeroed, 64-byte-aligned memory that filters keep their bits or counters in,
// owned by a shared_ptr so a view (the buffer protocol, a mapped file) can
// keep it alive.
//
// Small blocks come from calloc. Blocks of 4 MiB and more are mapped
// anonymously (fresh zero pages, lazily: a 1.2 GB filter is created in
// microseconds and costs memory only as its pages are touched), aligned to
// 2 MiB and marked MADV_HUGEPAGE. A Bloom filter reads one random line per
// key, so with 4 KiB pages nearly every probe of a large filter is also a TLB
// miss; huge pages remove most of those misses and make page faults while a
// new filter fills 512 times rarer (benchmarks/NOTES.md, "Huge pages").
//
// Memory may also point into memory owned by someone else (a mapped file):
// `owner` then keeps that alive.
#pragma once

#include <pthread.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <new>

#if defined(__linux__)
#include <sys/mman.h>
#endif

#include "bloomline/common.hpp"

namespace bloomline {

// How many forks this process is from the one that started counting: each
// child adds one (pthread_atfork). Memory shared with other processes (a
// file mapped for writing) belongs to the process that mapped it; a child
// that inherits the mapping across a fork must not write, flush or close it
// as its owner would, or it would release locks and rewrite headers that
// its parent still holds (filter_common.hpp, file.cpp).
inline std::atomic<std::uint32_t>& fork_generation_counter() {
    static std::atomic<std::uint32_t> generation{0};
    return generation;
}
inline std::uint32_t fork_generation() {
    static const bool counting = [] {
        ::pthread_atfork(nullptr, nullptr, [] { fork_generation_counter().fetch_add(1); });
        return true;
    }();
    (void)counting;
    return fork_generation_counter().load(std::memory_order_relaxed);
}

// Memory refused, saying how much was asked for: a bare "std::bad_alloc"
// leaves a user who sized a filter from a mistaken capacity guessing.
class OutOfMemory : public std::bad_alloc {
public:
    explicit OutOfMemory(std::size_t bytes) {
        std::snprintf(message_, sizeof(message_), "could not allocate %zu bytes (%.1f GiB) for a filter's storage",
                      bytes, static_cast<double>(bytes) / (1u << 30));
    }
    const char* what() const noexcept override { return message_; }

private:
    char message_[96];  // (no allocation while out of memory)
};

struct Memory {
    unsigned char* data = nullptr;
    std::size_t size = 0;
    std::shared_ptr<void> owner;  // frees (or unmaps) the block when the last user goes

    static Memory zeroed(std::size_t size) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
        constexpr std::size_t kHuge = std::size_t{2} << 20;
        if (size >= 2 * kHuge) {
            const std::size_t span = size + kHuge;
            void* raw = mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            if (raw == MAP_FAILED) throw OutOfMemory(size);
            const auto addr = reinterpret_cast<std::uintptr_t>(raw);
            auto* aligned = reinterpret_cast<unsigned char*>((addr + kHuge - 1) & ~std::uintptr_t{kHuge - 1});
            madvise(aligned, (size + kHuge - 1) & ~(kHuge - 1), MADV_HUGEPAGE);  // advice only: may be refused
            Memory m;
            m.data = aligned;
            m.size = size;
            m.owner = std::shared_ptr<void>(raw, [span](void* p) { munmap(p, span); });
            return m;
        }
#endif
        void* raw = std::calloc(size + kBlockBytes, 1);
        if (raw == nullptr) throw OutOfMemory(size);
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
