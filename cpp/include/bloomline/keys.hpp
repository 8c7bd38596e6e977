// Key encodings that need no Python: the byte rules of README.md ("Keys") for
// fixed-width array elements, so NumPy batches hash without the GIL.
//
//   integers (any width, signed or not) -> widened to 64 bits, 8 bytes LE
//                (IntKeys in key_source.hpp, for arrays of every width)
//   S elements  -> their bytes without trailing NULs
//   U elements  -> UTF-8 of their code points without trailing NULs
//
//   floats     -> Python's equality: a whole value is the int it equals
//                 (42.0 is 42, -0.0 is 0, 2.0**70 is 2**70); any other is
//                 kFloatTag then its IEEE-754 binary64 bytes, LE (9 bytes).
//                 NaN equals nothing, not even itself: the callers treat it
//                 as a null (float_key never sees one).
//   ints outside [-2**63, 2**64) -> kBigIntTag then the int's shortest
//                 two's-complement bytes, LE (9 or more of them: at least 10
//                 bytes in all, never the 8 of the 64-bit form).
//
// A value hashes the same whichever path it arrives by: np.int32(5), 5, 5.0
// and the 8 bytes 05 00 .. 00 are one key; "abc", b"abc" and np.str_("abc")
// too. The tags are bytes UTF-8 never holds, so no str equals one of these
// forms. docs/FORMAT.md, "Keys", has the rules and tests/data the vectors.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "bloomline/murmur3.hpp"

namespace bloomline {

// Length of a fixed-width element once trailing NULs are dropped.
template <class Char>
inline std::size_t strip_trailing_nuls(const Char* p, std::size_t n) {
    while (n > 0 && p[n - 1] == 0) --n;
    return n;
}

// UTF-32 -> UTF-8. `out` needs 4 bytes per code point. Returns the byte
// count, or -1 with *bad set to the first code point UTF-8 cannot encode
// (a surrogate or a value above U+10FFFF), which Python's str.encode would
// also refuse.
inline std::ptrdiff_t utf32_to_utf8(const std::uint32_t* cp, std::size_t n, unsigned char* out, std::uint32_t* bad) {
    // ASCII (nearly every URL): one or-reduction and one narrowing loop, both
    // branch-free and vectorised, instead of the general loop below.
    std::uint32_t any = 0;
    for (std::size_t i = 0; i < n; ++i) any |= cp[i];
    if (any < 0x80) {
        for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<unsigned char>(cp[i]);
        return static_cast<std::ptrdiff_t>(n);
    }
    unsigned char* o = out;
    for (std::size_t i = 0; i < n; ++i) {
        const std::uint32_t c = cp[i];
        if (c < 0x80) {
            *o++ = static_cast<unsigned char>(c);
        } else if (c < 0x800) {
            *o++ = static_cast<unsigned char>(0xC0 | (c >> 6));
            *o++ = static_cast<unsigned char>(0x80 | (c & 0x3F));
        } else if (c < 0x10000) {
            if (c >= 0xD800 && c <= 0xDFFF) {
                *bad = c;
                return -1;
            }
            *o++ = static_cast<unsigned char>(0xE0 | (c >> 12));
            *o++ = static_cast<unsigned char>(0x80 | ((c >> 6) & 0x3F));
            *o++ = static_cast<unsigned char>(0x80 | (c & 0x3F));
        } else if (c <= 0x10FFFF) {
            *o++ = static_cast<unsigned char>(0xF0 | (c >> 18));
            *o++ = static_cast<unsigned char>(0x80 | ((c >> 12) & 0x3F));
            *o++ = static_cast<unsigned char>(0x80 | ((c >> 6) & 0x3F));
            *o++ = static_cast<unsigned char>(0x80 | (c & 0x3F));
        } else {
            *bad = c;
            return -1;
        }
    }
    return o - out;
}

// Tags of the key forms beyond str, bytes and 64-bit ints (0xF8..0xFF never
// occur in UTF-8). Tuples and frozensets are the bindings' (keys_py.cpp).
constexpr unsigned char kFloatTag = 0xF8, kBigIntTag = 0xF9, kTupleTag = 0xFA, kFrozensetTag = 0xFB;

// Drop the bytes a two's-complement LE number does not need: a top 0x00 over
// a byte whose sign bit is clear, a top 0xFF over one whose sign bit is set.
inline std::size_t shortest_twos_complement(const unsigned char* p, std::size_t n) {
    while (n > 1 && ((p[n - 1] == 0x00 && !(p[n - 2] & 0x80)) || (p[n - 1] == 0xFF && (p[n - 2] & 0x80)))) --n;
    return n;
}

// The key of a finite or infinite float (not NaN), by the rule above: either
// the 64-bit int it equals (returns true, *as_int = its 8-byte pattern) or
// bytes (returns false; out holds *len bytes, at most kMaxFloatKeyBytes).
constexpr std::size_t kMaxFloatKeyBytes = 1 + 136;  // tag + a whole double below 2**1024, with its sign
inline bool float_key(double d, std::uint64_t* as_int, unsigned char* out, std::size_t* len) {
    if (std::isfinite(d) && d == std::trunc(d)) {
        if (d >= -9223372036854775808.0 && d < 0) {
            *as_int = static_cast<std::uint64_t>(static_cast<std::int64_t>(d));
            return true;
        }
        if (d >= 0 && d < 18446744073709551616.0) {
            *as_int = static_cast<std::uint64_t>(d);  // -0.0 too: 0
            return true;
        }
        // A whole value beyond 64 bits: |d| = m * 2**shift, shift >= 11.
        int e = 0;
        const double fr = std::frexp(std::fabs(d), &e);
        const auto m = static_cast<std::uint64_t>(std::ldexp(fr, 53));
        const int shift = e - 53;
        unsigned char mag[136] = {};
        for (int b = 0; b < 64; ++b) {
            if (!((m >> b) & 1)) continue;
            const int bit = b + shift;
            mag[bit / 8] = static_cast<unsigned char>(mag[bit / 8] | (1u << (bit % 8)));
        }
        if (d < 0) {  // two's complement: invert, add one
            unsigned carry = 1;
            for (unsigned char& c : mag) {
                const unsigned v = static_cast<unsigned char>(~c) + carry;
                c = static_cast<unsigned char>(v);
                carry = v >> 8;
            }
        }
        out[0] = kBigIntTag;
        const std::size_t n = shortest_twos_complement(mag, sizeof mag);
        std::memcpy(out + 1, mag, n);
        *len = 1 + n;
        return false;
    }
    out[0] = kFloatTag;
    std::uint64_t bits = 0;
    std::memcpy(&bits, &d, 8);
    for (int b = 0; b < 8; ++b) out[1 + b] = static_cast<unsigned char>(bits >> (8 * b));
    *len = 9;
    return false;
}

// The hash of a float key (not NaN).
inline Hash128 hash_float_key(double d, std::uint64_t seed) {
    std::uint64_t v = 0;
    unsigned char bytes[kMaxFloatKeyBytes];
    std::size_t n = 0;
    if (float_key(d, &v, bytes, &n)) return murmur3_128_u64(v, seed);
    return murmur3_128(bytes, n, seed);
}

}  // namespace bloomline
