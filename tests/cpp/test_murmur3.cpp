// Hashing: MurmurHash3_x64_128 against the reference's known answers
// (tests/data/murmur3_x64_128.txt, made with the mmh3 package; the Python
// tests check the same file), the integer-key path against the bytes path,
// and the batch hash (AVX2 or portable, whichever this machine runs)
// against the scalar one.
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "bloomline/hash_batch.hpp"
#include "bloomline/murmur3.hpp"
#include "check.hpp"
#include "data.hpp"

using namespace bloomline;

TEST("murmur3_128 gives the reference's answer for every known vector") {
    int rows = 0;
    for (const std::string& line : testdata::lines("murmur3_x64_128.txt")) {
        std::istringstream in(line);
        std::uint64_t seed = 0;
        std::string data_hex, h1_hex, h2_hex;
        in >> seed >> data_hex >> h1_hex >> h2_hex;
        const std::string data = testdata::unhex(data_hex);
        const Hash128 h = murmur3_128(data.data(), data.size(), seed);
        CHECK_EQ(h.h1, std::stoull(h1_hex, nullptr, 16));
        CHECK_EQ(h.h2, std::stoull(h2_hex, nullptr, 16));
        ++rows;
    }
    CHECK_EQ(rows, 68);
}

TEST("an integer key hashes as its 8 little-endian bytes") {
    const std::uint64_t values[] = {0, 1, 5, 0x7fffffffffffffffULL, ~std::uint64_t{0}, 0x8000000000000000ULL, 123456789};
    for (std::uint64_t v : values) {
        unsigned char le[8];
        for (int i = 0; i < 8; ++i) le[i] = static_cast<unsigned char>(v >> (8 * i));
        for (std::uint64_t seed : {std::uint64_t{0}, std::uint64_t{7}, std::uint64_t{1} << 40}) {
            const Hash128 a = murmur3_128_u64(v, seed), b = murmur3_128(le, 8, seed);
            CHECK(a.h1 == b.h1 && a.h2 == b.h2);
        }
    }
}

TEST("a seed above 2**32 is used whole, not cut to its low 32 bits") {
    const Hash128 low = murmur3_128("x", 1, 3), high = murmur3_128("x", 1, (std::uint64_t{1} << 40) + 3);
    CHECK(low.h1 != high.h1);
}

TEST("the streamed hash equals the whole one for every way of cutting the bytes") {
    std::vector<unsigned char> data(200);
    std::uint64_t x = 0x9e3779b97f4a7c15ULL;
    for (auto& b : data) b = static_cast<unsigned char>((x = x * 6364136223846793005ULL + 1) >> 56);
    bool same = true;
    for (std::size_t len : {std::size_t{0}, std::size_t{1}, std::size_t{15}, std::size_t{16}, std::size_t{17},
                            std::size_t{63}, std::size_t{200}}) {
        const Hash128 whole = murmur3_128(data.data(), len, 5);
        for (std::size_t piece = 1; piece <= 33; ++piece) {  // pieces of 1..33 bytes, and a first cut anywhere
            for (std::size_t first = 0; first <= len && first < 20; ++first) {
                Murmur3Stream s(5);
                s.update(data.data(), first);
                for (std::size_t at = first; at < len; at += piece)
                    s.update(data.data() + at, at + piece <= len ? piece : len - at);
                const Hash128 h = s.digest();
                same = same && h.h1 == whole.h1 && h.h2 == whole.h2;
            }
        }
    }
    CHECK(same);
}

TEST("the batch hash equals the scalar hash for every length around its steps") {
    std::vector<std::uint64_t> values;
    std::uint64_t x = 0x243f6a8885a308d3ULL;
    for (int i = 0; i < 67; ++i) values.push_back(x = x * 6364136223846793005ULL + 1442695040888963407ULL);
    for (std::size_t n = 0; n <= values.size(); ++n) {
        std::vector<Hash128> out(n + 1, Hash128{1, 1});
        murmur3_128_u64_many(values.data(), n, 99, out.data());
        bool same = true;
        for (std::size_t i = 0; i < n; ++i) {
            const Hash128 h = murmur3_128_u64(values[i], 99);
            same = same && out[i].h1 == h.h1 && out[i].h2 == h.h2;
        }
        CHECK(same);
        CHECK(out[n].h1 == 1 && out[n].h2 == 1);  // nothing written past n
    }
}

TEST("only x86-64 may choose AVX2; every other machine runs the portable code") {
#if defined(__x86_64__) || defined(__i386__)
    CHECK(simd_level() == SimdLevel::avx2 || simd_level() == SimdLevel::portable);
#else
    CHECK(simd_level() == SimdLevel::portable);
#endif
}
