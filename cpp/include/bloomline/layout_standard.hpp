// The standard layout, whole: where a key's k slots are, how its bits are
// tested and set, and its false-positive rate. One class, like the blocked
// layout's (layout_blocked.hpp); the filters, the Redis encoders
// (positions.hpp) and the sizing maths call it.
//
// Index (layout code 2): slot i is mul_hi(h1 + h2 * R^(i+1), m), R the odd
// remix constant (common.hpp): k independent multiplies of the key's second
// hash, shifted by its first, each mapped onto [0, m) by multiply-shift (no
// %: any m works). Every pair of slots is as independent as two draws, so
// the rate is the formula's on small filters and at tiny rates too.
//
// The first index (Layout::standard_v1, code 0), kept for the filters made
// with it: enhanced double hashing (g_0 = h1, g_i = g_(i-1) + y_(i-1),
// y_i = y_(i-1) + i, y_0 = h2), each g_i mapped by multiply-shift. The cubic
// step changes only low bits that multiply-shift drops, so it is plain
// double hashing in effect: a key whose h2 lies near a fraction of small
// denominator has its k slots on a few bits, about 3 / (m k) more false
// positives than the formula (docs/design/layouts.md has the figures).
//
// A key touches k cache lines, so batches use the stream's several-lines
// shape (stream.hpp, LinesPerKey) with each key's lines prefetched, and its
// slots kept from there for the test or set (all_set, set_slots).
#pragma once

#include <cmath>
#include <cstdint>

#include "bloomline/common.hpp"
#include "bloomline/murmur3.hpp"
#include "bloomline/words.hpp"

namespace bloomline {

class StandardLayout {
public:
    // f(slot) for each of the k slots of a key, in [0, num_slots), by the
    // index of `layout` (standard or standard_v1).
    template <class F>
    static void for_each_slot(std::uint64_t num_slots, std::uint32_t k, const Hash128& h, Layout layout, F&& f) {
        if (layout == Layout::standard_v1) {
            std::uint64_t x = h.h1, y = h.h2;
            f(mul_hi(x, num_slots));
            for (std::uint32_t i = 1; i < k; ++i) {
                x += y;
                y += i;
                f(mul_hi(x, num_slots));
            }
            return;
        }
        for (std::uint32_t i = 0; i < k; ++i) f(mul_hi(h.h1 + h.h2 * kRemixPowers.p[i], num_slots));
    }

    // Are all of a key's bits set?
    static bool contains(const std::uint64_t* words, std::uint64_t num_bits, std::uint32_t k, const Hash128& h,
                         Layout layout) {
        bool all = true;
        for_each_slot(num_bits, k, h, layout, [&](std::uint64_t s) { all = all && test_bit(words, s); });
        return all;
    }

    // Sets a key's bits, looking first (writer mutex held; with shared, each
    // bit by an atomic fetch-or, for memory other processes write at the
    // same time); returns how many were clear.
    static unsigned set(std::uint64_t* words, std::uint64_t num_bits, std::uint32_t k, const Hash128& h,
                        Layout layout, bool shared) {
        unsigned changed = 0;
        if (shared)
            for_each_slot(num_bits, k, h, layout, [&](std::uint64_t s) { changed += set_bit_shared(words, s); });
        else
            for_each_slot(num_bits, k, h, layout, [&](std::uint64_t s) { changed += set_bit(words, s); });
        return changed;
    }

    // A key's slots drawn already (a batch's, kept from its prefetch): are
    // all of its bits set? / set them (as set: returns how many were clear).
    static bool all_set(const std::uint64_t* words, const std::uint64_t* slots, unsigned k) {
        bool all = true;
        for (unsigned i = 0; i < k; ++i) all = all && test_bit(words, slots[i]);
        return all;
    }
    static unsigned set_slots(std::uint64_t* words, const std::uint64_t* slots, unsigned k, bool shared) {
        unsigned changed = 0;
        if (shared)
            for (unsigned i = 0; i < k; ++i) changed += set_bit_shared(words, slots[i]);
        else
            for (unsigned i = 0; i < k; ++i) changed += set_bit(words, slots[i]);
        return changed;
    }

    // The expected rate of n keys in m bits with k hashes: (1 - e^(-kn/m))^k.
    static double fp_rate(double n, double m, double k) { return std::pow(-std::expm1(-k * n / m), k); }

    // One bit: set it (writers serialised; with shared, by an atomic
    // fetch-or); true when it was clear. A threaded add sets a key's bits
    // one by one on their owners' threads (parallel.hpp).
    static bool set_bit(std::uint64_t* words, std::uint64_t i, bool shared) {
        return shared ? set_bit_shared(words, i) : set_bit(words, i);
    }

private:
    static bool test_bit(const std::uint64_t* words, std::uint64_t i) {
        return (load_le(words + (i >> 6)) >> (i & 63)) & 1;
    }
    // Writers serialised; true when the bit was clear.
    static bool set_bit(std::uint64_t* words, std::uint64_t i) {
        std::uint64_t* w = words + (i >> 6);
        const std::uint64_t old = load_le(w);
        const std::uint64_t bit = std::uint64_t{1} << (i & 63);
        if (old & bit) return false;
        atomic_store(w, to_le64(old | bit));
        return true;
    }
    static bool set_bit_shared(std::uint64_t* words, std::uint64_t i) {
        const std::uint64_t bit = to_le64(std::uint64_t{1} << (i & 63));
        return (__atomic_fetch_or(words + (i >> 6), bit, __ATOMIC_RELAXED) & bit) == 0;
    }
};

}  // namespace bloomline
