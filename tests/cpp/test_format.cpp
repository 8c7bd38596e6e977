// The format (format.hpp, filter_io.hpp): every kind round-trips to the
// same bytes and the same answers, and bad bytes are refused with
// std::invalid_argument saying what is wrong: every truncation, every
// single-byte change, a wrong magic or version, bits past num_slots.
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "bloomline/filter_io.hpp"
#include "bloomline/sizing.hpp"
#include "check.hpp"
#include "data.hpp"

using namespace bloomline;

namespace {

template <class T>
std::vector<unsigned char> encode(const T& f) {
    std::vector<unsigned char> out(header_of(f).total_size());
    encode_filter(f, out.data());
    return out;
}

std::unique_ptr<BloomFilter> small_bloom(Layout layout) {
    const Params p = optimal_params(200, 0.01, layout);
    auto f = std::make_unique<BloomFilter>(Geometry{layout, p.num_bits, p.num_hashes, 42}, 200, 0.01);
    for (std::uint64_t i = 0; i < 150; ++i) f->add(murmur3_128_u64(i, 42));
    return f;
}

// decode must refuse the bytes: true when it threw std::invalid_argument
// (never anything else, never a crash).
bool refused(const std::vector<unsigned char>& b, std::string* why = nullptr) {
    try {
        decode_filter<BloomFilter>(b.data(), b.size());
    } catch (const std::invalid_argument& e) {
        if (why) *why = e.what();
        return true;
    }
    return false;
}

}  // namespace

TEST("a BloomFilter round-trips to the same bytes and answers, both layouts") {
    for (Layout layout : {Layout::blocked, Layout::standard}) {
        const auto f = small_bloom(layout);
        const std::vector<unsigned char> bytes = encode(*f);
        const auto back = decode_filter<BloomFilter>(bytes.data(), bytes.size());
        CHECK(back->geometry() == f->geometry());
        CHECK_EQ(back->insert_count(), f->insert_count());
        CHECK_EQ(back->bits_set(), f->bits_set());
        CHECK(encode(*back) == bytes);
        bool all = true;
        for (std::uint64_t i = 0; i < 150; ++i) all = all && back->contains(murmur3_128_u64(i, 42));
        CHECK(all);
    }
}

TEST("a CountingBloomFilter round-trips with its counter width and counts") {
    for (unsigned bits : {4u, 8u, 16u}) {
        const Params p = optimal_params(100, 0.01, Layout::standard);
        CountingBloomFilter f(Geometry{Layout::standard, p.num_bits, p.num_hashes, 1}, bits, 100, 0.01);
        for (int i = 0; i < 20; ++i) f.add(murmur3_128_u64(5, 1));
        const std::vector<unsigned char> bytes = encode(f);
        const auto back = decode_filter<CountingBloomFilter>(bytes.data(), bytes.size());
        CHECK_EQ(back->counter_bits(), bits);
        CHECK_EQ(back->count(murmur3_128_u64(5, 1)), f.count(murmur3_128_u64(5, 1)));
        CHECK(encode(*back) == bytes);
        CHECK_THROWS(decode_filter<BloomFilter>(bytes.data(), bytes.size()), "not a BloomFilter");
    }
}

TEST("the header says what the format documents, little-endian") {
    const auto f = small_bloom(Layout::blocked);
    const std::vector<unsigned char> b = encode(*f);
    CHECK(std::memcmp(b.data(), "\x89" "BLOOML\n", 8) == 0);
    CHECK(b[8] == 1 && b[9] == 0);     // format_version 1
    CHECK(b[10] == 1 && b[11] == 1);   // kind BloomFilter, layout blocked
    CHECK_EQ(static_cast<int>(b[16]), 42);  // seed, low byte first
    CHECK_EQ(b.size(), kHeaderSize + header_of(*f).payload_len + kTrailerSize);
}

TEST("every truncation is refused") {
    const std::vector<unsigned char> b = encode(*small_bloom(Layout::blocked));
    int refusals = 0;
    for (std::size_t n = 0; n < b.size(); ++n) refusals += refused(std::vector<unsigned char>(b.begin(), b.begin() + static_cast<long>(n)));
    CHECK_EQ(static_cast<std::size_t>(refusals), b.size());
}

