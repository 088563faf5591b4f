# The run from a pack: unpack, set the environment (libraries, Vulkan drivers, Open MPI), then each
# part in its own process under its time budget, then the report. Sourced by tools/gpu-check.sh.

# Seconds per part (1 machine, 2 correctness, 3 GPU speed, 4 CPU scaling, 5 report): 8 minutes in
# all with --quick's half; a part that finishes early passes what it left to the next.
readonly full_budgets=(25 75 170 185 15)
readonly quick_budgets=(20 50 80 100 15)
readonly part_names=("the machine" "correct on the GPU" "fast on the GPU" "CPU scaling" "the report")
readonly part_files=(machine.sh correct.sh speed.sh scaling.sh report.sh)

# Unpacks the payload into $1/root once (again when the payload changed).
unpack() {
  local from=$1 sum
  sum=$(awk '/^payload:/ { print $NF }' "$from/pack.manifest")
  if [ -f "$from/root/.payload" ] && [ "$(cat "$from/root/.payload")" = "$sum" ]; then return 0; fi
  [ -w "$from" ] || die_usage "--from $from is not writable: copy the pack somewhere writable first"
  rm -rf "$from/root.new" && mkdir -p "$from/root.new" &&
    tar -C "$from/root.new" -xzf "$from/payload.tar.gz" || die_usage "$from/payload.tar.gz: cannot unpack it"
  echo "$sum" >"$from/root.new/.payload"
  rm -rf "$from/root" && mv "$from/root.new" "$from/root"
}

# The Vulkan driver files (ICD JSON) on this machine, NVIDIA's usual non-standard folders included.
find_icds() {
  local d
  for d in /etc/vulkan/icd.d /usr/share/vulkan/icd.d /usr/local/etc/vulkan/icd.d \
           /usr/local/share/vulkan/icd.d /usr/local/nvidia/share/vulkan/icd.d \
           /usr/local/nvidia/etc/vulkan/icd.d /usr/lib/x86_64-linux-gnu/nvidia/vulkan/icd.d; do
    [ -d "$d" ] && find "$d" -maxdepth 1 -name '*.json' 2>/dev/null
  done | sort -u
}

setup_env() {
  export ROOT=$1/root
  export LLMCPU=$ROOT/bin/llmcpu PLUGIN=$ROOT/lib/libllmcpu_vulkan.so PROBE=$ROOT/bin/llmcpu_vulkan_probe
  export LLMCPU_VULKAN_PLUGIN=$PLUGIN LLMCPU_CONF_DIR=$ROOT/conf DATA=$ROOT/data
  # Thread counts are the parts' to choose: an inherited OMP_NUM_THREADS would change "all cores".
  if [ -n "${OMP_NUM_THREADS:-}" ]; then
    echo "OMP_NUM_THREADS=$OMP_NUM_THREADS was set: unset for the run" >>"$OUT/raw/env.txt"
    unset OMP_NUM_THREADS
  fi
  local lib=$ROOT/lib err
  # The build's libstdc++ only where the machine's own is older (or missing).
  if ! err=$(LD_LIBRARY_PATH=$lib "$LLMCPU" version 2>&1) && grep -q "GLIBCXX\|CXXABI\|libstdc++\|libgcc_s" <<<"$err"; then
    lib=$lib:$ROOT/lib/cxx
    echo "libstdc++: the pack's (the machine's is older or missing)" >>"$OUT/raw/env.txt"
  fi
  ldconfig -p 2>/dev/null | grep -q 'libGLdispatch\.so\.0 ' || lib=$lib:$ROOT/lib/gl
  export LD_LIBRARY_PATH=$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  if ! err=$("$LLMCPU" version 2>&1); then
    echo "llmcpu does not start here: $err" >>"$OUT/raw/env.txt"
  fi
  # NVIDIA's driver file often sits outside the loader's search path: name every one found.
  export VK_FILES_FROM_USER=${VK_DRIVER_FILES:-${VK_ICD_FILENAMES:-}}
  if [ -z "$VK_FILES_FROM_USER" ]; then
    local icds
    icds=$(find_icds | paste -sd:)
    if [ -n "$icds" ]; then export VK_DRIVER_FILES=$icds VK_ICD_FILENAMES=$icds; fi
  fi
  if [ -x "$ROOT/mpi/bin/orterun" ]; then
    export MPIRUN=$ROOT/mpi/bin/orterun
    export OPAL_PREFIX=$ROOT/mpi OPAL_BINDIR=$ROOT/mpi/bin OPAL_LIBDIR=$ROOT/lib \
      OPAL_PKGLIBDIR=$ROOT/mpi/lib/openmpi OPAL_DATADIR=$ROOT/mpi/share \
      OPAL_PKGDATADIR=$ROOT/mpi/share/openmpi OPAL_SYSCONFDIR=$ROOT/mpi/etc \
      PMIX_PREFIX=$ROOT/mpi/pmix PMIX_PKGLIBDIR=$ROOT/mpi/pmix/lib/pmix \
      PMIX_PKGDATADIR=$ROOT/mpi/pmix/share/pmix
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
      OMPI_MCA_btl_vader_single_copy_mechanism=none OMPI_MCA_mca_base_component_show_load_errors=0 \
      OMPI_MCA_plm=isolated
  else
    export MPIRUN=
  fi
}

