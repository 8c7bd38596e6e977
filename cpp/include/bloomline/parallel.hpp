// threads= of the batch calls: a batch cut over several threads.
//
// Lookups never lock, so a batch of lookups is cut into one slice per
// thread, each going through the filter's own one-thread path.
//
// Adds on several threads give exactly one thread's answers, counts and
// bytes. Each thread owns a contiguous range of the filter's memory, in
// whole 512-slot units (so no word, counter byte or cache line has two
// owners), and makes every write that falls in it, in input order. A key's
// answer ("was new") depends only on the writes made to its own slots by
// the keys before it; those writes are made by its slots' owners, each in
// input order, so every key sees what it would have seen on one thread.
// Per super-chunk of keys: the keys are hashed (on all threads, slice by
// slice) and sorted to their owners, slice after slice, which keeps input
// order; then each owner adds its keys. The blocked layout's keys each have
// one owner (one block), and go through its one-thread batch add; the
// standard layout's and the counters' slots are sorted one by one, and a
// key is new when any of its owners changed one of its slots.
// Measured: benchmarks/RESULTS.md, "threads= on batch calls".
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include "bloomline/common.hpp"
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

// Lookups: slices of the batch, each looked up by its own thread.
template <class Filter, class Src>
void contains_parallel(const Filter& f, Src& src, std::size_t n, bool* out, unsigned threads) {
    run_on_threads(threads, [&](unsigned t) {
        const std::size_t lo = part_begin(n, threads, t), hi = part_begin(n, threads, t + 1);
        f.contains_keys(src, lo, hi - lo, out + lo);
    });
}

// Which thread owns a slot: slots in whole units of 512, the units cut into
// `parts` contiguous ranges. The owner of unit u is the high half of
// u * (2**64 * parts / units): one multiply per key, no division; it
// depends on the unit alone, never decreases with it, and stays below
// parts, which is all ownership needs.
struct Owners {
    std::uint64_t units;  // ceil(num_slots / 512)
    std::uint64_t scale;  // floor(2**64 * parts / units); 0: one owner per unit
    Owners(unsigned parts, std::uint64_t num_slots) : units((num_slots + 511) / 512), scale(0) {
        if (parts < units) {
#if defined(__SIZEOF_INT128__)
            __extension__ typedef unsigned __int128 u128;
            scale = static_cast<std::uint64_t>((static_cast<u128>(parts) << 64) / units);
#else
            // Rounded, not exact: off by far less than one unit's share.
            scale = static_cast<std::uint64_t>(static_cast<double>(parts) / static_cast<double>(units) * 0x1p64);
#endif
        }
    }
    unsigned of_unit(std::uint64_t u) const { return static_cast<unsigned>(scale ? mul_hi(u, scale) : u); }
    unsigned of_slot(std::uint64_t slot) const { return of_unit(slot / 512); }
};

// Keys per super-chunk of a threaded add: hashed and sorted to owners, then
// added. Large enough that starting threads (twice per chunk) costs little,
// small enough that its hashes and indices stay near the cache.
constexpr std::size_t kParallelChunk = std::size_t{1} << 18;

// The hashes of keys [start, start + m), hashed on `threads` threads into
// buf where they are not in memory already.
template <class Src>
const Hash128* hashes_of_chunk(Src& src, std::size_t start, std::size_t m, unsigned t, unsigned threads,
                               std::vector<Hash128>& buf) {
    if constexpr (has_in_place<Src>::value) {
        return src.in_place(start);
    } else {
        const std::size_t lo = part_begin(m, threads, t), hi = part_begin(m, threads, t + 1);
        hash_range(src, start + lo, hi - lo, buf.data() + lo);
        return buf.data();
    }
}

