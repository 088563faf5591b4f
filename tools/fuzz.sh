#!/bin/sh
# Builds the libFuzzer targets (tests/fuzz: every reader of outside input) with clang, libFuzzer,
# AddressSanitizer and UndefinedBehaviorSanitizer in a build folder of their own (LLMCPU_FUZZ=ON),
# then runs each target over its committed seeds (tests/fuzz/corpus/NAME) and the inputs of fixed
# findings (tests/fuzz/regressions/NAME) for a bounded time or number of runs, as many targets at
# once as the machine has CPUs (libFuzzer runs one thread). A crash, a sanitizer
# report, an exception other than llmcpu::Error, a single allocation over 512 MB, more than 2 GB of
# memory or an input that takes over 10 s fails the target; libFuzzer saves the input in
# BUILD_DIR/fuzz-artifacts/NAME/ and the output says how to run it again. New inputs that reach
# new code go to BUILD_DIR/fuzz-corpus/NAME (not the committed seeds). fuzz_encode needs GPT-2's
# tokenizer files in the cache folder (tools/fetch-data.sh). Installs nothing (tools/install-deps.sh
# does); exits non-zero if clang, libFuzzer or libomp is missing or a target fails.
#   tools/fuzz.sh [--seconds N | --runs N] [BUILD_DIR] [NAME...]
#     --seconds N   fuzz each target for N seconds (default 20)
#     --runs N      fuzz each target for N executions instead
#     BUILD_DIR     relative to the repository root; default: build-fuzz
#     NAME...       only these targets (fuzz_NAME); default: all of them
set -eu
cd "$(dirname "$0")/.."
limit="-max_total_time=20"
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) limit="-max_total_time=$2"; shift 2 ;;
    --runs) limit="-runs=$2"; shift 2 ;;
    -*) echo "fuzz.sh: unknown option '$1' (expected --seconds N or --runs N)" >&2; exit 2 ;;
    *) break ;;
  esac
done
build=${1:-build-fuzz}
[ $# -gt 0 ] && shift
case "$build" in /*) ;; *) build="$PWD/$build" ;; esac

install_hint="install clang 14, its libFuzzer runtime and LLVM's OpenMP with tools/install-deps.sh (Debian packages clang, libclang-rt-14-dev, libomp-dev)"
missing=""
for tool in clang++ cmake ninja; do
  command -v "$tool" >/dev/null 2>&1 || missing="$missing $tool"
done
if [ -n "$missing" ]; then
  echo "fuzz.sh: missing:$missing; $install_hint" >&2
  exit 2
fi
# libFuzzer's runtime and libomp: a one-line fuzz target that uses OpenMP must link.
probe=$(mktemp -d)
trap 'rm -rf "$probe"' EXIT
printf '%s\n' '#include <omp.h>' '#include <cstddef>' '#include <cstdint>' \
  'extern "C" int LLVMFuzzerTestOneInput(const uint8_t*, size_t) { return omp_get_max_threads() > 0 ? 0 : 1; }' \
  >"$probe/probe.cpp"
if ! clang++ -fsanitize=fuzzer,address,undefined -fopenmp "$probe/probe.cpp" -o "$probe/probe" \
    >"$probe/log" 2>&1; then
  cat "$probe/log" >&2
  echo "fuzz.sh: clang++ cannot link a libFuzzer target with OpenMP; $install_hint" >&2
  exit 2
fi

echo "== fuzz: configure and build $build (clang, libFuzzer, ASan, UBSan)"
cmake -S . -B "$build" -G Ninja -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g" -DLLMCPU_FUZZ=ON -DLLMCPU_TESTS=OFF \
  -DLLMCPU_BENCH=OFF -DLLMCPU_VULKAN=OFF >/dev/null
cmake --build "$build" --target llmcpu_fuzz llmcpu
# fuzz_cli's dictionary: the values in tests/fuzz/dict/cli.dict and every flag of every command, as
# the commands' own --help lists them (no copy of the flag tables to keep up to date).
llmcpu="$build/llmcpu"
{
  cat tests/fuzz/dict/cli.dict
  for command in $("$llmcpu" help | sed -n 's/^  \([a-z]*\) .*/\1/p' | grep -vx help); do
    "$llmcpu" "$command" --help
  done | grep -oE '(^| )--?[a-z][a-z0-9-]*' | tr -d ' ' | sort -u | sed 's/.*/"&"/'
} >"$build/cli.dict"
if ! grep -q '^"--model"$' "$build/cli.dict"; then
  echo "fuzz.sh: no flags from $llmcpu's --help for fuzz_cli's dictionary" >&2
  exit 2
