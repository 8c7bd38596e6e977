// RESP, Redis's protocol: the one home of a bulk string's frame
// ("$<n>\r\n<n bytes>\r\n") for every operand bloomline encodes in C++:
// positions blobs, BITFIELD operations, the key bytes of BF.* commands. The
// client frames the command around them (bloomline/redis/_wire.py, pack)
// and counts these operands with the command's own arguments.
#pragma once

#include <charconv>
#include <cstddef>
#include <cstring>
#include <string>

namespace bloomline::resp {

// The most bytes the frame of a bulk string of n bytes takes.
constexpr std::size_t max_bulk_size(std::size_t n) { return n + 25; }  // '$', up to 20 digits, 2 CRLFs

// Frames n bytes at p into w, which has max_bulk_size(n) bytes free; returns
// the end of what was written. For loops that write many small operands
// into one reserved buffer.
inline char* put_bulk(char* w, const void* p, std::size_t n) {
    *w++ = '$';
    w = std::to_chars(w, w + 20, n).ptr;
    *w++ = '\r';
    *w++ = '\n';
    std::memcpy(w, p, n);
    w += n;
    *w++ = '\r';
    *w++ = '\n';
    return w;
}

inline void append_bulk(std::string* out, const void* p, std::size_t n) {
    const std::size_t at = out->size();
    out->resize(at + max_bulk_size(n));
    char* end = put_bulk(&(*out)[at], p, n);
    out->resize(static_cast<std::size_t>(end - out->data()));
}

inline void append_bulk(std::string* out, const std::string& s) { append_bulk(out, s.data(), s.size()); }

inline std::string bulk(const std::string& s) {
    std::string out;
    append_bulk(&out, s);
    return out;
}

}  // namespace bloomline::resp
