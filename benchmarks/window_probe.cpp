// window_probe: a windowed filter's lookup over its G + 1 generations, in the
// core alone, two ways (benchmarks/NOTES.md, "Windowed filter"): the loop
// bloomline uses (WindowProbe::contains_batch, window_ring.hpp: a pass per
// generation, each generation's own batch lookup over the keys not found
// yet), and one pass per key over every generation (the key's k bits made
// into a 512-bit mask once, its block in each generation prefetched AHEAD keys
// before, tested with two AVX2 loads each), beside one plain filter's batch
// lookup. Keys are absent, so every generation is probed.
//
// build: g++ -O3 -mavx2 -std=c++17 -Icpp/include benchmarks/window_probe.cpp cpp/src/*.cpp -o window_probe
// run:   ./window_probe G CAPACITY AHEAD        (best of 3, ns per key)
#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <vector>

#include "bloomline/sizing.hpp"
#include "bloomline/window_ring.hpp"

using namespace bloomline;

template <class F>
double best_ns(std::size_t n, F f) {
    double best = 1e300;
    for (int r = 0; r < 3; ++r) {
        const auto s = std::chrono::steady_clock::now();
        f();
        const auto e = std::chrono::steady_clock::now();
        best = std::min(best, std::chrono::duration<double, std::nano>(e - s).count() / static_cast<double>(n));
    }
    return best;
}

int main(int argc, char** argv) {
    const int G = argc > 1 ? std::atoi(argv[1]) : 4;
    const std::size_t cap = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 1000000;
    const std::size_t ahead = argc > 3 ? std::strtoull(argv[3], nullptr, 10) : 8;
    const double rate = window_generation_error_rate(0.01, static_cast<std::uint32_t>(G));
    const Params p = optimal_params(static_cast<double>(cap), rate, Layout::blocked);
    Geometry g;
    g.layout = Layout::blocked;
    g.num_slots = p.num_bits;
    g.num_hashes = p.num_hashes;
    std::vector<std::unique_ptr<BloomFilter>> gens;
    std::vector<const BloomFilter*> ptrs;
    for (int i = 0; i <= G; ++i) {
        gens.push_back(std::make_unique<BloomFilter>(g, cap, rate));
        for (std::size_t k = 0; k < cap; ++k) gens.back()->add(murmur3_128_u64(k + i * cap, 0));
        ptrs.push_back(gens.back().get());
    }
    std::vector<Hash128> hs(cap);
    for (std::size_t k = 0; k < cap; ++k) hs[k] = murmur3_128_u64(k + (std::uint64_t{1} << 45), 0);
    std::unique_ptr<bool[]> out(new bool[cap]);
    const WindowProbe probe(ptrs);
    const double passes = best_ns(cap, [&] { probe.contains_batch(hs.data(), cap, out.get()); });

    std::vector<const std::uint64_t*> words;
    for (const BloomFilter* f : ptrs) words.push_back(f->bits().words());
    const std::uint64_t blocks = g.num_blocks();
    const std::uint32_t k = g.num_hashes;
    const double fused = best_ns(cap, [&] {
        for (std::size_t j = 0; j < cap; ++j) {
            if (j + ahead < cap) {
                const std::uint64_t o = BlockedLayout::block(hs[j + ahead].h1, blocks) * kBlockWords;
                for (const std::uint64_t* w : words) __builtin_prefetch(w + o, 0, 3);
            }
            const Hash128& h = hs[j];
            const std::uint64_t off = BlockedLayout::block(h.h1, blocks) * kBlockWords;
            alignas(32) std::uint64_t m[8] = {};
            for (std::uint32_t i = 0; i < k; ++i) {
                const unsigned o = BlockedLayout::offset(h.h2, i);
                m[o >> 6] |= std::uint64_t{1} << (o & 63);
            }
            const __m256i m0 = _mm256_load_si256(reinterpret_cast<const __m256i*>(m));
            const __m256i m1 = _mm256_load_si256(reinterpret_cast<const __m256i*>(m + 4));
            bool hit = false;
            for (std::size_t l = 0; l < words.size() && !hit; ++l) {
                const auto* b = reinterpret_cast<const __m256i*>(words[l] + off);
                hit = _mm256_testc_si256(_mm256_load_si256(b), m0) & _mm256_testc_si256(_mm256_load_si256(b + 1), m1);
            }
            out[j] = hit;
        }
    });
    const double one = best_ns(cap, [&] {
        Prehashed src{hs.data()};
        ptrs[0]->contains_keys(src, 0, cap, out.get());
    });
    std::printf("G=%d capacity=%zu ahead=%zu: passes %.1f, one pass per key %.1f, one generation %.1f ns/key\n", G,
                cap, ahead, passes, fused, one);
    return 0;
}