fi

targets=${*:-$(cat "$build/fuzz_targets.txt")}
for name in $targets; do
  if [ ! -x "$build/fuzz_$name" ]; then
    echo "fuzz.sh: no target fuzz_$name (targets: $(tr '\n' ' ' <"$build/fuzz_targets.txt"))" >&2
    exit 2
  fi
done
cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)
# libFuzzer runs one thread a target: as many targets at once as this process has CPUs.
jobs=$(nproc 2>/dev/null || echo 1)
echo "== fuzz: $limit per target, $jobs at a time, on ${cpu:-an unknown CPU}"

# fuzz_one NAME: one target over its seeds and regressions; its summary line goes to
# $build/fuzz-NAME.result (prefixed "FAILED " where it failed), its output to $build/fuzz-NAME.log.
fuzz_one() {
  name=$1
  binary="$build/fuzz_$name"
  work="$build/fuzz-corpus/$name"
  artifacts="$build/fuzz-artifacts/$name"
  log="$build/fuzz-$name.log"
  mkdir -p "$work" "$artifacts"
  set -- "$work" "tests/fuzz/corpus/$name"
  [ -d "tests/fuzz/regressions/$name" ] && set -- "$@" "tests/fuzz/regressions/$name"
  dict=""
  [ -f "tests/fuzz/dict/$name.dict" ] && dict="-dict=tests/fuzz/dict/$name.dict"
  [ "$name" = cli ] && dict="-dict=$build/cli.dict"
  start=$(date +%s)
  rc=0
  # One OpenMP thread: the machine's cores are libFuzzer's, and the readers' parallel loops run
  # the same code with one.
  OMP_NUM_THREADS=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    "$binary" $limit $dict -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=512 -close_fd_mask=1 \
    -print_final_stats=1 -artifact_prefix="$artifacts/" "$@" >"$log" 2>&1 || rc=$?
  seconds=$(( $(date +%s) - start ))
  done_line=$(grep -E '^#[0-9]+[[:space:]]+DONE' "$log" | tail -n 1)
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
  speed=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log")
  cov=$(echo "$done_line" | sed -n 's/.* cov: \([0-9]*\).*/\1/p')
  corp=$(echo "$done_line" | sed -n 's/.* corp: \([^ ]*\).*/\1/p')
  line="fuzz_$name: ${runs:-?} runs in ${seconds}s (${speed:-?}/s), cov ${cov:-?}, corpus ${corp:-?}"
  if [ "$rc" -ne 0 ] || [ -z "$done_line" ]; then
    line="FAILED $line: FAILED (exit status $rc)"
  fi
  echo "$line" >"$build/fuzz-$name.result"
}

running=0
for name in $targets; do
  rm -f "$build/fuzz-$name.result"
  fuzz_one "$name" &
  running=$((running + 1))
  if [ "$running" -ge "$jobs" ]; then
    wait
    running=0
  fi
done
wait

# The summary first, then each failed target's log tail and how to run its input again, and last
# a line naming the failed targets: a log cut to its tail still says what failed and why.
echo "== fuzz: summary"
failed=""
for name in $targets; do
  line=$(cat "$build/fuzz-$name.result" 2>/dev/null || echo "FAILED fuzz_$name: no result")
  echo "  ${line#FAILED }"
  case "$line" in FAILED\ *) failed="$failed fuzz_$name" ;; esac
done
for target in $failed; do
  name=${target#fuzz_}
  log="$build/fuzz-$name.log"
  echo "== $target failed; the end of $log:"
  tail -n 40 "$log" 2>/dev/null
  input=$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$log" 2>/dev/null | tail -n 1)
  [ -n "$input" ] && echo "run it again: OMP_NUM_THREADS=1 $build/$target $input"
done
if [ -n "$failed" ]; then
  echo "fuzz: FAILED:$failed (logs in $build/fuzz-*.log)"
  exit 1
fi
echo "fuzz: all passed"
