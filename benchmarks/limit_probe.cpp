// limit_probe: what one random 64-byte line read per key costs on this
// machine -- the floor under any Bloom filter check (a blocked filter reads
// one line per key; a standard one reads k).
//
// For each array size it reads one random line per key for a batch of keys,
// with software prefetch issued 32 keys ahead (the distance of the blocked
// filter's lookup loop, cpp/include/bloomline/stream.hpp), and reports ns/key. On
// the development VM 32 ahead read a line in 12.8 ns at 124 MB against 15.1
// with 16 ahead, and 64 was no faster: 32 is this loop's best, so the bound
// is not flattered. Random line numbers come from a
// cheap xorshift so the generator is not what is measured. Built by
// benchmarks/run.py with the extension's flags (-O3, no -march).
//
// The array is allocated the way bloomline allocates a large filter (2 MiB
// aligned, MADV_HUGEPAGE), or with plain 4 KiB pages when the 4th argument
// is "small-pages". Both a read per key (what contains does) and a
// read-modify-write of one word per key (what add does) are measured.
//
// usage: limit_probe SIZE_BYTES [KEYS] [REPEATS] [small-pages] [serve]
//   prints one JSON object with the medians of REPEATS runs; with "serve",
//   it sets the array up once, then answers each line "read", "write" or
//   "read-no-prefetch" on stdin with one run's {"ns_per_key": ...} on a
//   line of stdout, until stdin ends. benchmarks/run.py uses that to time
//   the probe right next to each filter repeat, so that both see the same
//   state of this shared machine.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#include <algorithm>
#include <string>
#include <sys/mman.h>

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

template <bool kWrite>
double run(Line* lines, std::uint64_t nlines, std::uint64_t keys, bool prefetch, std::uint64_t* sink) {
    constexpr int kRw = kWrite ? 1 : 0;
    constexpr std::size_t kDist = 32;
    std::uint64_t s = 0x9E3779B97F4A7C15ULL;
    std::uint64_t ring[kDist];
    for (std::size_t i = 0; i < kDist; ++i) {
        ring[i] = mul_hi(next(s), nlines);
        if (prefetch) __builtin_prefetch(&lines[ring[i]], kRw, 3);
    }
    std::uint64_t acc = 0;
    const auto t0 = std::chrono::steady_clock::now();
    for (std::uint64_t i = 0; i < keys; ++i) {
        const std::uint64_t idx = ring[i % kDist];
        const std::uint64_t nxt = mul_hi(next(s), nlines);
        ring[i % kDist] = nxt;
        if (prefetch) __builtin_prefetch(&lines[nxt], kRw, 3);
        Line& l = lines[idx];
        if (kWrite)
            l.w[(idx >> 3) & 7] |= std::uint64_t{1} << (idx & 63);  // set a bit: what an add does
        else
            acc += l.w[idx & 7] & 1;  // depend on the line's contents
    }
    const auto t1 = std::chrono::steady_clock::now();
    *sink += acc;
    return std::chrono::duration<double, std::nano>(t1 - t0).count() / static_cast<double>(keys);
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2) {
        std::fprintf(stderr, "usage: limit_probe SIZE_BYTES [KEYS] [REPEATS] [small-pages] [serve]\n");
        return 2;
    }
    const std::uint64_t size = std::strtoull(argv[1], nullptr, 10);
    const std::uint64_t keys = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 10'000'000;
    const int repeats = argc > 3 ? std::atoi(argv[3]) : 5;
    bool huge = true, serve = false;
    for (int a = 4; a < argc; ++a) {
        const std::string flag = argv[a];
        if (flag == "small-pages") {
            huge = false;
        } else if (flag == "serve") {
            serve = true;
        } else {
            std::fprintf(stderr, "limit_probe: unknown option %s\n", argv[a]);
            return 2;
        }
    }
    const std::uint64_t nlines = std::max<std::uint64_t>(1, size / 64);
    const std::size_t bytes = nlines * 64, huge_page = std::size_t{2} << 20;
    void* raw = mmap(nullptr, bytes + huge_page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) {
        std::fprintf(stderr, "limit_probe: cannot map %zu bytes\n", bytes);
        return 1;
    }
    auto* lines = reinterpret_cast<Line*>((reinterpret_cast<std::uintptr_t>(raw) + huge_page - 1) & ~(huge_page - 1));
    if (huge) madvise(lines, (bytes + huge_page - 1) & ~(huge_page - 1), MADV_HUGEPAGE);
    for (std::uint64_t i = 0; i < nlines; ++i)
        for (int j = 0; j < 8; ++j) lines[i].w[j] = i * 8 + static_cast<std::uint64_t>(j);
    std::uint64_t sink = 0;
    if (serve) {
        char line[64];
        while (std::fgets(line, sizeof line, stdin)) {
            const std::string cmd = std::string(line).substr(0, std::strcspn(line, "\r\n"));
            double ns = 0;
            if (cmd == "read") {
                ns = run<false>(lines, nlines, keys, true, &sink);
            } else if (cmd == "write") {
                ns = run<true>(lines, nlines, keys, true, &sink);
            } else if (cmd == "read-no-prefetch") {
                ns = run<false>(lines, nlines, keys, false, &sink);
            } else {
                std::fprintf(stderr, "limit_probe: unknown command %s\n", cmd.c_str());
                return 2;
            }
            std::printf("{\"ns_per_key\": %.3f, \"sink\": %llu}\n", ns, static_cast<unsigned long long>(sink & 1));
            std::fflush(stdout);
        }
        munmap(raw, bytes + huge_page);
        return 0;
    }
    std::vector<double> pre, nopre, rmw;
    for (int r = 0; r < repeats; ++r) {
        pre.push_back(run<false>(lines, nlines, keys, true, &sink));
        nopre.push_back(run<false>(lines, nlines, keys, false, &sink));
        rmw.push_back(run<true>(lines, nlines, keys, true, &sink));
    }
    auto median = [](std::vector<double>& v) {
        std::sort(v.begin(), v.end());
        return v[v.size() / 2];
    };
    std::printf(
        "{\"size_bytes\": %llu, \"keys\": %llu, \"huge_pages\": %s, \"read_ns_per_key\": %.3f, "
        "\"read_no_prefetch_ns_per_key\": %.3f, \"write_ns_per_key\": %.3f, \"sink\": %llu}\n",
        static_cast<unsigned long long>(bytes), static_cast<unsigned long long>(keys), huge ? "true" : "false",
        median(pre), median(nopre), median(rmw), static_cast<unsigned long long>(sink & 1));
    munmap(raw, bytes + huge_page);
    return 0;
}
