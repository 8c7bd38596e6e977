// See layout_blocked.hpp: the blocked layout's batch add (blind and
// look-first forms), its batch lookup (AVX2 and portable, and the choice
// between them), and its false-positive rate.
#include "bloomline/layout_blocked.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <mutex>
#include <type_traits>
#include <utility>
#include <vector>

#include "bloomline/hash_batch.hpp"
#include "bloomline/stream.hpp"
#include "simd_target.hpp"

namespace bloomline {

namespace {

using L = BlockedLayout;

// ---- the batch add ----------------------------------------------------------

// f(std::integral_constant<std::uint32_t, K>{}) with K = k when k is one of
// 1..kMaxUnrolledK, else K = 0 (k known only at run time). Loops over a
// key's k bits unroll, and the remix powers become immediates, when k is a
// compile-time constant; 16 covers every k that optimal_params picks down
// to an error rate of about 1e-5 per block.
constexpr std::uint32_t kMaxUnrolledK = 16;
template <class F, std::uint32_t... Ks>
inline void with_fixed_k_of(std::uint32_t k, F& f, std::integer_sequence<std::uint32_t, Ks...>) {
    const bool fixed = ((k == Ks + 1 && (f(std::integral_constant<std::uint32_t, Ks + 1>{}), true)) || ...);
    if (!fixed) f(std::integral_constant<std::uint32_t, 0>{});
}
template <class F>
inline void with_fixed_k(std::uint32_t k, F&& f) {
    with_fixed_k_of(k, f, std::make_integer_sequence<std::uint32_t, kMaxUnrolledK>{});
}

// f(j) for j in [0, k): unrolled when kFixedK (= k) is known at compile time.
template <std::uint32_t kFixedK, class F>
inline void for_each_probe(std::uint32_t k, F&& f) {
    if constexpr (kFixedK != 0) {
        // GCC 12 leaves even k = 6 rolled without this pragma.
#pragma GCC unroll 16
        for (std::uint32_t j = 0; j < kFixedK; ++j) f(j);
    } else {
        for (std::uint32_t j = 0; j < k; ++j) f(j);
    }
}

// Set the bit at `bit_index` (only its low 6 bits count, so a block offset
// 0..511 can be passed as it is) of the word at w without looking first;
// adds 1 to clear_count when it was clear.
inline void or_word_bit(std::uint64_t* w, unsigned bit_index, unsigned& clear_count) {
    std::uint64_t v = load_le(w);
#if defined(__x86_64__) && defined(__GNUC__) && !defined(BLOOMLINE_NO_INLINE_ASM)
    // bts sets the bit (its register index taken modulo 64) and leaves the
    // old value in the carry flag; sbb of -1 adds 1 - carry. GCC 12 writes
    // a shift, a not, an and and an add besides the or for the lines below
    // (benchmarks/NOTES.md, "Adds"). The sanitizer build in CI
    // defines BLOOMLINE_NO_INLINE_ASM, so the portable lines are tested too.
    asm("btsq %[b], %[v]\n\tsbbl $-1, %[c]"
        : [v] "+r"(v), [c] "+r"(clear_count)
        : [b] "r"(static_cast<std::uint64_t>(bit_index))
        : "cc");
#else
    const std::uint64_t bit = std::uint64_t{1} << (bit_index & 63);
    clear_count += (v & bit) == 0;
    v |= bit;
#endif
    atomic_store(w, to_le64(v));
}

// One key, blind: set the k offsets of h2 in `block`; returns how many were
// clear.
template <std::uint32_t kFixedK>
inline unsigned block_set_all(std::uint64_t* block, std::uint64_t h2, std::uint32_t k) {
    unsigned changed = 0;
    for_each_probe<kFixedK>(k, [&](std::uint32_t j) {
        const unsigned off = L::offset(h2, j);
        or_word_bit(block + (off >> 6), off, changed);
    });
    return changed;
}

// Two keys of different blocks, blind, their bits interleaved (a's bit j,
// b's bit j, a's bit j + 1, ...).
template <std::uint32_t kFixedK>
inline void block_set_all_two(std::uint64_t* block_a, std::uint64_t h2_a, std::uint64_t* block_b, std::uint64_t h2_b,
                              std::uint32_t k, unsigned& changed_a, unsigned& changed_b) {
    for_each_probe<kFixedK>(k, [&](std::uint32_t j) {
        const unsigned off_a = L::offset(h2_a, j);
        or_word_bit(block_a + (off_a >> 6), off_a, changed_a);
        const unsigned off_b = L::offset(h2_b, j);
        or_word_bit(block_b + (off_b >> 6), off_b, changed_b);
    });
}

// Keys h[0..m), blind, in order: each(i, changed) for each.
template <std::uint32_t kFixedK, class Each>
inline void add_group_blind(std::uint64_t* words, std::uint64_t num_blocks, std::uint32_t k, const Hash128* h,
                            std::size_t m, Each&& each) {
    auto block_of_key = [words, num_blocks](const Hash128& x) {
        return words + L::block(x.h1, num_blocks) * kBlockWords;
    };
    std::size_t i = 0;
    for (; i + 2 <= m; i += 2) {
        std::uint64_t* const a = block_of_key(h[i]);
        std::uint64_t* const b = block_of_key(h[i + 1]);
        if (a == b) {
            each(i, block_set_all<kFixedK>(a, h[i].h2, k));
            each(i + 1, block_set_all<kFixedK>(b, h[i + 1].h2, k));
            continue;
        }
        unsigned changed_a = 0, changed_b = 0;
        block_set_all_two<kFixedK>(a, h[i].h2, b, h[i + 1].h2, k, changed_a, changed_b);
        each(i, changed_a);
        each(i + 1, changed_b);
    }
    if (i < m) each(i, block_set_all<kFixedK>(block_of_key(h[i]), h[i].h2, k));
}

// ---- the batch lookup -------------------------------------------------------

// Test keys whose blocks are (being) fetched: out[i] for hashes[0..m).
using TestRun = void (*)(const std::uint64_t* words, std::uint64_t num_blocks, std::uint32_t k, const Hash128* h,
                         std::size_t m, bool* out);

void test_run_portable(const std::uint64_t* words, std::uint64_t num_blocks, std::uint32_t k, const Hash128* h,
                       std::size_t m, bool* out) {
    for (std::size_t i = 0; i < m; ++i)
        out[i] = L::has_all(words + L::block(h[i].h1, num_blocks) * kBlockWords, h[i].h2, k);
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
        const std::uint64_t* block = words + L::block(h[i].h1, num_blocks) * kBlockWords;
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

// ---- the false-positive rate ------------------------------------------------

constexpr double kTwoPi = 6.28318530717958647693;

// Probability that a foreign key's k bits are all set in a block that holds
// j keys: E[(X/512)^k], X the number of distinct bits hit by j*k uniform
// draws. The occupancy distribution of X is built ball by ball (a DP over
// 513 states) and cached per k; the cache only grows, under a mutex.
class BlockOccupancy {
public:
    double fp(std::uint32_t k, std::size_t j) {
        std::lock_guard<std::mutex> lock(mu_);
        Table& t = tables_[k];
        if (t.occ.empty()) {
            t.occ.assign(kBlockBits + 1, 0.0);
            t.occ[0] = 1.0;
            t.fp_by_j.push_back(0.0);  // j = 0: an empty block answers no
            t.next.assign(kBlockBits + 1, 0.0);
            t.hit.assign(kBlockBits + 1, 0.0);
            for (unsigned x = 1; x <= kBlockBits; ++x) t.hit[x] = std::pow(static_cast<double>(x) / kBlockBits, k);
        }
        while (t.fp_by_j.size() <= j) {
            for (std::uint32_t ball = 0; ball < k; ++ball) {
                add_ball(t.occ.data(), t.next.data());
                t.occ.swap(t.next);
            }
            double e = 0.0;
            for (unsigned x = 1; x <= kBlockBits; ++x) e += t.occ[x] * t.hit[x];
            t.fp_by_j.push_back(e);
        }
        return t.fp_by_j[j];
    }

private:
    struct Table {
        std::vector<double> occ;      // P(X = x) after fp_by_j.size() - 1 keys
        std::vector<double> next;     // occ after one more ball
        std::vector<double> fp_by_j;  // fp for a block with j keys
        std::vector<double> hit;      // (x / 512)^k, once per k: it was most of a first sizing's time
    };
    // One more draw: from p into q, two arrays so that the loop vectorizes.
    static void add_ball(const double* __restrict p, double* __restrict q) {
        q[0] = 0.0;
        for (unsigned x = 1; x <= kBlockBits; ++x)
            q[x] = p[x] * x / kBlockBits + p[x - 1] * (kBlockBits - x + 1) / kBlockBits;
    }
    std::mutex mu_;
    std::map<std::uint32_t, Table> tables_;
};

BlockOccupancy& occupancy() {
    static BlockOccupancy o;
    return o;
}

// A block whose k * j draws exceed this many is treated with the mean-fill
// formula (1 - (1 - 1/512)^(j k))^k instead of the exact occupancy
// distribution: at 24 draws per bit the fill's variance is about
// e^-24 / 512, and the two formulas agree to about 1e-10. So the exact
// table, built on first need per k, never grows past 24 * 512 draws.
constexpr double kExactDraws = 24.0 * kBlockBits;

// (1 + t) log(1 + t) - t, without cancellation for small t ("bd0" in
// Loader's algorithm for the Poisson and binomial densities).
double bd0(double t) {
    if (std::fabs(t) >= 0.1) return (1 + t) * std::log1p(t) - t;
    // sum over n >= 2 of (-1)^n t^n / (n (n - 1))
    double term = t * t, sum = 0.0;
    for (int n = 2; n < 40; ++n) {
        const double add = term / (n * (n - 1.0));
        sum += add;
        if (std::fabs(add) < 1e-18 * std::fabs(sum)) break;
        term *= -t;
    }
    return sum;
}

// log P(J = j) for J ~ Poisson(lambda). The direct form j log(lambda) -
// lambda - lgamma(j + 1) subtracts numbers near j log j, which for j of
// 1e17 are 4e18 and leave nothing of the result; for large j it is written
// as -lambda bd0((j - lambda) / lambda) - log(2 pi j) / 2 - stirlerr(j).
double log_poisson(double j, double lambda) {
    // The direct form for small loads, and for any load when lambda is tiny
    // (there bd0's argument (j - lambda) / lambda overflows: NaN for n near 0).
    if (j < 16 || lambda < 1.0) return j * std::log(lambda) - lambda - std::lgamma(j + 1.0);
    const double stirlerr = 1.0 / (12 * j) - 1.0 / (360 * j * j * j);  // lgamma(j+1) - Stirling, to 1e-12
    return -lambda * bd0((j - lambda) / lambda) - 0.5 * std::log(kTwoPi * j) - stirlerr;
}

// The Poisson mixture over block loads; see the header. The loads within
// 14 standard deviations of lambda hold all but about 1e-40 of the mass;
// they are summed every `step` loads (a Riemann sum of a smooth density:
// exact to far below double precision while a step is under a sixteenth of
// a standard deviation), so a call takes at most a few hundred terms for
// any n up to 2**64.
double fp_blocked(double n, double m, double k) {
    const double blocks = m / kBlockBits;
    const double lambda = n / blocks;
    if (lambda <= 0) return 0.0;
    const auto ki = static_cast<std::uint32_t>(k);
    const double log_clear_per_key = k * std::log1p(-1.0 / kBlockBits);
    const double exact_loads = std::floor(kExactDraws / k);
    const double sd = std::sqrt(lambda);
    const double step = std::max(1.0, std::floor(sd / 16));
    const double lo = std::max(0.0, std::floor(lambda - 14 * sd - 10));
    const double hi = std::ceil(lambda + 14 * sd + 30);
    auto fp_at = [&](double j) {
        return j <= exact_loads ? occupancy().fp(ki, static_cast<std::size_t>(j))
                                : std::pow(-std::expm1(j * log_clear_per_key), k);
    };
    double sum = 0.0, mass = 0.0;
    // Each load from its index (not by adding step again and again: above
    // 2**53 that sum rounds at every step, and the grid drifts off step).
    const auto count = static_cast<std::uint64_t>((hi - lo) / step) + 1;
    for (std::uint64_t i = 0; i < count; ++i) {
        const double j = lo + static_cast<double>(i) * step;
        const double pmf = std::exp(log_poisson(j, lambda));
        sum += pmf * fp_at(j);
        mass += pmf;
    }
    // Past about 1e32 keys a block, 14 standard deviations of the load are
    // below a double's resolution at lambda: the grid is a point or two
    // whose sum no longer holds the mass (or the density underflows). Every
    // block then holds lambda keys, to the precision there is.
    if (!(mass * step > 0.5)) return std::min(fp_at(lambda), 1.0);
    // Weighted by the mass the grid holds (1 but for the sum's own rounding,
    // which at loads of 1e16 and more is 1e-8 and would let more keys give a
    // lower rate).
    return std::min(sum / mass, 1.0);
}

}  // namespace

AddCounts BlockedLayout::add_batch(std::uint64_t* words, std::uint64_t num_blocks, std::uint32_t k, const BatchKeys& keys,
                      std::size_t n, AddForm form, bool* out) {
    AddCounts total;
    auto lines = [words, num_blocks](const Hash128& h, const void** addrs) {
        addrs[0] = words + L::block(h.h1, num_blocks) * kBlockWords;
        return 1u;
    };
    with_stream_source<L::Stream>(keys, [&](auto& src) {
        if (form != AddForm::blind) {
            const bool shared = form == AddForm::shared;
            stream<L::Stream, true>(src, n, lines, [&](const Hash128* h, std::size_t m, std::size_t first) {
                AddCounts group;
                for (std::size_t i = 0; i < m; ++i) {
                    std::uint64_t* block = words + L::block(h[i].h1, num_blocks) * kBlockWords;
                    const unsigned changed =
                        shared ? L::set_shared(block, h[i].h2, k) : L::set_look_first(block, h[i].h2, k);
                    const bool is_new = group.count(changed);
                    if (out) out[first + i] = is_new;
                }
                total += group;
            });
            return;
        }
        with_fixed_k(k, [&](auto fixed_k) {
            constexpr std::uint32_t kFixedK = decltype(fixed_k)::value;
            stream<L::Stream, true>(src, n, lines, [&](const Hash128* h, std::size_t m, std::size_t first) {
                // Counts in locals: a store to the bits (a uint64_t) may
                // alias anything reached through a pointer.
                AddCounts group;
                bool* const o = out ? out + first : nullptr;
                add_group_blind<kFixedK>(words, num_blocks, k, h, m, [&](std::size_t i, unsigned changed) {
                    const bool is_new = group.count(changed);
                    if (o) o[i] = is_new;
                });
                total += group;
            });
        });
    });
    return total;
}

void BlockedLayout::contains_batch(const std::uint64_t* words, std::uint64_t num_blocks, std::uint32_t k, const BatchKeys& keys,
                      std::size_t n, bool* out) {
    const TestRun test = test_run();
    auto lines = [words, num_blocks](const Hash128& h, const void** addrs) {
        addrs[0] = words + L::block(h.h1, num_blocks) * kBlockWords;
        return 1u;
    };
    with_stream_source<L::Stream>(keys, [&](auto& src) {
        stream<L::Stream, false>(src, n, lines, [&](const Hash128* h, std::size_t m, std::size_t first) {
            test(words, num_blocks, k, h, m, out + first);
        });
    });
}

double BlockedLayout::fp_rate(double n, double m, double k) { return fp_blocked(n, m, k); }

}  // namespace bloomline
