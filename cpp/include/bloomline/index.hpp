// The index generator: a key's 128-bit hash -> its k slots, for every filter
// kind. Bit storage and counter storage differ; the way positions are drawn
// does not. Each layout's index is its class's (layout_blocked.hpp,
// layout_standard.hpp); this header joins them to a filter's Geometry.
//
// Slots are counted in bits for BloomFilter and in counters for the
// counting filter: a blocked "block" is always 512 slots.
#pragma once

#include <cstdint>

#include "bloomline/common.hpp"
#include "bloomline/layout_blocked.hpp"
#include "bloomline/layout_standard.hpp"
#include "bloomline/murmur3.hpp"

namespace bloomline {

struct Geometry {
    Layout layout = Layout::blocked;
    std::uint64_t num_slots = 0;   // m: bits, or counters
    std::uint32_t num_hashes = 0;  // k
    std::uint64_t seed = 0;

    std::uint64_t num_blocks() const { return num_slots / kBlockBits; }
    bool operator==(const Geometry& o) const {
        return layout == o.layout && num_slots == o.num_slots && num_hashes == o.num_hashes && seed == o.seed;
    }
};

// Blocked layout: the block a key lives in.
inline std::uint64_t block_of(const Geometry& g, const Hash128& h) { return BlockedLayout::block(h.h1, g.num_blocks()); }

// Every layout: the k slot indices of a key, in [0, num_slots).
template <class F>
inline void for_each_slot(const Geometry& g, const Hash128& h, F&& f) {
    if (g.layout == Layout::blocked)
        BlockedLayout::for_each_slot(g.num_blocks(), g.num_hashes, h, f);
    else
        StandardLayout::for_each_slot(g.num_slots, g.num_hashes, h, g.layout, f);
}

// A key's slots as the per-key code walks them, each(f) calling f(slot):
// drawn from its hash (a single call), or kept from a batch's prefetch
// (FilterCommon::slot_stream), so the index runs once a key.
struct SlotsOfHash {
    const Geometry& g;
    const Hash128& h;
    template <class F>
    void each(F&& f) const { for_each_slot(g, h, f); }
};
struct KeptSlots {
    const std::uint64_t* slots;
    unsigned count;
    template <class F>
    void each(F&& f) const {
        for (unsigned i = 0; i < count; ++i) f(slots[i]);
    }
};

}  // namespace bloomline
