// What every filter kind holds besides its storage: the geometry, the targets
// it was sized for, the count of adds that found a key new, whether it may be
// used and written, and the writer mutex; and what follows from those alone:
// the false-positive rate at the current fill and the batch loop over slots.
// BloomFilter and CountingBloomFilter derive from it (CRTP: each supplies
// approx_count() and slot_address()).
//
// Filters know nothing of files: a mapped file (file.hpp) gives a filter its
// memory and, when it is mapped read-only, makes it read-only here; closing
// the file closes the filter. When other writers may change the memory
// behind the filter's mutex (a file mapped for writing by several handles or
// processes), the filter is told so (share_memory): every write is then an
// atomic read-modify-write, so no writer loses another's bit.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

#include "bloomline/index.hpp"
#include "bloomline/key_source.hpp"
#include "bloomline/memory.hpp"
#include "bloomline/sizing.hpp"
#include "bloomline/stream.hpp"

namespace bloomline {

// What may be done with a filter: everything, lookups only, or nothing
// (closed: its memory may be gone).
enum class Access : std::uint8_t { read_write, read_only, closed };

// Keys per hold of the writer mutex in a batch add: writers on other threads
// take turns chunk by chunk.
constexpr std::size_t kWriterChunk = 2048;

// The writer mutex: one atomic word. Every writer of a filter takes it, on
// whichever thread (a scalar add holding the GIL, a batch add that released
// it, clear, |=, close), so exclusion is std::mutex's. Taken free it costs
// one locked compare-exchange and a plain release store, where std::mutex
// costs two calls into libc and two locked instructions: a scalar add pays
// it on every call (benchmarks/NOTES.md, "Single calls beside abloom").
// Held, it is held for at most one batch chunk, so a waiter spins a little,
// then yields, then naps.
//
// A batch add lets go between chunks and takes it again at once, before a
// napping waiter wakes: alone that would keep a scalar add (which waits with
// the GIL held, so every Python thread with it) or a clear() waiting for the
// whole batch. So a waiter says it waits (`wanted_`), and a taker that finds
// others waiting makes way first, for a bounded time (kMakeWay): turns go
// chunk by chunk, as they should.
//
// The word holds its holder's fork generation (memory.hpp). A fork while
// another thread holds it (a batch add with the GIL released) leaves it held
// in the child, where that thread does not exist and would never let go: a
// taker of a later generation takes it over. The child's copy of the filter
// then has that chunk's bits in part and its counts without them, as if the
// chunk had been cut short; the parent's add goes on in the parent. Waiters
// are counted per generation too: a child never makes way for its parent's.
class WriterMutex {
public:
    WriterMutex() { (void)fork_generation(); }  // (forks are counted from the first filter on)
    void lock() {
        const std::uint32_t me = mark();
        if (__builtin_expect(others_wait(me), 0)) make_way(me);
        std::uint32_t free = 0;
        if (held_.compare_exchange_strong(free, me, std::memory_order_acquire, std::memory_order_relaxed)) return;
        wait_and_lock(me);
    }
    bool try_lock() { return try_lock_as(mark()); }
    void unlock() { held_.store(0, std::memory_order_release); }

private:
    static constexpr std::chrono::microseconds kMakeWay{2000};  // (a waiter naps 20 us: it wakes well within)

