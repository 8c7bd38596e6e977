// Index and layout: a key's k slots for each layout, against the positions
// recorded at format version 1 (tests/data/positions_v1.txt, where
// "standard" is the first index, now standard-v1) and for the standard
// layout's second index (tests/data/positions_layout2.txt): files and Redis
// shards hold bits there. And against the layouts' definitions written out
// again here.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "bloomline/index.hpp"
#include "bloomline/murmur3.hpp"
#include "check.hpp"
#include "data.hpp"

using namespace bloomline;

namespace {

std::vector<std::uint64_t> slots(const Geometry& g, const Hash128& h) {
    std::vector<std::uint64_t> out;
    for_each_slot(g, h, [&](std::uint64_t s) { out.push_back(s); });
    return out;
}

Hash128 hash_of(std::uint64_t i, std::uint64_t seed) { return murmur3_128_u64(i, seed); }

}  // namespace

// Rows of `name`: each key's slots must be those recorded; `standard_is`
// is the layout the file's word "standard" stood for when it was written.
int check_positions(const char* name, Layout standard_is) {
    int rows = 0;
    for (const std::string& line : testdata::lines(name)) {
        std::istringstream in(line);
        std::string layout, key_hex, positions;
        Geometry g;
        in >> layout >> g.num_slots >> g.num_hashes >> g.seed >> key_hex >> positions;
        g.layout = layout == "standard" ? standard_is : parse_layout(layout);
        const std::string key = testdata::unhex(key_hex);
        std::vector<std::uint64_t> want;
        std::istringstream ps(positions);
        for (std::string p; std::getline(ps, p, ',');) want.push_back(std::stoull(p));
        const bool same = slots(g, murmur3_128(key.data(), key.size(), g.seed)) == want;
        CHECK(same);
        if (!same) std::printf("    %s row: %s\n", name, line.c_str());
        ++rows;
    }
    return rows;
}

TEST("slots are the positions recorded at format version 1, and for the standard layout's second index") {
    CHECK_EQ(check_positions("positions_v1.txt", Layout::standard_v1), 42);
    CHECK_EQ(check_positions("positions_layout2.txt", Layout::standard), 21);
}

TEST("blocked: all k slots lie in the block h1 picks, at the top 9 bits of h2 remixed") {
    const Geometry g{Layout::blocked, 512 * 1000, 9, 5};
    for (std::uint64_t i = 0; i < 2000; ++i) {
        const Hash128 h = hash_of(i, g.seed);
        const std::uint64_t block = mul_hi(h.h1, 1000);
        std::uint64_t x = h.h2;
        bool ok = true;
        for (std::uint64_t s : slots(g, h)) {
            x *= kRemix;  // the chain of multiplies that kRemixPowers replaces
            ok = ok && s == block * 512 + (x >> 55);
        }
        CHECK(ok);
    }
}

TEST("standard: slot i is h1 + h2 * R^(i+1) mapped onto [0, m) by multiply-shift") {
    for (std::uint64_t m : {std::uint64_t{1}, std::uint64_t{63}, std::uint64_t{1000003}, std::uint64_t{1} << 40}) {
        const Geometry g{Layout::standard, m, 11, 3};
        bool ok = true;
        for (std::uint64_t i = 0; i < 500; ++i) {
            const Hash128 h = hash_of(i, g.seed);
            std::uint64_t r = 1;
            const std::vector<std::uint64_t> got = slots(g, h);
            ok = ok && got.size() == 11;
            for (std::uint32_t j = 0; j < 11 && ok; ++j) {
                r *= kRemix;  // the chain of multiplies that kRemixPowers replaces
                ok = got[j] == mul_hi(h.h1 + h.h2 * r, m) && got[j] < m;
            }
        }
        CHECK(ok);
    }
}

