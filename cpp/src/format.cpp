#include "bloomline/format.hpp"

#include <cmath>
#include <cstring>

#include "bloomline/murmur3.hpp"

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
    put<std::uint64_t>(out, 40, h.capacity);
    put<std::uint64_t>(out, 48, double_bits(h.error_rate));
    put<std::uint64_t>(out, 56, h.insert_count);
    put<std::uint64_t>(out, 64, kHeaderSize);
    put<std::uint64_t>(out, 72, h.payload_len);
    if (h.kind != Kind::scalable) put<std::uint64_t>(out, 80, h.fill);
    put<std::uint64_t>(out, 120, checksum64(out, 120));
}

Header decode_header(const unsigned char* in, std::size_t len) {
    if (len < kHeaderSize + kTrailerSize)
        bad("got " + std::to_string(len) + " bytes, shorter than the " + std::to_string(kHeaderSize + kTrailerSize) +
            "-byte minimum (truncated?)");
    if (std::memcmp(in, kMagic, 8) != 0) bad("bad magic (not a bloomline filter)");
    const auto version = get<std::uint16_t>(in, 8);
    if (version != kFormatVersion)
        bad("format version " + std::to_string(version) + " is not supported (this bloomline reads version 1)");
    if (get<std::uint64_t>(in, 120) != checksum64(in, 120)) bad("header checksum mismatch (the header is corrupt)");

    Header h;
    const auto kind = get<std::uint8_t>(in, 10);
    if (kind < 1 || kind > 3) bad("unknown kind code " + std::to_string(kind));
    h.kind = static_cast<Kind>(kind);
    const auto layout = get<std::uint8_t>(in, 11);
    if (layout > 1) bad("unknown layout code " + std::to_string(layout));
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
    if ((h.flags & ~kFlagDirty) != 0 || (h.flags != 0 && h.kind == Kind::scalable)) bad("unknown flags set");
    h.capacity = get<std::uint64_t>(in, 40);
    h.error_rate = bits_double(get<std::uint64_t>(in, 48));
    h.insert_count = get<std::uint64_t>(in, 56);
    if (get<std::uint64_t>(in, 64) != kHeaderSize) bad("payload_offset is not 128");
    h.payload_len = get<std::uint64_t>(in, 72);
    if (h.kind != Kind::scalable) h.fill = get<std::uint64_t>(in, 80);
    for (std::size_t off = 88; off < 120; ++off)
        if (in[off] != 0) bad("reserved header bytes are not zero");
    if (!(h.error_rate >= 0 && h.error_rate < 1)) bad("error_rate " + fmt(h.error_rate) + " is outside [0, 1)");

    if (h.kind == Kind::scalable) {
        if (h.num_slots < 1 || h.num_slots > kMaxStages)
            bad("a scalable filter must have 1 to 64 stages, got " + fmt(h.num_slots));
        if (h.num_hashes != 2 && h.num_hashes != 4) bad("growth must be 2 or 4, got " + fmt(h.num_hashes));
        const double t = scalable_tightening(in);
        if (!(t > 0 && t < 1)) bad("tightening must be in (0, 1), got " + fmt(t));
        if (h.payload_len > len || h.total_size() != len)
            bad("got " + std::to_string(len) + " bytes, the header describes " +
                fmt(h.payload_len + kHeaderSize + kTrailerSize) + " (truncated or padded?)");
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
    if (h.payload_len > len || h.total_size() != len)
        bad("got " + std::to_string(len) + " bytes, the header describes " + fmt(h.payload_len + kHeaderSize + kTrailerSize) +
            " (truncated or padded?)");
    return h;
}

std::size_t trailer_offset(const Header& h) { return kHeaderSize + h.payload_len; }
void write_u64(unsigned char* out, std::size_t off, std::uint64_t v) { put<std::uint64_t>(out, off, v); }

double scalable_tightening(const unsigned char* data) { return bits_double(get<std::uint64_t>(data, 80)); }

void set_scalable_tightening(unsigned char* header, double tightening) {
    put<std::uint64_t>(header, 80, double_bits(tightening));
    put<std::uint64_t>(header, 120, checksum64(header, 120));
}

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

namespace {

template <class F>
Header common_header(const F& f, Kind kind, unsigned slot_bits, std::size_t payload_len) {
    Header h;
    h.kind = kind;
    h.layout = f.geometry().layout;
    h.slot_bits = static_cast<std::uint8_t>(slot_bits);
    h.seed = f.geometry().seed;
    h.num_slots = f.geometry().num_slots;
    h.num_hashes = f.geometry().num_hashes;
    h.capacity = f.capacity();
    h.error_rate = f.error_rate();
    h.insert_count = f.insert_count();
    h.payload_len = payload_len;
    return h;
}

// Header checks, kind check, payload checksum, then a private copy of the
// payload (the input may be a bytes object about to be freed).
Header read_checked(const unsigned char* data, std::size_t len, Kind want, Memory* mem) {
    const Header h = decode_header(data, len);
    if (h.kind != want) bad(std::string("this holds a ") + kind_name(h.kind) + ", not a " + kind_name(want));
    const unsigned char* payload = checked_payload(data, len, h);
    *mem = Memory::zeroed(h.payload_len);
    std::memcpy(mem->data, payload, h.payload_len);
    return h;
}

}  // namespace

Header header_of(const BloomFilter& f) {
    Header h = common_header(f, Kind::bloom, 1, f.bits().nbytes());
    h.fill = f.bits_set();
    return h;
}

Header header_of(const CountingBloomFilter& f) {
    Header h = common_header(f, Kind::counting, f.counter_bits(), f.counters().nbytes());
    h.fill = f.nonzero_counters();
    return h;
}

template <>
std::unique_ptr<BloomFilter> filter_from(const Header& h, Memory payload, Backing backing, bool trust_fill) {
    return std::make_unique<BloomFilter>(Geometry{h.layout, h.num_slots, h.num_hashes, h.seed}, h.capacity,
                                         h.error_rate, std::move(payload), h.insert_count,
                                         trust_fill ? h.fill : BloomFilter::kUnknown, std::move(backing));
}

template <>
std::unique_ptr<CountingBloomFilter> filter_from(const Header& h, Memory payload, Backing backing, bool) {
    // Counts of a mapped file are made on first need (counting_filter.hpp).
    return std::make_unique<CountingBloomFilter>(Geometry{h.layout, h.num_slots, h.num_hashes, h.seed}, h.slot_bits,
                                                 h.capacity, h.error_rate, std::move(payload), h.insert_count,
                                                 std::move(backing));
}

template <class T>
std::unique_ptr<T> read_filter(const unsigned char* data, std::size_t len) {
    Memory mem;
    const Header h = read_checked(data, len, KindOf<T>::value, &mem);
    return filter_from<T>(h, std::move(mem), Backing{}, false);
}

template std::unique_ptr<BloomFilter> read_filter<BloomFilter>(const unsigned char*, std::size_t);
template std::unique_ptr<CountingBloomFilter> read_filter<CountingBloomFilter>(const unsigned char*, std::size_t);

}  // namespace bloomline
