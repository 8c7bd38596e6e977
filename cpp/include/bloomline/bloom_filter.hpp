// BloomFilter: a geometry (layout, m, k, seed) over a BitArray, working on
// precomputed 128-bit hashes. No Python, no I/O: the bindings turn keys into
// hashes and the persistence layer (filter_io.hpp) turns filters into bytes.
//
// Batches: every add and lookup of a batch goes through the stream
// (stream.hpp). The blocked layout has compiled loops of its own
// (BlockedLayout::add_batch, contains_batch); the standard layout uses the
// filter's slot stream, which prefetches a key's k lines. How a key's bits
// are found, tested and set is its layout's (layout_blocked.hpp,
// layout_standard.hpp).
//
// Threads: lookups never lock. Writes (add, add_keys, clear, |=, &=) hold a
// mutex, taken per chunk of kWriterChunk keys, so writers on several threads
// take turns. Under the mutex a set is a plain load/or/store (bits.hpp, and
// the layouts).
//
// Counters kept on the side, exact (updated under the writer mutex, read
// without it):
//   bits_set      bits that are 1 (from the old word values, no popcount)
//   insert_count  adds that changed at least one bit ("new" keys)
#pragma once

#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>

#include "bloomline/bits.hpp"
#include "bloomline/filter_common.hpp"
#include "bloomline/index.hpp"
#include "bloomline/layout_blocked.hpp"
#include "bloomline/layout_standard.hpp"
#include "bloomline/parallel.hpp"

namespace bloomline {

class BloomFilter : public FilterCommon<BloomFilter> {
public:
    // An empty filter. capacity and error_rate are the targets it was sized
    // for (0 when built from explicit num_bits/num_hashes).
    BloomFilter(const Geometry& g, std::uint64_t capacity, double error_rate)
        : FilterCommon(g, capacity, error_rate, 0), bits_(BitArray::zeroed(g.num_slots)) {}

    // Adopt existing payload memory (read from bytes, or a file map); its
    // size must already have been checked. bits_set is counted unless known
    // (a mapped open must not touch every page).
    BloomFilter(const Geometry& g, std::uint64_t capacity, double error_rate, Memory payload,
                std::uint64_t insert_count, std::uint64_t known_bits_set = kUnknown)
        : FilterCommon(g, capacity, error_rate, insert_count), bits_(std::move(payload)) {
        bits_set_ = known_bits_set == kUnknown ? bits_.popcount() : known_bits_set;
    }

    static constexpr std::uint64_t kUnknown = ~std::uint64_t{0};

    std::unique_ptr<BloomFilter> copy() const {
        check_open();
        Memory mem = Memory::zeroed(bits_.nbytes());
        std::memcpy(mem.data, bits_.bytes(), bits_.nbytes());
        return std::make_unique<BloomFilter>(geo_, capacity_, error_rate_, std::move(mem), insert_count());
    }

    // ---- single keys -------------------------------------------------
    // Checked under the mutex only: closing or making a filter read-only
    // takes the mutex, so the check there is the one that counts.
    bool add(const Hash128& h) {
        std::lock_guard<WriterMutex> lock(writer_);
        check_write();
        unsigned changed = 0;
        if (geo_.layout == Layout::blocked && !shared_ && scalar_blind_) {
            changed = BlockedLayout::set_blind(BlockedLayout::block_words(bits_.words(), geo_.num_blocks(), h.h1),
                                               h.h2, geo_.num_hashes);
        } else {
            changed = add_at(geo_, bits_.words(), h, shared_);
        }
        // A new key: the next one is likely new too (a filter filling up),
        // and is set blind. A known one: look first, writing nothing, as a
        // deduplicating stream's known keys should (clean lines, clean pages
        // of a mapped file).
        scalar_blind_ = changed != 0;
        if (changed == 0) return false;
        bump({changed, 1});
        return true;
    }
    bool contains(const Hash128& h) const {
        check_open();
        return probe_at(geo_, bits_.words(), h);
    }