// What each thread of a threaded add keeps, on cache lines of its own: the
// vectors' headers change with every key sorted, and two threads writing
// one line would pass it back and forth at every write.
template <class Item>
struct alignas(64) PerThread {
    std::vector<std::vector<Item>> to;  // [owner]: this thread's slice, sorted to owners
    std::vector<std::uint32_t> run;     // as an owner: its keys, slice after slice
    std::unique_ptr<bool[]> answers;    // as an owner: its keys' answers, in that order
    std::size_t answer_room = 0;
    std::vector<std::uint8_t> changed;  // as an owner (slot by slot): which keys it changed a slot of
    AddCounts counts;
};

// An owner's keys for a compiled batch loop: their hashes gathered from the
// chunk's, a small run at a time, into the loop's own ring (no copy of them
// all first).
struct GatheredKeys {
    const Hash128* hashes;
    const std::uint32_t* run;
    static void hash(const void* ctx, std::size_t first, std::size_t m, Hash128* out) {
        const auto* g = static_cast<const GatheredKeys*>(ctx);
        for (std::size_t j = 0; j < m; ++j) out[j] = g->hashes[g->run[first + j]];
    }
};

// Threaded adds where every key has one owner (the blocked layout's bits):
// owner(h) names it; add_run(keys, m, answers) adds an owner's keys
// (BatchKeys), in order, on its thread and returns their counts. in_lock(f) runs f, which adds a
// super-chunk and returns its counts, holding the filter's writer mutex,
// and counts them there (so other writers take turns chunk by chunk).
// Each thread writes the answers of its own slice, so that no two threads
// write one line of out.
template <class Src, class Owner, class AddRun, class InLock>
void add_by_key_owner(Src& src, std::size_t n, bool* out, unsigned threads, Owner&& owner, AddRun&& add_run,
                      InLock&& in_lock) {
    std::vector<Hash128> buf(has_in_place<Src>::value ? 0 : std::min(n, kParallelChunk));
    std::vector<PerThread<std::uint32_t>> per(threads);
    for (auto& p : per) p.to.resize(threads);
    for (std::size_t start = 0; start < n; start += kParallelChunk) {
        const std::size_t m = std::min(kParallelChunk, n - start);
        in_lock([&] {
            const Hash128* h = nullptr;
            run_on_threads(threads, [&](unsigned t) {
                const Hash128* mine = hashes_of_chunk(src, start, m, t, threads, buf);
                if (t == 0) h = mine;
                auto& to = per[t].to;
                for (auto& v : to) v.clear();
                for (std::size_t i = part_begin(m, threads, t), hi = part_begin(m, threads, t + 1); i < hi; ++i)
                    to[owner(mine[i])].push_back(static_cast<std::uint32_t>(i));
            });
            run_on_threads(threads, [&](unsigned o) {
                PerThread<std::uint32_t>& me = per[o];
                me.run.clear();
                for (unsigned t = 0; t < threads; ++t) me.run.insert(me.run.end(), per[t].to[o].begin(), per[t].to[o].end());
                if (out && me.answer_room < me.run.size()) {
                    me.answers.reset(new bool[me.run.size()]);
                    me.answer_room = me.run.size();
                }
                const GatheredKeys gathered{h, me.run.data()};
                me.counts = add_run(BatchKeys{nullptr, KeyHasher{&gathered, &GatheredKeys::hash}}, me.run.size(),
                                    out ? me.answers.get() : nullptr);
            });
            if (out) {
                run_on_threads(threads, [&](unsigned t) {
                    for (unsigned o = 0; o < threads; ++o) {
                        std::size_t j = 0;  // where slice t's keys start in owner o's answers
                        for (unsigned before = 0; before < t; ++before) j += per[before].to[o].size();
                        const bool* a = per[o].answers.get();
                        for (std::uint32_t i : per[t].to[o]) out[start + i] = a[j++];
                    }
                });
            }
            AddCounts chunk;
            for (const auto& p : per) chunk += p.counts;
            return chunk;
        });
    }
}

