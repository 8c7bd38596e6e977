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
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#ifdef __linux__
#include <sched.h>
#endif

#include "bloomline/common.hpp"
#include "bloomline/key_source.hpp"
#include "bloomline/lines.hpp"

namespace bloomline {

// The most threads a threaded call runs on (threads= in [0, 1024]; 0 means
// one per CPU, capped here).
constexpr unsigned kMaxThreads = 1024;

// The CPUs this process may run on: its affinity mask where the system has
// one (a container's cpuset, taskset), else every CPU; at least 1.
inline unsigned available_cpus() {
#ifdef __linux__
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        const int n = CPU_COUNT(&set);
        if (n > 0) return static_cast<unsigned>(n);
    }
#endif
    const unsigned cpus = std::thread::hardware_concurrency();
    return cpus == 0 ? 1 : cpus;
}

// The most threads a threaded add runs on: the CPUs available, or 8 where
// there are fewer. Its sort to owners costs more with every member (the
// answers step grows with the square of the team, a slot-by-slot add's
// merge per key with the team), and past the CPUs a member adds only that
// cost (benchmarks/NOTES.md, "A threaded add's team held to the CPUs"). The
// answers are the same for any team; the floor of 8 keeps a small machine
// running the partitions a larger one would.
inline unsigned add_team_limit() { return std::min(kMaxThreads, std::max(available_cpus(), 8u)); }

// First index of part t when n items are cut into `parts` near-equal parts.
inline std::size_t part_begin(std::size_t n, unsigned parts, unsigned t) {
    return n / parts * t + std::min<std::size_t>(t, n % parts);
}

// A team of threads kept for one threaded call: each phase (f(t) for t in
// [0, size)) runs on all of them, t = 0 on the calling thread. A threaded
// add runs one or three phases per super-chunk; starting threads for each
// phase cost tens of microseconds a thread, which at 16 threads outweighed
// a chunk's work. Here a phase starts with one atomic store, and an idle
// member spins briefly (the next phase is usually microseconds away), then
// sleeps on a condition variable, so an oversubscribed machine loses little
// to spinning. An exception from any member is rethrown by run() after the
// phase has ended on all of them.
class Team {
public:
    explicit Team(unsigned threads) : size_(std::max(1u, threads)), errors_(size_) {
        workers_.reserve(size_ - 1);
        try {
            for (unsigned t = 1; t < size_; ++t) workers_.emplace_back([this, t] { work(t); });
        } catch (...) {  // a thread could not be started
            stop();
            throw;
        }
    }
    Team(const Team&) = delete;
    Team& operator=(const Team&) = delete;
    ~Team() { stop(); }

    unsigned size() const { return size_; }

    template <class F>
    void run(F&& f) {
        if (workers_.empty()) {
            f(0u);
            return;
        }
        using Fn = std::remove_reference_t<F>;
        ctx_ = const_cast<void*>(static_cast<const void*>(&f));
        call_ = [](void* c, unsigned t) { (*static_cast<Fn*>(c))(t); };
        left_.store(static_cast<unsigned>(workers_.size()), std::memory_order_relaxed);
        {
            std::lock_guard<std::mutex> lk(m_);  // so that a member about to sleep sees it
            phase_.fetch_add(1, std::memory_order_release);
        }
        start_.notify_all();
        try {
            f(0u);
        } catch (...) {
            errors_[0] = std::current_exception();
        }
        for (unsigned spins = 0; left_.load(std::memory_order_acquire) != 0 && spins < kSpins; ++spins) cpu_relax();
        if (left_.load(std::memory_order_acquire) != 0) {
            std::unique_lock<std::mutex> lk(m_);
            done_.wait(lk, [this] { return left_.load(std::memory_order_acquire) == 0; });
        }
        for (auto& e : errors_)
            if (e) {
                std::exception_ptr first = e;
                for (auto& x : errors_) x = nullptr;
                std::rethrow_exception(first);
            }
    }

private:
    static constexpr unsigned kSpins = 4096;

