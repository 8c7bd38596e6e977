// threads_probe: what setting one random bit per key costs when N threads
// share the work -- the floor under a threaded add (bloomline's threaded
// adds set each key's bits on the thread that owns its block,
// cpp/include/bloomline/parallel.hpp). limit_probe.cpp, beside it, is the
// one-thread probe; this one cuts the keys into N slices and runs them at
// once, each key a random line of the shared array and one atomic OR into
// it (the form a write that other threads may race needs), prefetched 32
// keys ahead like the filters' loops. It also times a read per key on N
// threads (a threaded lookup's floor).
//
// The array is allocated as bloomline allocates a large filter (2 MiB
// aligned, MADV_HUGEPAGE). Random line numbers come from a per-thread
// xorshift, so the generator is not what is measured.
//
// usage: threads_probe SIZE_BYTES [KEYS] [REPEATS] [THREADS...]
//   prints one JSON object per thread count: the medians of REPEATS runs of
//   KEYS keys in all (wall-clock ns per key), atomic OR and read.
//   build: g++ -O3 -std=c++17 -pthread benchmarks/threads_probe.cpp -o threads_probe
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <sys/mman.h>
#include <thread>
#include <vector>

namespace {

inline std::uint64_t mul_hi(std::uint64_t a, std::uint64_t b) {
    __extension__ typedef unsigned __int128 u128;
    return static_cast<std::uint64_t>((static_cast<u128>(a) * b) >> 64);
}

inline std::uint64_t next(std::uint64_t& s) {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    return s * 0x2545F4914F6CDD1DULL;
}

struct alignas(64) Line {
    std::uint64_t w[8];
};

// One thread's slice: `keys` random lines, an atomic OR (kWrite) or a read each.
template <bool kWrite>
std::uint64_t slice(Line* lines, std::uint64_t nlines, std::uint64_t keys, std::uint64_t seed) {
    constexpr int kRw = kWrite ? 1 : 0;
    constexpr std::size_t kDist = 32;
    std::uint64_t s = 0x9E3779B97F4A7C15ULL ^ (seed * 0xD1B54A32D192ED03ULL);
    std::uint64_t ring[kDist];
    for (std::size_t i = 0; i < kDist; ++i) {
        ring[i] = mul_hi(next(s), nlines);
        __builtin_prefetch(&lines[ring[i]], kRw, 3);
    }
    std::uint64_t acc = 0;
    for (std::uint64_t i = 0; i < keys; ++i) {
        const std::uint64_t idx = ring[i % kDist];
        const std::uint64_t nxt = mul_hi(next(s), nlines);
        ring[i % kDist] = nxt;
        __builtin_prefetch(&lines[nxt], kRw, 3);
        Line& l = lines[idx];
        if (kWrite)
            __atomic_fetch_or(&l.w[(idx >> 3) & 7], std::uint64_t{1} << (idx & 63), __ATOMIC_RELAXED);
        else
            acc += __atomic_load_n(&l.w[idx & 7], __ATOMIC_RELAXED) & 1;
    }
    return acc;
}

template <bool kWrite>
double run(Line* lines, std::uint64_t nlines, std::uint64_t keys, unsigned threads, std::uint64_t* sink) {
    std::vector<std::uint64_t> acc(threads * 8, 0);  // a line apart
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<std::thread> pool;
    for (unsigned t = 1; t < threads; ++t)
        pool.emplace_back([&, t] { acc[t * 8] = slice<kWrite>(lines, nlines, keys / threads, t); });
    acc[0] = slice<kWrite>(lines, nlines, keys / threads, 0);
    for (auto& th : pool) th.join();
    const auto t1 = std::chrono::steady_clock::now();
    for (std::uint64_t a : acc) *sink += a;
    return std::chrono::duration<double, std::nano>(t1 - t0).count() / static_cast<double>(keys);
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2) {
        std::fprintf(stderr, "usage: threads_probe SIZE_BYTES [KEYS] [REPEATS] [THREADS...]\n");
        return 2;
    }
    const std::uint64_t size = std::strtoull(argv[1], nullptr, 10);
    const std::uint64_t keys = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 20'000'000;
    const int repeats = argc > 3 ? std::atoi(argv[3]) : 5;
    std::vector<unsigned> counts;
    for (int a = 4; a < argc; ++a) counts.push_back(static_cast<unsigned>(std::strtoul(argv[a], nullptr, 10)));
    if (counts.empty()) counts = {1, std::max(1u, std::thread::hardware_concurrency())};
    const std::uint64_t nlines = std::max<std::uint64_t>(1, size / 64);
    const std::size_t bytes = nlines * 64, huge_page = std::size_t{2} << 20;
    void* raw = mmap(nullptr, bytes + huge_page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) {
        std::fprintf(stderr, "threads_probe: cannot map %zu bytes\n", bytes);
        return 1;
    }
    auto* lines = reinterpret_cast<Line*>((reinterpret_cast<std::uintptr_t>(raw) + huge_page - 1) & ~(huge_page - 1));
    madvise(lines, (bytes + huge_page - 1) & ~(huge_page - 1), MADV_HUGEPAGE);
    for (std::uint64_t i = 0; i < nlines; ++i)
        for (int j = 0; j < 8; ++j) lines[i].w[j] = i * 8 + static_cast<std::uint64_t>(j);
    std::uint64_t sink = 0;
    for (unsigned threads : counts) {
        std::vector<double> ors, reads;
        for (int r = 0; r < repeats; ++r) {  // the two take turns
            ors.push_back(run<true>(lines, nlines, keys, threads, &sink));
            reads.push_back(run<false>(lines, nlines, keys, threads, &sink));
        }
        std::printf("{\"size_bytes\": %llu, \"keys\": %llu, \"threads\": %u, \"atomic_or_ns_per_key\": %.3f, "
                    "\"read_ns_per_key\": %.3f, \"sink\": %llu}\n",
                    static_cast<unsigned long long>(bytes), static_cast<unsigned long long>(keys), threads,
                    median(ors), median(reads), static_cast<unsigned long long>(sink & 1));
    }
    munmap(raw, bytes + huge_page);
    return 0;
}