// Threaded adds slot by slot (the standard layout's bits, counters of both
// layouts): slots(h, f) calls f(slot) for each of a key's slots;
// set_slot(o, slot) makes the write on owner o's thread and says whether
// it changed what makes a key new (a clear bit, a zero counter); line(slot)
// is its address, prefetched ahead. out[i]: some slot of key i changed.
// in_lock(f) as above: f returns a super-chunk's counts (slots changed,
// keys new).
template <class Src, class Slots, class SetSlot, class Line, class InLock>
void add_by_slot_owner(Src& src, std::size_t n, bool* out, unsigned threads, const Owners& owners, Slots&& slots,
                       SetSlot&& set_slot, Line&& line, InLock&& in_lock) {
    // A slot and its key's index in the chunk in one word: slot << 16 | index
    // (slots are below 2**48, a chunk holds 2**16 keys).
    using Pair = std::uint64_t;
    constexpr std::size_t kChunk = std::size_t{1} << 16;  // keys: k pairs each
    static_assert(kMaxBits <= (std::uint64_t{1} << 48), "a slot must fit in 48 bits beside its key's index");
    std::vector<Hash128> buf(has_in_place<Src>::value ? 0 : std::min(n, kChunk));
    std::vector<PerThread<Pair>> per(threads);
    for (auto& p : per) p.to.resize(threads);
    std::vector<AddCounts> news(threads);
    for (std::size_t start = 0; start < n; start += kChunk) {
        const std::size_t m = std::min(kChunk, n - start);
        in_lock([&] {
            run_on_threads(threads, [&](unsigned t) {
                const Hash128* h = hashes_of_chunk(src, start, m, t, threads, buf);
                auto& to = per[t].to;
                for (auto& v : to) v.clear();
                for (std::size_t i = part_begin(m, threads, t), hi = part_begin(m, threads, t + 1); i < hi; ++i)
                    slots(h[i], [&](std::uint64_t s) { to[owners.of_slot(s)].push_back(s << 16 | i); });
            });
            run_on_threads(threads, [&](unsigned o) {
                PerThread<Pair>& me = per[o];
                me.changed.assign(m, 0);
                std::uint64_t slots_changed = 0;
                // As many lines in flight as the one-thread stream keeps (4 keys of k).
                constexpr std::size_t kAhead = 32;
                for (unsigned t = 0; t < threads; ++t) {
                    const std::vector<Pair>& run = per[t].to[o];
                    for (std::size_t j = 0; j < run.size(); ++j) {
                        if (j + kAhead < run.size()) __builtin_prefetch(line(run[j + kAhead] >> 16), 1, 3);
                        const bool c = set_slot(o, run[j] >> 16);
                        slots_changed += c;
                        me.changed[run[j] & 0xFFFF] |= c ? 1 : 0;
                    }
                }
                me.counts = AddCounts{slots_changed, 0};
            });
            run_on_threads(threads, [&](unsigned t) {
                std::uint64_t count = 0;
                for (std::size_t i = part_begin(m, threads, t), hi = part_begin(m, threads, t + 1); i < hi; ++i) {
                    std::uint8_t any = 0;
                    for (unsigned o = 0; o < threads; ++o) any |= per[o].changed[i];
                    count += any;
                    if (out) out[start + i] = any != 0;
                }
                news[t] = AddCounts{0, count};
            });
            AddCounts chunk;
            for (const auto& p : per) chunk += p.counts;
            for (const AddCounts& c : news) chunk += c;
            return chunk;
        });
    }
}

// Adds on `threads` threads: the filter's own threaded add (add_keys_on), or
// its one-thread path for one thread.
template <class Filter, class Src>
void add_parallel(Filter& f, Src& src, std::size_t n, bool* out, unsigned threads) {
    if (threads <= 1) return f.add_keys(src, n, out);
    f.add_keys_on(src, n, out, threads);
}

}  // namespace bloomline