    void work(unsigned t) {
        std::uint64_t seen = 0;
        for (;;) {
            std::uint64_t p = phase_.load(std::memory_order_acquire);
            for (unsigned spins = 0; p == seen && spins < kSpins; ++spins) {
                cpu_relax();
                p = phase_.load(std::memory_order_acquire);
            }
            if (p == seen) {
                std::unique_lock<std::mutex> lk(m_);
                start_.wait(lk, [&] { return (p = phase_.load(std::memory_order_acquire)) != seen; });
            }
            seen = p;
            if (stopping_.load(std::memory_order_acquire)) return;
            try {
                call_(ctx_, t);
            } catch (...) {
                errors_[t] = std::current_exception();
            }
            if (left_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
                { std::lock_guard<std::mutex> lk(m_); }  // the caller is waiting, or will see left_ == 0
                done_.notify_one();
            }
        }
    }

    void stop() {
        stopping_.store(true, std::memory_order_release);
        {
            std::lock_guard<std::mutex> lk(m_);
            phase_.fetch_add(1, std::memory_order_release);
        }
        start_.notify_all();
        for (auto& th : workers_) th.join();
        workers_.clear();
    }

    const unsigned size_;
    std::vector<std::exception_ptr> errors_;  // [member]: what its part of this phase threw
    std::vector<std::thread> workers_;
    std::mutex m_;
    std::condition_variable start_, done_;
    std::atomic<std::uint64_t> phase_{0};
    std::atomic<unsigned> left_{0};  // members other than the caller still in this phase
    std::atomic<bool> stopping_{false};
    void (*call_)(void*, unsigned) = nullptr;
    void* ctx_ = nullptr;
};

