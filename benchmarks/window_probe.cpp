// window_probe: a windowed filter's lookup over its G + 1 generations, in the
// core alone, four ways (benchmarks/NOTES.md, "Windowed filter"): the loop
// bloomline uses (WindowProbe::contains_batch, window_ring.hpp: a pass per
// generation, each generation's own batch lookup over the keys not found
// yet); one pass per key over every generation (the key's k bits made into a
// 512-bit mask once, its block in each generation prefetched AHEAD keys
// before, tested with two AVX2 loads each); the same over the generations
// interleaved block by block in one array (a key's G + 1 blocks adjacent
// lines), with the mask, and with the offsets in AVX2 lanes as the plain
// batch lookup has them; beside one plain filter's batch lookup. Keys are
// absent, so every generation is probed; the passes are also timed over
// chunks of the batch. Then adds of new keys over G full
// generations: WindowProbe::add_batch, the interleaved array's, and a plain
// filter's add.
//
// build: g++ -O3 -mavx2 -std=c++17 -Icpp/include benchmarks/window_probe.cpp cpp/src/*.cpp -o window_probe
// run:   ./window_probe G CAPACITY AHEAD CHUNK  (best of 3, ns per key)
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

template <class F, class R>
double best_ns(std::size_t n, F f, R reset) {
    double best = 1e300;
    for (int r = 0; r < 3; ++r) {
        reset();
        const auto s = std::chrono::steady_clock::now();
        f();
        const auto e = std::chrono::steady_clock::now();
        best = std::min(best, std::chrono::duration<double, std::nano>(e - s).count() / static_cast<double>(n));
    }
    return best;
}

