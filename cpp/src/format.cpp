#include "bloomline/format.hpp"

#include <cmath>
#include <cstring>
#include <type_traits>

#include "bloomline/memory.hpp"
#include "bloomline/murmur3.hpp"
#include "bloomline/sizing.hpp"

namespace bloomline {

namespace {

constexpr unsigned char kMagic[8] = {0x89, 'B', 'L', 'O', 'O', 'M', 'L', '\n'};

template <class T>
void put(unsigned char* out, std::size_t off, T v) {
    static_assert(std::is_integral<T>::value, "integers only");
    for (std::size_t i = 0; i < sizeof(T); ++i) out[off + i] = static_cast<unsigned char>(static_cast<std::uint64_t>(v) >> (8 * i));
}

template <class T>
T get(const unsigned char* in, std::size_t off) {
    std::uint64_t v = 0;
    for (std::size_t i = sizeof(T); i > 0; --i) v = (v << 8) | in[off + i - 1];
    return static_cast<T>(v);
}

std::uint64_t double_bits(double d) {
    std::uint64_t u;
    std::memcpy(&u, &d, 8);
    return u;
}

double bits_double(std::uint64_t u) {
    double d;
    std::memcpy(&d, &u, 8);
    return d;
}

[[noreturn]] void bad(const std::string& what) { throw std::invalid_argument("invalid bloomline data: " + what); }

bool valid_slot_bits(Kind k, unsigned b) {
    if (k == Kind::counting) return b == 4 || b == 8 || b == 16;
    return b == 1;
}

}  // namespace

const char* kind_name(Kind k) {
    switch (k) {
        case Kind::bloom: return "BloomFilter";
        case Kind::counting: return "CountingBloomFilter";
        case Kind::scalable: return "ScalableBloomFilter";
        case Kind::windowed: return "WindowedBloomFilter";
    }
    return "unknown";
}

std::uint64_t checksum64(const void* data, std::size_t len) { return murmur3_128(data, len, 0).h1; }

void encode_header(const Header& h, unsigned char* out) {
    std::memset(out, 0, kHeaderSize);
    std::memcpy(out, kMagic, 8);
    put<std::uint16_t>(out, 8, kFormatVersion);
    put<std::uint8_t>(out, 10, static_cast<std::uint8_t>(h.kind));
    put<std::uint8_t>(out, 11, static_cast<std::uint8_t>(h.layout));
    put<std::uint8_t>(out, 12, kHashMurmur3);
    put<std::uint8_t>(out, 13, h.slot_bits);
    put<std::uint16_t>(out, 14, static_cast<std::uint16_t>(kHeaderSize));
    put<std::uint64_t>(out, 16, h.seed);
    put<std::uint64_t>(out, 24, h.num_slots);
    put<std::uint32_t>(out, 32, h.num_hashes);
    put<std::uint32_t>(out, 36, h.flags);
    put<std::uint32_t>(out, 116, h.writers);
    put<std::uint64_t>(out, 40, h.capacity);
    put<std::uint64_t>(out, 48, double_bits(h.error_rate));
    put<std::uint64_t>(out, 56, h.insert_count);
    put<std::uint64_t>(out, 64, kHeaderSize);
    put<std::uint64_t>(out, 72, h.payload_len);
    put<std::uint64_t>(out, 80, h.fill);  // kind 3: the tightening's bits; kind 4: the window's
    put<std::uint64_t>(out, 120, checksum64(out, 120));
}

namespace {

// What a reader checks first of any header: the magic, the version, the
// header's checksum.
void check_header_start(const unsigned char* in) {
    if (std::memcmp(in, kMagic, 8) != 0) bad("bad magic (not a bloomline filter)");
    const auto version = get<std::uint16_t>(in, 8);
    if (version != kFormatVersion)
        bad("format version " + std::to_string(version) + " is not supported (this bloomline reads version 1)");
    if (get<std::uint64_t>(in, 120) != checksum64(in, 120)) bad("header checksum mismatch (the header is corrupt)");
}

}  // namespace


namespace {

// Every check of a header that needs no more than its 128 bytes: fields,
// and for kinds 1 and 2 the payload length against the geometry.
Header parse_header(const unsigned char* in) {
    check_header_start(in);

    Header h;
    const auto kind = get<std::uint8_t>(in, 10);
    if (kind < 1 || kind > 4) bad("unknown kind code " + std::to_string(kind));
    h.kind = static_cast<Kind>(kind);
    const auto layout = get<std::uint8_t>(in, 11);
    if (layout > kMaxLayoutCode) bad("unknown layout code " + std::to_string(layout));
    h.layout = static_cast<Layout>(layout);
    const auto hash_id = get<std::uint8_t>(in, 12);
    if (hash_id != kHashMurmur3) bad("unknown hash id " + std::to_string(hash_id));
    h.slot_bits = get<std::uint8_t>(in, 13);
    if (!valid_slot_bits(h.kind, h.slot_bits))
        bad("slot_bits " + std::to_string(h.slot_bits) + " is invalid for a " + kind_name(h.kind));
    if (get<std::uint16_t>(in, 14) != kHeaderSize) bad("header_size is not 128");
    h.seed = get<std::uint64_t>(in, 16);
    h.num_slots = get<std::uint64_t>(in, 24);
    h.num_hashes = get<std::uint32_t>(in, 32);
    h.flags = get<std::uint32_t>(in, 36);
    const bool container = h.kind == Kind::scalable || h.kind == Kind::windowed;
    const std::uint32_t allowed = h.kind == Kind::windowed ? (kFlagRing | kFlagDirty) : container ? 0 : kFlagDirty;
    if ((h.flags & ~allowed) != 0) bad("unknown flags set");
    if (h.kind == Kind::windowed && (h.flags & kFlagDirty) && !(h.flags & kFlagRing))
        bad("a windowed filter is dirty (open for writing) only in its ring form (flags 2)");
    h.capacity = get<std::uint64_t>(in, 40);
    h.error_rate = bits_double(get<std::uint64_t>(in, 48));
    h.insert_count = get<std::uint64_t>(in, 56);
    if (h.insert_count > kMaxCount) bad("insert_count " + fmt(h.insert_count) + " is past any filter's count (2**56)");
    if (get<std::uint64_t>(in, 64) != kHeaderSize) bad("payload_offset is not 128");
    h.payload_len = get<std::uint64_t>(in, 72);
    h.fill = get<std::uint64_t>(in, 80);
    for (std::size_t off = 88; off < 116; ++off)
        if (in[off] != 0) bad("reserved header bytes are not zero");
    h.writers = get<std::uint32_t>(in, 116);
    if (h.writers != 0 && !(h.flags & kFlagDirty))
        bad("writers is " + fmt(h.writers) + " in a file that is not open for writing (flags 0)");
    if (!(h.error_rate >= 0 && h.error_rate < 1)) bad("error_rate " + fmt(h.error_rate) + " is outside [0, 1)");

    if (h.kind == Kind::scalable) {
        if (h.num_slots < 1 || h.num_slots > kMaxStages)
            bad("a scalable filter must have 1 to 64 stages, got " + fmt(h.num_slots));
        if (h.num_hashes != 2 && h.num_hashes != 4) bad("growth must be 2 or 4, got " + fmt(h.num_hashes));
        const double t = bits_double(h.fill);
        if (!(t > 0 && t < 1)) bad("tightening must be in (0, 1), got " + fmt(t));
        return h;
    }
    if (h.kind == Kind::windowed) {
        if (h.num_hashes < 1 || h.num_hashes > kMaxGenerations)
            bad("generations must be in [1, 64], got " + fmt(h.num_hashes));
        if (h.num_slots > h.num_hashes + std::uint64_t{1})
            bad("a windowed filter of " + fmt(h.num_hashes) + " generations keeps at most " + fmt(h.num_hashes + 1) +
                ", got " + fmt(h.num_slots));
        if ((h.flags & kFlagRing) && h.num_slots != h.num_hashes + std::uint64_t{1})
            bad("a windowed filter's ring form holds all " + fmt(h.num_hashes + 1) + " places of its ring, got " +
                fmt(h.num_slots));
        if (h.capacity < 1 || h.capacity > kMaxBits) bad("capacity must be in [1, 2**48], got " + fmt(h.capacity));
        if (!(h.error_rate > 0)) bad("error_rate must be in (0, 1), got " + fmt(h.error_rate));
        const double w = bits_double(h.fill);
        // (at least 1 ms, as bloomline/windowed.py makes them)
        if (!(std::isfinite(w) && w >= 1e-3)) bad("window must be a finite number of seconds >= 0.001, got " + fmt(w));
        return h;
    }
    try {
        check_geometry(h.num_slots, h.num_hashes, h.layout);
    } catch (const std::invalid_argument& e) {
        bad(e.what());
    }
    if (h.fill > h.num_slots) bad("fill " + fmt(h.fill) + " exceeds num_slots " + fmt(h.num_slots));
    if (h.payload_len != payload_bytes(h.num_slots, h.slot_bits))
        bad("payload_len " + fmt(h.payload_len) + " does not match num_slots " + fmt(h.num_slots) + " (expected " +
            fmt(static_cast<std::uint64_t>(payload_bytes(h.num_slots, h.slot_bits))) + ")");
    return h;
}

// The most bytes a chain's payload can take: each stage record at the
// size the chain's rule gives that stage (decode_chain checks each stage
// against the rule, so a longer payload could never load).
std::uint64_t chain_payload_bound(const Header& h) {
    ChainRule rule;
    try {
        rule = ChainRule::make(h.capacity, h.error_rate, h.num_hashes, bits_double(h.fill));
    } catch (const std::invalid_argument& e) {
        bad(e.what());
    }
    std::uint64_t bound = 0;
    const auto stages = static_cast<std::uint32_t>(std::min<std::uint64_t>(h.num_slots, rule.max_stages()));
    for (std::uint32_t i = 0; i < stages; ++i) {
        const Params p = optimal_params(static_cast<double>(rule.stage_capacity(i)), rule.stage_error_rate(i), h.layout);
        bound += kStageRecordHead + kHeaderSize + payload_bytes(p.num_bits, 1) + kTrailerSize;
    }
    return bound;
}

// The most bytes a window's payload can take: each generation at the size
// its parameters give it (decode_window checks each against them).
std::uint64_t window_payload_bound(const Header& h) {
    Params p;
    try {
        p = optimal_params(static_cast<double>(h.capacity), window_generation_error_rate(h.error_rate, h.num_hashes),
                           h.layout);
    } catch (const std::invalid_argument& e) {
        bad(e.what());
    }
    const std::size_t len = kHeaderSize + payload_bytes(p.num_bits, 1) + kTrailerSize;
    const bool ring = (h.flags & kFlagRing) != 0;
    return h.num_slots * (record_head_size(Kind::windowed, ring) + len + record_padding(len, ring));
}

}  // namespace

Header decode_header(const unsigned char* in, std::size_t len) {
    if (len < kHeaderSize + kTrailerSize)
        bad("got " + std::to_string(len) + " bytes, shorter than the " + std::to_string(kHeaderSize + kTrailerSize) +
            "-byte minimum (truncated?)");
    const Header h = parse_header(in);
    if (h.payload_len > len || h.total_size() != len)
        bad("got " + std::to_string(len) + " bytes, the header describes " + fmt(h.payload_len + kHeaderSize + kTrailerSize) +
            " (truncated or padded?)");
    return h;
}

std::uint64_t encoded_length(const unsigned char* header) {
    const Header h = parse_header(header);
    if (h.kind == Kind::scalable && h.payload_len > chain_payload_bound(h))
        bad("payload_len " + fmt(h.payload_len) + " is more than a chain of " + fmt(h.num_slots) +
            " stages of these parameters can take (" + fmt(chain_payload_bound(h)) + ")");
    if (h.kind == Kind::windowed && h.payload_len > window_payload_bound(h))
        bad("payload_len " + fmt(h.payload_len) + " is more than " + fmt(h.num_slots) +
            " generations of these parameters take (" + fmt(window_payload_bound(h)) + ")");
    return h.total_size();
}

std::size_t trailer_offset(const Header& h) { return kHeaderSize + h.payload_len; }
void write_u64(unsigned char* out, std::size_t off, std::uint64_t v) { put<std::uint64_t>(out, off, v); }

const unsigned char* checked_payload(const unsigned char* data, std::size_t len, const Header& h) {
    (void)len;
    const unsigned char* payload = data + kHeaderSize;
    if (h.flags & kFlagDirty) return payload;
    if (get<std::uint64_t>(data, kHeaderSize + h.payload_len) != checksum64(payload, h.payload_len))
        bad("payload checksum mismatch (the payload is corrupt)");
    return payload;
}

void write_filter(const Header& h, const unsigned char* payload, unsigned char* out) {
    encode_header(h, out);
    std::memcpy(out + kHeaderSize, payload, h.payload_len);
    put<std::uint64_t>(out, kHeaderSize + h.payload_len, checksum64(out + kHeaderSize, h.payload_len));
}

std::size_t record_head_size(Kind kind, bool ring) {
    if (ring) return kRingRecordHead;
    return kind == Kind::windowed ? kGenerationRecordHead : kStageRecordHead;
}
std::size_t record_padding(std::size_t len, bool ring) { return ring ? (64 - len % 64) % 64 : 0; }

std::size_t container_size(Kind kind, const std::vector<std::size_t>& record_lens, bool ring) {
    std::size_t total = kHeaderSize + kTrailerSize;
    for (std::size_t len : record_lens) total += record_head_size(kind, ring) + len + record_padding(len, ring);
    return total;
}

std::vector<std::size_t> start_container(Header h, const std::vector<std::size_t>& record_lens,
                                         const std::vector<std::uint64_t>& counts,
                                         const std::vector<std::int64_t>& numbers, unsigned char* out) {
    const bool windowed = h.kind == Kind::windowed;
    if (counts.size() != record_lens.size() || (windowed && numbers.size() != record_lens.size()))
        throw std::invalid_argument("start_container: " + std::to_string(record_lens.size()) + " records, " +
                                    std::to_string(counts.size()) + " counts, " + std::to_string(numbers.size()) +
                                    " numbers");
    const bool ring = (h.flags & kFlagRing) != 0;
    const std::size_t head = record_head_size(h.kind, ring);
    h.slot_bits = 1;
    h.num_slots = record_lens.size();
    h.payload_len = container_size(h.kind, record_lens, ring) - kHeaderSize - kTrailerSize;
    encode_header(h, out);
    std::vector<std::size_t> offsets;
    std::size_t pos = kHeaderSize;
    for (std::size_t i = 0; i < record_lens.size(); ++i) {
        std::memset(out + pos, 0, head);
        put<std::uint64_t>(out, pos, record_lens[i]);
        put<std::uint64_t>(out, pos + 8, counts[i]);
        if (windowed) put<std::uint64_t>(out, pos + 16, static_cast<std::uint64_t>(numbers[i]));
        offsets.push_back(pos + head);
        pos += head + record_lens[i];
        const std::size_t pad = record_padding(record_lens[i], ring);
        std::memset(out + pos, 0, pad);
        pos += pad;
    }
    return offsets;
}

void finish_container(unsigned char* out, std::size_t len) {
    put<std::uint64_t>(out, len - kTrailerSize, checksum64(out + kHeaderSize, len - kHeaderSize - kTrailerSize));
}

Header read_container(const unsigned char* data, std::size_t len, Kind kind, std::vector<StageBytes>* records) {
    const Header h = decode_header(data, len);
    if (h.kind != kind) bad(std::string("this holds a ") + kind_name(h.kind) + ", not a " + kind_name(kind));
    checked_payload(data, len, h);
    const char* what = kind == Kind::windowed ? "generation " : "stage ";
    const bool ring = (h.flags & kFlagRing) != 0;
    const std::size_t head = record_head_size(kind, ring);
    records->clear();
    std::size_t pos = kHeaderSize;
    const std::size_t end = kHeaderSize + h.payload_len;
    for (std::uint64_t i = 0; i < h.num_slots; ++i) {
        if (end - pos < head) bad(what + fmt(i) + " is truncated");
        const auto record_len = get<std::uint64_t>(data, pos);
        const auto count = get<std::uint64_t>(data, pos + 8);
        if (count > kMaxCount) bad(what + fmt(i) + " count " + fmt(count) + " is past any filter's count (2**56)");
        const auto number = kind == Kind::windowed ? static_cast<std::int64_t>(get<std::uint64_t>(data, pos + 16)) : 0;
        pos += head;
        if (record_len > end - pos)
            bad(what + fmt(i) + " claims " + fmt(record_len) + " bytes, " + fmt(static_cast<std::uint64_t>(end - pos)) +
                " left");
        for (std::size_t b = pos - head + 24; b < pos; ++b)
            if (data[b] != 0) bad(what + fmt(i) + ": its head's reserved bytes are not zero");
        records->push_back({count, number, data + pos, static_cast<std::size_t>(record_len)});
        pos += record_len;
        const std::size_t pad = record_padding(static_cast<std::size_t>(record_len), ring);
        if (end - pos < pad) bad(what + fmt(i) + " is truncated (its padding)");
        for (std::size_t b = pos; b < pos + pad; ++b)
            if (data[b] != 0) bad(what + fmt(i) + ": its padding is not zero");
        pos += pad;
    }
    if (pos != end) bad(std::string("bytes left over after the last ") + (kind == Kind::windowed ? "generation" : "stage"));
    return h;
}

std::size_t chain_size(const std::vector<std::size_t>& stage_lens) { return container_size(Kind::scalable, stage_lens); }

Header chain_header(const ChainHeader& c) {
    Header h;
    h.kind = Kind::scalable;
    h.layout = c.layout;
    h.seed = c.seed;
    h.num_hashes = c.growth;
    h.capacity = c.initial_capacity;
    h.error_rate = c.error_rate;
    h.insert_count = c.insert_count;
    h.fill = double_bits(c.tightening);
    return h;
}

double chain_tightening(const Header& h) { return bits_double(h.fill); }

ChainHeader read_chain(const unsigned char* data, std::size_t len, std::vector<StageBytes>* stages) {
    const Header h = read_container(data, len, Kind::scalable, stages);
    ChainHeader c;
    c.layout = h.layout;
    c.seed = h.seed;
    c.initial_capacity = h.capacity;
    c.error_rate = h.error_rate;
    c.growth = h.num_hashes;
    c.tightening = bits_double(h.fill);
    c.insert_count = h.insert_count;
    return c;
}

Header window_header(const WindowHeader& w) {
    Header h;
    h.kind = Kind::windowed;
    h.layout = w.layout;
    h.seed = w.seed;
    h.num_hashes = w.generations;
    h.capacity = w.capacity;
    h.error_rate = w.error_rate;
    h.insert_count = w.insert_count;
    h.fill = double_bits(w.window);
    h.flags = (w.ring ? kFlagRing : 0) | (w.dirty ? kFlagDirty : 0);
    return h;
}

double window_seconds(const Header& h) { return bits_double(h.fill); }

WindowHeader read_window(const unsigned char* data, std::size_t len, std::vector<StageBytes>* generations) {
    const Header h = read_container(data, len, Kind::windowed, generations);
    WindowHeader w;
    w.layout = h.layout;
    w.seed = h.seed;
    w.capacity = h.capacity;
    w.error_rate = h.error_rate;
    w.generations = h.num_hashes;
    w.window = bits_double(h.fill);
    w.insert_count = h.insert_count;
    w.ring = (h.flags & kFlagRing) != 0;
    w.dirty = (h.flags & kFlagDirty) != 0;
    return w;
}

}  // namespace bloomline
