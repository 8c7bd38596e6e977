// MurmurHash3_x64_128: the one hash every bloomline filter uses.
//
// What: Austin Appleby's public-domain MurmurHash3, x64 128-bit variant,
// written here from its description. For a 32-bit seed the result equals the
// reference implementation and the `mmh3` package bit for bit
// (mmh3.hash128(data, seed, x64arch=True, signed=False) == h1 | h2 << 64);
// tests/test_murmur3.py checks 10,100 random inputs of every length 0..100.
// Seeds up to 2**64 - 1 are accepted: h1 and h2 start from the full 64-bit
// seed, which reduces to the reference for seeds below 2**32.
//
// Why this hash: it is fast on short keys (a URL takes a few dozen cycles),
// its 128 bits give the two independent 64-bit halves that double
// hashing and block selection need, and it is what crawler tooling already
// uses, so users can reproduce positions elsewhere.
//
// Portability: blocks are read as little-endian whatever the host order, so
// the same bytes give the same hash on any machine.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace bloomline {

struct Hash128 {
    std::uint64_t h1;
    std::uint64_t h2;
};

namespace detail {

inline std::uint64_t rotl64(std::uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

inline std::uint64_t fmix64(std::uint64_t k) {
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdULL;
    k ^= k >> 33;
    k *= 0xc4ceb9fe1a85ec53ULL;
    k ^= k >> 33;
    return k;
}

inline std::uint64_t load_le64(const unsigned char* p) {
    std::uint64_t v;
    std::memcpy(&v, p, 8);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap64(v);
#endif
    return v;
}

constexpr std::uint64_t kMurmurC1 = 0x87c37b91114253d5ULL;
constexpr std::uint64_t kMurmurC2 = 0x4cf5ad432745937fULL;

inline std::uint64_t mix_k1(std::uint64_t k1) {
    k1 *= kMurmurC1;
    k1 = rotl64(k1, 31);
    k1 *= kMurmurC2;
    return k1;
}

inline std::uint64_t mix_k2(std::uint64_t k2) {
    k2 *= kMurmurC2;
    k2 = rotl64(k2, 33);
    k2 *= kMurmurC1;
    return k2;
}

inline Hash128 finalize(std::uint64_t h1, std::uint64_t h2, std::uint64_t len) {
    h1 ^= len;
    h2 ^= len;
    h1 += h2;
    h2 += h1;
    h1 = fmix64(h1);
    h2 = fmix64(h2);
    h1 += h2;
    h2 += h1;
    return {h1, h2};
}

}  // namespace detail

namespace detail {

// One 16-byte block into the state.
inline void mix_block(std::uint64_t& h1, std::uint64_t& h2, const unsigned char* block) {
    h1 ^= mix_k1(load_le64(block));
    h1 = rotl64(h1, 27);
    h1 += h2;
    h1 = h1 * 5 + 0x52dce729;
    h2 ^= mix_k2(load_le64(block + 8));
    h2 = rotl64(h2, 31);
    h2 += h1;
    h2 = h2 * 5 + 0x38495ab5;
}

// The tail (up to 15 bytes) and the finalisation: byte i of the tail lands
// in bits 8*(i % 8) of k1 (first eight) or k2 (the rest), exactly as the
// reference's fall-through switch does.
inline Hash128 finish(std::uint64_t h1, std::uint64_t h2, const unsigned char* tail, std::size_t rest,
                      std::uint64_t len) {
    std::uint64_t k1 = 0;
    std::uint64_t k2 = 0;
    for (std::size_t i = rest; i > 8; --i) k2 = (k2 << 8) | tail[i - 1];
    for (std::size_t i = rest < 8 ? rest : 8; i > 0; --i) k1 = (k1 << 8) | tail[i - 1];
    if (rest > 8) h2 ^= mix_k2(k2);
    if (rest > 0) h1 ^= mix_k1(k1);
    return finalize(h1, h2, len);
}

}  // namespace detail

// Hash `len` bytes at `data`.
inline Hash128 murmur3_128(const void* data, std::size_t len, std::uint64_t seed) {
    const auto* bytes = static_cast<const unsigned char*>(data);
    const std::size_t nblocks = len / 16;
    std::uint64_t h1 = seed;
    std::uint64_t h2 = seed;
    for (std::size_t i = 0; i < nblocks; ++i) detail::mix_block(h1, h2, bytes + i * 16);
    return detail::finish(h1, h2, bytes + nblocks * 16, len & 15, len);
}

// The same hash over bytes that arrive in pieces: equal to murmur3_128 of
// their concatenation. A save hashes the payload chunk by chunk as it
// writes it, so the checksum is of exactly the bytes written.
class Murmur3Stream {
public:
    explicit Murmur3Stream(std::uint64_t seed) : h1_(seed), h2_(seed) {}
    void update(const void* data, std::size_t len) {
        const auto* p = static_cast<const unsigned char*>(data);
        total_ += len;
        if (held_ > 0) {  // complete the block begun by the last piece
            const std::size_t take = len < 16 - held_ ? len : 16 - held_;
            std::memcpy(block_ + held_, p, take);
            held_ += take;
            p += take;
            len -= take;
            if (held_ < 16) return;
            detail::mix_block(h1_, h2_, block_);
            held_ = 0;
        }
        for (; len >= 16; p += 16, len -= 16) detail::mix_block(h1_, h2_, p);
        std::memcpy(block_, p, len);
        held_ = len;
    }
    Hash128 digest() const { return detail::finish(h1_, h2_, block_, held_, total_); }

private:
    std::uint64_t h1_, h2_;
    std::uint64_t total_ = 0;
    unsigned char block_[16] = {};
    std::size_t held_ = 0;
};

// The hash of the 8 little-endian bytes of `value`, without going through
// memory: the integer-key path. Equal to murmur3_128(le_bytes(value), 8, seed).
inline Hash128 murmur3_128_u64(std::uint64_t value, std::uint64_t seed) {
    using namespace detail;
    std::uint64_t h1 = seed ^ mix_k1(value);
    return finalize(h1, seed, 8);
}

}  // namespace bloomline
