// Hashing many 64-bit integer keys at once: the NumPy integer batch path.
//
// What: murmur3_128_u64 (the hash of a key's 8 little-endian bytes) for a
// whole array, with a runtime-dispatched AVX2 version that hashes four keys
// per step and a portable loop for every other CPU (x86-64 without AVX2,
// ARM, big-endian hosts). Both give the same hashes bit for bit; the tests
// run every integer batch through both (BLOOMLINE_SIMD=portable).
//
// Why this way: a wheel is built for baseline x86-64 (no -march), so the
// AVX2 code is compiled for that one function (a target attribute) and
// chosen once, at first use, by asking the CPU (cpuid via
// __builtin_cpu_supports). AVX2 has no 64-bit multiply, so each of
// MurmurHash3's six multiplies per key becomes three 32x32->64 multiplies;
// four keys per step still win.
//
// The hash is a small part of a batch add or lookup next to the memory
// access that follows it (benchmarks/core_bench.cpp times both paths). The
// same choice (simd_level) serves the blocked layout's lookups
// (layout_blocked.hpp), where AVX2 gains more.
#pragma once

#include <cstddef>
#include <cstdint>

#include "bloomline/murmur3.hpp"

namespace bloomline {

// Which batch-hash code this process uses. Decided once: AVX2 when the CPU
// has it, unless the environment variable BLOOMLINE_SIMD is "portable".
enum class SimdLevel { portable, avx2 };
SimdLevel simd_level();
const char* simd_level_name(SimdLevel level);

// out[i] = murmur3_128_u64(values[i], seed) for i < n.
void murmur3_128_u64_many(const std::uint64_t* values, std::size_t n, std::uint64_t seed, Hash128* out);

}  // namespace bloomline
