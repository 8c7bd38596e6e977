// Keys from an Arrow column, read through the Arrow C Data Interface
// (https://arrow.apache.org/docs/format/CDataInterface.html): pyarrow,
// pandas (Arrow-backed), polars and DuckDB all export their columns in this
// ABI, so one reader serves them all without depending on any of them.
//
// Why this way: the interface hands over raw buffers (validity bitmap,
// offsets, data, or 16-byte views), so a key is hashed straight from the
// column's memory, with no object per key and no copy. A key is its bytes
// (string and binary types, UTF-8 already); for integer and boolean
// columns, the integer widened to 64 bits; for float32 and float64 columns,
// the float key (keys.hpp), a NaN being a null: the same keys as from NumPy.
//
// Producers' buffers are trusted as the interface says, but what can be
// checked cheaply is checked before any key is read: the format, the
// buffer count, offsets that never decrease, and each view's buffer index
// and bounds (views carry their buffers' sizes). A bad column is refused
// with a message; nothing reads outside what the column claims.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "bloomline/key_source.hpp"
#include "bloomline/keys.hpp"
#include "bloomline/murmur3.hpp"

// The ABI's structs, exactly as the specification defines them (and guarded
// by its macros, so that another header defining them too is fine).
extern "C" {
#ifndef ARROW_C_DATA_INTERFACE
#define ARROW_C_DATA_INTERFACE
struct ArrowSchema {
    const char* format;
    const char* name;
    const char* metadata;
    int64_t flags;
    int64_t n_children;
    struct ArrowSchema** children;
    struct ArrowSchema* dictionary;
    void (*release)(struct ArrowSchema*);
    void* private_data;
};
struct ArrowArray {
    int64_t length;
    int64_t null_count;
    int64_t offset;
    int64_t n_buffers;
    int64_t n_children;
    const void** buffers;
    struct ArrowArray** children;
    struct ArrowArray* dictionary;
    void (*release)(struct ArrowArray*);
    void* private_data;
};
#endif
#ifndef ARROW_C_STREAM_INTERFACE
#define ARROW_C_STREAM_INTERFACE
struct ArrowArrayStream {
    int (*get_schema)(struct ArrowArrayStream*, struct ArrowSchema* out);
    int (*get_next)(struct ArrowArrayStream*, struct ArrowArray* out);
    const char* (*get_last_error)(struct ArrowArrayStream*);
    void (*release)(struct ArrowArrayStream*);
    void* private_data;
};
#endif
}

namespace bloomline {

// One Arrow array (a chunk) as keys.
struct ArrowColumn {
    enum class Kind { binary32, binary64, view, fixed, integer, boolean, floating };
    Kind kind = Kind::binary32;
    unsigned width = 0;  // integers, floats and fixed-size binary: bytes per value
    bool is_signed = false;
    std::size_t length = 0;
    std::size_t offset = 0;              // the array's own offset, in elements
    const std::uint8_t* validity = nullptr;  // null: no nulls
    bool all_null = false;                   // Arrow's null type ("n"): no buffers, every element null
    const void* values = nullptr;        // offsets, views, integers or bits
    const std::uint8_t* data = nullptr;  // binary32/64: the bytes
    const std::uint8_t* const* variadic = nullptr;  // view: the data buffers
    const std::int64_t* variadic_sizes = nullptr;
    std::size_t n_variadic = 0;

