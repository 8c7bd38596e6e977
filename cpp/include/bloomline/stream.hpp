// The stream: the one loop shape behind every batch (adds and lookups, both
// layouts, both filter kinds). Keys are hashed a group at a time, and as
// soon as a key's hash exists the memory it will touch is prefetched; a key
// is used (tested, or set) only once `ahead` keys behind the newest hash.
// So the memory of the keys ahead is being fetched while later keys are
// hashed and earlier ones used: hashing a whole chunk first, then probing
// it, left the memory idle during the hashing.
//
// Two shapes: one line per key (blocked bits: groups of 16, 32 ahead) and
// several lines per key (the standard layout's k lines, counter blocks of 4
// to 16 lines: groups of 4, 4 ahead, since the CPU can only wait on a few
// dozen lines at once). benchmarks/NOTES.md has the distances that were
// tried.
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

template <std::size_t kGroup, std::size_t kAhead>
struct StreamShape {
    static constexpr std::size_t group = kGroup;
    static constexpr std::size_t ahead = kAhead;
    // Holds keys [used, used + ahead + group); a power of two >= that.
    static constexpr std::size_t ring = [] {
        std::size_t r = 1;
        while (r < kGroup + kAhead) r *= 2;
        return r;
    }();
    static_assert(kAhead % kGroup == 0, "whole groups ahead");
};
using OneLinePerKey = StreamShape<16, 32>;
using LinesPerKey = StreamShape<4, 4>;

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
    std::size_t made = 0;  // keys [used, made) are made and prefetched
    for (std::size_t used = 0; used < n;) {
        while (made < n && made < used + Shape::ahead + Shape::group) {
            const std::size_t m = std::min(Shape::group, n - made);
            const Hash128* h = src.make(made, m);
            for (std::size_t i = 0; i < m; ++i) {
                const unsigned count = lines(h[i], addrs);
                for (unsigned j = 0; j < count; ++j) __builtin_prefetch(addrs[j], kRw, 3);
            }
            made += m;
        }
        const std::size_t m = std::min(Shape::group, n - used);
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
