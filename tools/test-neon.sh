#!/bin/sh
# Cross-compiles the SIMD kernels and their tests (llmcpu_simd_tests) for 64-bit Arm with Debian's
# g++-aarch64-linux-gnu (cmake/aarch64-linux-gnu.cmake, a kernels-only build: LLMCPU_SIMD_ONLY) and
# runs them under qemu-aarch64 (user mode, Debian's arm64 runtime libraries), every kernel on every
# target each emulated CPU offers:
#   1. QEMU's "max" CPU (NEON, 512-bit SVE and SVE2, BF16): every test on sve and sve2, and the
#      bf16 tests on the Arm BF16 table (neon_bf16, BFMMLA GEMMs); the default is an SVE one (what
#      only emulation checks: the scalar reference is portable C++ that every native run tests, and
#      neon runs in 4);
#   2./3. 256-bit and 128-bit vectors: the targets Highway adds there (sve_256, sve2_128) and the
#      dispatch tests; the targets of 1 run the same code again there, so they are not repeated;
#   4. a NEON-only CPU (Cortex-A72): every test but the scalar ones (the same code as in 1): neon is
#      the only vectorized target and the default, and an SVE instruction where NEON code runs would
#      stop it; without BF16 the neon_bf16 table is not offered (nor a BF16 instruction run);
#   5. "max" with LLMCPU_TARGET=neon: the dispatch tests check that neon is then the one used.
# Every run sets LLMCPU_TEST_EMULATED=1, which leaves out the largest ragged shapes of the slowest
# tests (tests/simd/emulated.h): emulation checks each Arm target's instructions, the native runs
# the blocking at those shapes.
# Installs nothing (tools/install-deps.sh does); exits non-zero if a tool or library is missing or a
# test fails.
#   tools/test-neon.sh [BUILD_DIR]   (relative to the repository root; default: build-neon)
set -eu
cd "$(dirname "$0")/.."
build=${1:-build-neon}

missing=""
for tool in aarch64-linux-gnu-g++ qemu-aarch64 cmake ninja pkg-config; do
  command -v "$tool" >/dev/null 2>&1 || missing="$missing $tool"
done
[ -f /usr/lib/aarch64-linux-gnu/pkgconfig/libhwy.pc ] || missing="$missing libhwy-dev:arm64"
[ -f /usr/lib/aarch64-linux-gnu/cmake/GTest/GTestConfig.cmake ] || missing="$missing libgtest-dev:arm64"
[ -e /usr/lib/aarch64-linux-gnu/libgomp.so.1 ] || missing="$missing libgomp1:arm64"
if [ -n "$missing" ]; then
  echo "test-neon.sh: the aarch64 cross toolchain is incomplete, missing:$missing" >&2
  echo "test-neon.sh: install it with tools/install-deps.sh (as root; it adds the arm64 architecture" \
       "to apt and installs g++-aarch64-linux-gnu, qemu-user, libhwy-dev:arm64, libgtest-dev:arm64," \
       "libgomp1:arm64)" >&2
  exit 2
fi

echo "== test-neon: configure and build $build (aarch64 cross, kernels only)"
cmake -S . -B "$build" -G Ninja --toolchain "$PWD/cmake/aarch64-linux-gnu.cmake" \
  -DCMAKE_BUILD_TYPE=Release -DLLMCPU_SIMD_ONLY=ON -DLLMCPU_BENCH=OFF -DLLMCPU_VULKAN=OFF >/dev/null
cmake --build "$build" --target llmcpu_simd_tests

binary="$build/llmcpu_simd_tests"

# The vectorized targets a CPU model offers, from the parameterized test names (".../neon", ...).
targets_on() {
  QEMU_CPU=$1 qemu-aarch64 "$binary" --gtest_list_tests |
    sed -n 's/^  [^ ]*\/\([a-z0-9_]*\)  # GetParam.*/\1/p' | grep -vx scalar | sort -u |
    tr '\n' ' ' | sed 's/ $//'
}

