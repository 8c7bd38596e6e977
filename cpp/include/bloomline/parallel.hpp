// threads= of the batch calls: a batch cut over several threads.
//
// Lookups never lock, so a batch of lookups is cut into one slice per
// thread, each going through the filter's own one-thread path. Adds keep
// one thread for the bit sets, so that the bits, the "was new" answers and
// the counts are exactly those of one thread, and hash on all of them: a
// super-chunk of keys is hashed in parallel into a buffer, then added from
// it by the filter's one add path. That pays where hashing costs: strings
// (NumPy S arrays, Arrow string columns, lines of text). Integer keys hash
// faster than the add loop reads memory (cheap_to_hash, key_source.hpp) and
// are hashed inside it, on one thread. NumPy U arrays are hashed before the
// batch starts, in slices over the same threads (keys_py.hpp). Lists and
// other iterables are hashed under the GIL first, on one thread.
// Measured: benchmarks/RESULTS.md, "threads= on batch calls".
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

// The threads worth starting for n items: starting one costs tens of
// microseconds, so each gets at least 16,384 items.
inline unsigned useful_threads(unsigned threads, std::size_t n) {
    const std::size_t useful = std::max<std::size_t>(1, n / 16384);
    return static_cast<unsigned>(std::min<std::size_t>(threads, useful));
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
// and keys cheaper to hash than to add (integers), go straight to add_keys.
template <class Filter, class Src>
void add_parallel(Filter& f, Src& src, std::size_t n, bool* out, unsigned threads) {
    if constexpr (has_in_place<Src>::value) {
        f.add_keys(src, n, out);
    } else {
        if (threads <= 1 || cheap_to_hash(src)) return f.add_keys(src, n, out);
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
