# CMake toolchain: cross-compiles for 64-bit Arm Linux with Debian's g++-aarch64-linux-gnu, and runs
# what it builds (gtest discovery, ctest) under qemu-aarch64. tools/test-neon.sh uses it:
#   cmake -S . -B build-neon -G Ninja --toolchain cmake/aarch64-linux-gnu.cmake -DLLMCPU_SIMD_ONLY=ON
# The target's libraries are Debian's arm64 multiarch packages (libhwy-dev:arm64, libgtest-dev:arm64,
# installed by tools/install-deps.sh into /usr/lib/aarch64-linux-gnu) plus the cross toolchain's own
# runtime (libc, libstdc++, libgomp in /usr/aarch64-linux-gnu). Debian's cross compiler needs no
# separate sysroot: it searches those multiarch folders itself. To use a copied Arm root file system
# instead, pass -DCMAKE_SYSROOT=/path/to/root; qemu then loads its libraries from there too.
# Not here: the project's options (LLMCPU_SIMD_ONLY, ...) or any tuning flag.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)

set(LLMCPU_CROSS_TRIPLE aarch64-linux-gnu)
set(CMAKE_C_COMPILER ${LLMCPU_CROSS_TRIPLE}-gcc)
set(CMAKE_CXX_COMPILER ${LLMCPU_CROSS_TRIPLE}-g++)
# find_library/find_package look in lib/aarch64-linux-gnu (Debian multiarch), never in the host's
# lib/x86_64-linux-gnu.
set(CMAKE_LIBRARY_ARCHITECTURE ${LLMCPU_CROSS_TRIPLE})

if(CMAKE_SYSROOT)
  set(LLMCPU_CROSS_ROOT ${CMAKE_SYSROOT})
  set(CMAKE_FIND_ROOT_PATH ${CMAKE_SYSROOT})
  set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
  set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
  set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
else()
  set(LLMCPU_CROSS_ROOT /usr/${LLMCPU_CROSS_TRIPLE})
endif()
# Programs (ninja, pkg-config, qemu) are the host's.
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)

# pkg-config (Highway's libhwy.pc): the arm64 .pc files only, not the host's.
set(ENV{PKG_CONFIG_LIBDIR}
    "${CMAKE_SYSROOT}/usr/lib/${LLMCPU_CROSS_TRIPLE}/pkgconfig:${CMAKE_SYSROOT}/usr/share/pkgconfig")
if(CMAKE_SYSROOT)
  set(ENV{PKG_CONFIG_SYSROOT_DIR} ${CMAKE_SYSROOT})
endif()

# Test programs run under user-mode QEMU; -L names where the Arm dynamic loader and the toolchain's
# runtime live (libraries it does not find there come from the host's /usr/lib/aarch64-linux-gnu).
# QEMU_CPU in the environment picks the emulated CPU (default "max": NEON, SVE and SVE2).
find_program(LLMCPU_QEMU_AARCH64 qemu-aarch64)
if(LLMCPU_QEMU_AARCH64)
  set(CMAKE_CROSSCOMPILING_EMULATOR ${LLMCPU_QEMU_AARCH64} -L ${LLMCPU_CROSS_ROOT})
endif()
