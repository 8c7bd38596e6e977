// BloomFilter: a geometry (layout, m, k, seed) over a BitArray, working on
// precomputed 128-bit hashes. No Python, no I/O: the bindings turn keys into
// hashes and the format module turns filters into bytes.
//
// Batches run in one pass with a prefetch ring (the standard layout and
// hashes already in memory: index.hpp; blocked lookups and adds of keys
// hashed on the way, which hash inside their loop: block_probe.hpp).
// Measured on the development VM at 124 MB (benchmarks/RESULTS.md, D, each
// repeat paired with a limit-probe run): contains_many of uint64 keys
// 15.3 ns/key and add_many 21.9 ns/key against 10.8 ns for a bare
// prefetched random line read (1.41x [1.05-1.45 over repeats], 1.97x
// [1.49-2.12]; the last four runs 1.33-1.57x and 1.91-2.46x; before the
// blind adds 1.70x and 4.50x). The standard layout pays about k lines: 72
// and 85 ns/key.
//
// Threads: lookups never lock. Writes (add, add_batch, add_keys, clear,
// |=, &=) hold a mutex, taken per chunk (512 hashes, or 2048 keys hashed
// inside the add loop), so writers on several threads take turns. Under
// the mutex a set is a plain load/or/store; see bits.hpp for why that
// beats an atomic per word.
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
#include <vector>

#include "bloomline/bits.hpp"
#include "bloomline/block_probe.hpp"
#include "bloomline/filter_common.hpp"
#include "bloomline/index.hpp"
#include "bloomline/parallel.hpp"

namespace bloomline {

class BloomFilter : public FilterCommon<BloomFilter> {
public:
    // An empty filter. capacity and error_rate are the targets it was sized
    // for (0 when built from explicit num_bits/num_hashes).
    BloomFilter(const Geometry& g, std::uint64_t capacity, double error_rate)
        : FilterCommon(g, capacity, error_rate, 0, {}), bits_(BitArray::zeroed(g.num_slots)) {}

    // Adopt existing payload memory (read from bytes, or a file map); its
    // size must already have been checked. bits_set is counted unless known
    // (a mapped open must not touch every page).
    BloomFilter(const Geometry& g, std::uint64_t capacity, double error_rate, Memory payload,
                std::uint64_t insert_count, std::uint64_t known_bits_set = kUnknown, Backing backing = {})
        : FilterCommon(g, capacity, error_rate, insert_count, std::move(backing)), bits_(std::move(payload)) {
        bits_set_ = known_bits_set == kUnknown ? bits_.popcount() : known_bits_set;
    }

    static constexpr std::uint64_t kUnknown = ~std::uint64_t{0};

    std::unique_ptr<BloomFilter> copy() const {
        backing_.check_open();
        Memory mem = Memory::zeroed(bits_.nbytes());
        std::memcpy(mem.data, bits_.bytes(), bits_.nbytes());
        return std::make_unique<BloomFilter>(geo_, capacity_, error_rate_, std::move(mem), insert_count());
    }

    // ---- single keys -------------------------------------------------
    bool add(const Hash128& h) {
        backing_.check_write();
        std::lock_guard<std::mutex> lock(writer_);
        const unsigned changed = add_one(h);
        if (changed == 0) return false;
        bump(changed, 1);
        return true;
    }

    bool contains(const Hash128& h) const {
        backing_.check_open();
        return probe(h);
    }

    // ---- batches: out[i] (may be null for adds) gets the answer for hashes[i]
    // add_batch: out[i] is true when key i changed a bit, i.e. was new; a key
    // repeated later in the same batch finds its bits set and gets false.
    std::size_t add_batch(const Hash128* hashes, std::size_t n, bool* out) {
        return locked_batch(n, [&](Tally& tally) { add_run(hashes, n, tally, MarkNew{out}, look_first_); });
    }

