// Add and contains on both layouts: no false negative, "new" exactly when a
// bit changed, batches equal to single adds bit for bit, the blocked
// layout's two add forms equal, false positives near the sizing formula,
// and the golden files of format version 1 answering as recorded.
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "bloomline/layout_blocked.hpp"
#include "bloomline/bloom_filter.hpp"
#include "bloomline/filter_io.hpp"
#include "bloomline/sizing.hpp"
#include "check.hpp"
#include "data.hpp"

using namespace bloomline;

namespace {

const Layout kLayouts[] = {Layout::blocked, Layout::standard};

std::unique_ptr<BloomFilter> sized(std::uint64_t capacity, double rate, Layout layout, std::uint64_t seed = 0) {
    const Params p = optimal_params(static_cast<double>(capacity), rate, layout);
    return std::make_unique<BloomFilter>(Geometry{layout, p.num_bits, p.num_hashes, seed}, capacity, rate);
}

std::vector<Hash128> hashes(std::uint64_t lo, std::uint64_t n, std::uint64_t seed = 0) {
    std::vector<Hash128> out(n);
    for (std::uint64_t i = 0; i < n; ++i) out[i] = murmur3_128_u64(lo + i, seed);
    return out;
}

bool same_bits(const BloomFilter& a, const BloomFilter& b) {
    return a.bits().nbytes() == b.bits().nbytes() && std::memcmp(a.bits().bytes(), b.bits().bytes(), a.bits().nbytes()) == 0;
}

Hash128 str_hash(const std::string& s, std::uint64_t seed) { return murmur3_128(s.data(), s.size(), seed); }

}  // namespace

TEST("add reports a new key once, and contains finds every key added") {
    for (Layout layout : kLayouts) {
        auto f = sized(10000, 0.01, layout);
        const std::vector<Hash128> keys = hashes(0, 10000);
        std::uint64_t fresh = 0;
        for (const Hash128& h : keys) fresh += f->add(h);
        CHECK(fresh > 9900);  // a few keys find their bits set already (false positives at add)
        CHECK_EQ(f->insert_count(), fresh);
        bool all = true, again = false;
        for (const Hash128& h : keys) all = all && f->contains(h), again = again || f->add(h);
        CHECK(all);
        CHECK(!again);
        CHECK_EQ(f->bits_set(), f->bits().popcount());
    }
}

TEST("false positives at capacity are near the rate the filter was sized for") {
    for (Layout layout : kLayouts) {
        auto f = sized(100000, 0.01, layout, 11);
        for (const Hash128& h : hashes(0, 100000, 11)) f->add(h);
        std::uint64_t hits = 0;
        for (const Hash128& h : hashes(1ULL << 40, 200000, 11)) hits += f->contains(h);
        const double rate = static_cast<double>(hits) / 200000;
        // 2000 expected hits, sd about 45: [0.8%, 1.2%] is more than 4 sd either side.
        CHECK(rate > 0.008);
        CHECK(rate < 0.012);
    }
}

TEST("a batch add equals one add per key, bit for bit, with the same new flags") {
    for (Layout layout : kLayouts) {
        auto one = sized(50000, 0.001, layout), batch = sized(50000, 0.001, layout);
        std::vector<Hash128> keys = hashes(0, 30000);
        const std::vector<Hash128> repeats = hashes(0, 5000);
        keys.insert(keys.end(), repeats.begin(), repeats.end());  // repeats within the batch: not new
        std::vector<char> want(keys.size());
        for (std::size_t i = 0; i < keys.size(); ++i) want[i] = one->add(keys[i]);
        std::unique_ptr<bool[]> got(new bool[keys.size()]);
        Prehashed src{keys.data()};
        batch->add_keys(src, keys.size(), got.get());
        bool flags = true;
        for (std::size_t i = 0; i < keys.size(); ++i) flags = flags && got[i] == static_cast<bool>(want[i]);
        CHECK(flags);
        CHECK(same_bits(*one, *batch));
        CHECK_EQ(one->bits_set(), batch->bits_set());
        CHECK_EQ(one->insert_count(), batch->insert_count());
        std::unique_ptr<bool[]> found(new bool[keys.size()]);
        batch->contains_keys(src, 0, keys.size(), found.get());
        bool all = true;
        for (std::size_t i = 0; i < keys.size(); ++i) all = all && found[i];
        CHECK(all);
    }
}

