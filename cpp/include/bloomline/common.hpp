// Small shared vocabulary of the core: layouts, limits, the 64x64->128
// multiply, the error type and value formatting for error messages.
//
// Errors: the core throws std::invalid_argument (a bad parameter or a bad
// file) with a message that names the parameter and shows its value; the
// bindings map it to Python's ValueError unchanged.
#pragma once

#include <charconv>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <system_error>

namespace bloomline {

// How the k positions of a key are spread over the array. The value is the
// file format's layout code (docs/FORMAT.md).
//  - standard: k positions anywhere in [0, m) (k cache lines per key).
//  - blocked:  all k positions in one 512-bit, 64-byte-aligned block
//              (one cache line per key; 3% more memory at 1%, sizing.hpp).
//  - standard_v1: the standard layout's first index, kept so that filters
//    made with it still answer; it runs above its rate on small filters and
//    at tiny rates (layout_standard.hpp). Never chosen by default.
enum class Layout : std::uint8_t { standard_v1 = 0, blocked = 1, standard = 2 };
constexpr std::uint8_t kMaxLayoutCode = 2;

// Both indexes of the standard layout share its storage and its maths.
constexpr bool is_standard(Layout l) { return l != Layout::blocked; }

constexpr unsigned kBlockBits = 512;   // one cache line
constexpr unsigned kBlockBytes = kBlockBits / 8;
constexpr unsigned kBlockWords = kBlockBits / 64;

// k beyond 64 buys nothing real (error rates below about 1e-19) and would
// make a corrupt header expensive to probe with.
constexpr std::uint32_t kMaxHashes = 64;
// 2**48 bits = 32 TiB: far beyond any single machine, small enough that all
// size arithmetic stays exact in 64 bits (and in a double).
constexpr std::uint64_t kMaxBits = std::uint64_t{1} << 48;
// The most a count of keys (insert_count, a stage's or a generation's) can
// be: above the estimate from any filter's bits (a full filter of 2**48 bits
// estimates under 2**54 keys), and 65 of them sum without wrapping. A file
// or call saying more is damaged, not a count to wrap on the next add.
constexpr std::uint64_t kMaxCount = std::uint64_t{1} << 56;
// A scalable chain has at most this many stages (the file format's limit).
constexpr std::uint32_t kMaxStagesOfChain = 64;

// Slots changed and keys found new by a run of adds (every layout and kind).
struct AddCounts {
    std::uint64_t bits = 0;
    std::uint64_t keys = 0;
    // One key's add changed `changed` slots; returns whether it was new.
    bool count(unsigned changed) {
        bits += changed;
        keys += changed != 0;
        return changed != 0;
    }
    AddCounts& operator+=(const AddCounts& o) {
        bits += o.bits;
        keys += o.keys;
        return *this;
    }
};

inline const char* layout_name(Layout l) {
    return l == Layout::blocked ? "blocked" : l == Layout::standard ? "standard" : "standard-v1";
}

// "standard-v1" is taken too, to make a filter that matches one made with
// the first index; errors name the two a user chooses between.
inline Layout parse_layout(const std::string& s) {
    if (s == "blocked") return Layout::blocked;
    if (s == "standard") return Layout::standard;
    if (s == "standard-v1") return Layout::standard_v1;
    throw std::invalid_argument("layout must be 'blocked' or 'standard', got '" + s + "'");
}

// High 64 bits of a * b: maps a uniform 64-bit hash onto [0, b) without the
// bias or the cost of %, ("multiply-shift", Lemire 2016).
inline std::uint64_t mul_hi(std::uint64_t a, std::uint64_t b) {
#if defined(__SIZEOF_INT128__)
    __extension__ typedef unsigned __int128 u128;
    return static_cast<std::uint64_t>((static_cast<u128>(a) * b) >> 64);
#else
    const std::uint64_t a_lo = a & 0xffffffffu, a_hi = a >> 32;
    const std::uint64_t b_lo = b & 0xffffffffu, b_hi = b >> 32;
    const std::uint64_t lo_lo = a_lo * b_lo, hi_lo = a_hi * b_lo;
    const std::uint64_t lo_hi = a_lo * b_hi, hi_hi = a_hi * b_hi;
    const std::uint64_t cross = (lo_lo >> 32) + (hi_lo & 0xffffffffu) + lo_hi;
    return hi_hi + (hi_lo >> 32) + (cross >> 32);
#endif
}

// The remix powers, kRemix^(i+1) mod 2^64 for i < 64: k fixed odd multipliers that
// draw a key's k positions from one 64-bit hash, each by an independent
// multiply (no chain of k), for the blocked offsets and the standard slots.
constexpr std::uint64_t kRemix = 0x9E3779B97F4A7C15ULL;  // the 64-bit golden ratio; odd: a bijection
struct RemixPowers {
    std::uint64_t p[kMaxHashes];
    constexpr RemixPowers() : p() {
        std::uint64_t x = 1;
        for (std::uint32_t i = 0; i < kMaxHashes; ++i) {
            x *= kRemix;
            p[i] = x;
        }
    }
};
inline constexpr RemixPowers kRemixPowers{};

// A spinning waiter's pause: it lets the other hyperthread run and keeps the
// loop from flooding the memory system with loads.
inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

// Shortest text that reads back as the same double, as Python's repr
// writes it where they agree ("1.5", "0.01", "1e-300", and "1.0" for a
// whole number): errors show a value as the user typed it.
inline std::string fmt(double v) {
    char buf[32];
    auto r = std::to_chars(buf, buf + sizeof buf, v);
    if (r.ec != std::errc()) return "?";
    std::string s(buf, r.ptr);
    if (s.find_first_of(".eEn") == std::string::npos) s += ".0";  // n: inf, nan
    return s;
}
inline std::string fmt(std::uint64_t v) { return std::to_string(v); }
inline std::string fmt(std::uint32_t v) { return std::to_string(v); }

}  // namespace bloomline
