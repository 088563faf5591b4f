#!/bin/sh
# Cross-compiles the SIMD kernels and their tests (llmcpu_simd_tests) for 64-bit Arm with Debian's
# g++-aarch64-linux-gnu (cmake/aarch64-linux-gnu.cmake, a kernels-only build: LLMCPU_SIMD_ONLY) and
# runs them under qemu-aarch64, twice:
#   1. on QEMU's "max" CPU (NEON, SVE, SVE2): every kernel on every target that CPU runs (neon and the
#      SVE ones), the best one being the default;
#   2. on a NEON-only CPU (Cortex-A72) with LLMCPU_TARGET=neon: neon is the only vectorized target,
#      the default and the one chosen.
# Installs nothing (tools/install-deps.sh does); exits non-zero if a tool or library is missing or a
# test fails.
#   tools/test-neon.sh [BUILD_DIR]      (default: build-neon)
# LLMCPU_NEON_JOBS sets how many tests run at once (default: the number of CPUs).
set -eu
cd "$(dirname "$0")/.."
build=${1:-build-neon}
jobs=${LLMCPU_NEON_JOBS:-$(nproc)}

missing=""
for tool in aarch64-linux-gnu-g++ qemu-aarch64 cmake ninja pkg-config; do
  command -v "$tool" >/dev/null 2>&1 || missing="$missing $tool"
done
[ -f /usr/lib/aarch64-linux-gnu/pkgconfig/libhwy.pc ] || missing="$missing libhwy-dev:arm64"
[ -f /usr/lib/aarch64-linux-gnu/cmake/GTest/GTestConfig.cmake ] || missing="$missing libgtest-dev:arm64"
if [ -n "$missing" ]; then
  echo "test-neon.sh: the aarch64 cross toolchain is incomplete, missing:$missing" >&2
  echo "test-neon.sh: install it with tools/install-deps.sh (as root; it adds the arm64 architecture" \
       "to apt and installs g++-aarch64-linux-gnu, qemu-user, libhwy-dev:arm64, libgtest-dev:arm64)" >&2
  exit 2
fi

echo "== test-neon: configure and build $build (aarch64 cross, kernels only)"
cmake -S . -B "$build" -G Ninja --toolchain "$PWD/cmake/aarch64-linux-gnu.cmake" \
  -DCMAKE_BUILD_TYPE=Release -DLLMCPU_SIMD_ONLY=ON -DLLMCPU_BENCH=OFF -DLLMCPU_VULKAN=OFF >/dev/null
cmake --build "$build" --target llmcpu_simd_tests

binary="$build/llmcpu_simd_tests"

# The vectorized targets a CPU model offers, from the parameterized test names (".../neon", ...).
targets_on() {
  QEMU_CPU=$1 qemu-aarch64 -L /usr/aarch64-linux-gnu "$binary" --gtest_list_tests |
    sed -n 's/^  [^ ]*\/\([a-z0-9_]*\)  # GetParam.*/\1/p' | sort -u | tr '\n' ' '
}

status=0
summary=""
# run NAME QEMU_CPU [VAR=value ...]: the whole suite through ctest (each test under qemu-aarch64).
run() {
  name=$1 cpu=$2
  shift 2
  targets=$(targets_on "$cpu")
  echo "== test-neon: $name: qemu-aarch64 -cpu $cpu${*:+ with $*}; targets: $targets"
  case " $targets " in
    *" neon "*) ;;
    *) echo "test-neon.sh: the neon target is not offered on qemu -cpu $cpu" >&2; status=1 ;;
  esac
  log="$build/test-neon-$name.log"
  rc=0
  env QEMU_CPU="$cpu" "$@" ctest --test-dir "$build" -j "$jobs" --output-on-failure >"$log" 2>&1 ||
    rc=$?
  tail -n 40 "$log" | sed -n '/tests passed/,$p'
  line=$(grep -E '^[0-9]+% tests passed' "$log" || echo "no ctest summary (see $log)")
  if [ "$rc" -ne 0 ]; then
    status=1
    grep -E '\*\*\*Failed|Failed  |Exception|Timeout' "$log" | head -n 40 || true
  fi
  summary="$summary
  $name (cpu $cpu${*:+, $*}; targets $targets): $line"
}

run max max
run neon-only cortex-a72 LLMCPU_TARGET=neon

echo "== test-neon: summary$summary"
if [ "$status" -ne 0 ]; then
  echo "test-neon: FAILED (logs in $build/test-neon-*.log)"
else
  echo "test-neon: all passed"
fi
exit "$status"
