// A windowed filter's ring in one file that several processes map for
// writing (WindowedBloomFilter.open): the ring form of kind 4
// (docs/FORMAT.md), every place of the ring a kind-1 encoding at a fixed
// offset, each place's generation number in its record head.
//
// What all handles agree on, whatever their clocks:
//  - The current generation is the newest of the clock's and of every
//    number in the file: once any handle has started generation c, no handle
//    adds to an older one as current (the clock never goes back, across
//    processes too).
//  - A generation is started once (start_generation): under the file's
//    header lock, a handle that finds it, or a newer one, anywhere in the
//    ring does nothing and adds to the newest (a handle that waited while
//    the ring moved on never restarts a generation that may have expired);
//    otherwise it marks the place
//    kGenerationStarting, clears its bits, zeroes its count, and only then
//    stores the number (a release store, read with acquire loads).
//  - A place marked starting, or holding none, is probed by nobody and added
//    to by nobody: adds go to a place only once it shows the current number,
//    so no add is cleared by the rotation that made its generation.
//  - A lookup that overlaps a rotation answers as before it or as after it:
//    the place being cleared holds a generation that has just expired, and
//    clearing only turns bits off, so a key it finds there was there before.
//  - "New" between processes is at least once, as for a BloomFilter file: two
//    handles adding one key at the same instant may both find it new.
//  - A rotator killed while it cleared leaves its place starting: the next
//    start there, or the last writer's close, clears it again.
// Counts are each handle's own adds, added to the record head at its
// flushes (adds not yet flushed when another handle restarts the place are
// not counted; every handle's filter of a restarted place counts from zero:
// restart_counts, called from Python when it sees the number change): the
// last close cuts each to its bits set and makes every checksum current. A
// handle's capacity warning counts its own adds to a generation only.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "bloomline/bloom_filter.hpp"
#include "bloomline/file.hpp"
#include "bloomline/format.hpp"

namespace bloomline {

class MappedWindow {
public:
    // Map a ring-form file (its checks as decode_window's, the payload's
    // checksums only if verify or the first writer of a clean file).
    MappedWindow(const std::string& path, bool writable, bool verify);
    MappedWindow(const MappedWindow&) = delete;
    MappedWindow& operator=(const MappedWindow&) = delete;

    const WindowHeader& params() const { return params_; }
    std::size_t places() const { return heads_.size(); }
    // A filter over place i's bits in the file (shared with every handle;
    // read-only for a read-only map). The caller owns it; the map lives as
    // long as any of them.
    std::unique_ptr<BloomFilter> place_filter(std::size_t i) const;
    // Place i's generation number now (kGenerationNone / kGenerationStarting
    // when it holds none).
    std::int64_t number(std::size_t i) const;
    // Start generation n at its place (above); returns the generation to
    // add to: n, or the newest in the ring where it is newer. adds: the
    // place filter's insert count now (this handle's count starts there).
    std::int64_t start_generation(std::int64_t n, std::uint64_t adds);
    // Every place emptied (numbers kGenerationNone), under the header lock.
    void clear(const std::vector<std::uint64_t>& adds);
    // Record heads and headers brought up to date, pages written back; adds:
    // each place filter's insert count (this handle's adds). With final
    // this handle leaves the writers (the last makes the file clean).
    void flush(const std::vector<std::uint64_t>& adds, bool final);
    // The file's generations as one kind-4 encoding (filter_io.hpp), read
    // under the header lock (a reader's share of it when mapped read-only),
    // so that no handle starts a generation while they are copied: a save
    // or pickle overlapping a rotation answers as before it or as after it.
    // Adds go on meanwhile (they only set bits). Each generation's count is
    // the file's plus this handle's adds not yet flushed (adds, as flush
    // takes them), at most its bits set. ring: every place (the form open
    // maps); else the generations live at now (or at the file's newest, if
    // newer), oldest first. alloc(len) gives the buffer.
    void encode(bool ring, std::int64_t now, const std::vector<std::uint64_t>& adds,
                const std::function<unsigned char*(std::size_t)>& alloc) const;
    const MappedFile& file() const { return *file_; }
    bool writable() const { return file_->writable(); }
    bool released() const { return file_->released(); }

private:
    unsigned char* head(std::size_t i) const { return file_->data() + heads_[i]; }
    void check_writer(const char* doing) const;
    void empty_place(std::size_t i, std::int64_t mark);  // header lock held
    void count_adds(const std::vector<std::uint64_t>& adds);  // header lock held
    // A filter over place i's bits as mapped now, with this count of new keys.
    std::unique_ptr<BloomFilter> view(std::size_t i, std::uint64_t count) const;

    std::shared_ptr<MappedFile> file_;
    WindowHeader params_;
    std::vector<std::size_t> heads_;  // each place's record head (its encoding follows)
    std::vector<Header> headers_;     // each place's kind-1 header as mapped
    // Per place: the generation this handle's count belongs to, and the
    // place filter's insert count already added to the file.
    std::vector<std::int64_t> counted_number_;
    std::vector<std::uint64_t> counted_;
};

}  // namespace bloomline
