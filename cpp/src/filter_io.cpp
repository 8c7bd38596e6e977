// See filter_io.hpp.
#include "bloomline/filter_io.hpp"

#include <algorithm>
#include <cstring>
#include <string>

#include "bloomline/murmur3.hpp"

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

void FillCount::add(const unsigned char* chunk, std::uint64_t offset, std::size_t n) {
    const std::uint64_t used_bits = h_.num_slots * h_.slot_bits;  // <= 2**52: no overflow
    const std::uint64_t total_bits = h_.payload_len * 8;
    // The padding: every bit past num_slots is 0.
    for (std::uint64_t byte = std::max(used_bits / 8, offset); byte < offset + n; ++byte) {
        const unsigned keep = byte == used_bits / 8 ? static_cast<unsigned>(used_bits % 8) : 0;
        if ((chunk[byte - offset] >> keep) != 0)
            throw std::invalid_argument("bits are set past num_slots " + fmt(h_.num_slots) + " (in byte " + fmt(byte) +
                                        " of the payload, whose " + fmt(total_bits - used_bits) +
                                        " padding bits must be 0)");
    }
    if (h_.slot_bits == 1) {
        std::size_t off = 0;
        for (; off + 8 <= n; off += 8) {
            std::uint64_t w;
            std::memcpy(&w, chunk + off, 8);
            fill_ += popcount64(w);
        }
        for (; off < n; ++off) fill_ += popcount64(chunk[off]);
        return;
    }
    // Counters wholly inside the chunk (offsets are multiples of 8 bytes, so
    // no counter straddles two chunks), below num_slots.
    const CounterArray counters(Memory{const_cast<unsigned char*>(chunk), n, nullptr}, h_.slot_bits);
    const std::uint64_t first = offset * 8 / h_.slot_bits;
    const std::uint64_t end = std::min<std::uint64_t>(h_.num_slots, (offset + n) * 8 / h_.slot_bits);
    for (std::uint64_t i = first; i < end; ++i) fill_ += counters.get(i - first) != 0;
}

std::uint64_t payload_fill(const Header& h, const unsigned char* payload) {
    FillCount count(h);
    count.add(payload, 0, h.payload_len);
    return count.fill();
}

// Bytes per chunk of a snapshot: adds wait for one chunk's copy at most.
constexpr std::size_t kSnapshotChunk = std::size_t{1} << 20;

template <class T>
Snapshot snapshot_payload(const T& f, const std::function<unsigned char*(std::size_t, std::size_t)>& place,
                          const std::function<void(const unsigned char*, std::size_t)>& done) {
    Snapshot s{header_of(f), 0};
    Header& h = s.header;
    FillCount fill(h);
    Murmur3Stream checksum(0);
    for (std::size_t off = 0; off < h.payload_len; off += kSnapshotChunk) {
        const std::size_t n = std::min<std::size_t>(kSnapshotChunk, h.payload_len - off);
        unsigned char* to = place(off, n);
        f.read_locked([&] {
            f.check_open();  // closed meanwhile: its memory may be gone
            if (!f.shared_memory()) return (void)std::memcpy(to, payload_of(f) + off, n);
            // Other processes write this memory with 64-bit atomics: read it
            // so, or a 16-bit counter could be copied half old, half new.
            const auto* from = reinterpret_cast<const std::uint64_t*>(payload_of(f) + off);
            for (std::size_t w = 0; w < n / 8; ++w) {
                const std::uint64_t v = __atomic_load_n(from + w, __ATOMIC_RELAXED);
                std::memcpy(to + 8 * w, &v, 8);
            }
        });
        fill.add(to, off, n);
        checksum.update(to, n);
        if (done) done(to, n);
    }
    h.fill = fill.fill();
    h.flags = 0;
    h.writers = 0;
    s.payload_checksum = checksum.digest().h1;
    return s;
}

template <class T>
void encode_filter(const T& f, unsigned char* out) {
    const Snapshot s = snapshot_payload(f, [out](std::size_t off, std::size_t) { return out + kHeaderSize + off; });
    encode_header(s.header, out);
    write_u64(out, trailer_offset(s.header), s.payload_checksum);
}

