// The runner's main (check.hpp), linked into every test executable. It
// says which machine and which SIMD code ran, so a log shows that an
// aarch64 run took the portable paths.
#include <cstdio>

#include "bloomline/hash_batch.hpp"
#include "check.hpp"

int main(int argc, char** argv) {
#if defined(__x86_64__)
    const char* arch = "x86-64";
#elif defined(__aarch64__)
    const char* arch = "aarch64";
#else
    const char* arch = "other";
#endif
    std::printf("bloomline C++ tests on %s, SIMD %s\n", arch, bloomline::simd_level_name(bloomline::simd_level()));
    return check::run(argc, argv);
}
