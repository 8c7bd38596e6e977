// A batch of keys as the core sees it: a key source, where key i's 128-bit
// hash comes from. The bindings make sources from NumPy arrays (hashed on
// demand, without the GIL) and from lists (hashed beforehand, with it); the
// batch loops above take any source.
//
//   src(i)                 key i's hash (every source; callable from any thread)
//   src.range(first, m, out)  hashes of keys [first, first + m) at once, where
//                          a run is faster than one by one (integer keys:
//                          hash_batch.hpp); optional
//   src.in_place(first)    a pointer to hash `first`, where the hashes already
//                          sit in memory (lists): nothing is copied; optional
//
// Compiled loops (the blocked layout's, layout_blocked.cpp) cannot be templates over
// every source, so they take BatchKeys: hashes in place, or a KeyHasher (a
// function pointer called about every 16 keys) that fills a small ring.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "bloomline/hash_batch.hpp"
#include "bloomline/keys.hpp"
#include "bloomline/murmur3.hpp"

namespace bloomline {

template <class Src, class = void>
struct has_range : std::false_type {};
template <class Src>
struct has_range<Src, std::void_t<decltype(std::declval<Src&>().range(std::size_t{}, std::size_t{},
                                                                       static_cast<Hash128*>(nullptr)))>>
    : std::true_type {};

template <class Src, class = void>
struct has_in_place : std::false_type {};
template <class Src>
struct has_in_place<Src, std::void_t<decltype(std::declval<Src&>().in_place(std::size_t{}))>> : std::true_type {};

// Hashes of keys [first, first + m) into out.
template <class Src>
void hash_range(Src& src, std::size_t first, std::size_t m, Hash128* out) {
    if constexpr (has_range<Src>::value) {
        src.range(first, m, out);
    } else {
        for (std::size_t i = 0; i < m; ++i) out[i] = src(first + i);
    }
}

// Hashes computed beforehand, as a source.
struct Prehashed {
    const Hash128* h;
    Hash128 operator()(std::size_t i) const { return h[i]; }
    const Hash128* in_place(std::size_t first) const { return h + first; }
};

// The keys of an integer array: key i alone, or a run of keys through the
// batch hash (AVX2 where the CPU has it). Narrower integers are widened to
// 64 bits (sign-extended when signed) a few hundred at a time.
template <class T>
struct IntKeys {
    const T* v;
    std::uint64_t seed;

    // Element i as the 64-bit integer key it is.
    std::uint64_t value(std::size_t i) const {
        using Wide = typename std::conditional<std::is_signed<T>::value, std::int64_t, std::uint64_t>::type;
        return static_cast<std::uint64_t>(static_cast<Wide>(v[i]));
    }

    Hash128 operator()(std::size_t i) const { return murmur3_128_u64(value(i), seed); }

    void range(std::size_t first, std::size_t m, Hash128* out) const {
        if constexpr (sizeof(T) == 8) {
            murmur3_128_u64_many(reinterpret_cast<const std::uint64_t*>(v + first), m, seed, out);
        } else {
            constexpr std::size_t kStep = 256;
            std::uint64_t wide[kStep];
            for (std::size_t s = 0; s < m; s += kStep) {
                const std::size_t c = std::min(kStep, m - s);
                for (std::size_t i = 0; i < c; ++i) wide[i] = value(first + s + i);
                murmur3_128_u64_many(wide, c, seed, out + s);
            }
        }
    }
};

// f(IntKeys<T>{p, seed}) for integers of `width` bytes (1, 2, 4 or 8),
// signed or not: the one place an integer array's element type is chosen.
template <class F>
decltype(auto) with_int_keys(const void* p, std::size_t width, bool is_signed, std::uint64_t seed, F&& f) {
    auto as = [&](auto tag) -> decltype(auto) {
        using T = decltype(tag);
        return f(IntKeys<T>{static_cast<const T*>(p), seed});
    };
    switch (width) {
        case 1: return is_signed ? as(std::int8_t{}) : as(std::uint8_t{});
        case 2: return is_signed ? as(std::int16_t{}) : as(std::uint16_t{});
        case 4: return is_signed ? as(std::int32_t{}) : as(std::uint32_t{});
        default: return is_signed ? as(std::int64_t{}) : as(std::uint64_t{});
    }
}

// A source behind a function pointer: hash(ctx, first, m, out) writes the
// hashes of keys [first, first + m) (m <= 16) to out. Called on one thread,
// in order.
struct KeyHasher {
    const void* ctx = nullptr;
    void (*hash)(const void* ctx, std::size_t first, std::size_t m, Hash128* out) = nullptr;
};

// The keys of a compiled batch loop: hashes in place, or a KeyHasher.
struct BatchKeys {
    const Hash128* in_place = nullptr;
    KeyHasher hasher;
};

// f(BatchKeys) for keys [lo, ...) of any source.
template <class Src, class F>
void with_batch_keys(Src& src, std::size_t lo, F&& f) {
    if constexpr (has_in_place<Src>::value) {
        f(BatchKeys{src.in_place(lo), {}});
    } else {
        struct From {
            Src* src;
            std::size_t lo;
        } from{&src, lo};
        KeyHasher hasher{&from, [](const void* ctx, std::size_t first, std::size_t m, Hash128* out) {
                             const From& r = *static_cast<const From*>(ctx);
                             hash_range(*r.src, r.lo + first, m, out);
                         }};
        f(BatchKeys{nullptr, hasher});
    }
}

}  // namespace bloomline
