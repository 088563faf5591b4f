#!/bin/bash
# What a machine with a GPU can show, measured in one run of at most 8 minutes from a packed folder.
#
#   tools/gpu-check.sh --pack DIR [--build BUILD]       here: gather the program, the Vulkan plugin,
#                                                       its tests and probe, fixtures, data and the
#                                                       shared libraries a bare machine lacks (<= 60 MB)
#   DIR/gpu-check.sh [--from DIR] [--out OUT] [--quick] [--parts LIST]
#                                                       there: run the five parts, write OUT/report.md
#                                                       and OUT/report.json, print the summary
#
# The parts, each under its own time budget (a part that overruns is killed, noted in the report, and
# the later parts still run; time a part leaves unused passes to the next):
#   1 the machine: CPU, cores, NUMA nodes, caches (llmcpu topo) and the Vulkan devices the plugin sees
#   2 correct on the GPU: the plugin's op and layer tests, llmcpu verify with every layer offloaded
#   3 fast on the GPU: GPT-2 124M steps on the CPU against the device, the copy time hidden, the GEMM
#     shader against the device's FMA roof
#   4 CPU scaling: fp32 and bf16 steps on 1..N threads (compact, spread) and mpirun -np 1/2/4
#   5 the report: markdown tables, the raw JSON, a one-screen summary
# --quick runs small sizes (a 2-core machine with lavapipe finishes in under 5 minutes). --parts 2,3
# runs only those of parts 2-4 (1 and 5 always run), e.g. again after a fix.
# Exit status: 0 when the report was written (failures inside are in it), 2 on bad usage or a pack
# that cannot be used.
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# In the source tree the parts live in tools/gpu_check/; in a pack, beside this script.
if [ -d "$here/gpu_check" ]; then parts_dir=$here/gpu_check; else parts_dir=$here/tools/gpu_check; fi
# shellcheck source=gpu_check/common.sh
. "$parts_dir/common.sh"

usage() { sed -n '2,22p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }

mode=run pack_dir='' build_dir='' from='' out='' quick=0 parts=2,3,4
while [ $# -gt 0 ]; do
  case $1 in
    --pack) [ $# -ge 2 ] || die_usage "--pack: expected a folder to write the pack to"
            mode=pack pack_dir=$2; shift 2 ;;
    --build) [ $# -ge 2 ] || die_usage "--build: expected the build folder (default build)"
             build_dir=$2; shift 2 ;;
    --from) [ $# -ge 2 ] || die_usage "--from: expected a folder made by --pack"
            from=$2; shift 2 ;;
    --out) [ $# -ge 2 ] || die_usage "--out: expected a folder for the report"
           out=$2; shift 2 ;;
    --quick) quick=1; shift ;;
    --parts) [[ $# -ge 2 && $2 =~ ^[234](,[234])*$ ]] || die_usage "--parts: expected a comma-separated list of 2, 3 and 4 (parts 1 and 5 always run)"
             parts=$2; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) die_usage "unknown argument '$1' (expected --pack DIR, --build DIR, --from DIR, --out DIR, --quick, --parts LIST)" ;;
  esac
done

if [ "$mode" = pack ]; then
  [ ! -f "$here/pack.manifest" ] || die_usage "--pack runs from the source tree (tools/gpu-check.sh), not from a pack"
  [ -z "$from$out" ] && [ $quick = 0 ] && [ $parts = 2,3,4 ] || die_usage "--pack takes only --build (--from, --out, --quick and --parts are for the run)"
  # shellcheck source=gpu_check/pack.sh
  . "$parts_dir/pack.sh"
  pack_main "$pack_dir" "${build_dir:-$(cd "$here/.." && pwd)/build}"
  exit $?
fi

[ -z "$build_dir" ] || die_usage "--build is for --pack"
if [ -z "$from" ]; then
  [ -f "$here/pack.manifest" ] || die_usage "no pack here ($here/pack.manifest): make one with tools/gpu-check.sh --pack DIR, then run DIR/gpu-check.sh or pass --from DIR"
  from=$here
fi
# shellcheck source=gpu_check/run.sh
. "$parts_dir/run.sh"
run_main "$from" "${out:-$PWD/gpu-check-$(date -u +%Y%m%d-%H%M%S)}" "$quick" "$parts"
