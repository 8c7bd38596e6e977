// Batches: hashing in chunks, and on several threads (the `threads=` of
// add_many / contains_many).
//
// Lookups never lock, so a batch of lookups is simply cut into one slice
// per thread. Adds are split differently, so that the result is exactly
// what one thread would give (the same bits, the same "was new" answers,
// the same counts): the keys are hashed in parallel, a super-chunk at a
// time, then each thread adds, in input order, the keys whose block lies in
// its own range of blocks. Two keys that share a block are always added by
// the same thread, in order, so a key repeated in a batch is still new only
// at its first place, and no word is written by two threads. The caller
// holds the filter's writer mutex for the whole batch.
//
// Filters without blocks (the standard layout, counting filters) hash in
// parallel and add on one thread.
//
// Measured on the 2-core development VM (benchmarks/RESULTS.md, "threads";
// 10M uint64 keys, blocked, 1%, thread counts taking turns; three runs):
// contains_many 1.18-1.95x faster with 2 threads at 12 MB and 1.81-1.95x
// at 124 MB. Blocked add_many with 2 threads is no faster than with one
// (0.62-0.97x at 12 MB, 0.99-1.06x at 124 MB): its keys are hashed before
// any is added and every thread scans the whole hashed chunk for its
// blocks, while one thread hashes inside its add loop (block_probe.hpp)
// and sets bits blind. Before the blind, streamed one-thread adds, two
// threads were 1.08-1.37x faster; four other splits were tried since
// (benchmarks/NOTES.md, fifth and sixth rounds). The standard layout's
// adds gain little.
#pragma once

#include <algorithm>
#include <cstddef>
#include <exception>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "bloomline/murmur3.hpp"