TEST("standard-v1: enhanced double hashing, each slot mapped onto [0, m) by multiply-shift") {
    for (std::uint64_t m : {std::uint64_t{1}, std::uint64_t{63}, std::uint64_t{1000003}, std::uint64_t{1} << 40}) {
        const Geometry g{Layout::standard_v1, m, 11, 3};
        bool ok = true;
        for (std::uint64_t i = 0; i < 500; ++i) {
            const Hash128 h = hash_of(i, g.seed);
            std::uint64_t x = h.h1, y = h.h2;
            const std::vector<std::uint64_t> got = slots(g, h);
            ok = ok && got.size() == 11;
            for (std::uint32_t j = 0; j < 11 && ok; ++j) {
                if (j > 0) {
                    x += y;
                    y += j;
                }
                const std::uint64_t want = mul_hi(x, m);
                ok = got[j] == want && got[j] < m;
            }
        }
        CHECK(ok);
    }
}

// The defect the second index mends: on a small filter, some keys' k slots
// under the first index fall on a few bits. At half fill a key of d distinct
// slots is a false positive with chance 2^-d, so the mean of 2^(k - d) is the
// factor its rate runs above that of k distinct bits.
TEST("standard: a key's slots are as distinct as k independent draws; standard-v1's are not") {
    const std::uint64_t m = 192;
    const std::uint32_t k = 13;
    const int keys = 200000;
    auto factor = [&](Layout layout) {
        const Geometry g{layout, m, k, 0};
        double total = 0;
        for (int i = 0; i < keys; ++i) {
            std::vector<std::uint64_t> s = slots(g, hash_of(static_cast<std::uint64_t>(i), 0));
            std::sort(s.begin(), s.end());
            total += std::ldexp(1.0, static_cast<int>(k) - static_cast<int>(std::unique(s.begin(), s.end()) - s.begin()));
        }
        return total / keys;
    };
    // k independent draws from m: the distribution of d by adding one draw at a time.
    std::vector<double> p(k + 1, 0.0);
    p[0] = 1;
    for (std::uint32_t draw = 0; draw < k; ++draw)
        for (std::uint32_t d = draw + 1; d-- > 0;) {
            const double q = p[d];
            p[d] = q * static_cast<double>(d) / static_cast<double>(m);
            p[d + 1] += q * (1 - static_cast<double>(d) / static_cast<double>(m));
        }
    double ideal = 0;
    for (std::uint32_t d = 1; d <= k; ++d) ideal += p[d] * std::ldexp(1.0, static_cast<int>(k - d));
    const double now = factor(Layout::standard), v1 = factor(Layout::standard_v1);
    std::printf("    mean 2^(k - distinct), 13 slots in 192: k draws %.4f, standard %.4f, standard-v1 %.4f\n", ideal,
                now, v1);
    CHECK(std::fabs(now - ideal) < 0.02);  // the sd of the mean is about 0.002
    CHECK(v1 > 1.5 * ideal);
}

TEST("blocked: keys spread over the blocks evenly") {
    const Geometry g{Layout::blocked, 512 * 64, 7, 0};
    std::vector<int> per_block(64);
    for (std::uint64_t i = 0; i < 64000; ++i) per_block[block_of(g, hash_of(i, 0))]++;
    int lo = per_block[0], hi = per_block[0];
    for (int c : per_block) lo = c < lo ? c : lo, hi = c > hi ? c : hi;
    // 1000 expected per block, sd about 31: 5 sd either side.
    CHECK(lo > 845);
    CHECK(hi < 1155);
}

TEST("mul_hi is the high half of the 128-bit product (multiply-shift)") {
    CHECK_EQ(mul_hi(~std::uint64_t{0}, ~std::uint64_t{0}), ~std::uint64_t{0} - 1);
    CHECK_EQ(mul_hi(std::uint64_t{1} << 63, 4), std::uint64_t{2});
    CHECK_EQ(mul_hi(12345, 678), std::uint64_t{0});
    // (2**64 - 1) * 3 = 2 * 2**64 + (2**64 - 3)
    CHECK_EQ(mul_hi(~std::uint64_t{0}, 3), std::uint64_t{2});
    CHECK_EQ(mul_hi(0x123456789abcdef0ULL, 0x0fedcba987654321ULL), 0x0121fa00ad77d742ULL);
}