template <class F>
double best_ns(std::size_t n, F f) {
    return best_ns(n, f, [] {});
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
    // The same passes over chunks of CHUNK keys (their hashes stay cached).
    const std::size_t chunk = argc > 4 ? std::strtoull(argv[4], nullptr, 10) : 8192;
    const double chunked = best_ns(cap, [&] {
        for (std::size_t s = 0; s < cap; s += chunk)
            probe.contains_batch(hs.data() + s, std::min(chunk, cap - s), out.get() + s);
    });
    std::printf("passes over chunks of %zu keys: %.1f ns/key\n", chunk, chunked);

    std::vector<const std::uint64_t*> words;
    for (const BloomFilter* f : ptrs) words.push_back(f->bits().words());
    const std::uint64_t blocks = g.num_blocks();
    const std::uint32_t k = g.num_hashes;
    // A key's k bits as a 512-bit mask, in two AVX2 halves.
    auto mask_of = [k](const Hash128& h, __m256i* m0, __m256i* m1) {
        alignas(32) std::uint64_t m[8] = {};
        for (std::uint32_t i = 0; i < k; ++i) {
            const unsigned o = BlockedLayout::offset(h.h2, i);
            m[o >> 6] |= std::uint64_t{1} << (o & 63);
        }
        *m0 = _mm256_load_si256(reinterpret_cast<const __m256i*>(m));
        *m1 = _mm256_load_si256(reinterpret_cast<const __m256i*>(m + 4));
    };
    const double fused = best_ns(cap, [&] {
        for (std::size_t j = 0; j < cap; ++j) {
            if (j + ahead < cap) {
                const std::uint64_t o = BlockedLayout::block(hs[j + ahead].h1, blocks) * kBlockWords;
                for (const std::uint64_t* w : words) __builtin_prefetch(w + o, 0, 3);
            }
            const Hash128& h = hs[j];
            const std::uint64_t off = BlockedLayout::block(h.h1, blocks) * kBlockWords;
            __m256i m0, m1;
            mask_of(h, &m0, &m1);
            bool hit = false;
            for (std::size_t l = 0; l < words.size() && !hit; ++l) {
                const auto* b = reinterpret_cast<const __m256i*>(words[l] + off);
                hit = _mm256_testc_si256(_mm256_load_si256(b), m0) & _mm256_testc_si256(_mm256_load_si256(b + 1), m1);
            }
            out[j] = hit;
        }
    });
    // Interleaved: block b of generation l at (b * L + l), so a key's L
    // blocks are adjacent lines (one page, one prefetch run).
    const std::size_t L = words.size();
    const std::size_t inter_words = blocks * L * kBlockWords;
    std::unique_ptr<std::uint64_t[], decltype(&std::free)> inter_owner(
        static_cast<std::uint64_t*>(std::aligned_alloc(64, inter_words * 8)), &std::free);
    std::uint64_t* inter = inter_owner.get();
    for (std::uint64_t b = 0; b < blocks; ++b)
        for (std::size_t l = 0; l < L; ++l)
            std::copy(words[l] + b * kBlockWords, words[l] + (b + 1) * kBlockWords,
                      inter + (b * L + l) * kBlockWords);
    const std::uint64_t* iw = inter;
    // Key j's group of L blocks, and a prefetch of it (its first block for
    // writing where asked: the current generation's, under an add).
    auto group_of = [&](std::size_t j) { return iw + BlockedLayout::block(hs[j].h1, blocks) * L * kBlockWords; };
    auto prefetch_group = [&](std::size_t j, bool write_first) {
        if (j >= cap) return;
        const char* o = reinterpret_cast<const char*>(group_of(j));
        if (write_first)
            __builtin_prefetch(o, 1, 3);
        else
            __builtin_prefetch(o, 0, 3);
        for (std::size_t l = 1; l < L; ++l) __builtin_prefetch(o + 64 * l, 0, 3);
    };
    const double interleaved = best_ns(cap, [&] {
        for (std::size_t j = 0; j < cap; ++j) {
            prefetch_group(j + ahead, false);
            const Hash128& h = hs[j];
            const std::uint64_t* base = group_of(j);
            __m256i m0, m1;
            mask_of(h, &m0, &m1);
            bool hit = false;
            for (std::size_t l = 0; l < L && !hit; ++l) {
                const auto* b = reinterpret_cast<const __m256i*>(base + l * kBlockWords);
                hit = _mm256_testc_si256(_mm256_load_si256(b), m0) & _mm256_testc_si256(_mm256_load_si256(b + 1), m1);
            }
            out[j] = hit;
        }
    });
    // The same, the key's offsets computed once in AVX2 lanes (as the
    // plain filter's batch lookup does) and tested against each block.
    const std::uint32_t groups = (k + 7) / 8;
    const double interleaved_simd = best_ns(cap, [&] {
        for (std::size_t j = 0; j < cap; ++j) {
            prefetch_group(j + ahead, false);
            const Hash128& h = hs[j];
            const std::uint64_t* base = group_of(j);
            __m256i widx[4], bits[4], half[4];
            alignas(32) std::uint32_t offs[32];
            for (std::uint32_t i = 0; i < groups * 8; ++i)
                offs[i] = i < k ? BlockedLayout::offset(h.h2, i) : BlockedLayout::offset(h.h2, 0);
            for (std::uint32_t g = 0; g < groups; ++g) {
                const __m256i off = _mm256_load_si256(reinterpret_cast<const __m256i*>(offs + 8 * g));
                widx[g] = _mm256_srli_epi32(off, 5);
                bits[g] = _mm256_sllv_epi32(_mm256_set1_epi32(1), _mm256_and_si256(off, _mm256_set1_epi32(31)));
                half[g] = _mm256_slli_epi32(off, 23);
            }
            bool hit = false;
            for (std::size_t l = 0; l < L && !hit; ++l) {
                const auto* b = reinterpret_cast<const __m256i*>(base + l * kBlockWords);
                const __m256i lo = _mm256_load_si256(b), hi = _mm256_load_si256(b + 1);
                unsigned clear = 0;
                for (std::uint32_t g = 0; g < groups; ++g) {
                    const __m256 fl = _mm256_castsi256_ps(_mm256_permutevar8x32_epi32(lo, widx[g]));
                    const __m256 fh = _mm256_castsi256_ps(_mm256_permutevar8x32_epi32(hi, widx[g]));
                    const __m256i w = _mm256_castps_si256(_mm256_blendv_ps(fl, fh, _mm256_castsi256_ps(half[g])));
                    const __m256i c = _mm256_cmpeq_epi32(_mm256_and_si256(w, bits[g]), _mm256_setzero_si256());
                    clear |= static_cast<unsigned>(_mm256_movemask_ps(_mm256_castsi256_ps(c)));
                }
                hit = clear == 0;
            }
            out[j] = hit;
        }
    });
    const double one = best_ns(cap, [&] {
        Prehashed src{hs.data()};
        ptrs[0]->contains_keys(src, 0, cap, out.get());
    });
    // Adds of new keys (refresh on): the current generation empty, the G
    // older ones full. The generations apart (WindowProbe::add_batch over
    // gens 1..G, into a fresh gen 0), and interleaved (cur = block 0 of each
    // key's group: its k bits set, the others tested).
    std::vector<const BloomFilter*> older(ptrs.begin() + 1, ptrs.end());
    const WindowProbe older_probe(older);
    BloomFilter& cur = *gens[0];
    const double add_apart = best_ns(
        cap, [&] { older_probe.add_batch(cur, hs.data(), cap, true, out.get()); }, [&] { cur.clear(); });
    const double add_plain = best_ns(
        cap,
        [&] {
            Prehashed src{hs.data()};
            cur.add_keys(src, cap, out.get());
        },
        [&] { cur.clear(); });
    auto clear_cur = [&] {
        for (std::uint64_t b = 0; b < blocks; ++b)
            std::fill(inter + b * L * kBlockWords, inter + (b * L + 1) * kBlockWords, std::uint64_t{0});
    };
    const double add_inter = best_ns(
        cap,
        [&] {
            for (std::size_t j = 0; j < cap; ++j) {
                prefetch_group(j + ahead, true);
                const Hash128& h = hs[j];
                std::uint64_t* base = inter + (group_of(j) - iw);
                __m256i m0, m1;
                mask_of(h, &m0, &m1);
                auto* c = reinterpret_cast<__m256i*>(base);
                const __m256i c0 = _mm256_load_si256(c), c1 = _mm256_load_si256(c + 1);
                const bool was = _mm256_testc_si256(c0, m0) & _mm256_testc_si256(c1, m1);
                _mm256_store_si256(c, _mm256_or_si256(c0, m0));
                _mm256_store_si256(c + 1, _mm256_or_si256(c1, m1));
                bool hit = was;
                for (std::size_t l = 1; l < L && !hit; ++l) {
                    const auto* b = reinterpret_cast<const __m256i*>(base + l * kBlockWords);
                    hit = _mm256_testc_si256(_mm256_load_si256(b), m0) &
                          _mm256_testc_si256(_mm256_load_si256(b + 1), m1);
                }
                out[j] = !hit;
            }
        },
        clear_cur);
    std::printf("adds: apart %.1f, interleaved %.1f, plain %.1f ns/key\n", add_apart, add_inter, add_plain);
    std::printf("G=%d capacity=%zu ahead=%zu: passes %.1f, one pass per key %.1f, interleaved %.1f, simd %.1f, "
                "one generation %.1f ns/key\n",
                G, cap, ahead, passes, fused, interleaved, interleaved_simd, one);
    return 0;
}