TEST("every single-byte change is refused, the header's and the payload's by their checksums") {
    for (Layout layout : {Layout::blocked, Layout::standard}) {
        const std::vector<unsigned char> good = encode(*small_bloom(layout));
        std::size_t refusals = 0;
        for (std::size_t i = 0; i < good.size(); ++i) {
            std::vector<unsigned char> bad = good;
            bad[i] ^= 0x5a;
            refusals += refused(bad);
        }
        CHECK_EQ(refusals, good.size());
        std::string why;
        std::vector<unsigned char> bad = good;
        bad[200] ^= 1;
        CHECK(refused(bad, &why) && why.find("payload checksum mismatch") != std::string::npos);
        bad = good;
        bad[20] ^= 1;
        CHECK(refused(bad, &why) && why.find("header checksum") != std::string::npos);
        bad = good;
        bad[0] = 'X';
        CHECK(refused(bad, &why) && why.find("magic") != std::string::npos);
    }
}

TEST("a version from the future is refused by name, even with a valid header checksum") {
    std::vector<unsigned char> b = encode(*small_bloom(Layout::blocked));
    b[8] = 2;
    write_u64(b.data(), 120, checksum64(b.data(), 120));
    std::string why;
    CHECK(refused(b, &why) && why.find("version") != std::string::npos);
}

TEST("bits set past num_slots are refused, checksums or not") {
    // A standard filter whose m is not a whole number of 512-bit blocks has
    // padding; a bit there is corruption the checksums cannot see if the
    // writer made them after setting it.
    BloomFilter f(Geometry{Layout::standard, 1000, 3, 0}, 0, 0);
    std::vector<unsigned char> b = encode(f);
    const Header h = decode_header(b.data(), b.size());
    b[kHeaderSize + h.payload_len - 1] = 0x80;
    write_u64(b.data(), trailer_offset(h), checksum64(b.data() + kHeaderSize, h.payload_len));
    std::string why;
    CHECK(refused(b, &why));
    CHECK(why.find("invalid bloomline data") != std::string::npos);
}

TEST("the golden scalable chain of format version 1 decodes with its stages") {
    const std::vector<unsigned char> b = testdata::read_bytes("v1_scalable.blf");
    const Chain c = decode_chain(b.data(), b.size());
    CHECK(c.stages.size() >= 3);  // 1000 keys into stages of 200, 400, 800
    bool all = true;
    for (int i = 0; i < 1000; ++i) {
        const std::string k = "golden-" + std::to_string(i);
        bool found = false;
        for (const ChainStage& s : c.stages) found = found || s.filter->contains(murmur3_128(k.data(), k.size(), c.seed));
        all = all && found;
    }
    CHECK(all);
}

// ---- kinds 3 and 4: one container code ------------------------------------------

namespace {
std::unique_ptr<BloomFilter> generation(std::uint64_t first, std::uint64_t n, double rate) {
    const Params p = optimal_params(100, rate, Layout::blocked);
    auto f = std::make_unique<BloomFilter>(Geometry{Layout::blocked, p.num_bits, p.num_hashes, 3}, 100, rate);
    for (std::uint64_t i = first; i < first + n; ++i) f->add(murmur3_128_u64(i, 3));
    return f;
}

std::vector<unsigned char> window_bytes(const std::vector<std::int64_t>& numbers, WindowHeader w = {}) {
    const double rate = window_generation_error_rate(0.01, 4);
    std::vector<std::unique_ptr<BloomFilter>> gens;
    std::vector<const BloomFilter*> ptrs;
    std::vector<std::uint64_t> counts;
    for (std::size_t i = 0; i < numbers.size(); ++i) {
        gens.push_back(generation(i * 50, 50, rate));
        ptrs.push_back(gens.back().get());
        counts.push_back(gens.back()->insert_count());
    }
    std::vector<unsigned char> out(window_encoded_size(ptrs));
    encode_window(w, ptrs, counts, numbers, out.data(), out.size());
    return out;
}

WindowHeader params() {
    WindowHeader w;
    w.seed = 3;
    w.capacity = 100;
    w.error_rate = 0.01;
    w.generations = 4;
    w.window = 3600;
    return w;
}
}  // namespace

