// The one loop of a windowed filter's lookups and adds (bloomline/windowed.py):
// its live generations are BloomFilters of one geometry, so one hash of a key
// serves them all. A key is hashed once (by the caller); a single key is
// probed in each generation in turn, stopping at the first that has it; a
// batch is probed a generation at a time (contains_batch says why). Adds look
// up in the older generations and add to the current one, in one call.
// Batches and single keys (the scalar `in` and `add`) go through here alike.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <type_traits>
#include <vector>

#include "bloomline/bloom_filter.hpp"
#include "bloomline/key_source.hpp"
#include "bloomline/stream.hpp"

namespace bloomline {

class WindowProbe {
public:
    // gens: the generations probed (any order; the newest first stops
    // earliest on recent keys), all of one geometry; may be empty.
    explicit WindowProbe(std::vector<const BloomFilter*> gens) : gens_(std::move(gens)) {
        for (const BloomFilter* f : gens_) {
            const Geometry& g = f->geometry();
            const Geometry& first = gens_.front()->geometry();
            if (g.layout != first.layout || g.num_slots != first.num_slots || g.num_hashes != first.num_hashes ||
                g.seed != first.seed)
                throw std::invalid_argument("the generations of a window must share one geometry");
        }
    }

    std::size_t size() const { return gens_.size(); }
    const std::vector<const BloomFilter*>& generations() const { return gens_; }

    void check_open() const {
        for (const BloomFilter* f : gens_) f->check_open();
    }

    // Does any generation have the key? (Its line in every generation asked
    // for at once: the probes then wait on about one miss, not one each.)
    bool contains(const Hash128& h) const {
        check_open();
        prefetch(h, nullptr);
        return probe_all(h);
    }

    // out[i] = any generation has key i, for the keys [0, n) with only[i]
    // (every key when only is null); out[i] is false for the others.
    //
    // One generation at a time over the whole batch (each generation's own
    // batch lookup, AVX2 where the CPU has it), then the next over the keys
    // not found yet: a pass keeps one generation's lines in the caches. One
    // pass per key over every generation's lines at once (all prefetched
    // together) was measured 2x slower (benchmarks/NOTES.md): G + 1
    // generations do not fit where one does.
    void contains_batch(const Hash128* hs, std::size_t n, bool* out, const bool* only = nullptr) const {
        check_open();
        std::fill(out, out + n, false);
        if (gens_.empty() || n == 0) return;
        // (bools as bytes 0/1: the loops below are branch-free and vectorise)
        auto* o = reinterpret_cast<unsigned char*>(out);
        const auto* want = reinterpret_cast<const unsigned char*>(only);
        std::unique_ptr<bool[]> got_owner;  // (a whole batch's answers: made when a pass needs them)
        Picker pick(n);
        for (std::size_t l = 0; l < gens_.size(); ++l) {
            // The keys still to probe: all of them (no copy) while most are.
            std::size_t pending = 0;
            if (want == nullptr)
                for (std::size_t i = 0; i < n; ++i) pending += o[i] ^ 1u;
            else
                for (std::size_t i = 0; i < n; ++i) pending += want[i] & (o[i] ^ 1u);
            if (pending == 0) return;
            if (pending * 4 >= n * 3) {
                Prehashed src{hs};
                if (l == 0 && want == nullptr) {
                    gens_[l]->contains_keys(src, 0, n, out);  // (the first pass answers in place)
                    continue;
                }
                if (!got_owner) got_owner.reset(new bool[n]);
                gens_[l]->contains_keys(src, 0, n, got_owner.get());
                const auto* got = reinterpret_cast<const unsigned char*>(got_owner.get());
                if (want == nullptr)
                    for (std::size_t i = 0; i < n; ++i) o[i] |= got[i];
                else
                    for (std::size_t i = 0; i < n; ++i) o[i] |= got[i] & want[i];
                continue;
            }
            pick.each(
                hs, n, [&](std::size_t i) { return !o[i] && (want == nullptr || want[i]); },
                [&](std::size_t k) {
                    Prehashed src{pick.keys()};
                    gens_[l]->contains_keys(src, 0, k, pick.got());
                    for (std::size_t j = 0; j < k; ++j) o[pick.where(j)] = pick.got()[j];
                });
        }
    }

    // Add key h at the current generation cur (not among these, the older
    // ones): true when no generation had it. refresh=false leaves a key an
    // older generation has where it is.
    bool add(BloomFilter& cur, const Hash128& h, bool refresh) const {
        check_compatible(cur);
        check_open();
        prefetch(h, &cur);
        const bool seen = probe_all(h);
        if (seen && !refresh) return false;
        return cur.add(h) && !seen;
    }

    // The same for keys [0, n) in order: out[i] true when key i was new to
    // the window (at its first place in the batch only). With refresh every
    // key goes into cur, and only those new to it are looked up here; else
    // the lookups come first and the keys not seen are added.
    void add_batch(BloomFilter& cur, const Hash128* hs, std::size_t n, bool refresh, bool* out) const {
        check_compatible(cur);
        if (refresh) {
            Prehashed src{hs};
            cur.add_keys(src, n, out);
            if (gens_.empty()) return;
            std::unique_ptr<bool[]> seen(new bool[n]);
            contains_batch(hs, n, seen.get(), out);
            for (std::size_t i = 0; i < n; ++i) out[i] = out[i] && !seen[i];
            return;
        }
        contains_batch(hs, n, out);
        std::size_t seen = 0;
        for (std::size_t i = 0; i < n; ++i) seen += out[i];
        if (seen == 0) {  // all fresh: the batch itself is added, no copy
            Prehashed src{hs};
            cur.add_keys(src, n, out);
            return;
        }
        // The keys not seen, in order, through the picker's buffers.
        Picker pick(n - seen);
        pick.each(
            hs, n,
            [&](std::size_t i) {
                const bool fresh = !out[i];
                out[i] = false;
                return fresh;
            },
            [&](std::size_t k) {
                Prehashed src{pick.keys()};
                cur.add_keys(src, k, pick.got());
                for (std::size_t j = 0; j < k; ++j) out[pick.where(j)] = pick.got()[j];
            });
    }

