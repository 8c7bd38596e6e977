// CountingBloomFilter: the same geometry and index generator as BloomFilter
// (index.hpp), over saturating counters (counters.hpp) instead of bits, so
// keys can be removed. With equal m, k, layout and seed a key's counters sit
// exactly where a BloomFilter puts its bits: to_bloom() is "counter > 0".
//
// Memory is m * counter_bits: 4-bit counters (the default) cost 4x a
// BloomFilter. With 4 bits the chance that a counter saturates is tiny at the
// sizes optimal_params picks (a counter's load is about Poisson(ln 2)); a
// key added many times saturates its own counters, which then stick
// (never decremented), so saturation never causes a false negative. A
// removal of a key that was never added but tests present (a false
// positive) does: it lowers counters other keys share. No filter can tell
// such a key from an added one, so removing only added keys is the caller's
// promise (docs/design/api.md).
//
// Kept on the side, exact: nonzero counters (for approx_count, as bits_set),
// saturated counters, adds that found the key absent.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "bloomline/bloom_filter.hpp"
#include "bloomline/counters.hpp"
#include "bloomline/filter_common.hpp"
#include "bloomline/index.hpp"
#include "bloomline/stream.hpp"

namespace bloomline {

inline void check_counter_bits(unsigned counter_bits) {
    if (counter_bits != 4 && counter_bits != 8 && counter_bits != 16)
        throw std::invalid_argument("counter_bits must be 4, 8 or 16, got " + std::to_string(counter_bits));
}

class CountingBloomFilter : public FilterCommon<CountingBloomFilter> {
public:
    CountingBloomFilter(const Geometry& g, unsigned counter_bits, std::uint64_t capacity, double error_rate)
        : FilterCommon(g, capacity, error_rate, 0) {
        check_counter_bits(counter_bits);
        counters_ = CounterArray::zeroed(g.num_slots, counter_bits);
    }

    // Adopt checked payload memory (bytes or a file map). With count_now
    // false (a mapped file), the nonzero and saturated counts are made on
    // first need, not here, so opening stays constant-time.
    CountingBloomFilter(const Geometry& g, unsigned counter_bits, std::uint64_t capacity, double error_rate,
                        Memory payload, std::uint64_t insert_count, bool count_now = true)
        : FilterCommon(g, capacity, error_rate, insert_count), counters_(std::move(payload), counter_bits) {
        check_counter_bits(counter_bits);
        if (count_now)
            recount();
        else
            counted_ = false;
    }

    std::unique_ptr<CountingBloomFilter> copy() const {
        check_open();
        Memory mem = Memory::zeroed(counters_.nbytes());
        std::memcpy(mem.data, counters_.bytes(), counters_.nbytes());
        return std::make_unique<CountingBloomFilter>(geo_, counters_.counter_bits(), capacity_, error_rate_,
                                                     std::move(mem), insert_count());
    }

    // ---- single keys -------------------------------------------------
    // True when the key was absent before (some counter was 0).
    bool add(const Hash128& h) {
        check_write();
        std::lock_guard<WriterMutex> lock(writer_);
        check_write();
        ensure_counted();
        return add_one(SlotsOfHash{geo_, h});
    }

    // Remove one occurrence. False (and nothing changed) when the key is
    // certainly absent. A removal that takes the key out (one of its
    // counters reaches 0) lowers insert_count, as an add that finds it
    // absent raises it: insert_count stays the keys present, not the adds.
    bool remove(const Hash128& h) {
        check_write();
        std::lock_guard<WriterMutex> lock(writer_);
        check_write();
        ensure_counted();
        return remove_one(SlotsOfHash{geo_, h});
    }

    bool contains(const Hash128& h) const { return count(h) > 0; }

    // The smallest of the key's counters: an upper bound on how many times it
    // was added (minus removed), unless a counter saturated.
    std::uint32_t count(const Hash128& h) const {
        check_open();
        return min_count(SlotsOfHash{geo_, h});
    }

