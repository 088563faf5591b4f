# CMake toolchain: cross-compiles for 64-bit Arm Linux with Debian's g++-aarch64-linux-gnu, and runs
# what it builds (gtest discovery, ctest) under qemu-aarch64. tools/test-neon.sh uses it:
#   cmake -S . -B build-neon -G Ninja --toolchain cmake/aarch64-linux-gnu.cmake -DLLMCPU_SIMD_ONLY=ON
# It links against the cross toolchain's libc, libstdc++ and libgomp (/usr/aarch64-linux-gnu) and
# Debian's arm64 multiarch packages (libhwy-dev:arm64, libgtest-dev:arm64, installed by
# tools/install-deps.sh into /usr/lib/aarch64-linux-gnu). Debian's cross compiler needs no separate
# sysroot: it searches those multiarch folders itself. To use a copied Arm root file system
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
  set(CMAKE_FIND_ROOT_PATH ${CMAKE_SYSROOT})
  set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
  set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
  set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
endif()
# Programs (ninja, pkg-config, qemu) are the host's.
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)

# pkg-config (Highway's libhwy.pc): the arm64 .pc files only, not the host's.
set(ENV{PKG_CONFIG_LIBDIR}
    "${CMAKE_SYSROOT}/usr/lib/${LLMCPU_CROSS_TRIPLE}/pkgconfig:${CMAKE_SYSROOT}/usr/share/pkgconfig")
if(CMAKE_SYSROOT)
  set(ENV{PKG_CONFIG_SYSROOT_DIR} ${CMAKE_SYSROOT})
endif()

# Test programs run under user-mode QEMU with Debian's arm64 runtime (libc6, libstdc++6, libgomp1,
# libhwy1 :arm64 in /usr/lib/aarch64-linux-gnu), so the dynamic loader and libc come from one package.
# Not -L /usr/aarch64-linux-gnu: that loader (libc6-arm64-cross) would pick up the newer libc.so.6 of
# libc6:arm64 from /lib/aarch64-linux-gnu, and a loader and libc of different builds hang at the first
# pthread_create. With CMAKE_SYSROOT, everything comes from that root instead.
# QEMU_CPU in the environment picks the emulated CPU (default "max": NEON, SVE and SVE2).
find_program(LLMCPU_QEMU_AARCH64 qemu-aarch64)
if(LLMCPU_QEMU_AARCH64 AND CMAKE_SYSROOT)
  set(CMAKE_CROSSCOMPILING_EMULATOR ${LLMCPU_QEMU_AARCH64} -L ${CMAKE_SYSROOT})
elseif(LLMCPU_QEMU_AARCH64)
  set(CMAKE_CROSSCOMPILING_EMULATOR ${LLMCPU_QEMU_AARCH64})
endif()
