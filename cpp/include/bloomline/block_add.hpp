// The batch add of the blocked layout: the one add driver behind every
// blocked add_many, update and threads= add (lists, arrays, pre-hashed keys).
// Keys go through the stream (stream.hpp), in input order; the caller holds
// the filter's writer mutex.
//
// A key's bits are set in one of two forms, chosen by the caller per batch:
//  - blind: load, or, store per bit with no branch and k unrolled, even when
//    the bit is set already. About twice as fast for new keys. Two keys of
//    different blocks go together, their bits interleaved, so that one
//    key's chain of load/or/store through a word overlaps the other's; two
//    keys of one block are never interleaved (the later could set a bit the
//    earlier then finds set, and the earlier would be called known).
//  - look first: a key whose bits are all set writes nothing, so a
//    deduplicating stream keeps its cache lines, and a mapped file's pages,
//    clean.
// The answers, the bits and the counts are the same either way
// (tests/test_add_forms.py). A third form, shared, is look-first with each
// bit set by an atomic fetch-or, for memory that other processes write at
// the same time (bits.hpp, block_set_shared).
#pragma once

#include <cstddef>
#include <cstdint>

#include "bloomline/key_source.hpp"

namespace bloomline {

enum class AddForm : std::uint8_t { blind, look_first, shared };

// Bits changed and keys found new by a run of adds.
struct AddCounts {
    std::uint64_t bits = 0;
    std::uint64_t keys = 0;
    // One key's add changed `changed` bits; returns whether it was new.
    bool count(unsigned changed) {
        bits += changed;
        keys += changed != 0;
        return changed != 0;
    }
    AddCounts& operator+=(const AddCounts& o) {
        bits += o.bits;
        keys += o.keys;
        return *this;
    }
};

// Add keys [0, n) in order; out[i] (out may be null) = key i was new. A key
// repeated later in the batch finds its bits set there and is not new.
AddCounts add_blocked(std::uint64_t* words, std::uint64_t num_blocks, std::uint32_t k, const BatchKeys& keys,
                      std::size_t n, AddForm form, bool* out);

}  // namespace bloomline
