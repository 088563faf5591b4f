#!/bin/sh
# Cross-compiles the SIMD kernels and their tests (llmcpu_simd_tests) for 64-bit Arm with Debian's
# g++-aarch64-linux-gnu (cmake/aarch64-linux-gnu.cmake, a kernels-only build: LLMCPU_SIMD_ONLY) and
# runs them under qemu-aarch64 (user mode, Debian's arm64 runtime libraries) on every target the
# emulated CPUs offer, five emulations at once (each is mostly one thread):
#   1. sve-128: QEMU's "max" CPU (NEON, SVE2, BF16) with 128-bit vectors: every test on sve, sve2,
#      sve2_128 (the default there) and the Arm BF16 table (neon_bf16, BFMMLA GEMMs), and the tests
#      of no target (dispatch);
#   2./3. sve-256 and sve-512: the same CPU with 256-bit vectors (sve_256, as on Neoverse V1) and
#      512-bit ones (sve2 at that width; the default there): the tests against the references (the
#      ones whose names say WithinDerivedBound, Ragged, Products...), where the vector width shapes
#      the kernels' tails and panels. Not the tests that compare a target with itself (thread counts,
#      repeated calls, scratch sizes, recomputation, a bf16 result as the fp32 one rounded), which
#      check the drivers' C++ at those widths' blocking as run 1 does at 128 bits: QEMU 7.2 emulates
#      SVE wider than 128 bits some 17x slower (3.8 s against 64 s for the matmul tests), and every
#      test there took 30 minutes;
#   4. neon-only: a NEON-only CPU (Cortex-A72): every test but the scalar ones: neon is the only
#      vectorized target and the default, and an SVE instruction where NEON code runs would stop
#      it; without BF16 the neon_bf16 table is not offered (nor a BF16 instruction run);
#   5. forced-neon: "max" with LLMCPU_TARGET=neon: the dispatch tests check that neon is then used.
# The scalar reference is portable C++ that every native run tests, so no emulation repeats it.
# Every run sets LLMCPU_TEST_EMULATED=1, which leaves out the largest shapes of the slowest tests
# (tests/simd/emulated.h): emulation checks each Arm target's instructions, the native runs the
# blocking at those shapes.
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
names=""
# start NAME QEMU_CPU GTEST_FILTER [VAR=value ...]: the suite in one process under qemu-aarch64 on
# that CPU model (its tests are instantiated for the targets that CPU offers), in the background;
# output in $build/test-neon-NAME.log, its exit status in .rc beside it, the CPU's targets in .targets.
start() {
  name=$1 cpu=$2 filter=$3
  shift 3
  targets=$(targets_on "$cpu")
  echo "== test-neon: $name: qemu-aarch64 -cpu $cpu${*:+ with $*}; vectorized targets: $targets"
  case " $targets " in
    *" neon "*) ;;
    *) echo "test-neon.sh: the neon target is not offered on qemu -cpu $cpu" >&2; status=1 ;;
  esac
  log="$build/test-neon-$name.log"
  echo "$targets" >"$log.targets"
  echo "qemu -cpu $cpu${*:+, $*}" >"$log.cpu"
  rm -f "$log.rc"
  (
    rc=0
    env QEMU_CPU="$cpu" LLMCPU_TEST_EMULATED=1 "$@" qemu-aarch64 "$binary" --gtest_brief=1 \
      --gtest_filter="$filter" >"$log" 2>&1 || rc=$?
    echo "$rc" >"$log.rc"
  ) &
  names="$names $name"
}

# report NAME: the counts of a finished run, and its failures' output.
report() {
  name=$1
  log="$build/test-neon-$name.log"
  rc=$(cat "$log.rc" 2>/dev/null || echo "none")
  passed=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) tests\{0,1\}\./\1/p' "$log")
  failed=$(grep -c '^\[  FAILED  \] .* ([0-9]* ms)$' "$log" || true)
  skipped=$(sed -n 's/^\[  SKIPPED \] \([0-9]*\) tests\{0,1\}[,.].*/\1/p' "$log")
  line="${passed:-0} passed, ${failed:-0} failed, ${skipped:-0} skipped"
  if [ "$rc" != 0 ] || [ -z "$passed" ] || [ "${failed:-0}" -ne 0 ]; then
    status=1
    line="$line (exit status $rc)"
    grep -v '^\[       OK \]' "$log" | tail -n 60
    echo "(full output: $log)"
  fi
  echo "$name: $line"
  summary="$summary
  $name ($(cat "$log.cpu"); targets $(cat "$log.targets")): $line"
}

# expect_arm_bf16 NAME yes|no: whether the CPU of run NAME offered the Arm BF16 table, which QEMU's
# "max" CPU must (it has BF16) and the Cortex-A72 must not.
expect_arm_bf16() {
  case " $(cat "$build/test-neon-$1.log.targets") " in
    *" neon_bf16 "*) offered=yes ;;
    *) offered=no ;;
  esac
  if [ "$offered" != "$2" ]; then
    echo "test-neon.sh: the neon_bf16 table offered in run $1: $offered, expected $2" >&2
    status=1
  fi
}

# The tests that compare a target with itself, left to the 128-bit run (see the top).
self_checks='*ThreadCount*:*IdenticalBits*:*SameBits*:*Scratch*:*Allocat*:*Frozen*:*Recomput*'
self_checks="$self_checks:*RoundedForward*:*WindowOfT*:*RoundsTheFp32*:*RoundTheir*:*Undoes*"

start sve-128 max,sve-default-vector-length=16 '-*/scalar:*/neon'
start sve-256 max,sve-default-vector-length=32 "*/sve_256-$self_checks"
start sve-512 max,sve-default-vector-length=64 "*/sve2:SimdDispatch.*-$self_checks"
start neon-only cortex-a72 '-*/scalar'
start forced-neon max 'SimdDispatch.*:SimdExact.*' LLMCPU_TARGET=neon
wait
for name in $names; do report "$name"; done
expect_arm_bf16 sve-128 yes
expect_arm_bf16 neon-only no

echo "== test-neon: summary$summary"
if [ "$status" -ne 0 ]; then
  echo "test-neon: FAILED (logs in $build/test-neon-*.log)"
else
  echo "test-neon: all passed"
fi
exit "$status"