    // add_batch and contains_batch over a key source (key_source.hpp): the
    // keys hashed a slice at a time into a buffer, so that a long batch
    // holds no array of all its hashes (16 bytes a key); hashes already in
    // memory are used where they lie. A slice's keys all go before the next
    // slice's, so the answers are the whole batch's.
    template <class Src>
    void add_keys(BloomFilter& cur, Src& src, std::size_t n, bool refresh, bool* out) const {
        in_slices(src, n, [&](const Hash128* hs, std::size_t lo, std::size_t m) { add_batch(cur, hs, m, refresh, out + lo); });
    }
    template <class Src>
    void contains_keys(Src& src, std::size_t n, bool* out) const {
        in_slices(src, n, [&](const Hash128* hs, std::size_t lo, std::size_t m) { contains_batch(hs, m, out + lo); });
    }

private:
    // Keys hashed at a time: at most 16 MiB of hashes. A slice is probed one
    // generation at a time, and a long one lets each generation's pass reuse
    // its lines: with 2**16 keys a slice, 1M keys in a ring of nine 1.2 MB
    // generations were looked up 1.6x slower (benchmarks/NOTES.md).
    static constexpr std::size_t kSlice = std::size_t{1} << 20;
    template <class Src, class F>
    static void in_slices(Src& src, std::size_t n, F&& f) {
        if (n == 0) return;
        if constexpr (has_in_place<Src>::value) {
            f(src.in_place(0), 0, n);
        } else {
            std::unique_ptr<Hash128[]> buf(new Hash128[std::min(n, kSlice)]);
            for (std::size_t lo = 0; lo < n; lo += kSlice) {
                const std::size_t m = std::min(kSlice, n - lo);
                hash_range(src, lo, m, buf.get());
                f(buf.get(), lo, m);
            }
        }
    }

    // Some keys of a batch, in order, copied kRoom at a time into buffers
    // that stay in cache: each(hs, n, pick, f) calls f(k) each time k keys
    // that pick(i) chose are gathered (kRoom, and then the rest), those being
    // keys()[0, k), key j at index where(j) of the batch, got() room for k
    // answers. (A copy of all the chosen keys of a batch at once, 24 bytes a
    // key of fresh pages, could cost more than the lookups: benchmarks/NOTES.md.)
    class Picker {
    public:
        static constexpr std::size_t kRoom = 4096;
        explicit Picker(std::size_t n)
            : room_(std::max<std::size_t>(1, std::min(n, kRoom))),
              keys_(new Hash128[room_]),
              where_(new std::size_t[room_]),
              got_(new bool[room_]) {}
        template <class Pick, class F>
        void each(const Hash128* hs, std::size_t n, Pick&& pick, F&& f) {
            std::size_t k = 0;
            for (std::size_t i = 0; i < n; ++i) {
                if (!pick(i)) continue;
                keys_[k] = hs[i];
                where_[k++] = i;
                if (k == room_) {
                    f(k);
                    k = 0;
                }
            }
            if (k != 0) f(k);
        }
        const Hash128* keys() const { return keys_.get(); }
        std::size_t where(std::size_t j) const { return where_[j]; }
        bool* got() { return got_.get(); }

    private:
        std::size_t room_;
        std::unique_ptr<Hash128[]> keys_;
        std::unique_ptr<std::size_t[]> where_;
        std::unique_ptr<bool[]> got_;
    };

    bool probe_all(const Hash128& h) const {
        for (const BloomFilter* f : gens_)
            if (probe(*f, h)) return true;
        return false;
    }

    // A single key's lines in each generation (and in cur, to be written).
    void prefetch(const Hash128& h, const BloomFilter* cur) const {
        if (gens_.size() + (cur != nullptr ? 1 : 0) < 2) return;  // (one probe: nothing to overlap)
        const void* lines[kMaxLinesPerKey];
        auto ask = [&](const BloomFilter& f, auto rw) {
            const unsigned n = f.slot_lines(h, lines);
            const void* last = nullptr;
            for (unsigned j = 0; j < n; ++j)
                if (lines[j] != last) __builtin_prefetch(last = lines[j], decltype(rw)::value, 3);
        };
        for (const BloomFilter* f : gens_) ask(*f, std::integral_constant<int, 0>{});
        if (cur != nullptr) ask(*cur, std::integral_constant<int, 1>{});
    }

    static bool probe(const BloomFilter& f, const Hash128& h) {
        const Geometry& g = f.geometry();
        const std::uint64_t* words = f.bits().words();
        if (g.layout == Layout::blocked) return BlockedLayout::contains(words, g.num_blocks(), g.num_hashes, h);
        return StandardLayout::contains(words, g.num_slots, g.num_hashes, h, g.layout);
    }
    void check_compatible(const BloomFilter& cur) const {
        if (gens_.empty()) return;
        const Geometry& g = cur.geometry();
        const Geometry& first = gens_.front()->geometry();
        if (g.layout != first.layout || g.num_slots != first.num_slots || g.num_hashes != first.num_hashes ||
            g.seed != first.seed)
            throw std::invalid_argument("the generations of a window must share one geometry");
    }

    std::vector<const BloomFilter*> gens_;
};

}  // namespace bloomline
