// 64-bit words of filter memory, read and written as every layout and
// filter needs them: little-endian on every machine (so payload bytes are
// portable), and with relaxed atomic loads and stores, so a reader racing a
// writer sees each word before or after, never torn.
#pragma once

#include <cstdint>

namespace bloomline {

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
constexpr bool kLittleEndianHost = false;
#else
constexpr bool kLittleEndianHost = true;
#endif

inline std::uint64_t to_le64(std::uint64_t v) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    return __builtin_bswap64(v);
#else
    return v;
#endif
}

inline std::uint64_t atomic_load(const std::uint64_t* p) { return __atomic_load_n(p, __ATOMIC_RELAXED); }
inline void atomic_store(std::uint64_t* p, std::uint64_t v) { __atomic_store_n(p, v, __ATOMIC_RELAXED); }
inline std::uint64_t load_le(const std::uint64_t* p) { return to_le64(atomic_load(p)); }

inline unsigned popcount64(std::uint64_t x) { return static_cast<unsigned>(__builtin_popcountll(x)); }

}  // namespace bloomline