    // ---- batches (same shape as BloomFilter's) ------------------------
    template <class Src>
    void add_keys(Src& src, std::size_t n, bool* out) {
        write_keys(src, n, out, [this](const KeptSlots& s) { return add_one(s); });
    }
    template <class Src>
    void remove_keys(Src& src, std::size_t n, bool* out) {
        write_keys(src, n, out, [this](const KeptSlots& s) { return remove_one(s); });
    }
    template <class Src>
    void contains_keys(Src& src, std::size_t lo, std::size_t n, bool* out) const {
        check_open();
        slot_stream<false>(src, lo, n, [&](const std::uint64_t* s, unsigned k, std::size_t i) {
            out[i] = min_count(KeptSlots{s, k}) > 0;
        });
    }
    template <class Src>
    void count_keys(Src& src, std::size_t lo, std::size_t n, std::uint32_t* out) const {
        check_open();
        slot_stream<false>(src, lo, n, [&](const std::uint64_t* s, unsigned k, std::size_t i) {
            out[i] = min_count(KeptSlots{s, k});
        });
    }

    // ---- whole filter ----------------------------------------------------
    // The union of two multisets: the saturating sum of counters (caller
    // checks compatibility). insert_count counts keys present, not adds, and
    // the keys both hold would count twice: it becomes the estimate from the
    // counters, as BloomFilter's | has it (a union with an empty filter is a
    // copy, whose count is kept exactly; count_combined says how memory
    // other writers share is counted).
    void union_with(const CountingBloomFilter& o) {
        check_write();
        o.check_open();
        const bool other_empty = o.nonzero_counters() == 0;  // (before the lock: o may be this filter)
        const std::uint64_t other_count = o.insert_count();
        std::lock_guard<WriterMutex> lock(writer_);
        ensure_counted();
        if (shared_) recount();  // (other writers' counters since this handle last counted: not this union's)
        const bool this_empty = nonzero_.load(std::memory_order_relaxed) == 0;
        const double before = approx_count();
        const std::uint32_t mx = counters_.max_value();
        for (std::uint64_t i = 0; i < geo_.num_slots; ++i) {
            const std::uint32_t s = counters_.get(i) + o.counters_.get(i);
            counters_.put(i, s < mx ? s : mx);
        }
        recount();
        if (this_empty && !shared_)
            insert_count_ = other_count;
        else if (!other_empty)
            count_combined(before, approx_count(), std::max(insert_count(), other_count));
    }

    // The intersection of two multisets: the smaller counter of each slot
    // (caller checks compatibility). A counter saturated in both stays
    // saturated. How many keys it holds is unknown, and its counters say
    // more than it holds (a counter raised by one key here and another
    // there survives): insert_count becomes the estimate from both filters
    // and their union, as BloomFilter's & has it.
    void intersect_with(const CountingBloomFilter& o) {
        check_write();
        o.check_open();
        std::lock_guard<WriterMutex> lock(writer_);
        ensure_counted();
        if (shared_) recount();  // (as union_with)
        const double before = approx_count();
        std::uint64_t other = 0, either = 0;
        for (std::uint64_t i = 0; i < geo_.num_slots; ++i) {
            const std::uint32_t a = counters_.get(i), b = o.counters_.get(i);
            other += b != 0;
            either += (a | b) != 0;
            if (b < a) counters_.put(i, b);
        }
        recount();
        const auto est = [this](std::uint64_t n) { return estimate_count(n, geo_.num_slots, geo_.num_hashes, geo_.layout); };
        count_combined(before, intersection_count(approx_count(), before, est(other), est(either)),
                       std::min(insert_count(), o.insert_count()));
    }

    // Counters above zero in either filter (caller checks compatibility):
    // the union's fill, counted without making it (sizing.hpp's estimates).
    std::uint64_t nonzero_in_union(const CountingBloomFilter& o) const {
        check_open();
        o.check_open();
        std::uint64_t n = 0;
        for (std::uint64_t i = 0; i < geo_.num_slots; ++i) n += (counters_.get(i) | o.counters_.get(i)) != 0;
        return n;
    }

