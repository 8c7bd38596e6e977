// hash_lanes: MurmurHash3 x64 128 of URL-like keys (47-66 bytes), one key
// at a time as the library hashes them (murmur3.hpp), against several keys
// hashed in lockstep (2, 4 or 8 lanes: their 16-byte blocks mixed
// together, so that the independent multiply chains overlap), each with
// the library's tail (a loop over up to 15 bytes) or a tail read with two
// overlapping loads. The question (benchmarks/NOTES.md, "Batches of str
// keys"): is the hash of a batch of str keys bound by the latency of one
// key's chain, which lanes would hide, or by the instructions themselves?
//
// Keys sit in 112-byte slots, as CPython's str objects of that size do:
// 1,000,000 keys (112 MB, streamed from memory) or the first 4,096 repeated
// (in cache). Every variant's hashes are checked against murmur3_128.
//
// build: g++ -O3 -std=c++17 -Icpp/include benchmarks/hash_lanes.cpp -o hash_lanes
// run:   ./hash_lanes [ROUNDS]  (ns per key: the median over rounds, variants taking turns)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "bloomline/murmur3.hpp"

using namespace bloomline;
using namespace bloomline::detail;

namespace {

// The tail's k1, k2 from the 16 bytes that end where the key ends (readable
// when the key has at least 16 bytes), else byte by byte.
inline void tail_words(const unsigned char* tail, std::size_t rest, std::size_t len, std::uint64_t& k1,
                       std::uint64_t& k2) {
    if (len >= 16) {
        const unsigned char* e = tail + rest - 16;
        std::uint64_t lo = load_le64(e), hi = load_le64(e + 8);
        const std::size_t drop = 16 - rest;  // leading bytes that are not the tail's
        if (drop >= 8) {
            lo = drop == 16 ? 0 : hi >> (8 * (drop - 8));
            hi = 0;
        } else if (drop > 0) {
            lo = (lo >> (8 * drop)) | (hi << (64 - 8 * drop));
            hi >>= 8 * drop;
        }
        k1 = lo;
        k2 = hi;
        return;
    }
    k1 = k2 = 0;
    for (std::size_t i = rest; i > 8; --i) k2 = (k2 << 8) | tail[i - 1];
    for (std::size_t i = rest < 8 ? rest : 8; i > 0; --i) k1 = (k1 << 8) | tail[i - 1];
}

template <bool kLoads>
inline Hash128 finish_with(std::uint64_t h1, std::uint64_t h2, const unsigned char* tail, std::size_t rest,
                           std::size_t len) {
    if (!kLoads) return finish(h1, h2, tail, rest, len);
    std::uint64_t k1, k2;
    tail_words(tail, rest, len, k1, k2);
    h2 ^= mix_k2(k2);  // (mix_k of 0 is 0: mixing an empty half changes nothing)
    h1 ^= mix_k1(k1);
    return finalize(h1, h2, len);
}

template <std::size_t N, bool kLoads>
inline void hash_lanes(const unsigned char* const* data, const std::size_t* len, std::uint64_t seed, Hash128* out) {
    std::uint64_t h1[N], h2[N];
    std::size_t common = len[0] / 16;
    for (std::size_t i = 0; i < N; ++i) {
        h1[i] = h2[i] = seed;
        common = std::min(common, len[i] / 16);
    }
    for (std::size_t b = 0; b < common; ++b)
        for (std::size_t i = 0; i < N; ++i) mix_block(h1[i], h2[i], data[i] + b * 16);
    for (std::size_t i = 0; i < N; ++i) {
        const std::size_t nb = len[i] / 16;
        for (std::size_t b = common; b < nb; ++b) mix_block(h1[i], h2[i], data[i] + b * 16);
        out[i] = finish_with<kLoads>(h1[i], h2[i], data[i] + nb * 16, len[i] & 15, len[i]);
    }
}

struct Keys {
    std::vector<unsigned char> heap;
    std::vector<const unsigned char*> ptr;
    std::vector<std::size_t> len;
};

// n keys in 112-byte slots (the text at offset 48, after a str's header);
// distinct is how many different slots they cycle through.
Keys make_keys(std::size_t n, std::size_t distinct) {
    std::mt19937_64 rng(1);
    Keys k;
    k.heap.assign(distinct * 112 + 64, 0);
    k.ptr.resize(n);
    k.len.resize(n);
    for (std::size_t j = 0; j < distinct; ++j) {
        const std::string s = "https://www.example" + std::to_string(rng() % 1000000) + ".com/path/" +
                              std::to_string(rng() % 1000000000) + "/item?id=" + std::to_string(j);
        std::memcpy(&k.heap[j * 112 + 48], s.data(), s.size());
        k.len[j] = s.size();
    }
    for (std::size_t i = 0; i < n; ++i) {
        k.ptr[i] = &k.heap[(i % distinct) * 112 + 48];
        k.len[i] = k.len[i % distinct];
    }
    return k;
}

}  // namespace

