// The lines splitter (lines.hpp): where lines start and where their keys
// end, for LF, CRLF, a last line without its newline (or ending in a lone
// CR), empty lines and an empty block; a line's key is its bytes.
#include <cstdint>
#include <string>
#include <vector>

#include "bloomline/lines.hpp"
#include "check.hpp"

using namespace bloomline;

namespace {

// The keys of a block, as strings.
std::vector<std::string> keys(const std::string& block) {
    LineSpans s;
    split_lines(reinterpret_cast<const unsigned char*>(block.data()), block.size(), &s);
    std::vector<std::string> out;
    for (std::size_t i = 0; i < s.size(); ++i) out.push_back(block.substr(s.begin[i], s.end[i] - s.begin[i]));
    return out;
}

using Keys = std::vector<std::string>;

}  // namespace

TEST("LF and CRLF lines give the same keys; the last line may lack its newline") {
    CHECK(keys("a\nb\r\nc") == (Keys{"a", "b", "c"}));
    CHECK(keys("a\nb\r\nc\n") == (Keys{"a", "b", "c"}));
    CHECK(keys("https://a.example/\r\n") == (Keys{"https://a.example/"}));
}

TEST("an empty block has no lines; newlines alone are empty lines") {
    CHECK(keys("").empty());
    CHECK(keys("\n") == (Keys{""}));
    CHECK(keys("\r\n\n") == (Keys{"", ""}));
    CHECK(keys("\n\nx") == (Keys{"", "", "x"}));
}

TEST("a carriage return is stripped before a newline and at the end of the last line, else it is content") {
    CHECK(keys("a\rb\n") == (Keys{"a\rb"}));
    CHECK(keys("a\r\r\n") == (Keys{"a\r"}));
    CHECK(keys("\ra\n") == (Keys{"\ra"}));
    CHECK(keys("a\r") == (Keys{"a"}));
    CHECK(keys("a\r\r") == (Keys{"a\r"}));
    CHECK(keys("\r") == (Keys{""}));
}

TEST("a last line ending in a carriage return is the same key as with CRLF: splitting is idempotent") {
    CHECK(keys("k\r\nk\r") == (Keys{"k", "k"}));
    const std::string block = "x\r";
    LineSpans s;
    split_lines(reinterpret_cast<const unsigned char*>(block.data()), block.size(), &s);
    CHECK_EQ(s.end_with_newline(0, block.size()), std::uint64_t{2});  // the '\r' is still written back
}

TEST("end_with_newline covers each line's ending, so lines can be written back unchanged") {
    const std::string block = "a\r\nbb\nc";
    LineSpans s;
    split_lines(reinterpret_cast<const unsigned char*>(block.data()), block.size(), &s);
    CHECK_EQ(s.size(), std::size_t{3});
    std::string joined;
    for (std::size_t i = 0; i < s.size(); ++i)
        joined += block.substr(s.begin[i], s.end_with_newline(i, block.size()) - s.begin[i]);
    CHECK_EQ(joined, block);
}

TEST("a line's key hashes as its bytes") {
    const std::string block = "https://a.example/\r\nx\n";
    LineSpans s;
    const auto* p = reinterpret_cast<const unsigned char*>(block.data());
    split_lines(p, block.size(), &s);
    LineKeys lk{p, &s, 9};
    const Hash128 a = lk(0), b = murmur3_128("https://a.example/", 18, 9);
    CHECK(a.h1 == b.h1 && a.h2 == b.h2);
    const Hash128 c = lk(1), d = murmur3_128("x", 1, 9);
    CHECK(c.h1 == d.h1 && c.h2 == d.h2);
}

TEST("a long block of many lines splits into all of them") {
    std::string block;
    for (int i = 0; i < 10000; ++i) block += "line-" + std::to_string(i) + (i % 2 ? "\r\n" : "\n");
    const Keys k = keys(block);
    CHECK_EQ(k.size(), std::size_t{10000});
    CHECK_EQ(k[9999], std::string("line-9999"));
    CHECK_EQ(k[4242], std::string("line-4242"));
}

TEST("select: the size planned and the bytes copied agree even if the block's last byte changes between them") {
    // The bindings size the output, allocate it, then copy, with the GIL
    // released around both: a bytearray's last byte may change in between.
    // Before the fix the copy read it again and wrote one byte past.
    std::string block = "a\nb\n";
    const auto* p = reinterpret_cast<const unsigned char*>(block.data());
    LineSpans s;
    split_lines(p, block.size(), &s);
    const bool keep[] = {true, true};
    const bool add_newline = last_line_needs_newline(p, block.size());
    const std::size_t size = selected_bytes(block.size(), s, keep, add_newline, 0, 2);
    CHECK_EQ(size, std::size_t{4});
    block[3] = 'c';  // "a\nbc": a last line without its newline now
    std::vector<unsigned char> out(size + 8, 0xEE);
    const unsigned char* end = copy_selected(p, block.size(), s, keep, add_newline, 0, 2, out.data());
    CHECK_EQ(static_cast<std::size_t>(end - out.data()), size);
    CHECK_EQ(out[size], 0xEE);  // nothing written past the planned size
}

TEST("select: ranges of lines copied one after another make the whole selection, a last line given its newline") {
    const std::string block = "a\r\nbb\n\nccc\r";
    const auto* p = reinterpret_cast<const unsigned char*>(block.data());
    LineSpans s;
    split_lines(p, block.size(), &s);
    const bool keep[] = {true, false, true, true};
    const bool add_newline = last_line_needs_newline(p, block.size());
    std::string whole;
    for (std::size_t cut = 0; cut <= s.size(); ++cut) {
        const std::size_t a = selected_bytes(block.size(), s, keep, add_newline, 0, cut);
        const std::size_t b = selected_bytes(block.size(), s, keep, add_newline, cut, s.size());
        std::string out(a + b, '?');
        auto* dst = reinterpret_cast<unsigned char*>(&out[0]);
        CHECK(copy_selected(p, block.size(), s, keep, add_newline, 0, cut, dst) == dst + a);
        CHECK(copy_selected(p, block.size(), s, keep, add_newline, cut, s.size(), dst + a) == dst + a + b);
        CHECK_EQ(out, std::string("a\r\n\nccc\r\n"));
    }
    LineSpans none;
    split_lines(p, 0, &none);
    CHECK_EQ(selected_bytes(0, none, keep, last_line_needs_newline(p, 0), 0, 0), std::size_t{0});
}
