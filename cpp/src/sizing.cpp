#include "bloomline/sizing.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "bloomline/layout_blocked.hpp"
#include "bloomline/layout_standard.hpp"

namespace bloomline {

namespace {

constexpr double kLn2 = 0.69314718055994530942;

double fp_any(double n, double m, std::uint32_t k, Layout layout) {
    return layout == Layout::blocked ? BlockedLayout::fp_rate(n, m, k) : StandardLayout::fp_rate(n, m, k);
}

// Best k and its rate: the rate is unimodal in k, so walk up while it falls.
std::pair<std::uint32_t, double> best_k(double n, double m, Layout layout) {
    std::uint32_t k = 1;
    double best = fp_any(n, m, 1, layout);
    for (std::uint32_t j = 2; j <= kMaxHashes; ++j) {
        const double f = fp_any(n, m, j, layout);
        if (!(f < best)) break;
        best = f;
        k = j;
    }
    return {k, best};
}

// The rate of n keys in m bits when each key's k slots are independent
// draws, exactly: E[(X/m)^k], X the bits the n k draws set. The textbook
// (1 - e^(-kn/m))^k takes the bits as independent and falls short on small
// filters (1.12x at capacity 10 and 1e-4), which the standard layout's
// second index would show (docs/design/sizing.md). Every term positive, so
// doubles hold it: p[j], the chance that j of K given bits are set once the
// n k draws are made (one draw's step raised to the n k-th power by
// squaring: K^3 log(n k), whatever n), and q[r], that a probe's k draws land
// on r distinct bits; a probe's r bits are all set with sum_j p[j] C(j,r)/C(K,r).
// A probe's bits are at most K = min(k, m) distinct, so K given bits do.
double exact_standard_rate(std::uint64_t n, double m, std::uint32_t k) {
    const std::uint32_t K = static_cast<std::uint32_t>(std::min(static_cast<double>(k), std::floor(m)));
    const std::size_t W = K + 1;
    // step[r * W + c]: from r of the K bits set to c, upper triangular: one
    // draw sets one more with chance (K - r) / m.
    std::vector<double> step(W * W, 0.0), square(W * W), p(W, 0.0), next(W), q(W, 0.0);
    for (std::uint32_t r = 0; r <= K; ++r) {
        const double more = static_cast<double>(K - r) / m;
        step[r * W + r] = 1 - more;
        if (r < K) step[r * W + r + 1] = more;
    }
    p[0] = q[0] = 1;
    for (std::uint64_t draws = n * k; draws != 0; draws >>= 1) {
        if (draws & 1) {
            for (std::size_t c = 0; c < W; ++c) {
                double sum = 0;
                for (std::size_t r = 0; r <= c; ++r) sum += p[r] * step[r * W + c];
                next[c] = sum;
            }
            p.swap(next);
        }
        if (draws > 1) {
            for (std::size_t r = 0; r < W; ++r)
                for (std::size_t c = r; c < W; ++c) {
                    double sum = 0;
                    for (std::size_t i = r; i <= c; ++i) sum += step[r * W + i] * step[i * W + c];
                    square[r * W + c] = sum;
                }
            step.swap(square);
        }
    }
    for (std::uint32_t d = 0; d < k; ++d)
        for (std::uint32_t r = std::min(d, K) + 1; r-- > 0;) {
            if (r == K) continue;  // (every bit there is hit: the next draw repeats one)
            const double stays = q[r] * static_cast<double>(r) / m;
            q[r + 1] += q[r] - stays;
            q[r] = stays;
        }
    double rate = 0;
    for (std::uint32_t r = 1; r <= K; ++r) {
        // C(j, r) / C(K, r), from j = K (1) down: C(j-1, r) = C(j, r) (j - r) / j.
        double all_set = 0, share = 1;
        for (std::uint32_t j = K; j >= r; --j) {
            all_set += p[j] * share;
            share *= static_cast<double>(j - r) / static_cast<double>(j);
        }
        rate += q[r] * all_set;
    }
    return rate;
}

}  // namespace

void check_capacity(double capacity) {
    if (!(capacity >= 1) || !std::isfinite(capacity))
        throw std::invalid_argument("capacity must be a positive integer, got " + fmt(capacity));
}

void check_error_rate(double error_rate) {
    if (!(error_rate > 0 && error_rate < 1))
        throw std::invalid_argument("error_rate must be in (0, 1), got " + fmt(error_rate));
}

void check_geometry(std::uint64_t num_bits, std::uint32_t num_hashes, Layout layout) {
    if (num_bits < 1 || num_bits > kMaxBits)
        throw std::invalid_argument("num_bits must be in [1, 2**48], got " + fmt(num_bits));
    if (layout == Layout::blocked && num_bits % kBlockBits != 0)
        throw std::invalid_argument("num_bits must be a multiple of 512 for layout 'blocked', got " +
                                    fmt(num_bits));
    if (num_hashes < 1 || num_hashes > kMaxHashes)
        throw std::invalid_argument("num_hashes must be in [1, 64], got " + fmt(num_hashes));
}

double false_positive_rate(double n, std::uint64_t num_bits, std::uint32_t num_hashes, Layout layout) {
    if (!(n >= 0) || !std::isfinite(n)) throw std::invalid_argument("n must be >= 0, got " + fmt(n));
    check_geometry(num_bits, num_hashes, layout);
    return fp_any(n, static_cast<double>(num_bits), num_hashes, layout);
}

double expected_rate(double n, std::uint64_t num_bits, std::uint32_t num_hashes, Layout layout) {
    if (layout == Layout::standard && n >= 0 && n <= static_cast<double>(kMaxCount)) {
        // An estimated count between two whole ones: the rate between theirs.
        check_geometry(num_bits, num_hashes, layout);
        const double m = static_cast<double>(num_bits), lo = std::floor(n), w = n - lo;
        const auto at = [&](double keys) {
            return keys < 1 ? 0.0 : exact_standard_rate(static_cast<std::uint64_t>(keys), m, num_hashes);
        };
        return w == 0 ? at(lo) : (1 - w) * at(lo) + w * at(lo + 1);
    }
    return false_positive_rate(n, num_bits, num_hashes, layout);
}

std::uint32_t optimal_num_hashes(std::uint64_t num_bits, double n, Layout layout) {
    if (!(n > 0) || !std::isfinite(n)) throw std::invalid_argument("n must be > 0, got " + fmt(n));
    check_geometry(num_bits, 1, layout);
    const double m = static_cast<double>(num_bits);
    if (is_standard(layout)) {
        const double k = std::round(m / n * kLn2);
        return static_cast<std::uint32_t>(std::clamp(k, 1.0, static_cast<double>(kMaxHashes)));
    }
    return best_k(n, m, layout).first;
}

Params optimal_params(double capacity, double error_rate, Layout layout) {
    check_capacity(capacity);
    check_error_rate(error_rate);
    const double n = capacity;
    const double m_formula = std::ceil(-n * std::log(error_rate) / (kLn2 * kLn2));
    // k needed at the formula's optimum is log2(1/p); refuse what we cannot
    // store before computing anything larger.
    if (std::ceil(-std::log2(error_rate)) > kMaxHashes)
        throw std::invalid_argument("error_rate " + fmt(error_rate) +
                                    " needs more than 64 hashes; the smallest supported is about 1e-19");
    auto too_big = [&](double m) {
        return std::invalid_argument("capacity " + fmt(capacity) + " at error_rate " + fmt(error_rate) +
                                     " needs " + fmt(m) + " bits, over the limit of 2**48");
    };
    if (m_formula > static_cast<double>(kMaxBits)) throw too_big(m_formula);

    Params p{};
    if (is_standard(layout)) {
        // The formula's m with k rounded to an integer can miss p by a hair
        // (1.004% at 1%); grow m by 0.05% steps until the rate is met. Then,
        // for the second index, on from there until the exact rate (never
        // under the textbook's) is met too.
        double m = std::max(1.0, m_formula);
        for (const bool exact : {false, true}) {
            if (exact && layout != Layout::standard) break;
            for (;;) {
                const double k_real = m / n * kLn2;
                const std::uint32_t k_lo = static_cast<std::uint32_t>(std::clamp(std::floor(k_real), 1.0, 64.0));
                const std::uint32_t k_hi = static_cast<std::uint32_t>(std::clamp(std::ceil(k_real), 1.0, 64.0));
                auto rate = [&](std::uint32_t k) {
                    return exact ? exact_standard_rate(static_cast<std::uint64_t>(n), m, k)
                                 : StandardLayout::fp_rate(n, m, k);
                };
                const double f_lo = rate(k_lo), f_hi = k_hi == k_lo ? f_lo : rate(k_hi);
                const std::uint32_t k = f_hi < f_lo ? k_hi : k_lo;
                const double f = std::min(f_lo, f_hi);
                if (f <= error_rate) {
                    p.num_bits = static_cast<std::uint64_t>(m);
                    p.num_hashes = k;
                    p.expected_fp_rate = f;
                    break;
                }
                m = std::ceil(m * 1.0005);
                if (m > static_cast<double>(kMaxBits)) throw too_big(m);
            }
        }
    } else {
        // Smallest number of blocks whose best-k rate meets p. The rate falls
        // as blocks are added, so bracket then bisect.
        auto rate = [&](double blocks) { return best_k(n, blocks * kBlockBits, layout).second; };
        const double max_blocks = static_cast<double>(kMaxBits / kBlockBits);
        double lo = 0;  // rate(lo) > p (0 blocks: nothing fits)
        double hi = std::max(1.0, std::ceil(m_formula / kBlockBits));
        while (rate(hi) > error_rate) {
            lo = hi;
            hi = std::ceil(hi * 1.25);
            if (hi > max_blocks) throw too_big(hi * kBlockBits);
        }
        while (hi - lo > 1) {
            const double mid = std::floor((lo + hi) / 2);
            (rate(mid) > error_rate ? lo : hi) = mid;
        }
        const auto [k, f] = best_k(n, hi * kBlockBits, layout);
        p.num_bits = static_cast<std::uint64_t>(hi) * kBlockBits;
        p.num_hashes = k;
        p.expected_fp_rate = f;
    }
    p.bits_per_key = static_cast<double>(p.num_bits) / n;
    return p;
}

double estimate_count(std::uint64_t bits_set, std::uint64_t num_bits, std::uint32_t num_hashes, Layout layout) {
    check_geometry(num_bits, num_hashes, layout);
    if (bits_set > num_bits)
        throw std::invalid_argument("bits_set must be <= num_bits (" + fmt(bits_set) + " > " + fmt(num_bits) + ")");
    if (bits_set == num_bits) return std::numeric_limits<double>::infinity();
    const double m = static_cast<double>(num_bits);
    const double log_empty = std::log1p(-static_cast<double>(bits_set) / m);
    if (is_standard(layout)) return -(m / num_hashes) * log_empty;
    const double new_bits_per_key = -std::expm1(num_hashes * std::log1p(-1.0 / kBlockBits));
    return -(m / kBlockBits) * log_empty / new_bits_per_key;
}

std::uint64_t estimate_as_count(double estimate) {
    return estimate < 1e18 ? static_cast<std::uint64_t>(estimate + 0.5) : 0;
}

double approx_intersection(double a, double b, double a_or_b) {
    // A full filter says nothing: NaN, not a confident 0 (inf + inf - inf).
    if (!std::isfinite(a) || !std::isfinite(b) || !std::isfinite(a_or_b)) return std::numeric_limits<double>::quiet_NaN();
    return std::max(0.0, a + b - a_or_b);
}

double approx_jaccard(double a, double b, double a_or_b) {
    if (a_or_b == 0) return 1.0;
    if (!std::isfinite(a_or_b)) return std::numeric_limits<double>::quiet_NaN();
    return approx_intersection(a, b, a_or_b) / a_or_b;
}

namespace {
// Whether optimal_params can size a stage of n keys at rate p (its own
// prechecks: k <= 64, and the formula's bits within 2**48).
bool stage_fits(double n, double p) {
    if (!(n >= 1) || n > static_cast<double>(kMaxBits)) return false;
    if (!(p > 0) || std::ceil(-std::log2(p)) > kMaxHashes) return false;
    return std::ceil(-n * std::log(p) / (kLn2 * kLn2)) <= static_cast<double>(kMaxBits);
}
}  // namespace

ChainRule ChainRule::make(std::uint64_t initial_capacity, double error_rate, std::uint32_t growth, double tightening) {
    if (initial_capacity < 1) throw std::invalid_argument("initial_capacity must be >= 1, got 0");
    if (initial_capacity > kMaxBits)
        throw std::invalid_argument("initial_capacity must be at most 2**48, got " + fmt(initial_capacity));
    check_error_rate(error_rate);
    if (growth != 2 && growth != 4) throw std::invalid_argument("growth must be 2 or 4, got " + fmt(growth));
    if (!(tightening > 0 && tightening < 1))
        throw std::invalid_argument("tightening must be in (0, 1), got " + fmt(tightening));
    ChainRule r{initial_capacity, error_rate, growth, tightening};
    if (!stage_fits(static_cast<double>(initial_capacity), r.stage_error_rate(0)))
        throw std::invalid_argument("error_rate " + fmt(error_rate) + " with tightening " + fmt(tightening) +
                                    " gives a first stage at rate " + fmt(r.stage_error_rate(0)) +
                                    ", which needs more than 64 hashes or 2**48 bits");
    return r;
}

std::uint64_t ChainRule::stage_capacity(std::uint32_t i) const {
    std::uint64_t c = initial_capacity;
    for (std::uint32_t j = 0; j < i; ++j) c = c > kMaxBits ? c : c * growth;  // saturates past 2**48
    return c;
}

double ChainRule::stage_error_rate(std::uint32_t i) const {
    // The same operations, in the same order, as the chain's Python side
    // used to compute (stage files written since then must match exactly).
    return error_rate * (1.0 - tightening) * std::pow(tightening, static_cast<double>(i));
}

std::uint32_t ChainRule::max_stages() const {
    std::uint32_t i = 0;
    while (i < kMaxStagesOfChain &&
           stage_fits(static_cast<double>(stage_capacity(i)), stage_error_rate(i)))
        ++i;
    return i;
}

double window_generation_error_rate(double error_rate, std::uint32_t generations) {
    return -std::expm1(std::log1p(-error_rate) / (static_cast<double>(generations) + 1.0));
}

std::uint64_t ChainRule::max_capacity() const {
    std::uint64_t total = 0;
    for (std::uint32_t i = 0, n = max_stages(); i < n; ++i) total += stage_capacity(i);
    return total;
}

}  // namespace bloomline