TEST("a windowed filter (kind 4) round-trips its generations, numbers and counts") {
    const std::vector<unsigned char> b = window_bytes({-2, 0, 1}, params());
    CHECK(b[10] == 4);
    const Window w = decode_window(b.data(), b.size());
    CHECK(w.generations.size() == 3 && w.params.window == 3600 && w.params.generations == 4);
    CHECK(w.generations[0].number == -2 && w.generations[2].number == 1);
    CHECK(w.params.insert_count == w.generations[0].count + w.generations[1].count + w.generations[2].count);
    CHECK(w.generations[1].filter->contains(murmur3_128_u64(60, 3)));
    // A kind-4 container is not a chain, nor a chain a window.
    bool refused_as_chain = false;
    try {
        decode_chain(b.data(), b.size());
    } catch (const std::invalid_argument& e) {
        refused_as_chain = std::string(e.what()).find("not a ScalableBloomFilter") != std::string::npos;
    }
    CHECK(refused_as_chain);
}

TEST("a windowed filter's generation numbers must rise and stay within G of the newest") {
    for (const std::vector<std::int64_t>& numbers :
         {std::vector<std::int64_t>{0, 2, 1}, std::vector<std::int64_t>{3, 3}, std::vector<std::int64_t>{0, 5}}) {
        const std::vector<unsigned char> b = window_bytes(numbers, params());
        bool refused_numbers = false;
        try {
            decode_window(b.data(), b.size());
        } catch (const std::invalid_argument& e) {
            refused_numbers = std::string(e.what()).find("generation") != std::string::npos;
        }
        CHECK(refused_numbers);
    }
}

namespace {
// The ring form: all G + 1 = 5 places, numbers by place (kGenerationNone: none).
std::vector<unsigned char> ring_bytes(const std::vector<std::int64_t>& numbers) {
    const double rate = window_generation_error_rate(0.01, 4);
    std::vector<std::unique_ptr<BloomFilter>> gens;
    std::vector<const BloomFilter*> ptrs;
    std::vector<std::uint64_t> counts;
    for (std::size_t i = 0; i < numbers.size(); ++i) {
        gens.push_back(generation(i * 50, numbers[i] == kGenerationNone ? 0 : 50, rate));
        ptrs.push_back(gens.back().get());
        counts.push_back(gens.back()->insert_count());
    }
    std::vector<unsigned char> out(window_encoded_size(ptrs, true));
    encode_window_ring(params(), ptrs, counts, numbers, out.data(), out.size());
    return out;
}
}  // namespace

TEST("a windowed filter's ring form keeps every place 64-byte aligned and reads its live generations") {
    // Generation n lives at place n mod 5: 5, 6, none, 8, 4 (4 below the newest, 8: still live).
    const std::vector<unsigned char> b = ring_bytes({5, 6, kGenerationNone, 8, 4});
    CHECK((b[36] & kFlagRing) != 0);
    std::vector<StageBytes> records;
    read_window(b.data(), b.size(), &records);
    CHECK(records.size() == 5);
    for (const StageBytes& r : records) CHECK((r.data - b.data()) % 64 == 0);  // each place's header, so its payload
    const Window w = decode_window(b.data(), b.size());
    CHECK(w.generations.size() == 4);
    CHECK(w.generations[0].number == 4 && w.generations[1].number == 5 && w.generations[3].number == 8);
    CHECK(w.generations[3].filter->contains(murmur3_128_u64(160, 3)));  // place 3 holds keys 150..199
    // A place more than 4 below the newest (10) holds an expired generation: left out, not refused.
    const std::vector<unsigned char> later = ring_bytes({10, 6, kGenerationNone, 8, 4});
    const Window w2 = decode_window(later.data(), later.size());
    CHECK(w2.generations.size() == 3 && w2.generations[0].number == 6 && w2.generations[2].number == 10);
    // A number that is not its place's is refused.
    const std::vector<unsigned char> wrong = ring_bytes({5, 6, kGenerationNone, 8, 3});
    CHECK_THROWS(decode_window(wrong.data(), wrong.size()), "not its place's");
}

TEST("every truncation of a windowed filter is refused") {
    const std::vector<unsigned char> b = window_bytes({0, 1}, params());
    bool all = true;
    for (std::size_t n = 0; n < b.size(); n += 7) {
        try {
            decode_window(b.data(), n);
            all = false;
        } catch (const std::invalid_argument&) {
        }
    }
    CHECK(all);
}

TEST("the golden windowed filter (kind 4) decodes with its two generations") {
    const std::vector<unsigned char> b = testdata::read_bytes("v1_windowed.blf");
    const Window w = decode_window(b.data(), b.size());
    CHECK(w.generations.size() == 2 && w.generations[0].number == 0 && w.generations[1].number == 1);
    CHECK(w.params.window == 1e12 && w.params.generations == 4 && w.params.seed == 7);
}
