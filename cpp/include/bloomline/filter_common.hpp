// What every filter kind holds besides its storage: the geometry, the targets
// it was sized for, the count of adds that found a key new, the file behind
// its memory (if mapped) and the writer mutex; and what follows from those
// alone: the false-positive rate at the current fill, flush() and close().
// BloomFilter and CountingBloomFilter derive from it (CRTP: each supplies
// approx_count() and fill_locked(), its bits set or nonzero counters).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>

#include "bloomline/index.hpp"
#include "bloomline/mapped.hpp"
#include "bloomline/parallel.hpp"
#include "bloomline/sizing.hpp"

namespace bloomline {

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
    const Backing& backing() const { return backing_; }

    // Lookups of keys [lo, hi) of a key source (parallel.hpp) into out[lo,
    // hi): hashed 512 at a time, each chunk given to contains_batch. A
    // filter with a faster way (BloomFilter's blocked stream) hides this.
    template <class HashAt>
    void contains_keys(HashAt& hash_at, std::size_t lo, std::size_t hi, bool* out) const {
        const Derived& self = *static_cast<const Derived*>(this);
        auto op = [&self](const Hash128* h, std::size_t m, bool* o) { self.contains_batch(h, m, o); };
        hash_chunks(hash_at, lo, hi, out, op);
    }

    // Adds of keys [0, n) of a key source, one thread: hashed 512 at a time,
    // each chunk given to add_batch (which takes the writer mutex, so
    // writers on other threads take turns chunk by chunk). A filter with a
    // faster way (BloomFilter's blocked stream) hides this.
    template <class HashAt>
    void add_keys(HashAt& hash_at, std::size_t n, bool* out) {
        Derived& self = *static_cast<Derived*>(this);
        auto op = [&self](const Hash128* h, std::size_t m, bool* o) { self.add_batch(h, m, o); };
        hash_chunks(hash_at, 0, n, out, op);
    }

    // The false-positive rate the current fill gives (not the design target).
    double expected_fp_rate() const {
        const double n = static_cast<const Derived*>(this)->approx_count();
        if (!(n < 1e300)) return 1.0;
        return false_positive_rate(n, geo_.num_slots, geo_.num_hashes, geo_.layout);
    }

    // Mapped files: header up to date and pages written back; close() also
    // makes the payload checksum current and refuses further use.
    void flush() {
        backing_.check_open();
        std::lock_guard<std::mutex> lock(writer_);
        backing_.flush(insert_count(), static_cast<Derived*>(this)->fill_locked(), false);
    }
    void close() {
        if (backing_.closed) return;
        std::lock_guard<std::mutex> lock(writer_);
        backing_.flush(insert_count(), static_cast<Derived*>(this)->fill_locked(), true);
        backing_.closed = true;
    }

protected:
    FilterCommon(const Geometry& g, std::uint64_t capacity, double error_rate, std::uint64_t insert_count,
                 Backing backing)
        : geo_(g), capacity_(capacity), error_rate_(error_rate), backing_(std::move(backing)) {
        check_geometry(g.num_slots, g.num_hashes, g.layout);
        insert_count_ = insert_count;
    }

    // Writer mutex held: a plain read-then-store, no locked instruction.
    void count_inserts(std::uint64_t keys) {
        insert_count_.store(insert_count_.load(std::memory_order_relaxed) + keys, std::memory_order_relaxed);
    }

    Geometry geo_;
    std::uint64_t capacity_;
    double error_rate_;
    std::atomic<std::uint64_t> insert_count_{0};
    Backing backing_;
    std::mutex writer_;
};

}  // namespace bloomline
