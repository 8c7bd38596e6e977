// The stream: the one loop shape behind every batch (adds and lookups, both
// layouts, both filter kinds). Keys are hashed a group at a time into a
// ring; the memory a key will touch is prefetched `ahead` keys before the
// key is used (tested, or set); keys are used a unit at a time. So the
// memory of the keys ahead is being fetched while later keys are hashed and
// earlier ones used: hashing a whole chunk first, then probing it, left the
// memory idle during the hashing.
//
// Two shapes: one line per key (blocked bits: BlockedLayout::Stream, in
// layout_blocked.hpp) and several lines per key (LinesPerKey, below: the
// standard layout's k lines, counter blocks of 4 to 16 lines: used one at a
// time, prefetched 4 ahead, since the CPU can only wait on a few dozen
// lines at once). benchmarks/NOTES.md has the distances that were tried.
//
// Prefetches are written out in this loop, not in a helper: GCC 12 treats a
// function whose only statement is __builtin_prefetch as "const" and
// deletes calls to it whose result is unused.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "bloomline/key_source.hpp"

namespace bloomline {

template <std::size_t kGroup, std::size_t kAhead, std::size_t kUnit>
struct StreamShape {
    static constexpr std::size_t group = kGroup;  // keys hashed per call of the source
    static constexpr std::size_t ahead = kAhead;  // keys between a prefetch and its use
    static constexpr std::size_t unit = kUnit;    // keys per call of use()
    // Holds keys [used, made): at most ahead + unit + group; a power of two,
    // so that neither a group nor a unit ever wraps around it.
    static constexpr std::size_t ring = [] {
        std::size_t r = 1;
        while (r < kGroup + kAhead + kUnit) r *= 2;
        return r;
    }();
    static_assert((kGroup & (kGroup - 1)) == 0 && (kUnit & (kUnit - 1)) == 0, "powers of two");
};
using LinesPerKey = StreamShape<64, 4, 1>;

// At most this many lines per key are prefetched (k of the standard layout).
constexpr unsigned kMaxLinesPerKey = 64;

// Hashes made by a KeyHasher as the stream needs them, into a ring.
template <class Shape>
struct RingOfHashes {
    KeyHasher keys;
    alignas(64) Hash128 ring[Shape::ring];
    const Hash128* make(std::size_t first, std::size_t m) {
        Hash128* h = ring + first % Shape::ring;
        keys.hash(keys.ctx, first, m, h);
        return h;
    }
    const Hash128* at(std::size_t first) const { return ring + first % Shape::ring; }
};

// Hashes already in memory: nothing to make, nothing copied.
struct HashesInPlace {
    const Hash128* hashes;
    const Hash128* make(std::size_t first, std::size_t) const { return hashes + first; }
    const Hash128* at(std::size_t first) const { return hashes + first; }
};

// The stream over keys [0, n) of src. lines(h, addrs) writes the addresses
// of the lines key h touches and returns how many; use(h, m, first) gets
// keys [first, first + m) once their lines were asked for.
template <class Shape, bool kForWrite, class Source, class Lines, class Use>
void stream(Source& src, std::size_t n, Lines&& lines, Use&& use) {
    constexpr int kRw = kForWrite ? 1 : 0;
    const void* addrs[kMaxLinesPerKey];
    std::size_t made = 0;     // keys [0, made) are hashed
    std::size_t fetched = 0;  // keys [0, fetched) had their lines asked for
    const Hash128* h = nullptr;  // the hashes of keys [fetched, made)
    for (std::size_t used = 0; used < n;) {
        const std::size_t m = std::min(Shape::unit, n - used);
        const std::size_t want = std::min(n, used + m + Shape::ahead);
        while (fetched < want) {
            if (fetched == made) {
                const std::size_t g = std::min(Shape::group, n - made);
                h = src.make(made, g);
                made += g;
            }
            const unsigned count = lines(*h++, addrs);
            for (unsigned j = 0; j < count; ++j) __builtin_prefetch(addrs[j], kRw, 3);
            ++fetched;
        }
        use(src.at(used), m, used);
        used += m;
    }
}

// f(source) with the stream source for keys: in place, or a ring.
template <class Shape, class F>
void with_stream_source(const BatchKeys& keys, F&& f) {
    if (keys.in_place != nullptr) {
        HashesInPlace src{keys.in_place};
        f(src);
    } else {
        RingOfHashes<Shape> src{keys.hasher, {}};
        f(src);
    }
}

}  // namespace bloomline