    // The BloomFilter of the same keys: bit i set where counter i > 0.
    std::unique_ptr<BloomFilter> to_bloom() const {
        check_open();
        Memory mem = Memory::zeroed(payload_bytes(geo_.num_slots, 1));
        for (std::uint64_t i = 0; i < geo_.num_slots; ++i)
            if (counters_.get(i) != 0) mem.data[i >> 3] = static_cast<unsigned char>(mem.data[i >> 3] | (1u << (i & 7)));
        return std::make_unique<BloomFilter>(geo_, capacity_, error_rate_, std::move(mem), insert_count());
    }

    // Whether no counter here is above o's (caller checks compatibility):
    // every key counts no more here than there.
    bool within(const CountingBloomFilter& o) const {
        check_open();
        o.check_open();
        for (std::uint64_t i = 0; i < geo_.num_slots; ++i)
            if (counters_.get(i) > o.counters_.get(i)) return false;
        return true;
    }

    bool same_content(const CountingBloomFilter& o) const {
        return std::memcmp(counters_.bytes(), o.counters_.bytes(), counters_.nbytes()) == 0;
    }

    void clear() {
        check_write();
        std::lock_guard<WriterMutex> lock(writer_);
        ensure_counted();
        counters_.clear();
        nonzero_ = 0;
        saturated_ = 0;
        insert_count_ = 0;
    }

    // Adds of keys [0, n) on `threads` threads, with the answers, counters
    // and counts of add_keys on one (parallel.hpp says why): each counter is
    // stepped by the thread that owns it, keys in input order.
    template <class Src>
    void add_keys_on(Src& src, std::size_t n, bool* out, unsigned threads) {
        check_write();
        const Geometry g = geo_;
        const Owners owners(threads, g.num_slots);
        const std::uint32_t mx = counters_.max_value();
        std::vector<std::uint64_t> saturated(threads, 0);  // per owner, for the chunk
        add_by_slot_owner(
            src, n, out, threads, owners, [&](const Hash128& h, auto&& f) { for_each_slot(g, h, f); },
            [&](unsigned o, std::uint64_t s) {
                // One counter of add_one, on its owner's thread.
                if (shared_) {
                    const std::uint32_t c = counters_.step(s, +1, mx, mx);
                    saturated[o] += c + 1 == mx;
                    return c == 0;
                }
                const std::uint32_t c = counters_.get(s);
                if (c < mx) {
                    counters_.put(s, c + 1);
                    saturated[o] += c + 1 == mx;
                }
                return c == 0;
            },
            [&](std::uint64_t s) { return static_cast<const void*>(counters_.address_of(s)); },
            [&](auto&& add_chunk) {
                std::lock_guard<WriterMutex> lock(writer_);
                check_write();
                ensure_counted();
                std::fill(saturated.begin(), saturated.end(), 0);
                const AddCounts c = add_chunk();  // bits: counters that were 0
                std::uint64_t sat = 0;
                for (std::uint64_t v : saturated) sat += v;
                nonzero_.store(nonzero_.load(std::memory_order_relaxed) + c.bits, std::memory_order_relaxed);
                saturated_.store(saturated_.load(std::memory_order_relaxed) + sat, std::memory_order_relaxed);
                count_inserts(c.keys);
            });
    }

    // ---- facts -------------------------------------------------------------
    unsigned counter_bits() const { return counters_.counter_bits(); }
    std::uint64_t nonzero_counters() const {
        const_cast<CountingBloomFilter*>(this)->ensure_counted_locked();
        return nonzero_.load(std::memory_order_relaxed);
    }
    std::uint64_t saturated_counters() const {
        const_cast<CountingBloomFilter*>(this)->ensure_counted_locked();
        return saturated_.load(std::memory_order_relaxed);
    }
    double approx_count() const {
        return estimate_count(nonzero_counters(), geo_.num_slots, geo_.num_hashes, geo_.layout);
    }
    const CounterArray& counters() const { return counters_; }
    // Writer mutex held: count the nonzero (and saturated) counters anew.
    std::uint64_t recount_fill_locked() {
        recount();
        counted_ = true;
        return nonzero_.load(std::memory_order_relaxed);
    }

    // The line slot s is in (the slot stream's prefetch).
    const void* slot_address(std::uint64_t s) const { return counters_.address_of(s); }

private:
    friend class FilterCommon<CountingBloomFilter>;