template Snapshot snapshot_payload<BloomFilter>(const BloomFilter&,
                                                const std::function<unsigned char*(std::size_t, std::size_t)>&,
                                                const std::function<void(const unsigned char*, std::size_t)>&);
template Snapshot snapshot_payload<CountingBloomFilter>(const CountingBloomFilter&,
                                                        const std::function<unsigned char*(std::size_t, std::size_t)>&,
                                                        const std::function<void(const unsigned char*, std::size_t)>&);
template void encode_filter<BloomFilter>(const BloomFilter&, unsigned char*);
template void encode_filter<CountingBloomFilter>(const CountingBloomFilter&, unsigned char*);

std::uint64_t checked_fill(const Header& h, const unsigned char* payload) {
    try {
        return payload_fill(h, payload);
    } catch (const std::invalid_argument& e) {
        bad(e.what());
    }
}

void repair_insert_count(Header& h) {
    h.insert_count =
        std::max(h.insert_count, estimate_as_count(estimate_count(h.fill, h.num_slots, h.num_hashes, h.layout)));
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
    if (h.flags & kFlagDirty) repair_insert_count(h);  // (a writer's adds not yet in its header, or never: killed)
    // A private copy: the input may be a bytes object about to be freed.
    Memory mem = Memory::zeroed(h.payload_len);
    std::memcpy(mem.data, payload, h.payload_len);
    return filter_over<T>(h, std::move(mem), true);
}

template std::unique_ptr<BloomFilter> decode_filter<BloomFilter>(const unsigned char*, std::size_t);
template std::unique_ptr<CountingBloomFilter> decode_filter<CountingBloomFilter>(const unsigned char*, std::size_t);

// ---- containers (kinds 3 and 4) -------------------------------------------------

namespace {
std::vector<std::size_t> record_lengths(const std::vector<const BloomFilter*>& records) {
    std::vector<std::size_t> lens;
    for (const BloomFilter* r : records) lens.push_back(header_of(*r).total_size());
    return lens;
}

// h's container, its records the encodings of these filters.
void encode_container(const Header& h, const std::vector<const BloomFilter*>& records,
                      const std::vector<std::uint64_t>& counts, const std::vector<std::int64_t>& numbers,
                      unsigned char* out, std::size_t len) {
    const std::vector<std::size_t> lens = record_lengths(records);
    if (container_size(h.kind, lens, (h.flags & kFlagRing) != 0) != len)
        throw std::invalid_argument(std::string("encoding a ") + kind_name(h.kind) + ": the buffer has the wrong size");
    const std::vector<std::size_t> at = start_container(h, lens, counts, numbers, out);
    for (std::size_t i = 0; i < records.size(); ++i) encode_filter(*records[i], out + at[i]);
    finish_container(out, len);
}

// Record i's filter, fully checked; its errors name the record ("stage 2: ...").
std::unique_ptr<BloomFilter> decode_record(const StageBytes& r, const char* what, std::uint64_t i) {
    try {
        return decode_filter<BloomFilter>(r.data, r.len);
    } catch (const std::invalid_argument& e) {
        bad(what + fmt(i) + ": " + std::string(e.what()).substr(std::strlen("invalid bloomline data: ")));
    }
}
}  // namespace

std::size_t chain_encoded_size(const std::vector<const BloomFilter*>& stages) {
    return chain_size(record_lengths(stages));
}

