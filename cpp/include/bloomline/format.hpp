// The bloomline format, version 1: the bytes of to_bytes, pickle and files,
// as a codec of headers and containers over raw bytes. It knows no filter
// class (filter_io.hpp turns filters into these bytes and back). Documented
// byte by byte in docs/FORMAT.md; this is the code that writes it.
//
// All integers little-endian. One 128-byte header, the payload, an 8-byte
// trailer:
//
//   off  size  field
//     0     8  magic "\x89BLOOML\n" (the high byte and the newline catch
//              transfers that mangle text or strip the 8th bit)
//     8     2  format_version = 1
//    10     1  kind: 1 BloomFilter, 2 CountingBloomFilter, 3 ScalableBloomFilter,
//              4 WindowedBloomFilter (kinds 3 and 4 reuse some fields; see
//              docs/FORMAT.md)
//    11     1  layout: 0 standard-v1 (the first index), 1 blocked, 2 standard
//    12     1  hash_id: 1 = MurmurHash3_x64_128
//    13     1  slot_bits: 1 for bits; 4, 8 or 16 for counters
//    14     2  header_size = 128
//    16     8  seed
//    24     8  num_slots (num_bits, or number of counters)
//    32     4  num_hashes
//    36     4  flags: bit 0 "dirty" = open for writing through a mapping; the
//              payload checksum is not current (other bits reserved, 0)
//    40     8  capacity (0: built from explicit num_bits/num_hashes)
//    48     8  error_rate, IEEE-754 double (0: not given)
//    56     8  insert_count (adds that reported a new key)
//    64     8  payload_offset = 128 (64-byte aligned)
//    72     8  payload_len = ceil(num_slots * slot_bits / 512) * 64
//    80     8  fill: bits set (kind 1) or nonzero counters (kind 2), so a
//              mapped open need not count them; kind 3: tightening (double);
//              kind 4: the window in seconds (double)
//    88    28  reserved, zero
//   116     4  writers: while dirty, the handles that have the file open
//              for writing (a count kept under a lock, file.cpp); 0 when clean
//   120     8  header_checksum = low 64 bits of MurmurHash3_x64_128(bytes 0..119, seed 0)
//   128     .  payload: bit i is bit (i % 8) of byte i / 8
//     .     8  payload_checksum = low 64 bits of MurmurHash3_x64_128(payload, seed 0)
//
// Readers check, in order: length >= header + trailer, magic, version,
// header checksum, every enum, every size against the others and against
// the actual length (nothing is allocated from an unchecked field), then the
// payload checksum. Each failure is std::invalid_argument saying what.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "bloomline/common.hpp"

namespace bloomline {

enum class Kind : std::uint8_t { bloom = 1, counting = 2, scalable = 3, windowed = 4 };

const char* kind_name(Kind k);

constexpr std::uint16_t kFormatVersion = 1;
constexpr std::size_t kHeaderSize = 128;
constexpr std::size_t kTrailerSize = 8;
constexpr std::uint8_t kHashMurmur3 = 1;

constexpr std::uint32_t kFlagDirty = 1;
// Kind 4 only: the ring form, every place of the ring at a fixed offset
// (record i holds generations i, i + G + 1, ...), which open(path, "r+")
// maps and several processes share (docs/FORMAT.md). Only the ring form may
// be dirty among containers.
constexpr std::uint32_t kFlagRing = 2;
// A ring place's generation number when it holds none: never started (or
// cleared), or being started (its bits being cleared) by a rotation.
constexpr std::int64_t kGenerationNone = INT64_MIN;
constexpr std::int64_t kGenerationStarting = INT64_MIN + 1;

struct Header {
    std::uint32_t flags = 0;
    std::uint32_t writers = 0;  // handles open for writing (dirty files only)
    Kind kind = Kind::bloom;
    Layout layout = Layout::blocked;
    std::uint8_t slot_bits = 1;
    std::uint64_t seed = 0;
    std::uint64_t num_slots = 0;
    std::uint32_t num_hashes = 0;
    std::uint64_t capacity = 0;
    double error_rate = 0;
    std::uint64_t insert_count = 0;
    std::uint64_t payload_len = 0;
    std::uint64_t fill = 0;  // kinds 1 and 2