    // Not a null: the validity bitmap's bit, and for floats not NaN (a NaN
    // equals nothing, not even itself: it is a missing value, never a key).
    bool valid(std::size_t i) const {
        if (all_null) return false;
        if (kind == Kind::floating && is_nan(offset + i)) return false;
        if (validity == nullptr) return true;
        const std::size_t b = offset + i;
        return (validity[b >> 3] >> (b & 7)) & 1;
    }
    double float_value(std::size_t j) const {  // element j, its offset included
        if (width == 4) {
            float f;
            std::memcpy(&f, static_cast<const unsigned char*>(values) + 4 * j, 4);
            return f;
        }
        double d;
        std::memcpy(&d, static_cast<const unsigned char*>(values) + 8 * j, 8);
        return d;
    }
    bool is_nan(std::size_t j) const {
        const double d = float_value(j);
        return d != d;
    }
};

// What an Arrow format string names, as a key column: "" if it is one,
// else why not ("type 'tsu:UTC' (a timestamp) is not a key type ...").
// `schema` may be a one-column struct (a record batch, a table): its child
// is the column. *column is set to the schema of the column itself.
std::string key_column_schema(const ArrowSchema& schema, const ArrowSchema** column);

// Read an array of that schema into *out (the struct's child for a record
// batch). Returns "" or what is wrong with the array.
std::string open_column(const ArrowSchema& schema, const ArrowArray& array, ArrowColumn* out);

// Index of the first null (counted from the column's first element), or
// `length` if there is none.
std::size_t first_null(const ArrowColumn& c);

// Element j (counted in the array's buffers, its offset included) of a
// string or binary column: its bytes.
struct ByteSpan {
    const std::uint8_t* data;
    std::size_t size;
};
inline ByteSpan bytes_at(const ArrowColumn& c, std::size_t j) {
    switch (c.kind) {
        case ArrowColumn::Kind::binary32: {
            const auto* o = static_cast<const std::int32_t*>(c.values);
            return {c.data + o[j], static_cast<std::size_t>(o[j + 1] - o[j])};
        }
        case ArrowColumn::Kind::binary64: {
            const auto* o = static_cast<const std::int64_t*>(c.values);
            return {c.data + o[j], static_cast<std::size_t>(o[j + 1] - o[j])};
        }
        case ArrowColumn::Kind::fixed:  // fixed-size binary (a UUID column): width bytes each, back to back
            return {static_cast<const std::uint8_t*>(c.values) + j * c.width, c.width};
        default: {  // view: the bytes inline (up to 12), else in a data buffer
            const auto* v = static_cast<const std::uint8_t*>(c.values) + 16 * j;
            std::int32_t len, buf, off;
            std::memcpy(&len, v, 4);
            if (len <= 12) return {v + 4, static_cast<std::size_t>(len)};
            std::memcpy(&buf, v + 8, 4);
            std::memcpy(&off, v + 12, 4);
            return {c.variadic[buf] + off, static_cast<std::size_t>(len)};
        }
    }
}

// Element j of an integer or boolean column, widened to 64 bits
// (sign-extended when signed): the integer key it is.
inline std::uint64_t integer_at(const ArrowColumn& c, std::size_t j) {
    if (c.kind == ArrowColumn::Kind::boolean) return (static_cast<const std::uint8_t*>(c.values)[j >> 3] >> (j & 7)) & 1;
    return with_int_keys(c.values, c.width, c.is_signed, 0, [j](auto ints) { return ints.value(j); });
}

inline bool is_bytes(const ArrowColumn& c) {
    return c.kind != ArrowColumn::Kind::integer && c.kind != ArrowColumn::Kind::boolean &&
           c.kind != ArrowColumn::Kind::floating;
}

// The hash of element i of a column. Callable from any thread.
struct ArrowKeys {
    const ArrowColumn* c;
    std::uint64_t seed;

    Hash128 operator()(std::size_t i) const {
        const std::size_t j = c->offset + i;
        if (c->kind == ArrowColumn::Kind::floating) return hash_float_key(c->float_value(j), seed);
        if (is_bytes(*c)) {
            const ByteSpan b = bytes_at(*c, j);
            return murmur3_128(b.data, b.size, seed);
        }
        return murmur3_128_u64(integer_at(*c, j), seed);
    }

    // Integer columns hash runs at once (hash_batch.hpp), as NumPy's do.
    void range(std::size_t first, std::size_t m, Hash128* out) const {
        const std::size_t j = c->offset + first;
        // One branch per run, not per key: the loops below are the hot path
        // of an Arrow batch (the compiled batch loops ask for 16 keys at a time).
        switch (c->kind) {
            case ArrowColumn::Kind::binary32: return offsets_range(static_cast<const std::int32_t*>(c->values) + j, m, out);
            case ArrowColumn::Kind::binary64: return offsets_range(static_cast<const std::int64_t*>(c->values) + j, m, out);
            case ArrowColumn::Kind::view:
            case ArrowColumn::Kind::fixed:
            case ArrowColumn::Kind::boolean:
            case ArrowColumn::Kind::floating:
                for (std::size_t i = 0; i < m; ++i) out[i] = (*this)(first + i);
                return;
            default:
                break;
        }
        // Integers: IntKeys widens a run and hashes it four at a time.
        with_int_keys(c->values, c->width, c->is_signed, seed, [&](auto ints) { ints.range(j, m, out); });
    }

  private:
    template <class Offset>
    void offsets_range(const Offset* o, std::size_t m, Hash128* out) const {
        for (std::size_t i = 0; i < m; ++i)
            out[i] = murmur3_128(c->data + o[i], static_cast<std::size_t>(o[i + 1] - o[i]), seed);
    }
};

// The keys of several chunks (a chunked array, a stream) as one batch:
// starts[c] is the index of chunk c's first key, starts[n_chunks] the total.
struct ArrowChunkedKeys {
    const ArrowColumn* columns;
    const std::size_t* starts;
    std::size_t n_chunks;
    std::uint64_t seed;

    Hash128 operator()(std::size_t i) const {
        const std::size_t c = static_cast<std::size_t>(std::upper_bound(starts, starts + n_chunks + 1, i) - starts) - 1;
        return ArrowKeys{columns + c, seed}(i - starts[c]);
    }

    void range(std::size_t first, std::size_t m, Hash128* out) const {
        std::size_t c = static_cast<std::size_t>(std::upper_bound(starts, starts + n_chunks + 1, first) - starts) - 1;
        while (m > 0) {
            const std::size_t take = std::min(m, starts[c + 1] - first);
            ArrowKeys{columns + c, seed}.range(first - starts[c], take, out);
            first += take;
            out += take;
            m -= take;
            ++c;
        }
    }
};

}  // namespace bloomline
