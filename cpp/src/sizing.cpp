#include "bloomline/sizing.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <mutex>
#include <vector>

namespace bloomline {

namespace {

constexpr double kLn2 = 0.69314718055994530942;
constexpr double kTwoPi = 6.28318530717958647693;

double fp_standard(double n, double m, double k) { return std::pow(-std::expm1(-k * n / m), k); }

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
        }
        while (t.fp_by_j.size() <= j) {
            for (std::uint32_t ball = 0; ball < k; ++ball) add_ball(t.occ);
            double e = 0.0;
            for (unsigned x = 1; x <= kBlockBits; ++x) e += t.occ[x] * std::pow(static_cast<double>(x) / kBlockBits, k);
            t.fp_by_j.push_back(e);
        }
        return t.fp_by_j[j];
    }

private:
    struct Table {
        std::vector<double> occ;      // P(X = x) after fp_by_j.size() - 1 keys
        std::vector<double> fp_by_j;  // fp for a block with j keys
    };
    static void add_ball(std::vector<double>& p) {
        for (unsigned x = kBlockBits; x > 0; --x)
            p[x] = p[x] * x / kBlockBits + p[x - 1] * (kBlockBits - x + 1) / kBlockBits;
        p[0] = 0.0;
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
    double sum = 0.0;
    // Each load from its index (not by adding step again and again: above
    // 2**53 that sum rounds at every step, and the grid drifts off step).
    const auto count = static_cast<std::uint64_t>((hi - lo) / step) + 1;
    for (std::uint64_t i = 0; i < count; ++i) {
        const double j = lo + static_cast<double>(i) * step;
        const double pmf = std::exp(log_poisson(j, lambda));
        const double f = j <= exact_loads ? occupancy().fp(ki, static_cast<std::size_t>(j))
                                          : std::pow(-std::expm1(j * log_clear_per_key), k);
        sum += pmf * f;
    }
    return std::min(sum * step, 1.0);
}

double fp_any(double n, double m, std::uint32_t k, Layout layout) {
    return layout == Layout::blocked ? fp_blocked(n, m, k) : fp_standard(n, m, k);
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

std::uint32_t optimal_num_hashes(std::uint64_t num_bits, double n, Layout layout) {
    if (!(n > 0) || !std::isfinite(n)) throw std::invalid_argument("n must be > 0, got " + fmt(n));
    check_geometry(num_bits, 1, layout);
    const double m = static_cast<double>(num_bits);
    if (layout == Layout::standard) {
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
    if (layout == Layout::standard) {
        // The formula's m with k rounded to an integer can miss p by a hair
        // (1.004% at 1%); grow m by 0.05% steps until the rate is met.
        double m = std::max(1.0, m_formula);
        for (;;) {
            const double k_real = m / n * kLn2;
            const std::uint32_t k_lo = static_cast<std::uint32_t>(std::clamp(std::floor(k_real), 1.0, 64.0));
            const std::uint32_t k_hi = static_cast<std::uint32_t>(std::clamp(std::ceil(k_real), 1.0, 64.0));
            const double f_lo = fp_standard(n, m, k_lo), f_hi = fp_standard(n, m, k_hi);
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
    if (layout == Layout::standard) return -(m / num_hashes) * log_empty;
    const double new_bits_per_key = -std::expm1(num_hashes * std::log1p(-1.0 / kBlockBits));
    return -(m / kBlockBits) * log_empty / new_bits_per_key;
}

std::uint64_t estimate_as_count(double estimate) {
    return estimate < 1e18 ? static_cast<std::uint64_t>(estimate + 0.5) : 0;
}

double approx_intersection(double a, double b, double a_or_b) { return std::max(0.0, a + b - a_or_b); }

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
