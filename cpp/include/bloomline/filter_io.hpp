// Filters to bytes and back, for every kind: the one place that joins the
// filter classes to the format codec (format.hpp). Files (file.hpp) and the
// bindings both go through it. Scalable chains and windowed filters are read
// and written here as well: their stages and generations are BloomFilters,
// in containers of kinds 3 and 4 (one container code serves both).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "bloomline/bloom_filter.hpp"
#include "bloomline/counting_filter.hpp"
#include "bloomline/format.hpp"
#include "bloomline/sizing.hpp"

namespace bloomline {

// Per filter class: its kind code.
template <class T>
struct KindOf;
template <>
struct KindOf<BloomFilter> {
    static constexpr Kind value = Kind::bloom;
};
template <>
struct KindOf<CountingBloomFilter> {
    static constexpr Kind value = Kind::counting;
};

Header header_of(const BloomFilter& f);
Header header_of(const CountingBloomFilter& f);
const unsigned char* payload_of(const BloomFilter& f);
const unsigned char* payload_of(const CountingBloomFilter& f);

// Exports take a snapshot of the payload: it is copied chunk by chunk, each
// chunk under the filter's writer mutex (no add of this process half done
// in it), and the header's fill and the payload checksum are computed from
// the bytes copied, never from the filter's own counts. So an export made
// while other threads or processes add holds every key added before it
// began, and its header always matches its payload: it loads, always.
// place(offset, n) says where payload bytes [offset, offset + n) go; done
// (optional) is called with each chunk once it is there (a file writes it).
// Returns the header of the export, fill included, and the checksum.
struct Snapshot {
    Header header;
    std::uint64_t payload_checksum;
};
template <class T>
Snapshot snapshot_payload(const T& f, const std::function<unsigned char*(std::size_t, std::size_t)>& place,
                          const std::function<void(const unsigned char*, std::size_t)>& done = {});

// The whole encoding, through a snapshot: out must hold
// header_of(f).total_size() bytes.
template <class T>
void encode_filter(const T& f, unsigned char* out);

// A filter over checked payload memory that a header describes. trust_fill:
// take the header's fill instead of counting (a clean mapped file, whose
// pages must not all be touched at open).
template <class T>
std::unique_ptr<T> filter_over(const Header& h, Memory payload, bool trust_fill);

// The fill of a payload that a header describes (bits set for kind 1,
// nonzero counters for kind 2), counted chunk by chunk, after checking that
// nothing is set past num_slots (the padding up to the whole block):
// std::invalid_argument otherwise. Chunks are added in any order, each at
// its byte offset in the payload, a multiple of 8.
class FillCount {
public:
    explicit FillCount(const Header& h) : h_(h) {}
    void add(const unsigned char* chunk, std::uint64_t offset, std::size_t n);
    std::uint64_t fill() const { return fill_; }

private:
    Header h_;
    std::uint64_t fill_ = 0;
};
// The whole payload's fill. O(payload).
std::uint64_t payload_fill(const Header& h, const unsigned char* payload);
// The same, its errors as "invalid bloomline data: ..." (a reader's).
std::uint64_t checked_fill(const Header& h, const unsigned char* payload);

// A dirty file's header (writers open, or killed) lags its payload: a
// killed writer never added its new keys to the insert count. Make it at
// least the estimate from the fill (h.fill counted from the payload).
void repair_insert_count(Header& h);

// A fully checked read of bytes (the payload is copied): the header, the
// checksums, the padding, and a clean header's fill against the payload; a
// dirty one's fill recounted and insert count repaired (above).
template <class T>
std::unique_ptr<T> decode_filter(const unsigned char* data, std::size_t len);

// ---- scalable chains (kind 3) ---------------------------------------------

struct ChainStage {
    std::uint64_t count;  // new keys it took
    std::unique_ptr<BloomFilter> filter;
};

struct Chain {
    ChainRule rule;
    Layout layout = Layout::blocked;
    std::uint64_t seed = 0;
    std::vector<ChainStage> stages;
};

// Bytes of the chain whose stages are these (oldest first).
std::size_t chain_encoded_size(const std::vector<const BloomFilter*>& stages);
void encode_chain(const ChainRule& rule, Layout layout, std::uint64_t seed,
                  const std::vector<const BloomFilter*>& stages, const std::vector<std::uint64_t>& counts,
                  unsigned char* out, std::size_t len);
// Read a chain, checking the container and every stage, and that each
// stage is what the chain's rule makes at its place.
Chain decode_chain(const unsigned char* data, std::size_t len);

// ---- windowed filters (kind 4) -----------------------------------------------
// The ring itself lives in Python (bloomline/windowed.py); the core writes
// and checks its bytes.

struct WindowGeneration {
    std::int64_t number;  // floor(t / (window / generations))
    std::uint64_t count;  // new keys it took
    std::unique_ptr<BloomFilter> filter;
};

struct Window {
    WindowHeader params;
    std::vector<WindowGeneration> generations;  // oldest first
};

std::size_t window_encoded_size(const std::vector<const BloomFilter*>& generations, bool ring = false);
// The parameters' insert_count is set here (the sum of counts).
void encode_window(WindowHeader params, const std::vector<const BloomFilter*>& generations,
                   const std::vector<std::uint64_t>& counts, const std::vector<std::int64_t>& numbers,
                   unsigned char* out, std::size_t len);
// The ring form (kFlagRing, docs/FORMAT.md): all G + 1 places of the ring
// in place order, each with its generation number or kGenerationNone; what
// open(path, "r+") maps (window_file.hpp).
void encode_window_ring(WindowHeader params, const std::vector<const BloomFilter*>& places,
                        const std::vector<std::uint64_t>& counts, const std::vector<std::int64_t>& numbers,
                        unsigned char* out, std::size_t len);
// Read a window, checking the container and every generation: its
// geometry is what the parameters make, its number is above the one
// before it and within `generations` of the newest, its count is at most
// its bits set (each new key set at least one bit).
Window decode_window(const unsigned char* data, std::size_t len);

}  // namespace bloomline
