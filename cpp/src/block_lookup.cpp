// See block_lookup.hpp: the portable and AVX2 lookup loops of the blocked
// layout, and the choice between them.
#include "bloomline/block_lookup.hpp"

#include "bloomline/bits.hpp"
#include "bloomline/hash_batch.hpp"
#include "bloomline/index.hpp"
#include "bloomline/stream.hpp"
#include "simd_target.hpp"

namespace bloomline {

namespace {

// Test keys whose blocks are (being) fetched: out[i] for hashes[0..m).
using TestRun = void (*)(const std::uint64_t* words, std::uint64_t num_blocks, std::uint32_t k, const Hash128* h,
                         std::size_t m, bool* out);

void test_run_portable(const std::uint64_t* words, std::uint64_t num_blocks, std::uint32_t k, const Hash128* h,
                       std::size_t m, bool* out) {
    for (std::size_t i = 0; i < m; ++i)
        out[i] = block_has_all(words + block_index(h[i].h1, num_blocks) * kBlockWords, h[i].h2, k);
}

#ifdef BLOOMLINE_HAVE_AVX2_PATH

// The remix powers of index.hpp as 32-bit lanes, eight per group: lo and hi
// halves, and the lo halves of the odd lanes moved to the even lanes (the
// lanes _mm256_mul_epu32 multiplies).
struct alignas(32) RemixLanes {
    std::uint32_t lo[8], hi[8], lo_odd[8];
};
struct RemixLaneTable {
    RemixLanes group[kMaxHashes / 8];
    constexpr RemixLaneTable() : group() {
        for (std::uint32_t i = 0; i < kMaxHashes; ++i) {
            RemixLanes& g = group[i / 8];
            g.lo[i % 8] = static_cast<std::uint32_t>(kRemixPowers.p[i]);
            g.hi[i % 8] = static_cast<std::uint32_t>(kRemixPowers.p[i] >> 32);
        }
        for (RemixLanes& g : group)
            for (unsigned j = 0; j < 8; ++j) g.lo_odd[j] = g.lo[(j & ~1u) + 1];
    }
};
constexpr RemixLaneTable kRemixLanes{};

BLOOMLINE_AVX2 inline __m256i load_lanes(const std::uint32_t* p) {
    return _mm256_load_si256(reinterpret_cast<const __m256i*>(p));
}

// Bit j of the result is set when offset 8 * group + j of h2 is clear in the
// block (lo = its words 0-3, hi = words 4-7, as eight 32-bit words each).
//
// Offset i is the top 9 bits of h2 * P_i mod 2^64. With h2 = (a_hi, a_lo)
// and P_i = (p_hi, p_lo) in 32-bit halves, the top 32 bits of that product
// are hi32(a_lo * p_lo) + lo32(a_hi * p_lo) + lo32(a_lo * p_hi) mod 2^32.
BLOOMLINE_AVX2 inline unsigned clear_bits_of_group(__m256i lo, __m256i hi, __m256i a_lo, __m256i a_hi,
                                                   const RemixLanes& c) {
    const __m256i p_lo = load_lanes(c.lo), p_hi = load_lanes(c.hi), p_lo_odd = load_lanes(c.lo_odd);
    const __m256i carry_even = _mm256_srli_epi64(_mm256_mul_epu32(a_lo, p_lo), 32);  // hi32 into the even lanes
    const __m256i carry_odd = _mm256_mul_epu32(a_lo, p_lo_odd);                     // hi32 already in odd lanes
    const __m256i carry = _mm256_blend_epi32(carry_even, carry_odd, 0xAA);
    const __m256i top = _mm256_add_epi32(carry, _mm256_add_epi32(_mm256_mullo_epi32(a_hi, p_lo),
                                                                 _mm256_mullo_epi32(a_lo, p_hi)));
    const __m256i off = _mm256_srli_epi32(top, 23);  // 0..511
    // Word off / 32 of the block: from lo or hi by bit 3 of that index
    // (bit 8 of off, moved to the sign bit that blendv reads).
    const __m256i word_index = _mm256_srli_epi32(off, 5);
    const __m256 from_lo = _mm256_castsi256_ps(_mm256_permutevar8x32_epi32(lo, word_index));
    const __m256 from_hi = _mm256_castsi256_ps(_mm256_permutevar8x32_epi32(hi, word_index));
    const __m256 from_hi_half = _mm256_castsi256_ps(_mm256_slli_epi32(off, 23));
    const __m256i word = _mm256_castps_si256(_mm256_blendv_ps(from_lo, from_hi, from_hi_half));
    const __m256i bit = _mm256_sllv_epi32(_mm256_set1_epi32(1), _mm256_and_si256(off, _mm256_set1_epi32(31)));
    const __m256i clear = _mm256_cmpeq_epi32(_mm256_and_si256(word, bit), _mm256_setzero_si256());
    return static_cast<unsigned>(_mm256_movemask_ps(_mm256_castsi256_ps(clear)));
}

BLOOMLINE_AVX2 void test_run_avx2(const std::uint64_t* words, std::uint64_t num_blocks, std::uint32_t k,
                                  const Hash128* h, std::size_t m, bool* out) {
    const std::uint32_t full_groups = k / 8;
    const unsigned last_lanes = (1u << (k % 8)) - 1;  // lanes in use in the partial group, if any
    for (std::size_t i = 0; i < m; ++i) {
        const std::uint64_t* block = words + block_index(h[i].h1, num_blocks) * kBlockWords;
        const __m256i lo = _mm256_load_si256(reinterpret_cast<const __m256i*>(block));
        const __m256i hi = _mm256_load_si256(reinterpret_cast<const __m256i*>(block + 4));
        const __m256i a_lo = _mm256_set1_epi32(static_cast<int>(static_cast<std::uint32_t>(h[i].h2)));
        const __m256i a_hi = _mm256_set1_epi32(static_cast<int>(static_cast<std::uint32_t>(h[i].h2 >> 32)));
        unsigned clear = 0;
        for (std::uint32_t g = 0; g < full_groups; ++g)
            clear |= clear_bits_of_group(lo, hi, a_lo, a_hi, kRemixLanes.group[g]);
        if (last_lanes)
            clear |= clear_bits_of_group(lo, hi, a_lo, a_hi, kRemixLanes.group[full_groups]) & last_lanes;
        out[i] = clear == 0;
    }
}

#endif  // BLOOMLINE_HAVE_AVX2_PATH

TestRun test_run() {
#ifdef BLOOMLINE_HAVE_AVX2_PATH
    if (simd_level() == SimdLevel::avx2) return test_run_avx2;
#endif
    return test_run_portable;
}

}  // namespace

void contains_blocked(const std::uint64_t* words, std::uint64_t num_blocks, std::uint32_t k, const BatchKeys& keys,
                      std::size_t n, bool* out) {
    const TestRun test = test_run();
    auto lines = [words, num_blocks](const Hash128& h, const void** addrs) {
        addrs[0] = words + block_index(h.h1, num_blocks) * kBlockWords;
        return 1u;
    };
    with_stream_source<OneLinePerKey>(keys, [&](auto& src) {
        stream<OneLinePerKey, false>(src, n, lines, [&](const Hash128* h, std::size_t m, std::size_t first) {
            test(words, num_blocks, k, h, m, out + first);
        });
    });
}

}  // namespace bloomline
