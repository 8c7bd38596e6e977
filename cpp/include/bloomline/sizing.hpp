// Sizing math: how many bits and hashes a filter needs, the false-positive
// rate a geometry gives, and the number of keys a fill level implies.
//
// Standard layout (every bit independent):
//   fp(n, m, k) = (1 - e^(-k n / m))^k
//   m = -n ln p / (ln 2)^2,  k = (m / n) ln 2
//   m/n = 20, k = 10 -> 8.89e-5;  10 bits/key, k = 7 -> 0.819%.
// Blocked layout (all k bits in one 512-bit block chosen by the key):
//   a block receives a Poisson(lambda = n * 512 / m) number of keys j, and a
//   foreign key is falsely found with probability E[(X_j / 512)^k], X_j the
//   number of distinct bits that j*k uniform draws hit (the exact occupancy
//   distribution, computed by a small DP and cached per k).
//   10 bits/key, k = 6 -> 0.9665%, which the filters measure
//   (examples/fp_rate.ipynb, run by tests/test_notebook.py).
//   The published 0.9576% ("exact Poisson mixture") puts the mean fill
//   (1 - (1 - 1/512)^(j k)) in place of X_j / 512; by Jensen's inequality
//   that under-counts. RocksDB's cruder model says 0.954%. Standard at the
//   same memory, best k: 0.819%.
// optimal_params picks the smallest m (and the best k for it) whose rate by
// the layout's own formula is at most the one asked for, so both layouts meet
// their target at capacity. The blocked layout pays 3.1% more memory than
// standard at 1% (9.92 vs 9.59 bits/key), 8.1% at 0.1% (15.55 vs 14.38) and
// 35% at 1e-6, where a 512-bit block is too small for the k it wants.
//
// Counting keys from the fill X (bits set of m):
//   standard: n = -(m / k) ln(1 - X / m)
//   blocked:  n = -(m / 512) ln(1 - X / m) / (1 - (1 - 1/512)^k)
// (the blocked form is the standard one corrected for bits colliding inside
// a block; both agree to first order).
#pragma once

#include <cstdint>

#include "bloomline/common.hpp"

namespace bloomline {

struct Params {
    std::uint64_t num_bits;
    std::uint32_t num_hashes;
    double bits_per_key;
    double expected_fp_rate;
};

// The expected false-positive rate after n distinct keys.
double false_positive_rate(double n, std::uint64_t num_bits, std::uint32_t num_hashes, Layout layout);

// The rate a filter of this geometry gives with n keys, as its
// expected_fp_rate says and as its sizing holds it: for the standard
// layout's second index the exact rate (an n between whole counts takes the
// rate between theirs), which the textbook under-counts on small filters;
// else false_positive_rate.
double expected_rate(double n, std::uint64_t num_bits, std::uint32_t num_hashes, Layout layout);

// The k that minimises the false-positive rate for n keys in num_bits.
std::uint32_t optimal_num_hashes(std::uint64_t num_bits, double n, Layout layout);

// Smallest geometry meeting error_rate at capacity. Throws
// std::invalid_argument naming the parameter for out-of-range input.
Params optimal_params(double capacity, double error_rate, Layout layout);

// Estimated number of distinct keys from the number of bits set.
// Infinity when every bit is set (the filter can say nothing).
double estimate_count(std::uint64_t bits_set, std::uint64_t num_bits, std::uint32_t num_hashes, Layout layout);
// An estimate (estimate_count's) as a count of adds, where the real count is
// unknown (after a union or intersection, a killed writer): rounded, 0 when
// nothing can be estimated (every bit set).
std::uint64_t estimate_as_count(double estimate);

// Two sets from the counts of three filters of one geometry (Swamidass and
// Baldi, 2007): with |A|, |B| and |A or B| each estimated from the bits set
// (estimate_count; A or B is the union of the two filters),
//   |A and B| = |A| + |B| - |A or B|, clipped at 0 (inclusion-exclusion),
//   Jaccard   = |A and B| / |A or B|,
// 1 for two empty sets (the same set), NaN (both) when a filter or the union
// is full (every bit set: nothing can be estimated).
double approx_intersection(double a, double b, double a_or_b);
double approx_jaccard(double a, double b, double a_or_b);

// A scalable chain's rule (Almeida, Baquero, Preguica and Hutchison,
// "Scalable Bloom Filters", 2007): stage i holds initial_capacity * growth**i
// keys at error rate error_rate * (1 - tightening) * tightening**i, so the
// compound rate, at most the sum of the stages' rates, stays under
// error_rate however many stages there are. A stage needs at most 64 hashes
// (a rate of about 1e-19) and at most 2**48 keys and bits, so a chain has
// at most max_stages() stages, known when it is made.
struct ChainRule {
    std::uint64_t initial_capacity = 1;
    double error_rate = 0.01;
    std::uint32_t growth = 2;
    double tightening = 0.9;

    // Checks every parameter: std::invalid_argument naming it.
    static ChainRule make(std::uint64_t initial_capacity, double error_rate, std::uint32_t growth, double tightening);
    std::uint64_t stage_capacity(std::uint32_t i) const;
    double stage_error_rate(std::uint32_t i) const;
    // How many stages can be made (1..64).
    std::uint32_t max_stages() const;
    // Keys the chain holds when all of them are full.
    std::uint64_t max_capacity() const;
};

// A windowed filter's generation rate (bloomline/windowed.py): a lookup asks
// G + 1 live generations, each sized at 1 - (1 - error_rate)**(1 / (G + 1)),
// so it misses all of them with probability at least 1 - error_rate.
// Computed as -expm1(log1p(-error_rate) / (G + 1)): no cancellation for
// small rates. The one formula: Python sizes generations with it, and the
// kind-4 reader checks them against it.
double window_generation_error_rate(double error_rate, std::uint32_t generations);

// Checks shared by every constructor: throw std::invalid_argument naming the
// parameter and its value.
void check_geometry(std::uint64_t num_bits, std::uint32_t num_hashes, Layout layout);
void check_capacity(double capacity);
void check_error_rate(double error_rate);

}  // namespace bloomline