int main(int argc, char** argv) {
    const int rounds = argc > 1 ? std::atoi(argv[1]) : 9;
    constexpr std::size_t n = 1000000;
    std::vector<Hash128> want(n), got(n);
    struct Variant {
        const char* name;
        void (*run)(const Keys&, Hash128*);
    };
    const Variant variants[] = {
        {"one key at a time (the library)",
         [](const Keys& k, Hash128* o) { for (std::size_t i = 0; i < n; ++i) o[i] = murmur3_128(k.ptr[i], k.len[i], 7); }},
        {"one at a time, tail by two loads",
         [](const Keys& k, Hash128* o) { for (std::size_t i = 0; i < n; i += 1) hash_lanes<1, true>(&k.ptr[i], &k.len[i], 7, o + i); }},
        {"2 lanes", [](const Keys& k, Hash128* o) { for (std::size_t i = 0; i < n; i += 2) hash_lanes<2, false>(&k.ptr[i], &k.len[i], 7, o + i); }},
        {"4 lanes", [](const Keys& k, Hash128* o) { for (std::size_t i = 0; i < n; i += 4) hash_lanes<4, false>(&k.ptr[i], &k.len[i], 7, o + i); }},
        {"4 lanes, tail by two loads",
         [](const Keys& k, Hash128* o) { for (std::size_t i = 0; i < n; i += 4) hash_lanes<4, true>(&k.ptr[i], &k.len[i], 7, o + i); }},
        {"8 lanes, tail by two loads",
         [](const Keys& k, Hash128* o) { for (std::size_t i = 0; i < n; i += 8) hash_lanes<8, true>(&k.ptr[i], &k.len[i], 7, o + i); }},
    };
    constexpr std::size_t kVariants = sizeof variants / sizeof variants[0];
    for (const std::size_t distinct : {n, std::size_t{4096}}) {
        const Keys keys = make_keys(n, distinct);
        for (std::size_t i = 0; i < n; ++i) want[i] = murmur3_128(keys.ptr[i], keys.len[i], 7);
        std::vector<std::vector<double>> t(kVariants);
        for (int r = 0; r < rounds; ++r) {
            for (std::size_t v = 0; v < kVariants; ++v) {
                const auto t0 = std::chrono::steady_clock::now();
                variants[v].run(keys, got.data());
                t[v].push_back(std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count() / n);
                if (std::memcmp(got.data(), want.data(), n * sizeof(Hash128)) != 0) {
                    std::printf("%s: hashes differ from murmur3_128\n", variants[v].name);
                    return 1;
                }
            }
        }
        std::printf("%s keys (%s):\n", distinct == n ? "1,000,000" : "4,096 repeated",
                    distinct == n ? "112 MB, from memory" : "in cache");
        for (std::size_t v = 0; v < kVariants; ++v) {
            std::sort(t[v].begin(), t[v].end());
            std::printf("  %-34s %6.2f ns/key (fastest %.2f)\n", variants[v].name, t[v][t[v].size() / 2], t[v][0]);
        }
    }
    return 0;
}