namespace bloomline {

// First index of part t when n items are cut into `parts` near-equal parts.
inline std::size_t part_begin(std::size_t n, unsigned parts, unsigned t) {
    return n / parts * t + std::min<std::size_t>(t, n % parts);
}

// f(t) for t in [0, threads): t = 0 on the calling thread, the others on new
// threads. An exception from any of them is rethrown after all have ended.
template <class F>
void run_on_threads(unsigned threads, F&& f) {
    if (threads <= 1) {
        f(0u);
        return;
    }
    std::vector<std::exception_ptr> errors(threads);
    std::vector<std::thread> pool;
    pool.reserve(threads - 1);
    auto join_all = [&pool] {
        for (auto& th : pool) th.join();
    };
    try {
        for (unsigned t = 1; t < threads; ++t)
            pool.emplace_back([&f, &errors, t] {
                try {
                    f(t);
                } catch (...) {
                    errors[t] = std::current_exception();
                }
            });
    } catch (...) {  // a thread could not be started
        join_all();
        throw;
    }
    try {
        f(0u);
    } catch (...) {
        errors[0] = std::current_exception();
    }
    join_all();
    for (auto& e : errors)
        if (e) std::rethrow_exception(e);
}

// A key source is hash_at(i) -> key i's hash. A source that can hash a run
// of keys faster than one by one (integer keys: hash_batch.hpp) also has
// hash_at.range(first, m, out); hash_range uses it when it is there.
template <class HashAt, class = void>
struct has_range : std::false_type {};
template <class HashAt>
struct has_range<HashAt, std::void_t<decltype(std::declval<HashAt&>().range(std::size_t{}, std::size_t{},
                                                                             static_cast<Hash128*>(nullptr)))>>
    : std::true_type {};

template <class HashAt>
void hash_range(HashAt& hash_at, std::size_t first, std::size_t m, Hash128* out) {
    if constexpr (has_range<HashAt>::value) {
        hash_at.range(first, m, out);
    } else {
        for (std::size_t i = 0; i < m; ++i) out[i] = hash_at(first + i);
    }
}

// A source whose hashes already sit in memory (lists, hashed with the GIL
// held) has hash_at.in_place(first), a pointer to hash `first`: the chunk
// loops below probe them where they are instead of copying them.
template <class HashAt, class = void>
struct has_in_place : std::false_type {};
template <class HashAt>
struct has_in_place<HashAt, std::void_t<decltype(std::declval<HashAt&>().in_place(std::size_t{}))>>
    : std::true_type {};

// Hashes computed beforehand, as a source.
struct Prehashed {
    const Hash128* h;
    Hash128 operator()(std::size_t i) const { return h[i]; }
    const Hash128* in_place(std::size_t first) const { return h + first; }
};

// Hashes [first, first + m): in place when the source has them, else
// computed into buf.
template <class HashAt>
const Hash128* hashes_at(HashAt& hash_at, std::size_t first, std::size_t m, Hash128* buf) {
    if constexpr (has_in_place<HashAt>::value) {
        return hash_at.in_place(first);
    } else {
        hash_range(hash_at, first, m, buf);
        return buf;
    }
}

// Hash keys [lo, hi) 512 at a time (8 KiB on the stack) and feed
// op(hashes, m, out + first) for each chunk. The one-thread batch path; the
// chunks also let writers on other threads take turns at a writer lock.
template <class HashAt, class Out, class Op>
void hash_chunks(HashAt& hash_at, std::size_t lo, std::size_t hi, Out* out, Op& op) {
    constexpr std::size_t kChunk = 512;
    Hash128 hashes[kChunk];
    for (std::size_t start = lo; start < hi; start += kChunk) {
        const std::size_t m = std::min(kChunk, hi - start);
        op(hashes_at(hash_at, start, m, hashes), m, out + start);
    }
}

// Keys per super-chunk: hashed in parallel into one buffer (4 MiB of
// hashes), then added. Large enough that starting threads costs nothing
// measurable, small enough to stay near the cache.
constexpr std::size_t kParallelChunk = std::size_t{1} << 18;

// For each super-chunk of the batch: hash it on `threads` threads into one
// buffer (or take it in place), then call body(hashes, m, start) on the
// calling thread.
template <class HashAt, class Body>
void for_each_hashed_chunk(HashAt& hash_at, std::size_t n, unsigned threads, Body&& body) {
    if constexpr (has_in_place<HashAt>::value) {
        for (std::size_t start = 0; start < n; start += kParallelChunk)
            body(hash_at.in_place(start), std::min(kParallelChunk, n - start), start);
        return;
    }
    std::vector<Hash128> buf(std::min(n, kParallelChunk));
    for (std::size_t start = 0; start < n; start += kParallelChunk) {
        const std::size_t m = std::min(kParallelChunk, n - start);
        run_on_threads(threads, [&](unsigned t) {
            const std::size_t lo = part_begin(m, threads, t), hi = part_begin(m, threads, t + 1);
            hash_range(hash_at, start + lo, hi - lo, buf.data() + lo);
        });
        body(static_cast<const Hash128*>(buf.data()), m, start);
    }
}

// Lookups: slices of the batch, each hashed and probed by its own thread
// (the filter's contains_keys; with one thread, exactly the one-thread
// path). hash_at(i) must be callable from any thread.
template <class Filter, class HashAt>
void contains_parallel(const Filter& f, HashAt& hash_at, std::size_t n, bool* out, unsigned threads) {
    run_on_threads(threads, [&](unsigned t) {
        f.contains_keys(hash_at, part_begin(n, threads, t), part_begin(n, threads, t + 1), out);
    });
}

// Adds for filters that cannot split by block: parallel hashing, then the
// filter's own add_batch on one thread.
template <class Filter, class HashAt>
void add_parallel_hashing(Filter& f, HashAt& hash_at, std::size_t n, bool* out, unsigned threads) {
    for_each_hashed_chunk(hash_at, n, threads, [&](const Hash128* hashes, std::size_t m, std::size_t start) {
        f.add_batch(hashes, m, out ? out + start : nullptr);
    });
}

}  // namespace bloomline