TEST("blocked adds: the blind and look-first forms set the same bits and report the same keys") {
    const std::uint64_t blocks = 200;
    const std::uint32_t k = 7;
    std::vector<Hash128> keys = hashes(0, 20000, 3);
    const std::vector<Hash128> again = hashes(0, 3000, 3);
    keys.insert(keys.end(), again.begin(), again.end());
    std::vector<std::uint64_t> a(blocks * kBlockWords), b(blocks * kBlockWords), c(blocks * kBlockWords);
    std::unique_ptr<bool[]> na(new bool[keys.size()]), nb(new bool[keys.size()]), nc(new bool[keys.size()]);
    const BatchKeys bk{keys.data(), {}};
    const AddCounts ca = BlockedLayout::add_batch(a.data(), blocks, k, bk, keys.size(), AddForm::blind, na.get());
    const AddCounts cb = BlockedLayout::add_batch(b.data(), blocks, k, bk, keys.size(), AddForm::look_first, nb.get());
    const AddCounts cc = BlockedLayout::add_batch(c.data(), blocks, k, bk, keys.size(), AddForm::shared, nc.get());
    CHECK(a == b);
    CHECK(a == c);
    CHECK(ca.bits == cb.bits && ca.keys == cb.keys && ca.bits == cc.bits && ca.keys == cc.keys);
    bool flags = true;
    for (std::size_t i = 0; i < keys.size(); ++i) flags = flags && na[i] == nb[i] && na[i] == nc[i];
    CHECK(flags);
    std::uint64_t ones = 0;
    for (std::uint64_t w : a) ones += static_cast<std::uint64_t>(__builtin_popcountll(w));
    CHECK_EQ(ca.bits, ones);
}

TEST("union holds both filters' keys; intersection holds the common ones") {
    for (Layout layout : kLayouts) {
        auto a = sized(20000, 0.01, layout), b = sized(20000, 0.01, layout);
        const std::vector<Hash128> ka = hashes(0, 10000), kb = hashes(5000, 10000);
        for (const Hash128& h : ka) a->add(h);
        for (const Hash128& h : kb) b->add(h);
        auto u = a->copy(), x = a->copy();
        u->union_with(*b);
        x->intersect_with(*b);
        bool all = true, common = true;
        for (const Hash128& h : ka) all = all && u->contains(h);
        for (const Hash128& h : kb) all = all && u->contains(h);
        for (const Hash128& h : hashes(5000, 5000)) common = common && x->contains(h);
        CHECK(all);
        CHECK(common);
        CHECK_EQ(u->bits_set(), u->bits().popcount());
    }
}

TEST("the golden files of format version 1 hold their keys and their recorded false positives") {
    const std::vector<std::string> meta = testdata::lines("golden.json");
    std::string json;
    for (const std::string& l : meta) json += l;
    for (const char* name : {"v1_bloom_blocked.blf", "v1_bloom_standard.blf"}) {
        const std::vector<unsigned char> bytes = testdata::read_bytes(name);
        const std::unique_ptr<BloomFilter> f = decode_filter<BloomFilter>(bytes.data(), bytes.size());
        const std::uint64_t seed = f->geometry().seed;
        bool all = true;
        for (int i = 0; i < 1000; ++i) all = all && f->contains(str_hash("golden-" + std::to_string(i), seed));
        CHECK(all);
        int hits = 0;
        for (int i = 0; i < 1000; ++i) hits += f->contains(str_hash("absent-" + std::to_string(i), seed));
        const std::size_t at = json.find("\"absent_hits\"", json.find(name));
        CHECK(at != std::string::npos);
        CHECK_EQ(hits, std::stoi(json.substr(json.find(':', at) + 1)));
    }
}

TEST("a filter's geometry is checked: blocked sizes are whole blocks, k is 1..64") {
    CHECK_THROWS(BloomFilter(Geometry{Layout::blocked, 1000, 7, 0}, 0, 0), "512");
    CHECK_THROWS(BloomFilter(Geometry{Layout::standard, 1000, 0, 0}, 0, 0), "num_hashes");
    CHECK_THROWS(BloomFilter(Geometry{Layout::standard, 1000, 65, 0}, 0, 0), "num_hashes");
}

TEST("published rates: m/n = 20, k = 10 gives 8.89e-5 for the standard layout") {
    const double r = false_positive_rate(1000, 20000, 10, Layout::standard);
    CHECK(r > 8.88e-5 && r < 8.90e-5);
}
