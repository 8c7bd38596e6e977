// Key encodings that need no Python: the byte rules of README.md ("Keys") for
// fixed-width array elements, so NumPy batches hash without the GIL.
//
//   integers (any width, signed or not) -> widened to 64 bits, 8 bytes LE
//                (IntKeys in key_source.hpp, for arrays of every width)
//   S elements  -> their bytes without trailing NULs
//   U elements  -> UTF-8 of their code points without trailing NULs
//
// A value hashes the same whichever path it arrives by: np.int32(5), 5 and
// the 8 bytes 05 00 .. 00 are one key; "abc", b"abc" and np.str_("abc") too.
#pragma once

#include <cstddef>
#include <cstdint>
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

}  // namespace bloomline