    // add_batch on several threads (parallel.hpp): hash_at(i) gives key i's
    // hash and is called from every thread. The blocked layout splits the
    // adds by block range; the result equals add_batch's exactly. Other
    // layouts hash in parallel and add on this thread (add_parallel_hashing,
    // as the counting filter does).
    //
    // Nothing a thread writes per key shares a cache line with another
    // thread's writes: tallies are summed in locals, and each thread marks
    // its new keys in its own byte array, merged into `out` by output slice
    // afterwards. (Writing `out` and shared tallies directly made two
    // threads slower than one: every line of `out` holds keys of both.)
    template <class HashAt>
    void add_parallel(HashAt& hash_at, std::size_t n, bool* out, unsigned threads) {
        if (geo_.layout != Layout::blocked) return add_parallel_hashing(*this, hash_at, n, out, threads);
        locked_batch(n, [&](Tally& total) {
            const Geometry g = geo_;
            const bool look_first = look_first_;
            struct alignas(64) Part {  // one cache line apart: push_back writes each vector's end pointer
                Tally tally;
                std::vector<Hash128> mine;
                std::vector<std::uint32_t> where;
                std::vector<unsigned char> fresh;  // 1 where this part found key i new
            };
            std::vector<Part> parts(threads);
            for_each_hashed_chunk(hash_at, n, threads, [&](const Hash128* buf, std::size_t m, std::size_t start) {
                run_on_threads(threads, [&](unsigned t) {
                    Part& part = parts[t];
                    const std::uint64_t lo = part_begin(g.num_blocks(), threads, t);
                    const std::uint64_t hi = part_begin(g.num_blocks(), threads, t + 1);
                    part.mine.clear();
                    part.where.clear();
                    part.fresh.assign(m, 0);
                    for (std::size_t i = 0; i < m; ++i) {
                        const std::uint64_t b = block_of(g, buf[i]);
                        if (b >= lo && b < hi) {
                            part.mine.push_back(buf[i]);
                            part.where.push_back(static_cast<std::uint32_t>(i));
                        }
                    }
                    const std::uint32_t* where = part.where.data();
                    unsigned char* fresh = part.fresh.data();
                    add_run(part.mine.data(), part.mine.size(), part.tally,
                            [where, fresh](std::size_t j, bool is_new) { fresh[where[j]] = is_new; }, look_first);
                });
                if (!out) return;
                run_on_threads(threads, [&](unsigned t) {
                    for (std::size_t i = part_begin(m, threads, t), e = part_begin(m, threads, t + 1); i < e; ++i) {
                        unsigned char any = 0;
                        for (const Part& part : parts) any |= part.fresh[i];
                        out[start + i] = any != 0;
                    }
                });
            });
            for (const Part& part : parts) total += part.tally;
        });
    }

    void contains_batch(const Hash128* hashes, std::size_t n, bool* out) const {
        backing_.check_open();
        const Geometry g = geo_;
        const std::uint64_t* const words = bits_.words();
        if (g.layout == Layout::blocked)
            return contains_blocked_many(words, g.num_blocks(), g.num_hashes, hashes, n, out);
        pipelined<false>(
            g, hashes, n, [words](std::uint64_t slot) { return words + (slot >> 6); },
            [&, g, words](std::size_t i) { out[i] = probe_at(g, words, hashes[i]); });
    }

    // contains_batch for keys [lo, hi) of a key source (parallel.hpp). The
    // blocked layout hashes them inside its lookup loop (block_probe.hpp),
    // so the memory of earlier keys is fetched while later ones are hashed;
    // hashes already in memory (lists) are looked up where they are.
    template <class HashAt>
    void contains_keys(HashAt& hash_at, std::size_t lo, std::size_t hi, bool* out) const {
        if (geo_.layout != Layout::blocked) return FilterCommon::contains_keys(hash_at, lo, hi, out);
        if constexpr (has_in_place<HashAt>::value) return contains_batch(hash_at.in_place(lo), hi - lo, out + lo);
        backing_.check_open();
        KeysFrom<HashAt> keys{&hash_at, lo};
        contains_blocked_stream(bits_.words(), geo_.num_blocks(), geo_.num_hashes, keys.hasher(), hi - lo, out + lo);
    }

    // add_batch for keys [0, n) of a key source, one thread. The blocked
    // layout hashes them inside its add loop (block_probe.hpp, the stream),
    // kStreamChunk keys per hold of the writer mutex; hashes already in
    // memory (lists) go through add_batch.
    template <class HashAt>
    void add_keys(HashAt& hash_at, std::size_t n, bool* out) {
        if constexpr (has_in_place<HashAt>::value) return FilterCommon::add_keys(hash_at, n, out);
        if (geo_.layout != Layout::blocked) return FilterCommon::add_keys(hash_at, n, out);
        constexpr std::size_t kStreamChunk = 2048;
        for (std::size_t start = 0; start < n; start += kStreamChunk) {
            const std::size_t m = std::min(kStreamChunk, n - start);
            locked_batch(m, [&](Tally& tally) {
                const KeysFrom<HashAt> keys{&hash_at, start};
                RingOfHashes src{keys.hasher(), {}};
                std::uint64_t* const words = bits_.words();
                const std::uint64_t num_blocks = geo_.num_blocks();
                const MarkNew mark{out ? out + start : nullptr};
                with_adder(look_first_, [&](const auto adder) {
                    auto use = [&](const Hash128* h, std::size_t cnt, std::size_t first) {
                        // Locals, so that the stores to the bits cannot be
                        // thought to change them (see add_run).
                        const auto add = adder;
                        const MarkNew mk = mark;
                        Tally group;
                        add.run(h, cnt, [&](std::size_t i, unsigned changed) { mk(first + i, group.count(changed)); });
                        tally += group;
                    };
                    stream_blocks<true>(words, num_blocks, src, m, use);
                });
            });
        }
    }