    template <class Slots>
    std::uint32_t min_count(const Slots& slots) const {
        std::uint32_t m = counters_.max_value();
        slots.each([&](std::uint64_t s) {
            const std::uint32_t c = counters_.get(s);
            m = c < m ? c : m;
        });
        return m;
    }

    // Batch adds or removes: op(h) per key under the writer mutex, by chunks.
    template <class Src, class Op>
    void write_keys(Src& src, std::size_t n, bool* out, Op&& op) {
        locked_chunks(n, [&](std::size_t start, std::size_t m) {
            ensure_counted();
            slot_stream<true>(src, start, m, [&](const std::uint64_t* s, unsigned k, std::size_t i) {
                const bool r = op(KeptSlots{s, k});
                if (out) out[start + i] = r;
            });
        });
    }

    // Writer mutex held. With shared memory each counter takes one atomic
    // step (counters.hpp), so another process's concurrent step is not lost.
    template <class Slots>
    bool add_one(const Slots& slots) {
        const std::uint32_t mx = counters_.max_value();
        bool was_absent = false;
        std::int64_t nonzero = 0, saturated = 0;
        slots.each([&](std::uint64_t s) {
            if (shared_) {
                const std::uint32_t c = counters_.step(s, +1, mx, mx);
                was_absent = was_absent || c == 0;
                nonzero += c == 0;
                saturated += c + 1 == mx;
                return;
            }
            const std::uint32_t c = counters_.get(s);
            if (c == 0) {
                was_absent = true;
                ++nonzero;
            }
            if (c < mx) {
                counters_.put(s, c + 1);
                saturated += (c + 1 == mx);
            }
        });
        nonzero_.store(nonzero_.load(std::memory_order_relaxed) + nonzero, std::memory_order_relaxed);
        saturated_.store(saturated_.load(std::memory_order_relaxed) + saturated, std::memory_order_relaxed);
        if (was_absent) count_inserts(1);
        return was_absent;
    }

    template <class Slots>
    bool remove_one(const Slots& slots) {
        if (min_count(slots) == 0) return false;
        const std::uint32_t mx = counters_.max_value();
        std::int64_t zeroed = 0;
        slots.each([&](std::uint64_t s) {
            if (shared_) {
                // Saturated counters stick; a counter another writer took to
                // 0 meanwhile stays 0.
                const std::uint32_t c = counters_.step(s, -1, 0, mx);
                zeroed += c == 1;
                return;
            }
            const std::uint32_t c = counters_.get(s);
            if (c == 0 || c == mx) return;  // saturated counters stick
            counters_.put(s, c - 1);
            zeroed += (c == 1);
        });
        const std::uint64_t nonzero = nonzero_.load(std::memory_order_relaxed) - zeroed;
        nonzero_.store(nonzero, std::memory_order_relaxed);
        if (zeroed > 0) {  // the key is now absent
            const std::uint64_t n = insert_count_.load(std::memory_order_relaxed);
            // Adds of a false positive raised nothing while their removals
            // may lower it: the count drifts, but a filter whose counters are
            // all 0 holds no key (without other writers to count for).
            insert_count_.store(n > 0 && !(nonzero == 0 && !shared_) ? n - 1 : 0, std::memory_order_relaxed);
        }
        return true;
    }

    // Mapped files count their counters on first need (writer mutex held, or
    // taken here), not at open.
    void ensure_counted() {
        if (!counted_) {
            recount();
            counted_ = true;
        }
    }
    void ensure_counted_locked() {
        if (counted_) return;
        std::lock_guard<WriterMutex> lock(writer_);
        ensure_counted();
    }

    void recount() {
        std::uint64_t nz = 0, sat = 0;
        const std::uint32_t mx = counters_.max_value();
        for (std::uint64_t i = 0; i < geo_.num_slots; ++i) {
            const std::uint32_t c = counters_.get(i);
            nz += c != 0;
            sat += c == mx;
        }
        nonzero_ = nz;
        saturated_ = sat;
    }

    CounterArray counters_;
    std::atomic<std::uint64_t> nonzero_{0};
    std::atomic<std::uint64_t> saturated_{0};
    std::atomic<bool> counted_{true};
};

}  // namespace bloomline
