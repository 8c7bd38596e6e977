// See filter_io.hpp.
#include "bloomline/filter_io.hpp"

#include <cstring>
#include <string>

namespace bloomline {

namespace {

[[noreturn]] void bad(const std::string& what) { throw std::invalid_argument("invalid bloomline data: " + what); }

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

Geometry geometry_of(const Header& h) { return Geometry{h.layout, h.num_slots, h.num_hashes, h.seed}; }

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

const unsigned char* payload_of(const BloomFilter& f) { return f.bits().bytes(); }
const unsigned char* payload_of(const CountingBloomFilter& f) { return f.counters().bytes(); }

template <>
std::unique_ptr<BloomFilter> filter_over(const Header& h, Memory payload, bool trust_fill) {
    return std::make_unique<BloomFilter>(geometry_of(h), h.capacity, h.error_rate, std::move(payload), h.insert_count,
                                         trust_fill ? h.fill : BloomFilter::kUnknown);
}

template <>
std::unique_ptr<CountingBloomFilter> filter_over(const Header& h, Memory payload, bool trust_fill) {
    // A mapped file's counts are made on first need (counting_filter.hpp).
    return std::make_unique<CountingBloomFilter>(geometry_of(h), h.slot_bits, h.capacity, h.error_rate,
                                                 std::move(payload), h.insert_count, !trust_fill);
}

std::uint64_t payload_fill(const Header& h, const unsigned char* payload) {
    const std::uint64_t used_bits = h.num_slots * h.slot_bits;  // <= 2**52: no overflow
    const std::uint64_t total_bits = h.payload_len * 8;
    for (std::uint64_t byte = used_bits / 8; byte < h.payload_len; ++byte) {
        const unsigned keep = byte == used_bits / 8 ? static_cast<unsigned>(used_bits % 8) : 0;
        if ((payload[byte] >> keep) != 0)
            throw std::invalid_argument("bits are set past num_slots " + fmt(h.num_slots) + " (in byte " + fmt(byte) +
                                        " of the payload, whose " + fmt(total_bits - used_bits) +
                                        " padding bits must be 0)");
    }
    std::uint64_t fill = 0;
    if (h.slot_bits == 1) {
        for (std::uint64_t off = 0; off < h.payload_len; off += 8) {
            std::uint64_t w;
            std::memcpy(&w, payload + off, 8);
            fill += popcount64(w);
        }
        return fill;
    }
    const CounterArray counters(Memory{const_cast<unsigned char*>(payload), h.payload_len, nullptr}, h.slot_bits);
    for (std::uint64_t i = 0; i < h.num_slots; ++i) fill += counters.get(i) != 0;
    return fill;
}

std::uint64_t checked_fill(const Header& h, const unsigned char* payload) {
    try {
        return payload_fill(h, payload);
    } catch (const std::invalid_argument& e) {
        bad(e.what());
    }
}

template <class T>
std::unique_ptr<T> decode_filter(const unsigned char* data, std::size_t len) {
    Header h = decode_header(data, len);
    if (h.kind != KindOf<T>::value) bad(std::string("this holds a ") + kind_name(h.kind) + ", not a " + kind_name(KindOf<T>::value));
    const unsigned char* payload = checked_payload(data, len, h);
    const std::uint64_t fill = checked_fill(h, payload);
    if (!(h.flags & kFlagDirty) && fill != h.fill)
        bad("fill " + fmt(h.fill) + " does not match the payload (" + fmt(fill) + " " +
            (h.slot_bits == 1 ? "bits set" : "counters above zero") + ")");
    h.fill = fill;
    // A private copy: the input may be a bytes object about to be freed.
    Memory mem = Memory::zeroed(h.payload_len);
    std::memcpy(mem.data, payload, h.payload_len);
    return filter_over<T>(h, std::move(mem), true);
}

template std::unique_ptr<BloomFilter> decode_filter<BloomFilter>(const unsigned char*, std::size_t);
template std::unique_ptr<CountingBloomFilter> decode_filter<CountingBloomFilter>(const unsigned char*, std::size_t);

// ---- chains ------------------------------------------------------------------

namespace {
std::vector<std::size_t> stage_lengths(const std::vector<const BloomFilter*>& stages) {
    std::vector<std::size_t> lens;
    for (const BloomFilter* s : stages) lens.push_back(header_of(*s).total_size());
    return lens;
}
}  // namespace

std::size_t chain_encoded_size(const std::vector<const BloomFilter*>& stages) {
    return chain_size(stage_lengths(stages));
}

void encode_chain(const ChainRule& rule, Layout layout, std::uint64_t seed,
                  const std::vector<const BloomFilter*>& stages, const std::vector<std::uint64_t>& counts,
                  unsigned char* out, std::size_t len) {
    const std::vector<std::size_t> lens = stage_lengths(stages);
    if (chain_size(lens) != len) throw std::invalid_argument("encode_chain: the buffer has the wrong size");
    ChainHeader c;
    c.layout = layout;
    c.seed = seed;
    c.initial_capacity = rule.initial_capacity;
    c.error_rate = rule.error_rate;
    c.growth = rule.growth;
    c.tightening = rule.tightening;
    for (std::uint64_t n : counts) c.insert_count += n;
    const std::vector<std::size_t> at = start_chain(c, lens, counts, out);
    for (std::size_t i = 0; i < stages.size(); ++i) encode_filter(*stages[i], out + at[i]);
    finish_chain(out, len);
}

Chain decode_chain(const unsigned char* data, std::size_t len) {
    std::vector<StageBytes> records;
    const ChainHeader c = read_chain(data, len, &records);
    Chain chain;
    try {
        chain.rule = ChainRule::make(c.initial_capacity, c.error_rate, c.growth, c.tightening);
    } catch (const std::invalid_argument& e) {
        bad(e.what());
    }
    chain.layout = c.layout;
    chain.seed = c.seed;
    if (records.size() > chain.rule.max_stages())
        bad("the chain has " + fmt(static_cast<std::uint64_t>(records.size())) + " stages, its rule allows " +
            fmt(chain.rule.max_stages()));
    for (std::uint32_t i = 0; i < records.size(); ++i) {
        const StageBytes& r = records[i];
        std::unique_ptr<BloomFilter> stage;
        try {
            stage = decode_filter<BloomFilter>(r.data, r.len);
        } catch (const std::invalid_argument& e) {
            bad("stage " + fmt(i) + ": " + std::string(e.what()).substr(std::strlen("invalid bloomline data: ")));
        }
        const std::uint64_t capacity = chain.rule.stage_capacity(i);
        const Geometry& g = stage->geometry();
        if (stage->capacity() != capacity || stage->error_rate() != chain.rule.stage_error_rate(i) ||
            g.layout != c.layout || g.seed != c.seed)
            bad("stage " + fmt(i) + " does not match the chain's parameters");
        if (r.count > capacity)
            bad("stage " + fmt(i) + " count " + fmt(r.count) + " exceeds its capacity " + fmt(capacity));
        chain.stages.push_back({r.count, std::move(stage)});
    }
    return chain;
}

}  // namespace bloomline