    // ---- whole-filter operations (caller checks compatibility) -------
    void union_with(const BloomFilter& o) { combine(o, [](std::uint64_t a, std::uint64_t b) { return a | b; }); }
    void intersect_with(const BloomFilter& o) {
        combine(o, [](std::uint64_t a, std::uint64_t b) { return a & b; });
    }
    bool same_content(const BloomFilter& o) const {
        return std::memcmp(bits_.bytes(), o.bits_.bytes(), bits_.nbytes()) == 0;
    }
    void clear() {
        backing_.check_write();
        std::lock_guard<std::mutex> lock(writer_);
        bits_.clear();
        bits_set_ = 0;
        insert_count_ = 0;
    }

    // ---- facts ---------------------------------------------------------
    std::uint64_t bits_set() const { return bits_set_.load(std::memory_order_relaxed); }
    double approx_count() const { return estimate_count(bits_set(), geo_.num_slots, geo_.num_hashes, geo_.layout); }
    const BitArray& bits() const { return bits_; }

private:
    friend class FilterCommon<BloomFilter>;
    std::uint64_t fill_locked() const { return bits_set(); }

    // Are all of a key's bits set? (No open/closed check: callers make it.)
    bool probe(const Hash128& h) const { return probe_at(geo_, bits_.words(), h); }

    static bool probe_at(const Geometry& g, const std::uint64_t* words, const Hash128& h) {
        if (g.layout == Layout::blocked) return block_has_all(words + block_of(g, h) * kBlockWords, h.h2, g.num_hashes);
        bool all = true;
        for_each_slot(g, h, [&](std::uint64_t s) { all = all && BitArray::test_word_bit(words + (s >> 6), s & 63); });
        return all;
    }

    // Bits changed and keys found new by a run of adds.
    struct Tally {
        std::uint64_t bits = 0;
        std::uint64_t keys = 0;
        // One key's add changed `changed` bits; returns whether it was new.
        bool count(unsigned changed) {
            bits += changed;
            keys += changed != 0;
            return changed != 0;
        }
        Tally& operator+=(const Tally& o) {
            bits += o.bits;
            keys += o.keys;
            return *this;
        }
    };

    // add_batch's answers: out[i] = key i was new (out may be null).
    struct MarkNew {
        bool* out;
        void operator()(std::size_t i, bool is_new) const {
            if (out) out[i] = is_new;
        }
    };

    // The add loop (writer mutex held), for one thread's run of keys:
    // mark(i, was_new) for each, the counts added to `tally`. Geometry,
    // words and counts are locals, not members or references: a store to
    // the bits (a uint64_t) may alias any uint64_t (see bits.hpp).
    //
    // The blocked layout sets a key's bits in one of two forms:
    //  - blind (block_set_all): load, or, store per bit, no branch, with k
    //    unrolled. About twice as fast for new keys (C++ harness, 10M new
    //    keys: 36 against 70 ns/key at 124 MB; block_probe.hpp).
    //  - look first (add_at, BitArray::set_in): a key whose bits are all
    //    set writes nothing, so its cache line, and a mapped file's page,
    //    stays clean; reading the line before the stores costs the time.
    // look_first says which; each batch takes the form its predecessor's
    // keys called for (locked_batch). The answers, bits and counts are
    // the same either way.
    template <class Mark>
    void add_run(const Hash128* hashes, std::size_t n, Tally& tally, Mark mark, bool look_first) {
        const Geometry g = geo_;
        std::uint64_t* const words = bits_.words();
        with_adder(look_first, [&, g, words](const auto adder) {
            Tally run;
            pipelined<true>(
                g, hashes, n, [words](std::uint64_t slot) { return words + (slot >> 6); },
                [&](std::size_t i) { mark(i, run.count(adder(hashes[i]))); });
            tally += run;
        });
    }