    // ---- batches: out[i] gets the answer for key i -------------------
    // Lookups of keys [lo, lo + n) of a source (key_source.hpp) into out[0, n).
    template <class Src>
    void contains_keys(Src& src, std::size_t lo, std::size_t n, bool* out) const {
        check_open();
        const Geometry g = geo_;
        const std::uint64_t* const words = bits_.words();
        if (g.layout == Layout::blocked) {
            with_batch_keys(src, lo, [&](const BatchKeys& keys) {
                BlockedLayout::contains_batch(words, g.num_blocks(), g.num_hashes, keys, n, out);
            });
            return;
        }
        slot_stream<false>(src, lo, n, [&, words](const std::uint64_t* slots, unsigned k, std::size_t i) {
            out[i] = StandardLayout::all_set(words, slots, k);
        });
    }

    // Adds of keys [0, n) of a source, in order; out[i] (out may be null) is
    // true when key i changed a bit, i.e. was new; a key repeated later in
    // the batch finds its bits set and gets false.
    //
    // Each chunk takes the add form (layout_blocked.hpp) its predecessor's keys
    // called for: look first when most of them were known (a deduplicating
    // stream, where clean lines save memory traffic and file writes), blind
    // while at least half are new (a filter being filled).
    template <class Src>
    void add_keys(Src& src, std::size_t n, bool* out) {
        locked_chunks(n, [&](std::size_t start, std::size_t m) {
            const Geometry g = geo_;
            std::uint64_t* const words = bits_.words();
            bool* const o = out ? out + start : nullptr;
            const bool shared = shared_;
            AddCounts counts;
            if (g.layout == Layout::blocked) {
                with_batch_keys(src, start, [&](const BatchKeys& keys) {
                    counts = BlockedLayout::add_batch(words, g.num_blocks(), g.num_hashes, keys, m,
                                                      shared ? AddForm::shared : form_, o);
                });
            } else {
                slot_stream<true>(src, start, m, [&, words, shared](const std::uint64_t* slots, unsigned k,
                                                                        std::size_t i) {
                    const bool is_new = counts.count(StandardLayout::set_slots(words, slots, k, shared));
                    if (o) o[i] = is_new;
                });
            }
            bump(counts);
            form_ = counts.keys * 2 < m ? AddForm::look_first : AddForm::blind;
        });
    }

    // Adds of keys [0, n) of a source on `threads` threads, with the
    // answers, counts and bits of add_keys on one (parallel.hpp says why).
    template <class Src>
    void add_keys_on(Src& src, std::size_t n, bool* out, unsigned threads) {
        check_write();
        const Geometry g = geo_;
        std::uint64_t* const words = bits_.words();
        const Owners owners(threads, g.num_slots);
        // Each super-chunk under the writer mutex, its counts taken there,
        // and the blocked add form for the next chunk chosen as add_keys does.
        auto in_lock = [this, chunk = parallel_chunk(threads)](auto&& add_chunk) {
            std::lock_guard<WriterMutex> lock(writer_);
            check_write();
            const AddCounts c = add_chunk();
            bump(c);
            form_ = c.keys * 2 < chunk ? AddForm::look_first : AddForm::blind;
        };
        if (g.layout == Layout::blocked) {
            const std::uint64_t blocks = g.num_blocks();
            add_by_key_owner(
                src, n, out, threads,
                [&](const Hash128& h) { return owners.of_unit(BlockedLayout::block(h.h1, blocks)); },
                [&](const BatchKeys& keys, std::size_t m, bool* answers) {
                    // The form is read under the mutex, and kept for the chunk.
                    return BlockedLayout::add_batch(words, blocks, g.num_hashes, keys, m,
                                                    shared_ ? AddForm::shared : form_, answers);
                },
                in_lock);
            return;
        }
        const bool shared = shared_;
        add_by_slot_owner(
            src, n, out, threads, owners, [&](const Hash128& h, auto&& f) { for_each_slot(g, h, f); },
            [&](unsigned, std::uint64_t s) { return StandardLayout::set_bit(words, s, shared); },
            [&](std::uint64_t s) { return static_cast<const void*>(words + (s >> 6)); }, in_lock);
    }

