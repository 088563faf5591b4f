# Part 3, fast on the device: GPT-2 124M training steps at B=4, T=1024 and T=64 on the CPU (every
# core) against every layer on the device (--offload-layers all) and the last 6 blocks there, with
# the copy time the device hides (--offload-report); then the plugin's GEMM shader on the step's
# shapes against the device's measured FMA roof (llmcpu_vulkan_probe gemm).
# --quick: gpt2-d2 (2 blocks of 128 channels) at B=1, T=64 and 32, with 1 block for "6".

# One row of the steps table; CPU_MS (the same T's CPU step) gives the speed-up.
step_row() {
  local T=$1 B=$2 where=$3 layers=$4 tag=$5
  table_row steps "$T" "$B" "$where" "$layers" "$STEP_MS" "$(calc %.0f 'b * t * 1000 / ms' b="$B" t="$T" ms="$STEP_MS")" \
    "$(calc %.2f 'c / ms' c="$CPU_MS" ms="$STEP_MS")" "$OFF_COPY_MS" "$OFF_COMPUTE_MS" "$OFF_HIDDEN" \
    "$OFF_UP_KB" "$OFF_DOWN_KB" "$(outcome "$STEP_RC")"
  [ "$STEP_RC" = 0 ] || note 3 "$tag: $(outcome "$STEP_RC"); the end of logs/$tag.log: $(tail -n 2 "$OUT/logs/$tag.log" | paste -sd' ')"
}

gemm_rows() {
  local secs=$1 flat=$OUT/raw/gemm.flat rc n i p args=(gemm)
  [ "$QUICK" = 1 ] && args+=(--quick)
  bounded "$OUT/logs/probe-gemm.log" "$secs" sh -c '"$0" "$@" >"$OUT/raw/gemm.json"' "$PROBE" "${args[@]}"
  rc=$?
  json_flat "$OUT/raw/gemm.json" >"$flat" 2>/dev/null
  table_row roof "$(json_get "$flat" device)" "$(json_get "$flat" roof_fp32_gflops)"
  n=$(awk -F'\t' '$1 ~ /^gemms\.[0-9]+\.name$/' "$flat" | wc -l)
  for ((i = 0; i < n; i++)); do
    p=gemms.$i
    table_row gemm "$(json_get "$flat" $p.name)" "$(json_get "$flat" $p.precision)" "$(json_get "$flat" $p.M)" \
      "$(json_get "$flat" $p.N)" "$(json_get "$flat" $p.K)" "$(json_get "$flat" $p.ms)" \
      "$(json_get "$flat" $p.gflops)" "$(calc %.1f 's * 100' s="$(json_get "$flat" $p.roof_share)")"
  done
  [ "$(json_get "$flat" check.checked)" = true ] ||
    note 3 "The GEMM shader's check against a CPU GEMM did not pass (max rel. error $(json_get "$flat" check.max_rel_error)): its times measure a wrong result."
  [ $rc -eq 0 ] || note 3 "llmcpu_vulkan_probe gemm: $(outcome $rc): $(tail -n 2 "$OUT/logs/probe-gemm.log" | paste -sd' ')"
}

part_main() {
  table_new steps $'T\tB\twhere\tdevice layers\tstep (ms)\ttokens/s\tspeed-up vs CPU (x)\tcopy (ms)\tdevice compute (ms)\tcopy hidden (%)\tup (kB)\tdown (kB)\tresult'
  table_new roof $'device\tfp32 FMA roof (GFLOP/s)'
  table_new gemm $'GEMM\tprecision\tM\tN\tK\ttime (ms)\tGFLOP/s\tshare of FMA roof (%)'
  local state model B steps part_T cap layers_some T
  state=$(cat "$OUT/raw/vulkan.state" 2>/dev/null || echo none)
  if [ "$QUICK" = 1 ]; then
    model=gpt2-d2 B=1 steps=2 part_T="64 32" cap=40 layers_some=1
  else
    model=gpt2-124m B=4 steps=3 part_T="1024 64" cap=60 layers_some=6
  fi
  [ "$state" = none ] && note 3 "Device rows not run: no usable Vulkan device (part 1 says why)."
  local first=1
  for T in $part_T; do
    local common=(--model "$model" -b "$B" -t "$T" --steps "$steps" --seed 1)
    train_step "step-cpu-T$T" "$cap" -- "${common[@]}"
    CPU_MS=$STEP_MS
    step_row "$T" "$B" CPU 0 "step-cpu-T$T"
    if [ "$state" != none ]; then
      local layers
      for layers in all "$layers_some"; do
        train_step "step-vk$layers-T$T" "$cap" -- "${common[@]}" --plugin "$PLUGIN" --offload-layers "$layers" --offload-report
        step_row "$T" "$B" "device" "$layers" "step-vk$layers-T$T"
      done
      # The GEMM shader after the first T's steps, so that a slow device still gets it measured.
      if [ $first = 1 ]; then gemm_rows "$([ "$QUICK" = 1 ] && echo 30 || echo 60)"; first=0; fi
    fi
  done
  if [ "$state" = cpu ]; then note 3 "The device is a CPU Vulkan driver: these times are not GPU times."; fi
}
