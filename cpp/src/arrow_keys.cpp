#include "bloomline/arrow_keys.hpp"

namespace bloomline {

namespace {

struct FormatInfo {
    ArrowColumn::Kind kind;
    unsigned width;
    bool is_signed;
};

bool key_format(const std::string& f, FormatInfo* info) {
    using K = ArrowColumn::Kind;
    if (f == "u" || f == "z") return *info = {K::binary32, 0, false}, true;
    if (f == "U" || f == "Z") return *info = {K::binary64, 0, false}, true;
    if (f == "vu" || f == "vz") return *info = {K::view, 0, false}, true;
    if (f == "b") return *info = {K::boolean, 0, false}, true;
    if (f == "n") return *info = {K::integer, 8, false}, true;  // (all null: open_column)
    if (f.size() > 2 && f.compare(0, 2, "w:") == 0 && f.size() <= 12 &&
        f.find_first_not_of("0123456789", 2) == std::string::npos) {  // fixed-size binary, "w:16"
        const unsigned long long w = std::stoull(f.substr(2));
        if (w < 1 || w > (1u << 30)) return false;
        return *info = {K::fixed, static_cast<unsigned>(w), false}, true;
    }
    if (f.size() != 1) return false;
    switch (f[0]) {
        case 'c': return *info = {K::integer, 1, true}, true;
        case 'C': return *info = {K::integer, 1, false}, true;
        case 's': return *info = {K::integer, 2, true}, true;
        case 'S': return *info = {K::integer, 2, false}, true;
        case 'i': return *info = {K::integer, 4, true}, true;
        case 'I': return *info = {K::integer, 4, false}, true;
        case 'l': return *info = {K::integer, 8, true}, true;
        case 'L': return *info = {K::integer, 8, false}, true;
        case 'f': return *info = {K::floating, 4, true}, true;
        case 'g': return *info = {K::floating, 8, true}, true;
        default: return false;
    }
}

std::string format_of(const ArrowSchema& s) { return s.format == nullptr ? std::string("(none)") : s.format; }

std::string bad_array(const std::string& what) { return "the Arrow array is malformed: " + what; }

}  // namespace

std::string key_column_schema(const ArrowSchema& schema, const ArrowSchema** column) {
    const ArrowSchema* s = &schema;
    const std::string f = format_of(schema);
    if (f == "+s") {  // a record batch or table: one column only
        if (schema.n_children != 1 || schema.children == nullptr || schema.children[0] == nullptr)
            return "an Arrow table or record batch of " + std::to_string(schema.n_children) +
                   " columns is not a batch of keys; pass one column";
        s = schema.children[0];
    }
    *column = s;
    const std::string cf = format_of(*s);
    if (s->dictionary != nullptr)
        return "a dictionary-encoded (categorical) Arrow column is not supported; decode it first "
               "(pyarrow: arr.dictionary_decode(); pandas: series.astype(series.cat.categories.dtype), which "
               "keeps its keys, where astype(str) would turn 101 into '101')";
    FormatInfo info{};
    if (key_format(cf, &info)) return {};
    std::string what = "Arrow type '" + cf + "'";
    if (cf == "e") what += " (half-precision floating point; cast it to float32 or float64)";
    if (!cf.empty() && cf[0] == 't') what += " (a date or time)";
    return what + " is not a key type; use strings, binary, integers, booleans or floats";
}

std::string open_column(const ArrowSchema& schema, const ArrowArray& top, ArrowColumn* out) {
    const ArrowSchema* cs = nullptr;
    std::string err = key_column_schema(schema, &cs);
    if (!err.empty()) return err;
    const ArrowArray* a = &top;
    std::int64_t extra_offset = 0;
    std::int64_t length = top.length;
    if (cs != &schema) {  // the struct's one child
        if (top.n_children != 1 || top.children == nullptr || top.children[0] == nullptr)
            return bad_array("a struct without its one child");
        if (top.null_count != 0 && top.n_buffers > 0 && top.buffers != nullptr && top.buffers[0] != nullptr)
            return "an Arrow record batch with null rows is not supported";
        a = top.children[0];
        extra_offset = top.offset;
    }
    if (length < 0 || a->offset < 0 || extra_offset < 0 || a->length < extra_offset + length)
        return bad_array("length " + std::to_string(length) + " and offset " + std::to_string(a->offset));
    FormatInfo info{};
    key_format(format_of(*cs), &info);
    ArrowColumn c;
    c.kind = info.kind;
    c.width = info.width;
    c.is_signed = info.is_signed;
    c.length = static_cast<std::size_t>(length);
    c.offset = static_cast<std::size_t>(a->offset + extra_offset);
    if (format_of(*cs) == "n") {  // the null type (an empty or all-missing column): no buffers, every element null
        c.all_null = true;
        *out = c;
        return {};
    }
    const std::int64_t want = info.kind == ArrowColumn::Kind::view       ? 3
                              : info.kind == ArrowColumn::Kind::binary32 ? 3
                              : info.kind == ArrowColumn::Kind::binary64 ? 3
                                                                         : 2;
    if (info.kind == ArrowColumn::Kind::view ? a->n_buffers < want : a->n_buffers != want)
        return bad_array(std::to_string(a->n_buffers) + " buffers for type '" + format_of(*cs) + "'");
    if (a->buffers == nullptr) return bad_array("no buffers");
    if (a->null_count != 0) c.validity = static_cast<const std::uint8_t*>(a->buffers[0]);
    c.values = a->buffers[1];
    if (c.length == 0) {
        *out = c;
        return {};
    }
    if (c.values == nullptr) return bad_array("a missing values buffer");
    if (info.kind == ArrowColumn::Kind::binary32 || info.kind == ArrowColumn::Kind::binary64) {
        c.data = static_cast<const std::uint8_t*>(a->buffers[2]);
        // Offsets that never decrease keep every key inside the data buffer
        // the producer describes.
        auto check = [&](auto* o) -> std::string {
            if (o[c.offset] < 0) return bad_array("a negative offset");
            for (std::size_t i = c.offset; i < c.offset + c.length; ++i)
                if (o[i + 1] < o[i]) return bad_array("offsets decrease at element " + std::to_string(i - c.offset));
            if (c.data == nullptr && o[c.offset + c.length] != o[c.offset]) return bad_array("a missing data buffer");
            return {};
        };
        err = info.kind == ArrowColumn::Kind::binary32 ? check(static_cast<const std::int32_t*>(c.values))
                                                       : check(static_cast<const std::int64_t*>(c.values));
        if (!err.empty()) return err;
    }
    if (info.kind == ArrowColumn::Kind::view) {
        c.n_variadic = static_cast<std::size_t>(a->n_buffers - 3);
        c.variadic = reinterpret_cast<const std::uint8_t* const*>(a->buffers + 2);
        c.variadic_sizes = static_cast<const std::int64_t*>(a->buffers[a->n_buffers - 1]);
        if (c.n_variadic > 0 && c.variadic_sizes == nullptr) return bad_array("a missing buffer-sizes buffer");
        const auto* v = static_cast<const std::uint8_t*>(c.values);
        for (std::size_t i = 0; i < c.length; ++i) {
            if (!c.valid(i)) continue;
            const std::uint8_t* e = v + 16 * (c.offset + i);
            std::int32_t len, buf, off;
            std::memcpy(&len, e, 4);
            std::memcpy(&buf, e + 8, 4);
            std::memcpy(&off, e + 12, 4);
            if (len < 0) return bad_array("a negative view length at element " + std::to_string(i));
            if (len <= 12) continue;
            if (buf < 0 || static_cast<std::size_t>(buf) >= c.n_variadic || c.variadic[buf] == nullptr || off < 0 ||
                static_cast<std::int64_t>(off) + len > c.variadic_sizes[buf])
                return bad_array("view " + std::to_string(i) + " points outside its data buffers");
        }
    }
    *out = c;
    return {};
}

std::size_t first_null(const ArrowColumn& c) {
    if (c.all_null) return 0;
    if (c.kind == ArrowColumn::Kind::floating) {  // a NaN is a null too
        for (std::size_t i = 0; i < c.length; ++i)
            if (!c.valid(i)) return i;
        return c.length;
    }
    if (c.validity == nullptr) return c.length;
    std::size_t i = 0;
    // Whole bytes of the bitmap at a time where the column is byte-aligned.
    while (i < c.length) {
        const std::size_t b = c.offset + i;
        if ((b & 7) == 0 && i + 8 <= c.length && c.validity[b >> 3] == 0xFF) {
            i += 8;
            continue;
        }
        if (!c.valid(i)) return i;
        ++i;
    }
    return c.length;
}

}  // namespace bloomline
