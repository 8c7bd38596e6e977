// See hash_batch.hpp: the portable loop, the AVX2 loop and the choice
// between them.
#include "bloomline/hash_batch.hpp"

#include <cstdlib>
#include <cstring>

#include "simd_target.hpp"

namespace bloomline {

namespace {

void hash_portable(const std::uint64_t* values, std::size_t n, std::uint64_t seed, Hash128* out) {
    for (std::size_t i = 0; i < n; ++i) out[i] = murmur3_128_u64(values[i], seed);
}

#ifdef BLOOMLINE_HAVE_AVX2_PATH

// A 64-bit constant as the two 32-bit halves _mm256_mul_epu32 multiplies by.
struct Const64 {
    __m256i lo, hi;
};

BLOOMLINE_AVX2 inline Const64 const64(std::uint64_t c) {
    return {_mm256_set1_epi64x(static_cast<long long>(c & 0xffffffffULL)),
            _mm256_set1_epi64x(static_cast<long long>(c >> 32))};
}

// Low 64 bits of a * c in each lane: a_lo*c_lo + ((a_lo*c_hi + a_hi*c_lo) << 32).
BLOOMLINE_AVX2 inline __m256i mul64(__m256i a, const Const64& c) {
    const __m256i lo_lo = _mm256_mul_epu32(a, c.lo);
    const __m256i lo_hi = _mm256_mul_epu32(a, c.hi);
    const __m256i hi_lo = _mm256_mul_epu32(_mm256_srli_epi64(a, 32), c.lo);
    return _mm256_add_epi64(lo_lo, _mm256_slli_epi64(_mm256_add_epi64(lo_hi, hi_lo), 32));
}

template <int R>
BLOOMLINE_AVX2 inline __m256i rotl64x4(__m256i x) {
    return _mm256_or_si256(_mm256_slli_epi64(x, R), _mm256_srli_epi64(x, 64 - R));
}

BLOOMLINE_AVX2 inline __m256i xorshift33(__m256i x) { return _mm256_xor_si256(x, _mm256_srli_epi64(x, 33)); }

BLOOMLINE_AVX2 void hash_avx2(const std::uint64_t* values, std::size_t n, std::uint64_t seed, Hash128* out) {
    const Const64 c1 = const64(detail::kMurmurC1), c2 = const64(detail::kMurmurC2);
    const Const64 f1 = const64(0xff51afd7ed558ccdULL), f2 = const64(0xc4ceb9fe1a85ec53ULL);
    // The same steps as murmur3_128_u64: h1 = seed ^ mix_k1(v), h2 = seed,
    // then finalize(h1, h2, 8).
    const __m256i seed_len = _mm256_set1_epi64x(static_cast<long long>(seed ^ 8));
    std::size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        __m256i k = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(values + i));
        k = mul64(rotl64x4<31>(mul64(k, c1)), c2);
        __m256i h1 = _mm256_xor_si256(seed_len, k);
        __m256i h2 = seed_len;
        h1 = _mm256_add_epi64(h1, h2);
        h2 = _mm256_add_epi64(h2, h1);
        h1 = xorshift33(mul64(xorshift33(mul64(xorshift33(h1), f1)), f2));
        h2 = xorshift33(mul64(xorshift33(mul64(xorshift33(h2), f1)), f2));
        h1 = _mm256_add_epi64(h1, h2);
        h2 = _mm256_add_epi64(h2, h1);
        // (h1 of keys 0..3, h2 of keys 0..3) -> four {h1, h2} pairs in order.
        const __m256i even = _mm256_unpacklo_epi64(h1, h2);  // key 0, key 2
        const __m256i odd = _mm256_unpackhi_epi64(h1, h2);   // key 1, key 3
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), _mm256_permute2x128_si256(even, odd, 0x20));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i + 2), _mm256_permute2x128_si256(even, odd, 0x31));
    }
    // Clear the upper halves of the vector registers before leaving for
    // baseline code. GCC 12 emitted no vzeroupper here (the call below was
    // made a tail jump), and the SSE code of the caller then ran with dirty
    // upper halves, much slower (benchmarks/NOTES.md, "Adds").
    _mm256_zeroupper();
    if (i < n) hash_portable(values + i, n - i, seed, out + i);
}

#endif  // BLOOMLINE_HAVE_AVX2_PATH

SimdLevel detect() {
    const char* env = std::getenv("BLOOMLINE_SIMD");
    if (env && std::strcmp(env, "portable") == 0) return SimdLevel::portable;
#ifdef BLOOMLINE_HAVE_AVX2_PATH
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2")) return SimdLevel::avx2;
#endif
    return SimdLevel::portable;
}

}  // namespace

SimdLevel simd_level() {
    static const SimdLevel level = detect();
    return level;
}

const char* simd_level_name(SimdLevel level) { return level == SimdLevel::avx2 ? "avx2" : "portable"; }

void murmur3_128_u64_many(const std::uint64_t* values, std::size_t n, std::uint64_t seed, Hash128* out) {
#ifdef BLOOMLINE_HAVE_AVX2_PATH
    if (simd_level() == SimdLevel::avx2) return hash_avx2(values, n, seed, out);
#endif
    hash_portable(values, n, seed, out);
}

}  // namespace bloomline
