// The counting filter: counts, removal, and saturation (a counter at its
// maximum sticks there, so removals never cause a false negative), for each
// counter width; to_bloom() is the BloomFilter of the same keys.
#include <cstdint>
#include <cstring>
#include <memory>
#include <set>
#include <vector>

#include "bloomline/counting_filter.hpp"
#include "bloomline/sizing.hpp"
#include "check.hpp"

using namespace bloomline;

namespace {

const Layout kLayouts[] = {Layout::blocked, Layout::standard};

CountingBloomFilter make(unsigned bits, Layout layout, std::uint64_t capacity = 1000) {
    const Params p = optimal_params(static_cast<double>(capacity), 0.01, layout);
    return CountingBloomFilter(Geometry{layout, p.num_bits, p.num_hashes, 0}, bits, capacity, 0.01);
}

Hash128 key(std::uint64_t i) { return murmur3_128_u64(i, 0); }

}  // namespace

TEST("add counts, remove uncounts, and a removed key is gone") {
    for (Layout layout : kLayouts) {
        CountingBloomFilter f = make(4, layout);
        CHECK(f.add(key(1)));
        CHECK(!f.add(key(1)));
        CHECK(f.count(key(1)) >= 2);
        CHECK(f.remove(key(1)));
        CHECK(f.remove(key(1)));
        CHECK(!f.contains(key(1)));
        CHECK(!f.remove(key(1)));  // certainly absent: nothing changed
        CHECK_EQ(f.nonzero_counters(), std::uint64_t{0});
    }
}

TEST("a counter at its maximum sticks: no false negative after removals") {
    for (unsigned bits : {4u, 8u}) {
        for (Layout layout : kLayouts) {
            CountingBloomFilter f = make(bits, layout);
            const std::uint32_t max = (1u << bits) - 1;
            for (std::uint32_t i = 0; i < max + 5; ++i) f.add(key(7));
            CHECK_EQ(f.count(key(7)), max);  // saturated, not wrapped
            std::set<std::uint64_t> slots;  // distinct: blocked offsets are drawn with replacement
            for_each_slot(f.geometry(), key(7), [&](std::uint64_t s) { slots.insert(s); });
            CHECK_EQ(f.saturated_counters(), std::uint64_t{slots.size()});
            for (std::uint32_t i = 0; i < max + 5; ++i) f.remove(key(7));
            CHECK_EQ(f.count(key(7)), max);  // stuck: never decremented
            CHECK(f.contains(key(7)));
        }
    }
}

TEST("a key sharing a saturated counter survives the removal of the key that saturated it") {
    for (Layout layout : kLayouts) {
        CountingBloomFilter f = make(4, layout, 100);
        for (std::uint64_t i = 0; i < 100; ++i) f.add(key(i));
        for (int i = 0; i < 40; ++i) f.add(key(0));
        for (int i = 0; i < 41; ++i) f.remove(key(0));
        bool others = true;
        for (std::uint64_t i = 1; i < 100; ++i) others = others && f.contains(key(i));
        CHECK(others);
    }
}

TEST("16-bit counters count to 65535 and stick there") {
    CountingBloomFilter f = make(16, Layout::blocked);
    for (std::uint32_t i = 0; i < 65540; ++i) f.add(key(3));
    CHECK_EQ(f.count(key(3)), 65535u);
    f.remove(key(3));
    CHECK_EQ(f.count(key(3)), 65535u);
}

TEST("to_bloom is the BloomFilter of the same keys") {
    for (Layout layout : kLayouts) {
        CountingBloomFilter c = make(4, layout, 2000);
        BloomFilter b(c.geometry(), 2000, 0.01);
        for (std::uint64_t i = 0; i < 2000; ++i) c.add(key(i)), b.add(key(i));
        const std::unique_ptr<BloomFilter> t = c.to_bloom();
        CHECK(std::memcmp(t->bits().bytes(), b.bits().bytes(), b.bits().nbytes()) == 0);
    }
}

TEST("counter widths other than 4, 8 and 16 are refused") {
    CHECK_THROWS(make(3, Layout::blocked), "counter_bits must be 4, 8 or 16, got 3");
}