    std::size_t total_size() const { return kHeaderSize + payload_len + kTrailerSize; }
};

std::uint64_t checksum64(const void* data, std::size_t len);

void encode_header(const Header& h, unsigned char* out);

// Parse and validate a header; `len` is the whole input's length.
Header decode_header(const unsigned char* data, std::size_t len);
// The whole length of the encoding (any kind) whose first kHeaderSize bytes
// these are, for a reader of a stream that must know how much more to read:
// the header checked as decode_header checks it, its payload length against
// its geometry (kinds 1 and 2) or its chain's rule (kind 3), so that a
// bogus length is refused before anything is read (std::invalid_argument
// saying what); the rest is left to decode_header once the whole is read.
std::uint64_t encoded_length(const unsigned char* header);

// Header, then the payload checked against its checksum: the payload start.
// A dirty payload (flags bit 0) has no current checksum and is returned as is.
const unsigned char* checked_payload(const unsigned char* data, std::size_t len, const Header& h);

// The offset of the payload checksum; rewrite header fields in place.
std::size_t trailer_offset(const Header& h);
void write_u64(unsigned char* out, std::size_t off, std::uint64_t v);

// out must hold h.total_size() bytes.
void write_filter(const Header& h, const unsigned char* payload, unsigned char* out);

// Kinds 3 and 4 are containers: a header, then records, each a head of
// u64 fields and a kind-1 encoding (a stage of a chain, a generation of a
// window). Both are written and read by the one container code below.
//
// Kind 3, a scalable chain: num_slots = number of stages (1..64),
// num_hashes = growth factor (2 or 4), capacity = initial capacity,
// error_rate = the compound target, insert_count = new keys in all, bytes
// 80..87 = tightening ratio (a double in (0, 1)). A record's head: the
// stage's byte length (u64), the new keys it took (u64); oldest first.
//
// Kind 4, a windowed filter: num_slots = number of generations stored
// (0..generations + 1), num_hashes = generations G (1..64), capacity =
// distinct keys per window (each generation's capacity), error_rate = the
// compound target, insert_count = the sum of the generations' counts,
// bytes 80..87 = the window in seconds (a finite double > 0). A record's
// head: the generation's byte length (u64), the new keys it took (u64),
// its generation number floor(t / (window / G)) (i64); oldest first.
constexpr std::uint32_t kMaxStages = kMaxStagesOfChain;
constexpr std::uint32_t kMaxGenerations = 64;
constexpr std::size_t kStageRecordHead = 16;
constexpr std::size_t kGenerationRecordHead = 24;

// The ring form's record: a 64-byte head (byte length, count, number, 40
// zero bytes), the encoding, then zero bytes up to a multiple of 64, so
// that every place's payload is 64-byte aligned in the file, as a mapped
// filter's memory must be.
constexpr std::size_t kRingRecordHead = 64;

// A record's head size for a container kind (3 or 4; ring: the ring form),
// and the padding after an encoding of len bytes.
std::size_t record_head_size(Kind kind, bool ring = false);
std::size_t record_padding(std::size_t len, bool ring);

struct ChainHeader {
    Layout layout = Layout::blocked;
    std::uint64_t seed = 0;
    std::uint64_t initial_capacity = 0;
    double error_rate = 0;
    std::uint32_t growth = 2;
    double tightening = 0.9;
    std::uint64_t insert_count = 0;
};

struct WindowHeader {
    Layout layout = Layout::blocked;
    std::uint64_t seed = 0;
    std::uint64_t capacity = 0;
    double error_rate = 0;
    std::uint32_t generations = 4;
    double window = 0;  // seconds
    std::uint64_t insert_count = 0;
    bool ring = false;   // the ring form (kFlagRing): every place, in place order
    bool dirty = false;  // (ring form) open for writing, or its writer died
};

// One record: its count of new keys, its generation number (kind 4; 0 in
// kind 3) and its encoding.
struct StageBytes {
    std::uint64_t count;
    std::int64_t number;
    const unsigned char* data;
    std::size_t len;
};

// Bytes of a container of records whose encodings have these lengths.
std::size_t container_size(Kind kind, const std::vector<std::size_t>& record_lens, bool ring = false);
// Write the header h (its kind, 3 or 4, says the record head; its
// payload_len is set here) and the records' heads; record i's encoding goes
// at out + offsets[i] (written by the caller, so no record is copied
// twice). numbers: the generation numbers (kind 4; empty for kind 3).
// Returns those offsets. Call finish_container once the encodings are in
// place.
std::vector<std::size_t> start_container(Header h, const std::vector<std::size_t>& record_lens,
                                         const std::vector<std::uint64_t>& counts,
                                         const std::vector<std::int64_t>& numbers, unsigned char* out);
void finish_container(unsigned char* out, std::size_t len);
// Check a container's header (of the kind asked), checksums and record
// structure (not the records' own bytes), and list the records.
Header read_container(const unsigned char* data, std::size_t len, Kind kind, std::vector<StageBytes>* records);

// Kind 3 over the container code.
std::size_t chain_size(const std::vector<std::size_t>& stage_lens);
Header chain_header(const ChainHeader& c);
// A kind-3 header's tightening ratio (stored in the fill field).
double chain_tightening(const Header& h);
ChainHeader read_chain(const unsigned char* data, std::size_t len, std::vector<StageBytes>* stages);

// Kind 4 over the container code.
Header window_header(const WindowHeader& w);
// A kind-4 header's window in seconds (stored in the fill field).
double window_seconds(const Header& h);
WindowHeader read_window(const unsigned char* data, std::size_t len, std::vector<StageBytes>* generations);

}  // namespace bloomline