void encode_chain(const ChainRule& rule, Layout layout, std::uint64_t seed,
                  const std::vector<const BloomFilter*>& stages, const std::vector<std::uint64_t>& counts,
                  unsigned char* out, std::size_t len) {
    if (stages.empty() || stages.size() > kMaxStages)
        throw std::invalid_argument("a scalable filter has 1 to 64 stages, got " + std::to_string(stages.size()));
    ChainHeader c;
    c.layout = layout;
    c.seed = seed;
    c.initial_capacity = rule.initial_capacity;
    c.error_rate = rule.error_rate;
    c.growth = rule.growth;
    c.tightening = rule.tightening;
    for (std::uint64_t n : counts) c.insert_count += n;
    encode_container(chain_header(c), stages, counts, {}, out, len);
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
        std::unique_ptr<BloomFilter> stage = decode_record(r, "stage ", i);
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

namespace {

// Record i of a windowed filter, decoded: a generation of the window's
// parameters (the rate and geometry each generation is made with), or bad().
std::unique_ptr<BloomFilter> decode_generation(const StageBytes& r, std::uint32_t i, const WindowHeader& p,
                                               double rate, const Params& want) {
    std::unique_ptr<BloomFilter> gen = decode_record(r, "generation ", i);
    const Geometry& g = gen->geometry();
    if (gen->capacity() != p.capacity || gen->error_rate() != rate || g.num_slots != want.num_bits ||
        g.num_hashes != want.num_hashes || g.layout != p.layout || g.seed != p.seed)
        bad("generation " + fmt(i) + " does not match the window's parameters (capacity " + fmt(p.capacity) +
            ", error rate " + fmt(rate) + " per generation, " + layout_name(p.layout) + ", seed " + fmt(p.seed) +
            ")");
    return gen;
}

// The ring form (kFlagRing): record i is place i of the ring, holding
// generation n (n mod (G + 1) == i) or none. The live generations are those
// within G of the newest held anywhere (a place keeps an expired generation
// until the ring comes round to it); a place being started when its writer
// died holds none. A dirty file's counts are not kept exactly (several
// processes count their own adds, at least once): each is cut to its bits.
Window decode_ring(Window& w, const std::vector<StageBytes>& records, double rate, const Params& want) {
    const WindowHeader& p = w.params;
    const auto places = static_cast<std::int64_t>(p.generations) + 1;
    std::int64_t newest = kGenerationNone;
    for (std::uint32_t i = 0; i < records.size(); ++i) {
        const std::int64_t n = records[i].number;
        if (n == kGenerationNone || n == kGenerationStarting) continue;
        if (((n % places) + places) % places != i)
            bad("generation " + fmt(i) + " has number " + std::to_string(n) + ", which is not its place's (" +
                std::to_string(n) + " mod " + std::to_string(places) + " is not " + fmt(i) + ")");
        newest = std::max(newest, n);
    }
    std::uint64_t total = 0;
    std::vector<WindowGeneration> live;
    for (std::uint32_t i = 0; i < records.size(); ++i) {
        const StageBytes& r = records[i];
        std::unique_ptr<BloomFilter> gen = decode_generation(r, i, p, rate, want);
        std::uint64_t count = r.count;
        if (count > gen->bits_set()) {
            if (!p.dirty)
                bad("generation " + fmt(i) + " count " + fmt(r.count) + " exceeds its bits set " +
                    fmt(gen->bits_set()) + " (each new key sets a bit)");
            count = gen->bits_set();
        }
        total += r.count;
        const std::int64_t n = r.number;
        if (n == kGenerationNone || n == kGenerationStarting) continue;
        // (unsigned: the difference of two int64 with n <= newest fits)
        if (static_cast<std::uint64_t>(newest) - static_cast<std::uint64_t>(n) > p.generations) continue;
        gen->take_count(count);  // (the record's: the place's own header may be an earlier generation's)
        live.push_back({n, count, std::move(gen)});
    }
    if (!p.dirty && total != p.insert_count)
        bad("insert_count " + fmt(p.insert_count) + " is not the sum of the generations' counts (" + fmt(total) + ")");
    std::sort(live.begin(), live.end(),
              [](const WindowGeneration& a, const WindowGeneration& b) { return a.number < b.number; });
    w.generations = std::move(live);
    w.params.insert_count = 0;
    for (const WindowGeneration& g : w.generations) w.params.insert_count += g.count;
    return std::move(w);
}

}  // namespace

void encode_window_ring(WindowHeader params, const std::vector<const BloomFilter*>& places,
                        const std::vector<std::uint64_t>& counts, const std::vector<std::int64_t>& numbers,
                        unsigned char* out, std::size_t len) {
    if (places.size() != params.generations + std::size_t{1})
        throw std::invalid_argument("a windowed filter's ring form holds all " +
                                    std::to_string(params.generations + 1) + " places, got " +
                                    std::to_string(places.size()));
    params.insert_count = 0;
    for (std::uint64_t n : counts) params.insert_count += n;
    params.ring = true;
    params.dirty = false;
    encode_container(window_header(params), places, counts, numbers, out, len);
}

std::size_t window_encoded_size(const std::vector<const BloomFilter*>& generations, bool ring) {
    return container_size(Kind::windowed, record_lengths(generations), ring);
}

void encode_window(WindowHeader params, const std::vector<const BloomFilter*>& generations,
                   const std::vector<std::uint64_t>& counts, const std::vector<std::int64_t>& numbers,
                   unsigned char* out, std::size_t len) {
    if (generations.size() > params.generations + std::size_t{1})
        throw std::invalid_argument("a windowed filter of " + std::to_string(params.generations) +
                                    " generations keeps at most " + std::to_string(params.generations + 1) + ", got " +
                                    std::to_string(generations.size()));
    params.insert_count = 0;
    for (std::uint64_t n : counts) params.insert_count += n;
    encode_container(window_header(params), generations, counts, numbers, out, len);
}

Window decode_window(const unsigned char* data, std::size_t len) {
    std::vector<StageBytes> records;
    Window w;
    w.params = read_window(data, len, &records);
    const WindowHeader& p = w.params;
    // The generations' rate, and the geometry it gives (what the Python
    // side made them with: the same function, window_generation_error_rate).
    const double rate = window_generation_error_rate(p.error_rate, p.generations);
    Params want;
    try {
        want = optimal_params(static_cast<double>(p.capacity), rate, p.layout);
    } catch (const std::invalid_argument& e) {
        bad(e.what());
    }
    if (p.ring) return decode_ring(w, records, rate, want);
    for (std::uint32_t i = 0; i < records.size(); ++i)
        if (records[i].number == kGenerationNone || records[i].number == kGenerationStarting)
            bad("generation " + fmt(i) + " has number " + std::to_string(records[i].number) +
                ", which marks a ring file's place (-2**63: empty, -2**63 + 1: being started)");
    for (std::uint32_t i = 1; i < records.size(); ++i)
        if (records[i].number <= records[i - 1].number)
            bad("generation " + fmt(i) + " has number " + std::to_string(records[i].number) + ", not above " +
                std::to_string(records[i - 1].number) + " (generations are stored oldest first, each once)");
    std::uint64_t total = 0;
    for (std::uint32_t i = 0; i < records.size(); ++i) {
        const StageBytes& r = records[i];
        std::unique_ptr<BloomFilter> gen = decode_generation(r, i, p, rate, want);
        // (unsigned: the difference of two ascending int64 fits)
        if (static_cast<std::uint64_t>(records.back().number) - static_cast<std::uint64_t>(r.number) > p.generations)
            bad("generation " + fmt(i) + " (number " + std::to_string(r.number) + ") is more than " +
                fmt(p.generations) + " older than the newest (" + std::to_string(records.back().number) + ")");
        if (r.count > gen->bits_set())
            bad("generation " + fmt(i) + " count " + fmt(r.count) + " exceeds its bits set " + fmt(gen->bits_set()) +
                " (each new key sets a bit)");
        // The record's count is the generation's: its filter's own header was
        // encoded a moment later (an export while other threads add), or, in a
        // crafted file, says anything.
        gen->take_count(r.count);
        total += r.count;
        w.generations.push_back({r.number, r.count, std::move(gen)});
    }
    if (total != p.insert_count)
        bad("insert_count " + fmt(p.insert_count) + " is not the sum of the generations' counts (" + fmt(total) + ")");
    return w;
}

}  // namespace bloomline