// f(t) for t in [0, threads), once: t = 0 on the calling thread, the others
// on a team's threads. An exception from any of them is rethrown after all
// have ended.
template <class F>
void run_on_threads(unsigned threads, F&& f) {
    if (threads <= 1) {
        f(0u);
        return;
    }
    Team(threads).run(f);
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

// The lines of p[0, n), as split_lines finds them, on up to `threads`
// threads (each at least 1 MiB of the block): each thread finds the lines
// that start in its share of the bytes, then copies them into their place.
// The split is a dedup's one serial step otherwise (a memchr per line).
inline void split_lines_on(const unsigned char* p, std::size_t n, LineSpans* out, unsigned threads) {
    threads = static_cast<unsigned>(std::min<std::size_t>(threads, std::max<std::size_t>(1, n >> 20)));
    if (threads <= 1) return split_lines(p, n, out);
    std::vector<LineSpans> parts(threads);
    std::vector<std::size_t> first(threads + 1, 0);  // [part]: its first line's index in out
    Team team(threads);
    team.run([&](unsigned t) {
        const std::size_t stop = part_begin(n, threads, t + 1);
        split_lines_from(p, n, first_line_start(p, part_begin(n, threads, t), stop), stop, &parts[t]);
    });
    for (unsigned t = 0; t < threads; ++t) first[t + 1] = first[t] + parts[t].size();
    out->begin.resize(first[threads]);
    out->end.resize(first[threads]);
    team.run([&](unsigned t) {
        std::copy(parts[t].begin.begin(), parts[t].begin.end(), out->begin.begin() + static_cast<std::ptrdiff_t>(first[t]));
        std::copy(parts[t].end.begin(), parts[t].end.end(), out->end.begin() + static_cast<std::ptrdiff_t>(first[t]));
    });
}

// The lines of p[0, n) that keep[i] names, copied into one output on up to
// `threads` threads (at least 16,384 lines each), as select_lines writes
// them: each thread sizes its own range of lines, alloc(total) gives the
// output's memory, then each copies its range into its place. The size
// reads only the spans and keep, so a buffer that changes between the
// passes never makes the copy write more than was sized.
template <class Alloc>
void select_lines_on(const unsigned char* p, std::size_t n, const LineSpans& lines, const bool* keep,
                     unsigned threads, Alloc&& alloc) {
    const bool add_newline = last_line_needs_newline(p, n);
    const unsigned t = useful_threads(threads, lines.size());
    std::vector<std::size_t> offset(t + 1, 0);
    Team team(t);
    team.run([&](unsigned k) {
        offset[k + 1] = selected_bytes(n, lines, keep, add_newline, part_begin(lines.size(), t, k),
                                       part_begin(lines.size(), t, k + 1));
    });
    for (unsigned k = 0; k < t; ++k) offset[k + 1] += offset[k];
    unsigned char* dst = alloc(offset[t]);
    team.run([&](unsigned k) {
        copy_selected(p, n, lines, keep, add_newline, part_begin(lines.size(), t, k), part_begin(lines.size(), t, k + 1),
                      dst + offset[k]);
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
// added. Large enough that each owner's share is a long run (the phases'
// starts and the slowest owner cost the same per chunk), small enough that
// the chunk's hashes stay in the caches: 2**18 keys up to 7 threads, then
// 2**18 per 4 threads, up to 2**20 (on 16 cores, 2**20 added 1.17x as fast
// as 2**18: benchmarks/RESULTS.md, "Adds on every core").
constexpr std::size_t kParallelChunk = std::size_t{1} << 18;
inline std::size_t parallel_chunk(unsigned threads) {
    return kParallelChunk * std::min<std::size_t>(4, std::max<std::size_t>(1, threads / 4));
}

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

// What each thread of a slot-by-slot threaded add keeps, on cache lines of
// its own: the vectors' headers change with every key sorted, and two
// threads writing one line would pass it back and forth at every write.
template <class Item>
struct alignas(64) PerThread {
    std::vector<std::vector<Item>> to;  // [owner]: this thread's slice, sorted to owners
    std::vector<std::uint8_t> changed;  // as an owner: which keys it changed a slot of
    AddCounts counts;
};

// Threaded adds where every key has one owner (the blocked layout's bits):
// owner(h) names it; add_run(keys, m, answers) adds an owner's keys
// (BatchKeys), in order, on its thread and returns their counts. in_lock(f)
// runs f, which adds a super-chunk and returns its counts, holding the
// filter's writer mutex, and counts them there (so other writers take turns
// chunk by chunk).
//
// Three steps per super-chunk: each thread hashes its slice and sorts the
// hashes themselves to their owners (an owner then reads its keys as a few
// sequential runs, not gathered one by one from other cores' caches); each
// owner adds its keys, run after run (slices in input order); each thread
// writes its slice's answers, key i's answer the next of its owner's (the
// owner noted per key at the sort). The steps are pipelined over three
// chunks, so that one phase (one wait for the slowest thread) does all
// three at once: chunk c + 1 sorted, chunk c added, chunk c - 1 answered.
// A thread that ends its share of the memory-bound add early hashes the
// next chunk meanwhile, where three phases a chunk left it waiting at each.
template <class Src, class Owner, class AddRun, class InLock>
void add_by_key_owner(Src& src, std::size_t n, bool* out, unsigned threads, Owner&& owner, AddRun&& add_run,
                      InLock&& in_lock) {
    constexpr unsigned kSets = 3;        // chunks in flight: sorted, added, answered
    constexpr std::size_t kGroup = 1024;  // keys hashed at a time into a thread's own buffer (16 KB)
    const std::size_t keys_per_chunk = parallel_chunk(threads);
    const std::size_t chunks = (n + keys_per_chunk - 1) / keys_per_chunk;
    const auto chunk_size = [&](std::size_t c) { return std::min(keys_per_chunk, n - c * keys_per_chunk); };
    struct alignas(64) Mine {
        std::vector<std::vector<Hash128>> to[kSets];  // [set][owner]: this thread's slice, sorted to owners
        std::vector<std::uint16_t> owner_of[kSets];   // [set]: each key of this thread's slice, its owner
        std::unique_ptr<bool[]> answers[kSets];       // [set], as an owner: its keys' answers, in order
        std::size_t answer_room[kSets] = {};
        AddCounts counts[kSets];                      // [set], as an owner: its add's counts
        std::vector<Hash128> hashed;                  // a group of this thread's keys, hashed
    };
    static_assert(kMaxThreads <= 65536, "an owner must fit in 16 bits");
    std::vector<Mine> per(threads);
    for (auto& p : per)
        for (auto& to : p.to) to.resize(threads);

    auto sort_to_owners = [&](std::size_t c, unsigned t) {
        Mine& me = per[t];
        const std::size_t set = c % kSets;
        const std::size_t start = c * keys_per_chunk, m = chunk_size(c);
        const std::size_t lo = part_begin(m, threads, t), hi = part_begin(m, threads, t + 1);
        auto& to = me.to[set];
        for (auto& v : to) v.clear();
        auto& owner_of = me.owner_of[set];
        owner_of.resize(hi - lo);
        for (std::size_t g = lo; g < hi; g += kGroup) {
            const std::size_t count = std::min(kGroup, hi - g);
            const Hash128* h;
            if constexpr (has_in_place<Src>::value) {
                h = src.in_place(start + g);
            } else {
                me.hashed.resize(kGroup);
                hash_range(src, start + g, count, me.hashed.data());
                h = me.hashed.data();
            }
            for (std::size_t i = 0; i < count; ++i) {
                const unsigned o = owner(h[i]);
                owner_of[g - lo + i] = static_cast<std::uint16_t>(o);
                to[o].push_back(h[i]);
            }
        }
    };
    auto add_owned = [&](std::size_t c, unsigned o) {
        Mine& me = per[o];
        const std::size_t set = c % kSets;
        std::size_t total = 0;
        for (unsigned t = 0; t < threads; ++t) total += per[t].to[set][o].size();
        if (out && me.answer_room[set] < total) {
            me.answers[set].reset(new bool[total]);
            me.answer_room[set] = total;
        }
        AddCounts counts;
        std::size_t done = 0;
        for (unsigned t = 0; t < threads; ++t) {
            const std::vector<Hash128>& run = per[t].to[set][o];
            if (run.empty()) continue;
            counts += add_run(BatchKeys{run.data(), {}}, run.size(), out ? me.answers[set].get() + done : nullptr);
            done += run.size();
        }
        me.counts[set] = counts;
    };
    auto answer = [&](std::size_t c, unsigned t) {
        const std::size_t set = c % kSets;
        const std::size_t start = c * keys_per_chunk, m = chunk_size(c);
        std::vector<std::size_t> next(threads, 0);  // [owner]: slice t's next answer in its answers
        for (unsigned o = 0; o < threads; ++o)
            for (unsigned before = 0; before < t; ++before) next[o] += per[before].to[set][o].size();
        const std::uint16_t* owner_of = per[t].owner_of[set].data();
        for (std::size_t i = part_begin(m, threads, t), hi = part_begin(m, threads, t + 1), j = 0; i < hi; ++i, ++j) {
            const unsigned o = owner_of[j];
            out[start + i] = per[o].answers[set][next[o]++];
        }
    };

    Team team(threads);
    // Phase p: chunk p sorted, chunk p - 1 added, chunk p - 2 answered.
    const std::size_t phases = chunks + (out ? 2 : 1);
    for (std::size_t p = 0; p < phases; ++p) {
        const bool adds = p >= 1 && p - 1 < chunks;
        auto phase = [&](unsigned t) {
            if (adds) add_owned(p - 1, t);
            if (p < chunks) sort_to_owners(p, t);
            if (out && p >= 2) answer(p - 2, t);
        };
        if (!adds) {
            team.run(phase);
            continue;
        }
        // An exception (from hashing the next chunk) still counts the chunk
        // whose add ended in the phase; it is rethrown after the count.
        std::exception_ptr failed;
        in_lock([&] {
            const std::size_t set = (p - 1) % kSets;
            for (auto& me : per) me.counts[set] = AddCounts{};
            try {
                team.run(phase);
            } catch (...) {
                failed = std::current_exception();
            }
            AddCounts chunk;
            for (const auto& me : per) chunk += me.counts[set];
            return chunk;
        });
        if (failed) std::rethrow_exception(failed);
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
    Team team(threads);
    for (std::size_t start = 0; start < n; start += kChunk) {
        const std::size_t m = std::min(kChunk, n - start);
        in_lock([&] {
            team.run([&](unsigned t) {
                const Hash128* h = hashes_of_chunk(src, start, m, t, threads, buf);
                auto& to = per[t].to;
                for (auto& v : to) v.clear();
                for (std::size_t i = part_begin(m, threads, t), hi = part_begin(m, threads, t + 1); i < hi; ++i)
                    slots(h[i], [&](std::uint64_t s) { to[owners.of_slot(s)].push_back(s << 16 | i); });
            });
            team.run([&](unsigned o) {
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
            team.run([&](unsigned t) {
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
    f.add_keys_on(src, n, out, std::min(threads, add_team_limit()));
}

}  // namespace bloomline
