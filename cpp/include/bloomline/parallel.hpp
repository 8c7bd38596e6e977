// threads= of the batch calls: a batch cut over several threads.
//
// Lookups never lock, so a batch of lookups is cut into one slice per
// thread, each going through the filter's own one-thread path. Adds keep
// one thread for the bit sets (so the bits, the "was new" answers and the
// counts are exactly those of one thread) and hash on all of them: a
// super-chunk of keys is hashed in parallel into a buffer, then added from
// it by the filter's one add path. That pays where hashing costs (strings);
// integer keys hash faster than the add loop reads memory, and are hashed
// inside it on one thread (benchmarks/RESULTS.md, threads). Splitting the
// adds themselves by block range was exact too, but no faster than one
// thread on the 2-core development VM, and was removed (benchmarks/NOTES.md).
#pragma once

#include <algorithm>
#include <cstddef>
#include <exception>
#include <thread>
#include <vector>

#include "bloomline/key_source.hpp"

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

// Keys per super-chunk: hashed in parallel into one buffer (4 MiB of
// hashes), then added. Large enough that starting threads costs nothing
// measurable, small enough to stay near the cache.
constexpr std::size_t kParallelChunk = std::size_t{1} << 18;

// Lookups: slices of the batch, each looked up by its own thread.
template <class Filter, class Src>
void contains_parallel(const Filter& f, Src& src, std::size_t n, bool* out, unsigned threads) {
    run_on_threads(threads, [&](unsigned t) {
        const std::size_t lo = part_begin(n, threads, t), hi = part_begin(n, threads, t + 1);
        f.contains_keys(src, lo, hi - lo, out + lo);
    });
}

// Adds: hashing on `threads` threads, the adds on this one (the filter's
// add_keys over the hashes). Sources whose hashes are already in memory,
// and integer keys (a source with a batch hash), go straight to add_keys.
template <class Filter, class Src>
void add_parallel(Filter& f, Src& src, std::size_t n, bool* out, unsigned threads) {
    if constexpr (has_in_place<Src>::value || has_range<Src>::value) {
        f.add_keys(src, n, out);
    } else {
        if (threads <= 1) return f.add_keys(src, n, out);
        std::vector<Hash128> buf(std::min(n, kParallelChunk));
        for (std::size_t start = 0; start < n; start += kParallelChunk) {
            const std::size_t m = std::min(kParallelChunk, n - start);
            run_on_threads(threads, [&](unsigned t) {
                const std::size_t lo = part_begin(m, threads, t), hi = part_begin(m, threads, t + 1);
                hash_range(src, start + lo, hi - lo, buf.data() + lo);
            });
            Prehashed hashes{buf.data()};
            f.add_keys(hashes, m, out ? out + start : nullptr);
        }
    }
}

}  // namespace bloomline
