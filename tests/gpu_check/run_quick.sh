#!/bin/bash
# gpu_check_quick: pack this build, run the packed check with --quick, check the report.
#   run_quick.sh SOURCE BUILD WORK PYTHON
set -euo pipefail
src=$1 build=$2 work=$3 python=$4
rm -rf "$work"
mkdir -p "$work"
"$src/tools/gpu-check.sh" --pack "$work/pack" --build "$build"
# Run from a copy elsewhere, so that nothing can reach back into the build or the source tree.
mv "$work/pack" "$work/moved-pack"
"$work/moved-pack/gpu-check.sh" --out "$work/out" --quick
expect=(--expect-parts-ok)
# With a Vulkan driver here (lavapipe) the device's parts must have measured; with Open MPI packed,
# the mpirun rows.
if "$work/moved-pack/root/bin/llmcpu_vulkan_probe" devices >/dev/null 2>&1; then expect+=(--expect-device); fi
if [ -x "$work/moved-pack/root/mpi/bin/orterun" ]; then expect+=(--expect-mpirun); fi
echo "checking the report with: ${expect[*]}"
"$python" "$src/tests/gpu_check/check_report.py" "$work/out" "${expect[@]}"