    // A holder's word: odd, so never 0 (free), and one per fork generation.
    static std::uint32_t mark() {
        return fork_generation_counter().load(std::memory_order_relaxed) * 2u + 1u;
    }
    // Free, or held by a thread of an ancestor process (a fork since): take it.
    bool try_lock_as(std::uint32_t me) {
        std::uint32_t seen = held_.load(std::memory_order_relaxed);
        return seen != me && held_.compare_exchange_strong(seen, me, std::memory_order_acquire, std::memory_order_relaxed);
    }
    // wanted_: the waiters' generation mark (high half) and their number.
    bool others_wait(std::uint32_t me) const {
        const std::uint64_t w = wanted_.load(std::memory_order_relaxed);
        return (w >> 32) == me && (w & 0xffffffffu) != 0;
    }
    void count_waiter(std::uint32_t me, bool in) {
        std::uint64_t w = wanted_.load(std::memory_order_relaxed);
        for (;;) {
            const std::uint64_t n = (w >> 32) == me ? (w & 0xffffffffu) : 0;  // (a parent's waiters are gone)
            const std::uint64_t next = (std::uint64_t{me} << 32) | (in ? n + 1 : (n ? n - 1 : 0));
            if (wanted_.compare_exchange_weak(w, next, std::memory_order_relaxed)) return;
        }
    }
    // Until the waiters have had their turn, or kMakeWay has passed. (The
    // slow paths out of line: lock() is on every scalar add.)
    __attribute__((noinline, cold)) void make_way(std::uint32_t me) {
        const auto until = std::chrono::steady_clock::now() + kMakeWay;
        for (unsigned spins = 0; others_wait(me); ++spins) {
            if (spins < 64) {
                cpu_relax();
                continue;
            }
            if (std::chrono::steady_clock::now() > until) return;
            std::this_thread::yield();
        }
    }
    __attribute__((noinline, cold)) void wait_and_lock(std::uint32_t me) {
        count_waiter(me, true);
        for (unsigned spins = 0;; ++spins) {
            if (try_lock_as(me)) break;
            if (spins < 64) {
                cpu_relax();
            } else if (spins < 128) {
                std::this_thread::yield();
            } else {
                std::this_thread::sleep_for(std::chrono::microseconds(20));
            }
        }
        count_waiter(me, false);
    }
    std::atomic<std::uint32_t> held_{0};
    std::atomic<std::uint64_t> wanted_{0};
};

template <class Derived>
class FilterCommon {
public:
    FilterCommon(const FilterCommon&) = delete;
    FilterCommon& operator=(const FilterCommon&) = delete;

    const Geometry& geometry() const { return geo_; }
    // The targets it was sized for (0 when built from explicit m and k).
    std::uint64_t capacity() const { return capacity_; }
    double error_rate() const { return error_rate_; }
    // Adds that found the key new.
    std::uint64_t insert_count() const { return insert_count_.load(std::memory_order_relaxed); }
    // The count a container's record holds for this filter, where its own
    // header's may be stale (a windowed ring file's place: that header is
    // rewritten only at the last writer's close, not when the place restarts).
    void take_count(std::uint64_t n) { insert_count_.store(n, std::memory_order_relaxed); }

    Access access() const { return access_.load(std::memory_order_relaxed); }
    void check_open() const {
        if (access() == Access::closed) throw std::invalid_argument("I/O operation on a closed filter");
    }
    void check_write() const {
        check_open();
        if (access() == Access::read_only) throw std::invalid_argument("the filter is read-only (" + read_only_why_ + ")");
        if (shared_ && owner_generation_ != fork_generation())
            throw std::invalid_argument(
                "this filter's memory was opened for writing by a parent of this process, before a fork: a child "
                "must not write through its parent's handle; open the file again in this process with "
                "open(path, 'r+')");
    }
    // Lookups only from now on; `why` says so in the error of a write.
    void set_read_only(std::string why) {
        std::lock_guard<WriterMutex> lock(writer_);
        read_only_why_ = std::move(why);
        access_ = Access::read_only;
    }

    // Other writers may change this memory without our mutex: writes become
    // atomic read-modify-writes, and the counts of set slots cover this
    // filter's own changes plus what was there at the last recount().
    void share_memory() {
        std::lock_guard<WriterMutex> lock(writer_);
        shared_ = true;
        owner_generation_ = fork_generation();
    }
    bool shared_memory() const { return shared_; }

    // f() under the writer mutex (no add of this filter runs meanwhile).
    template <class F>
    void locked(F&& f) {
        std::lock_guard<WriterMutex> lock(writer_);
        f();
    }
    // f() under the writer mutex, for a reader that must not see an add of
    // this filter half done (an export's copy of the payload).
    template <class F>
    void read_locked(F&& f) const {
        std::lock_guard<WriterMutex> lock(writer_);
        f();
    }
    // Under the writer mutex: refuse all further use.
    void close_locked() { access_ = Access::closed; }

    // The false-positive rate the current fill gives (not the design target).
    double expected_fp_rate() const {
        const double n = static_cast<const Derived*>(this)->approx_count();
        if (!(n < 1e300)) return 1.0;
        return expected_rate(n, geo_.num_slots, geo_.num_hashes, geo_.layout);
    }

protected:
    FilterCommon(const Geometry& g, std::uint64_t capacity, double error_rate, std::uint64_t insert_count)
        : geo_(g), capacity_(capacity), error_rate_(error_rate) {
        check_geometry(g.num_slots, g.num_hashes, g.layout);
        insert_count_ = insert_count;
    }

    // Writer mutex held: a plain read-then-store, no locked instruction.
    // Held at kMaxCount, what a reader takes (never wrapped, never a file
    // that does not load).
    void count_inserts(std::uint64_t keys) {
        const std::uint64_t n = insert_count_.load(std::memory_order_relaxed);
        insert_count_.store(std::min(kMaxCount, n + std::min(kMaxCount, keys)), std::memory_order_relaxed);
    }

