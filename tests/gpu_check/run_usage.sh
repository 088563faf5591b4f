#!/bin/bash
# gpu_check_usage: tools/gpu-check.sh refuses bad usage with exit status 2 and a message naming
# the argument or folder.
#   run_usage.sh SOURCE WORK
set -uo pipefail
src=$1 work=$2 script=$1/tools/gpu-check.sh failures=0
rm -rf "$work" && mkdir -p "$work/not-a-pack" && touch "$work/not-a-pack/file"
# expect_refusal PATTERN ARGS...: exit 2 and PATTERN in the error output.
expect_refusal() {
  local pattern=$1 err rc; shift
  err=$("$script" "$@" 2>&1 >/dev/null); rc=$?
  if [ $rc -ne 2 ] || ! grep -q -- "$pattern" <<<"$err"; then
    echo "FAIL: gpu-check.sh $* gave exit $rc and: $err (expected 2 and '$pattern')"
    failures=$((failures + 1))
  fi
}
expect_refusal "unknown argument '--bogus'" --bogus
expect_refusal "--out: expected a folder" --out
expect_refusal "--from $work/missing: no such folder" --from "$work/missing"
expect_refusal "not a pack" --from "$work/not-a-pack"
expect_refusal "no pack here" --quick
expect_refusal "the folder exists and is not a pack" --pack "$work/not-a-pack"
expect_refusal "--pack takes only --build" --pack "$work/p" --quick
expect_refusal "--parts: expected a comma-separated list" --parts 1,5
expect_refusal "llmcpu not found: build it first" --pack "$work/p" --build "$work/no-build"
"$script" --help | grep -q -- "--pack DIR" || { echo "FAIL: --help does not describe --pack"; failures=$((failures + 1)); }
[ $failures -eq 0 ] && echo "all refusals as expected"
exit $((failures > 0))