status=0
summary=""
# run NAME QEMU_CPU GTEST_FILTER [VAR=value ...]: the suite in one process under qemu-aarch64 on that
# CPU model (its tests are instantiated for the targets that CPU offers); output in $build/NAME.log.
run() {
  name=$1 cpu=$2 filter=$3
  shift 3
  targets=$(targets_on "$cpu")
  echo "== test-neon: $name: qemu-aarch64 -cpu $cpu${*:+ with $*}; vectorized targets: $targets"
  case " $targets " in
    *" neon "*) ;;
    *) echo "test-neon.sh: the neon target is not offered on qemu -cpu $cpu" >&2; status=1 ;;
  esac
  log="$build/test-neon-$name.log"
  rc=0
  env QEMU_CPU="$cpu" LLMCPU_TEST_EMULATED=1 "$@" qemu-aarch64 "$binary" --gtest_brief=1 \
    --gtest_filter="$filter" \
    >"$log" 2>&1 || rc=$?
  passed=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) tests\{0,1\}\./\1/p' "$log")
  failed=$(grep -c '^\[  FAILED  \] .* ([0-9]* ms)$' "$log" || true)
  skipped=$(sed -n 's/^\[  SKIPPED \] \([0-9]*\) tests\{0,1\}[,.].*/\1/p' "$log")
  line="${passed:-0} passed, ${failed:-0} failed, ${skipped:-0} skipped"
  if [ "$rc" -ne 0 ] || [ -z "$passed" ] || [ "${failed:-0}" -ne 0 ]; then
    status=1
    line="$line (exit status $rc)"
    grep -v '^\[       OK \]' "$log" | tail -n 60
    echo "(full output: $log)"
  fi
  echo "$name: $line"
  summary="$summary
  $name (qemu -cpu $cpu${*:+, $*}; targets $targets): $line"
}

# expect_arm_bf16 CPU yes|no: whether the run just made (its $targets) offered the Arm BF16 table,
# which QEMU's "max" CPU must (it has BF16) and the Cortex-A72 must not.
expect_arm_bf16() {
  case " $targets " in
    *" neon_bf16 "*) offered=yes ;;
    *) offered=no ;;
  esac
  if [ "$offered" != "$2" ]; then
    echo "test-neon.sh: the neon_bf16 table offered on qemu -cpu $1: $offered, expected $2" >&2
    status=1
  fi
}

# 1. QEMU's "max" CPU (512-bit SVE, BF16): every kernel on sve and sve2, the bf16 ones on neon_bf16,
#    and the tests of no target (dispatch: the default is an SVE one). Not the scalar reference
#    (portable C++, run natively by every x86-64 test run) nor neon (run 4 runs it, on a CPU where
#    an SVE instruction would stop it).
run max max '-*/scalar:*/neon'
expect_arm_bf16 max yes
# 2. 256-bit SVE (as on Neoverse V1): Highway's sve_256 target, which only this vector length offers.
run sve-256 max,sve-default-vector-length=32 '*/sve_256:SimdDispatch.*'
# 3. 128-bit SVE2 (as on Neoverse N2/V2): the sve2_128 target.
run sve-128 max,sve-default-vector-length=16 '*/sve2_128:SimdDispatch.*'
# 4. A NEON-only CPU (Cortex-A72): neon is the only vectorized target and the default.
run neon-only cortex-a72 '-*/scalar'
expect_arm_bf16 cortex-a72 no
# 5. LLMCPU_TARGET=neon on the SVE CPU: the dispatch tests check that neon is then the one used.
run forced-neon max 'SimdDispatch.*:SimdExact.*' LLMCPU_TARGET=neon

echo "== test-neon: summary$summary"
if [ "$status" -ne 0 ]; then
  echo "test-neon: FAILED (logs in $build/test-neon-*.log)"
else
  echo "test-neon: all passed"
fi
exit "$status"