    // The count after a union or intersection, whose adds are unknown: the
    // estimate `after` (of the keys it now holds) stands in. Memory that other
    // writers share (a file mapped "r+" by several handles) holds keys they
    // count themselves, at their own flushes: there the count moves by the
    // change of the estimate, `after - before`, so no key counts twice.
    // Writer mutex held.
    // A result with every bit set says nothing of its keys: it keeps
    // `full_count` (the larger of the operands' counts for a union, the
    // smaller for an intersection), not 0, which would call it empty.
    void count_combined(double before, double after, std::uint64_t full_count) {
        if (!shared_) {
            insert_count_.store(after < 1e18 ? estimate_as_count(after) : std::min(kMaxCount, full_count),
                                std::memory_order_relaxed);
            return;
        }
        if (!(before < 1e18) || !(after < 1e18)) return;  // a full filter: nothing to estimate, the count stays
        const double n = static_cast<double>(insert_count_.load(std::memory_order_relaxed)) + (after - before);
        const double cap = static_cast<double>(kMaxCount);
        insert_count_.store(n <= 0 ? 0 : n >= cap ? kMaxCount : static_cast<std::uint64_t>(n + 0.5),
                            std::memory_order_relaxed);
    }

    // The keys an intersection holds: |A| + |B| - |A or B| from the estimates,
    // at most what its own bits say (`fill`, which runs high). A full
    // operand says nothing (every estimate of it infinite): the fill's.
    static double intersection_count(double fill, double a, double b, double a_or_b) {
        if (!(a < 1e300) || !(b < 1e300) || !(a_or_b < 1e300)) return fill;
        return std::min(fill, approx_intersection(a, b, a_or_b));
    }

    // op(slots, count, i) for keys [lo, lo + n) of a source (i counted from
    // lo), through the stream with each key's lines prefetched
    // (Derived::slot_address(slot): the line a slot is in): the batch loop of
    // every filter without a loop of its own. A key's slots are drawn once,
    // when its lines are asked for, and kept in a ring until op uses them.
    template <bool kWrite, class Src, class Op>
    void slot_stream(Src& src, std::size_t lo, std::size_t n, Op&& op) const {
        const Derived& self = *static_cast<const Derived*>(this);
        constexpr std::size_t kRing = 8;  // keys asked for and not yet used: at most ahead + unit
        static_assert(kRing >= LinesPerKey::ahead + LinesPerKey::unit, "the ring holds every key in flight");
        std::uint64_t slots[kRing][kMaxHashes];
        unsigned counts[kRing];
        std::size_t asked = 0;
        auto lines = [&](const Hash128& h, const void** addrs) {
            std::uint64_t* mine = slots[asked % kRing];
            unsigned c = 0;
            for_each_slot(geo_, h, [&](std::uint64_t s) {
                mine[c] = s;
                addrs[c++] = self.slot_address(s);
            });
            counts[asked++ % kRing] = c;
            return c;
        };
        with_batch_keys(src, lo, [&](const BatchKeys& keys) {
            with_stream_source<LinesPerKey>(keys, [&](auto& s) {
                stream<LinesPerKey, kWrite>(s, n, lines, [&](const Hash128*, std::size_t m, std::size_t first) {
                    for (std::size_t i = first; i < first + m; ++i) op(slots[i % kRing], counts[i % kRing], i);
                });
            });
        });
    }

    // Batch adds of n keys in chunks of kWriterChunk, each under the writer
    // mutex: chunk(start, m) adds keys [start, start + m).
    template <class Chunk>
    void locked_chunks(std::size_t n, Chunk&& chunk) {
        check_write();
        for (std::size_t start = 0; start < n; start += kWriterChunk) {
            std::lock_guard<WriterMutex> lock(writer_);
            check_write();  // closed meanwhile?
            chunk(start, std::min(kWriterChunk, n - start));
        }
    }

    Geometry geo_;
    std::uint64_t capacity_;
    double error_rate_;
    std::atomic<std::uint64_t> insert_count_{0};
    std::atomic<Access> access_{Access::read_write};
    std::string read_only_why_;
    bool shared_ = false;  // set under the writer mutex, before any concurrent use
    std::uint32_t owner_generation_ = 0;  // shared memory: the fork_generation() of the process it belongs to
    mutable WriterMutex writer_;
};

}  // namespace bloomline
