// core_bench: the C++ core alone, without Python: ns per key of the batch
// loops (add_keys and contains_keys of BloomFilter, both layouts) over
// integer keys hashed inside the loop, at three filter sizes, and of the
// integer batch hash. Figures in benchmarks/NOTES.md that say "core_bench"
// come from this program.
//
// build: g++ -O3 -std=c++17 -Icpp/include benchmarks/core_bench.cpp cpp/src/*.cpp -o core_bench
// run:   ./core_bench [KEYS] [REPEATS]        (BLOOMLINE_SIMD=portable: no AVX2)
//
// Each row is the median of REPEATS runs; the runs of all rows take turns,
// so that the drift of a shared machine falls on all of them alike. A new
// filter is filled by each add run (new keys: the blind form), then the same
// keys are added again (known keys: look first) and looked up.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "bloomline/bloom_filter.hpp"
#include "bloomline/hash_batch.hpp"
#include "bloomline/keys.hpp"
#include "bloomline/sizing.hpp"

namespace {

using namespace bloomline;
using Clock = std::chrono::steady_clock;

// Integer keys hashed on demand, a run at a time (as the bindings' arrays).
struct IntSource {
    const std::uint64_t* v;
    std::uint64_t seed;
    Hash128 operator()(std::size_t i) const { return murmur3_128_u64(v[i], seed); }
    void range(std::size_t first, std::size_t m, Hash128* out) const {
        murmur3_128_u64_many(v + first, m, seed, out);
    }
};

struct Row {
    std::string name;
    std::vector<double> ns;
};

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
    const std::size_t n = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 10'000'000;
    const int repeats = argc > 2 ? std::atoi(argv[2]) : 5;
    std::vector<std::uint64_t> keys(n);
    std::uint64_t x = 88172645463325252ULL;
    for (auto& k : keys) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        k = x;
    }
    std::vector<bool> sink_bits;
    std::unique_ptr<bool[]> out(new bool[n]);
    std::vector<Hash128> hashes(n);

    // (layout, filter capacity): an L2-sized filter, 12 MB and 124 MB at 1%.
    struct Case {
        Layout layout;
        double capacity;
    };
    const Case cases[] = {{Layout::blocked, 200'000}, {Layout::blocked, 10'000'000}, {Layout::blocked, 100'000'000},
                          {Layout::standard, 10'000'000}};
    std::vector<Row> rows;
    for (const Case& c : cases) {
        const Params p = optimal_params(c.capacity, 0.01, c.layout);
        const std::string tag = std::string(layout_name(c.layout)) + " " +
                                std::to_string(p.num_bits / 8 / 1000) + " KB k=" + std::to_string(p.num_hashes);
        rows.push_back({tag + " add new", {}});
        rows.push_back({tag + " add known", {}});
        rows.push_back({tag + " contains", {}});
    }
    rows.push_back({std::string("hash u64 (") + simd_level_name(simd_level()) + ")", {}});

    auto time_ns = [&](auto&& f) {
        const auto t0 = Clock::now();
        f();
        return std::chrono::duration<double, std::nano>(Clock::now() - t0).count() / static_cast<double>(n);
    };
    for (int r = 0; r < repeats; ++r) {
        std::size_t row = 0;
        for (const Case& c : cases) {
            const Params p = optimal_params(c.capacity, 0.01, c.layout);
            BloomFilter f(Geometry{c.layout, p.num_bits, p.num_hashes, 0}, 0, 0.0);
            IntSource src{keys.data(), 0};
            rows[row++].ns.push_back(time_ns([&] { f.add_keys(src, n, out.get()); }));
            rows[row++].ns.push_back(time_ns([&] { f.add_keys(src, n, out.get()); }));
            rows[row++].ns.push_back(time_ns([&] { f.contains_keys(src, 0, n, out.get()); }));
        }
        rows[row++].ns.push_back(time_ns([&] { murmur3_128_u64_many(keys.data(), n, 0, hashes.data()); }));
    }
    std::printf("core_bench: %zu uint64 keys, median of %d runs (ns/key)\n", n, repeats);
    for (const Row& row : rows) std::printf("  %-40s %7.2f\n", row.name.c_str(), median(row.ns));
    return 0;
}