    // ---- whole-filter operations (caller checks compatibility) -------
    void union_with(const BloomFilter& o) {
        combine(
            o, true, [](std::uint64_t a, std::uint64_t b) { return a | b; },
            [](std::uint64_t* a, std::uint64_t b) { __atomic_fetch_or(a, b, __ATOMIC_RELAXED); });
    }
    void intersect_with(const BloomFilter& o) {
        combine(
            o, false, [](std::uint64_t a, std::uint64_t b) { return a & b; },
            [](std::uint64_t* a, std::uint64_t b) { __atomic_fetch_and(a, b, __ATOMIC_RELAXED); });
    }
    // Bits set in the union of the two (caller checks compatibility),
    // counted without making it: the union estimates (sizing.hpp).
    std::uint64_t bits_set_in_union(const BloomFilter& o) const {
        check_open();
        o.check_open();
        const std::uint64_t* a = bits_.words();
        const std::uint64_t* b = o.bits_.words();
        std::uint64_t set = 0;
        for (std::size_t i = 0, n = bits_.nbytes() / 8; i < n; ++i) set += popcount64(atomic_load(a + i) | atomic_load(b + i));
        return set;
    }
    // Whether every bit set here is set in o (caller checks compatibility):
    // then every key added here tests present in o.
    bool within(const BloomFilter& o) const {
        check_open();
        o.check_open();
        const std::uint64_t* a = bits_.words();
        const std::uint64_t* b = o.bits_.words();
        for (std::size_t i = 0, n = bits_.nbytes() / 8; i < n; ++i)
            if ((atomic_load(a + i) & ~atomic_load(b + i)) != 0) return false;
        return true;
    }
    bool same_content(const BloomFilter& o) const {
        return std::memcmp(bits_.bytes(), o.bits_.bytes(), bits_.nbytes()) == 0;
    }
    void clear() {
        check_write();
        std::lock_guard<WriterMutex> lock(writer_);
        if (shared_) {
            std::uint64_t* w = bits_.words();
            for (std::size_t i = 0, n = bits_.nbytes() / 8; i < n; ++i) atomic_store(w + i, 0);
        } else {
            bits_.clear();
        }
        bits_set_ = 0;
        insert_count_ = 0;
    }

    // ---- facts ---------------------------------------------------------
    std::uint64_t bits_set() const { return bits_set_.load(std::memory_order_relaxed); }
    double approx_count() const { return estimate_count(bits_set(), geo_.num_slots, geo_.num_hashes, geo_.layout); }
    const BitArray& bits() const { return bits_; }
    // Another handle emptied this memory and started it afresh (a shared
    // windowed file's rotation, window_file.hpp): the bits set counted anew
    // and this filter's count of new keys from zero. The bits are untouched.
    void restart_counts() {
        std::lock_guard<WriterMutex> lock(writer_);
        bits_set_ = bits_.popcount();
        insert_count_ = 0;
    }
    // Writer mutex held: count the bits set anew (other writers' too).
    std::uint64_t recount_fill_locked() {
        bits_set_ = bits_.popcount();
        return bits_set_;
    }

    // The line slot s is in (the slot stream's prefetch), and the lines key h
    // touches (a windowed filter's, window_ring.hpp).
    const void* slot_address(std::uint64_t s) const { return bits_.words() + (s >> 6); }
    unsigned slot_lines(const Hash128& h, const void** addrs) const {
        unsigned n = 0;
        for_each_slot(geo_, h, [&](std::uint64_t s) { addrs[n++] = slot_address(s); });
        return n;
    }

private:
    friend class FilterCommon<BloomFilter>;