# PART and PART_DEADLINE (epoch seconds) for part $1's process, which starts at $2 with $3 seconds.
start_part() {
  export PART=$1 PART_DEADLINE
  PART_DEADLINE=$(awk -v n="$2" -v b="$3" 'BEGIN { printf "%.0f\n", n + b }')
}

# Runs part $1 (1-based) in its own process, killed with everything it started at its deadline.
run_part() {
  local i=$(($1 - 1)) budget=$2 t0 rc used status
  t0=$(now)
  start_part "$1" "$t0" "$budget"
  say "part $1 ($(tr -d '\n' <<<"${part_names[$i]}")): budget ${budget} s"
  # raw/vk.env: the Vulkan driver files part 1 found to work, when they differ from the defaults.
  timeout -k 5 "$((budget + 2))" bash -c '. "$0/common.sh"; if [ -f "$OUT/raw/vk.env" ]; then . "$OUT/raw/vk.env"; fi
    . "$0/$1"; part_main' \
    "$PARTS_DIR" "${part_files[$i]}" </dev/null >>"$OUT/logs/part$1.log" 2>&1
  rc=$?
  used=$(secs_since "$t0")
  case $rc in
    0) status=ok ;;
    124|137) status="killed at its budget"
             note "$1" "Part $1 ran out of its ${budget} s budget and was killed; its tables hold what it measured before." ;;
    *) status="failed (exit $rc)"; note "$1" "Part $1 ended with status $rc: see logs/part$1.log." ;;
  esac
  table_row parts "$1" "${part_names[$i]}" "$budget" "$used" "$status"
  PART_USED=$used
}

run_main() {
  local from out=$2 i carry=0 budgets t_start
  from=$(cd "$1" 2>/dev/null && pwd) || die_usage "--from $1: no such folder"
  [ -f "$from/pack.manifest" ] && [ -f "$from/payload.tar.gz" ] ||
    die_usage "--from $from: not a pack (no pack.manifest or payload.tar.gz); make one with tools/gpu-check.sh --pack DIR"
  mkdir -p "$out/raw" "$out/logs" || die_usage "--out $out: cannot create it"
  OUT=$(cd "$out" && pwd)
  export OUT QUICK=$3 PARTS_DIR=$parts_dir
  rm -f "$OUT"/raw/* "$OUT"/logs/*
  t_start=$(now)
  unpack "$from"
  setup_env "$from"
  if [ "$QUICK" = 1 ]; then budgets=("${quick_budgets[@]}"); else budgets=("${full_budgets[@]}"); fi
  table_new parts $'part\tname\tbudget (s)\tused (s)\tstatus'
  {
    echo "started: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "pack: $(sed -n 2,3p "$from/pack.manifest" | paste -sd';' | sed 's/;/; /')"
    echo "sizes: $([ "$QUICK" = 1 ] && echo quick || echo full)"
  } >>"$OUT/raw/env.txt"
  for i in 1 2 3 4; do
    if [ "$i" != 1 ] && [[ ",$4," != *",$i,"* ]]; then
      table_row parts "$i" "${part_names[i - 1]}" 0 0 "not run (--parts)"
      continue
    fi
    run_part "$i" "$((budgets[i - 1] + carry))"
    carry=$((budgets[i - 1] + carry - PART_USED))
    [ $carry -gt 0 ] || carry=0
  done
  # The report's own row is written before it runs, so that the table it prints is whole.
  local t5 report_budget=$((budgets[4] + carry))
  t5=$(now)
  table_row parts 5 "${part_names[4]}" "$report_budget" "-" "ok"
  start_part 5 "$t5" "$report_budget"
  export TOTAL_SECS
  TOTAL_SECS=$(secs_since "$t_start")
  if ! timeout -k 5 "$report_budget" bash -c '. "$0/common.sh"; . "$0/report.sh"; part_main' "$PARTS_DIR" \
      </dev/null 2>>"$OUT/logs/part5.log"; then
    echo "gpu-check: the report could not be written in ${report_budget} s: see $OUT/logs/part5.log; the tables are in $OUT/raw" >&2
    return 1
  fi
  say "report: $OUT/report.md and $OUT/report.json ($(secs_since "$t_start") s in all)"
}
