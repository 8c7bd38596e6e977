# Cross-compiling the core and its C++ tests for aarch64 Linux with Debian's
# g++-aarch64-linux-gnu; CTest runs the tests under qemu-aarch64 with the
# cross toolchain's sysroot (Debian's qemu-user). Used by .ci/run:
#   cmake -S . -B build/aarch64 -DBLOOMLINE_TESTS=ON \
#         -DCMAKE_TOOLCHAIN_FILE=tests/cpp/toolchain-aarch64.cmake
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64 -L /usr/aarch64-linux-gnu)
