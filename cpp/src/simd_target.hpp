// Private to cpp/src: whether this build can carry AVX2 code next to its
// baseline code, and the attribute that compiles one function for AVX2.
// The wheel is built for baseline x86-64 (no -march), so AVX2 code is
// compiled per function and only called after simd_level() (hash_batch.hpp)
// has asked the CPU.
#pragma once

#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__) && \
    !(defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__)
#define BLOOMLINE_HAVE_AVX2_PATH 1
#define BLOOMLINE_AVX2 __attribute__((target("avx2")))
#include <immintrin.h>
#endif