    // Are all of a key's bits set?
    static bool probe_at(const Geometry& g, const std::uint64_t* words, const Hash128& h) {
        if (g.layout == Layout::blocked) return BlockedLayout::contains(words, g.num_blocks(), g.num_hashes, h);
        return StandardLayout::contains(words, g.num_slots, g.num_hashes, h, g.layout);
    }

    // Sets a key's bits, looking first (writer mutex held; with shared, each
    // bit by an atomic fetch-or); returns how many were clear.
    static unsigned add_at(const Geometry& g, std::uint64_t* words, const Hash128& h, bool shared) {
        if (g.layout == Layout::blocked) return BlockedLayout::set(words, g.num_blocks(), g.num_hashes, h, shared);
        return StandardLayout::set(words, g.num_slots, g.num_hashes, h, g.layout, shared);
    }

    // Under the writer mutex: plain read-then-store, no locked instruction.
    void bump(const AddCounts& c) {
        bits_set_.store(bits_set_.load(std::memory_order_relaxed) + c.bits, std::memory_order_relaxed);
        count_inserts(c.keys);
    }

    // a = op(a, b) word by word; shared memory takes atomic_op(word*, b's
    // word) instead, so that other writers' bits are kept.
    template <class Op, class AtomicOp>
    void combine(const BloomFilter& o, bool is_union, Op op, AtomicOp atomic_op) {
        check_write();
        o.check_open();
        std::lock_guard<WriterMutex> lock(writer_);
        // A union with an empty filter is a copy of the other: its count is
        // kept exactly (a scalable chain's union adds stages so). Memory
        // other writers share may hold bits this filter has not counted.
        const bool copy_of_other = is_union && !shared_ && bits_set() == 0;
        const bool copy_of_this = is_union && !shared_ && o.bits_set() == 0;
        const std::uint64_t other_count = o.insert_count();
        std::uint64_t* a = bits_.words();
        const std::uint64_t* b = o.bits_.words();
        std::uint64_t set = 0, set_before = 0, set_other = 0, set_either = 0;
        for (std::size_t i = 0, n = bits_.nbytes() / 8; i < n; ++i) {
            const std::uint64_t x = load_le(a + i), y = load_le(b + i);
            set_before += popcount64(x);
            set_other += popcount64(y);
            set_either += popcount64(x | y);
            if (shared_) {
                atomic_op(a + i, atomic_load(b + i));
                set += popcount64(atomic_load(a + i));
                continue;
            }
            const std::uint64_t v = op(x, y);
            atomic_store(a + i, to_le64(v));
            set += popcount64(v);
        }
        bits_set_ = set;
        if (copy_of_other) {
            insert_count_ = other_count;
            return;
        }
        if (copy_of_this) return;
        // Otherwise the number of adds is unknown. A union holds what its
        // bits say; an intersection's bits say more than it holds (a bit
        // set by one key in a and another in b survives the AND), so its
        // count is the estimate from both filters and their union
        // (approx_intersection), as approx_intersection_count gives it.
        const auto est = [this](std::uint64_t bits) {
            return estimate_count(bits, geo_.num_slots, geo_.num_hashes, geo_.layout);
        };
        const double after = is_union ? approx_count()
                                      : intersection_count(approx_count(), est(set_before), est(set_other),
                                                           est(set_either));
        const std::uint64_t mine = insert_count();
        count_combined(est(set_before), after, is_union ? std::max(mine, other_count) : std::min(mine, other_count));
    }

    BitArray bits_;
    std::atomic<std::uint64_t> bits_set_{0};
    AddForm form_ = AddForm::blind;  // the add form for the next chunk (writer mutex held)
    bool scalar_blind_ = true;        // the next single add sets blind (writer mutex held)
};

}  // namespace bloomline
