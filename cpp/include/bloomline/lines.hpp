// Lines of a block of text as keys: what `bloomline dedup/build/query` and
// add_lines/contains_lines take. A line ends at '\n'; a '\r' just before it
// is part of the ending, not of the key (CRLF and LF lines compare equal).
// The block's last line may lack its '\n'; a '\r' at its end is still its
// ending, so "k\r" and "k\r\n" are one key (deduplicating output again
// changes nothing). Any other '\r' is content. The key is the line's bytes,
// as the key rules say for bytes: a line and those bytes passed to add()
// are one key.
//
// Why here, in C++: a line becomes a key without becoming a Python object;
// the splitting (memchr) and hashing run with the GIL released.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "bloomline/murmur3.hpp"

namespace bloomline {

// Where each line of p[0, n) starts, and where its key ends (before "\n",
// "\r\n", or a last line's final "\r"). An empty block has no lines.
struct LineSpans {
    std::vector<std::uint64_t> begin;
    std::vector<std::uint64_t> end;
    std::size_t size() const { return begin.size(); }
    // The line's end with its line ending (the next line's start, or n).
    std::uint64_t end_with_newline(std::size_t i, std::uint64_t n) const {
        return i + 1 < begin.size() ? begin[i + 1] : n;
    }
};

// Appends the lines of p[0, n) that start in [from, stop): from must be a
// line's start (0, or just after a '\n'). A line may run past stop.
inline void split_lines_from(const unsigned char* p, std::size_t n, std::size_t from, std::size_t stop,
                             LineSpans* out) {
    std::size_t pos = from;
    while (pos < stop) {
        const void* nl = std::memchr(p + pos, '\n', n - pos);
        const std::size_t at = nl ? static_cast<std::size_t>(static_cast<const unsigned char*>(nl) - p) : n;
        std::size_t end = at;
        if (end > pos && p[end - 1] == '\r') --end;  // before '\n', or ending the last line
        out->begin.push_back(pos);
        out->end.push_back(end);
        pos = nl ? at + 1 : n;
    }
}

// The first line start in [from, stop), or stop where none is: 0, or the
// byte after a '\n'.
inline std::size_t first_line_start(const unsigned char* p, std::size_t from, std::size_t stop) {
    if (from == 0 || from >= stop) return from;
    const void* nl = std::memchr(p + from - 1, '\n', stop - from);
    return nl ? static_cast<std::size_t>(static_cast<const unsigned char*>(nl) - p) + 1 : stop;
}

inline void split_lines(const unsigned char* p, std::size_t n, LineSpans* out) {
    out->begin.clear();
    out->end.clear();
    split_lines_from(p, n, 0, n, out);
}

// The lines [lo, hi) that keep[i] names, as select_lines writes them: each
// with its own ending, and the block's last line given '\n' where
// add_newline says it lacks one. selected_bytes is their size;
// copy_selected writes them at dst (one memcpy per run of kept lines) and
// returns the end. Cut into ranges of lines, several threads each write
// their own part of one output. The size reads only the spans, keep and
// add_newline, never the data: the bindings size the output, then copy,
// with the GIL released around both, and a bytearray's last byte changing
// in between must not change how much is written.
inline bool last_line_needs_newline(const unsigned char* p, std::size_t n) { return n > 0 && p[n - 1] != '\n'; }

inline std::size_t selected_bytes(std::size_t n, const LineSpans& lines, const bool* keep, bool add_newline,
                                  std::size_t lo, std::size_t hi) {
    std::size_t total = 0;
    for (std::size_t i = lo; i < hi; ++i)
        if (keep[i]) total += lines.end_with_newline(i, n) - lines.begin[i];
    if (hi == lines.size() && hi > lo && keep[hi - 1] && add_newline) ++total;
    return total;
}

inline unsigned char* copy_selected(const unsigned char* p, std::size_t n, const LineSpans& lines, const bool* keep,
                                    bool add_newline, std::size_t lo, std::size_t hi, unsigned char* dst) {
    for (std::size_t i = lo; i < hi;) {
        if (!keep[i]) {
            ++i;
            continue;
        }
        std::size_t j = i + 1;
        while (j < hi && keep[j]) ++j;
        const std::uint64_t b = lines.begin[i], e = lines.end_with_newline(j - 1, n);
        std::memcpy(dst, p + b, e - b);
        dst += e - b;
        if (j == lines.size() && add_newline) *dst++ = '\n';
        i = j;
    }
    return dst;
}

// The lines as a key source (key_source.hpp).
struct LineKeys {
    const unsigned char* p;
    const LineSpans* lines;
    std::uint64_t seed;
    Hash128 operator()(std::size_t i) const {
        const std::uint64_t b = lines->begin[i];
        return murmur3_128(p + b, static_cast<std::size_t>(lines->end[i] - b), seed);
    }
};

}  // namespace bloomline