    // The two add forms as small values (words, geometry): adder(hash)
    // sets a key's bits and returns how many were clear; adder.run(h, cnt,
    // each) adds keys h[0..cnt) in order and calls each(i, changed) for
    // each. The loops copy them into locals.
    template <std::uint32_t kFixedK>
    struct BlindAdd {
        std::uint64_t* words;
        std::uint64_t num_blocks;
        std::uint32_t k;
        std::uint64_t* block_of_key(const Hash128& h) const {
            return words + block_index(h.h1, num_blocks) * kBlockWords;
        }
        unsigned operator()(const Hash128& h) const { return block_set_all<kFixedK>(block_of_key(h), h.h2, k); }
        // Two keys at a time, their bits interleaved (block_probe.hpp),
        // unless they share a block.
        template <class Each>
        void run(const Hash128* h, std::size_t cnt, Each&& each) const {
            std::size_t i = 0;
            for (; i + 2 <= cnt; i += 2) {
                std::uint64_t* const a = block_of_key(h[i]);
                std::uint64_t* const b = block_of_key(h[i + 1]);
                if (a == b) {
                    each(i, block_set_all<kFixedK>(a, h[i].h2, k));
                    each(i + 1, block_set_all<kFixedK>(b, h[i + 1].h2, k));
                    continue;
                }
                unsigned changed_a = 0, changed_b = 0;
                block_set_all_two<kFixedK>(a, h[i].h2, b, h[i + 1].h2, k, changed_a, changed_b);
                each(i, changed_a);
                each(i + 1, changed_b);
            }
            if (i < cnt) each(i, (*this)(h[i]));
        }
    };
    struct LookFirstAdd {
        Geometry g;
        std::uint64_t* words;
        unsigned operator()(const Hash128& h) const { return add_at(g, words, h); }
        template <class Each>
        void run(const Hash128* h, std::size_t cnt, Each&& each) const {
            for (std::size_t i = 0; i < cnt; ++i) each(i, (*this)(h[i]));
        }
    };

    // loop(adder) with the form look_first asks for (blind only exists for
    // the blocked layout), k unrolled where it can be.
    template <class Loop>
    void with_adder(bool look_first, Loop&& loop) {
        const Geometry g = geo_;
        std::uint64_t* const words = bits_.words();
        if (g.layout == Layout::blocked && !look_first) {
            with_fixed_k(g.num_hashes, [&](auto fixed_k) {
                loop(BlindAdd<decltype(fixed_k)::value>{words, g.num_blocks(), g.num_hashes});
            });
        } else {
            loop(LookFirstAdd{g, words});
        }
    }

    // Keys [lo, ...) of a key source as the KeyHasher of a stream.
    template <class HashAt>
    struct KeysFrom {
        HashAt* keys;
        std::size_t lo;
        KeyHasher hasher() const {
            return {this, [](const void* ctx, std::size_t first, std::size_t m, Hash128* h) {
                        const KeysFrom& r = *static_cast<const KeysFrom*>(ctx);
                        hash_range(*r.keys, r.lo + first, m, h);
                    }};
        }
    };

    // One batch of n keys under the writer mutex: add(tally) adds them and
    // counts into tally; then the filter's counts are bumped and the next
    // batch's add form chosen. Returns the number of new keys.
    //
    // The form: the next batch looks first when most of these keys were
    // known (a deduplicating stream, where clean lines save memory and
    // file writes), and sets blind while at least half are new (a filter
    // being filled).
    template <class Add>
    std::size_t locked_batch(std::size_t n, Add&& add) {
        backing_.check_write();
        std::lock_guard<std::mutex> lock(writer_);
        Tally tally;
        add(tally);
        bump(tally.bits, tally.keys);
        if (n > 0) look_first_ = tally.keys * 2 < n;
        return tally.keys;
    }

    // Under the writer mutex: plain read-then-store, no locked instruction.
    void bump(std::uint64_t bits, std::uint64_t keys) {
        bits_set_.store(bits_set_.load(std::memory_order_relaxed) + bits, std::memory_order_relaxed);
        count_inserts(keys);
    }

    // Sets a key's bits (writer mutex held); returns how many were clear.
    unsigned add_one(const Hash128& h) { return add_at(geo_, bits_.words(), h); }

    static unsigned add_at(const Geometry& g, std::uint64_t* words, const Hash128& h) {
        if (g.layout == Layout::blocked) {
            unsigned offs[kMaxHashes];
            offsets_in_block(g.num_hashes, h.h2, offs);
            return BitArray::set_in(words + block_of(g, h) * kBlockWords, offs, g.num_hashes);
        }
        unsigned changed = 0;
        for_each_slot(g, h, [&](std::uint64_t s) { changed += BitArray::set_word_bit(words + (s >> 6), s & 63); });
        return changed;
    }

    template <class Op>
    void combine(const BloomFilter& o, Op op) {
        backing_.check_write();
        o.backing_.check_open();
        std::lock_guard<std::mutex> lock(writer_);
        std::uint64_t* a = bits_.words();
        const std::uint64_t* b = o.bits_.words();
        std::uint64_t set = 0;
        for (std::size_t i = 0, n = bits_.nbytes() / 8; i < n; ++i) {
            a[i] = op(a[i], b[i]);
            set += popcount64(a[i]);
        }
        bits_set_ = set;
        // After a union or intersection the number of adds is unknown; the
        // estimate from the bits is the best stand-in.
        const double est = approx_count();
        insert_count_ = est < 1e18 ? static_cast<std::uint64_t>(est + 0.5) : 0;
    }

    BitArray bits_;
    std::atomic<std::uint64_t> bits_set_{0};
    bool look_first_ = false;  // the add form for the next batch (writer mutex held)
};

}  // namespace bloomline
