# Part 4, CPU scaling on this machine: fp32 and bf16 training steps at T=64 (B=4) and T=1024 (B=1)
# on 1, 2, 4, 8 and 16 threads (those the machine has; compact, and spread where its plan differs),
# then `mpirun -np 1/2/4` at the same total batch (4 sequences) with 16/8/4 threads per rank.
# Efficiency: tokens/s against the 1-thread run's tokens/s times the threads used in all.
# GPT-2 124M; --quick: gpt2-d2.

# The 1-thread tokens/s of a precision and T (compact), for the efficiency column.
declare -A ONE_THREAD_TPS

scaling_row() {
  local prec=$1 T=$2 B=$3 ranks=$4 threads=$5 bind=$6 tag=$7 tps total
  total=$((ranks * threads))
  tps=$(calc %.1f 'b * t * 1000 / ms' b="$((B * ranks))" t="$T" ms="$STEP_MS")
  if [ "$ranks" = 1 ] && [ "$threads" = 1 ] && [ "$bind" = compact ]; then ONE_THREAD_TPS[$prec-$T]=$tps; fi
  table_row "$TABLE" "$prec" "$T" "$B" "$ranks" "$threads" "$bind" "$STEP_MS" "$tps" \
    "$(calc %.2f 'tps / one' tps="$tps" one="${ONE_THREAD_TPS[$prec-$T]:--}")" \
    "$(calc %.1f '100 * tps / (one * n)' tps="$tps" one="${ONE_THREAD_TPS[$prec-$T]:--}" n="$total")" \
    "$(outcome "$STEP_RC")"
  [ "$STEP_RC" = 0 ] || note 4 "$tag: $(outcome "$STEP_RC"); the end of logs/$tag.log: $(tail -n 2 "$OUT/logs/$tag.log" | paste -sd' ')"
}

part_main() {
  local header=$'precision\tT\tB per rank\tranks\tthreads per rank\tbind\tstep (ms)\ttokens/s\tspeed-up vs 1 thread (x)\tefficiency (%)\tresult'
  table_new scaling "$header"
  table_new mpirun "$header"
  local model cap cores pus n threads=() spread=0 t
  if [ "$QUICK" = 1 ]; then model=gpt2-d2 cap=30; else model=gpt2-124m cap=60; fi
  read -r cores pus < <("$LLMCPU" topo 2>/dev/null | awk '/^machine:/ { for (i = 1; i <= NF; i++) { if ($i ~ /^cores?,?$/) c = $(i - 1); if ($i ~ /^PUs?,?$/) p = $(i - 1) } } END { print c + 0, p + 0 }')
  if [ "${cores:-0}" -lt 1 ]; then note 4 "Not run: llmcpu topo did not give the core count."; return 0; fi
  for n in 1 2 4 8 16; do [ "$n" -le "$pus" ] && threads+=("$n"); done
  [ "$cores" -le 16 ] && [ "$cores" -gt 1 ] && [[ " ${threads[*]} " != *" $cores "* ]] && threads+=("$cores")
  # Spread differs from compact only where the machine has several NUMA nodes: compare the plans.
  for t in "${threads[@]}"; do
    local smt=(); [ "$t" -gt "$cores" ] && smt=(--smt)
    if [ "$("$LLMCPU" topo --threads "$t" "${smt[@]}" --json 2>&1)" != "$("$LLMCPU" topo --threads "$t" "${smt[@]}" --bind spread --json 2>&1)" ]; then spread=1; fi
  done
  [ $spread = 1 ] || note 4 "spread places threads as compact does on this machine (llmcpu topo --json, every thread count): not run twice."

  local prec T B bind
  for bind in compact spread; do
    [ $bind = spread ] && [ $spread = 0 ] && continue
    for T in 64 1024; do
      if [ "$T" = 64 ]; then B=4; else B=1; fi
      for prec in fp32 bf16; do
        for t in "${threads[@]}"; do
          local smt=(); [ "$t" -gt "$cores" ] && smt=(--smt)
          local tag=scale-$prec-T$T-$bind-$t
          train_step "$tag" "$cap" -- --model "$model" -b "$B" -t "$T" --steps $([ "$T" = 64 ] && echo 3 || echo 2) \
            --precision "$prec" --threads "$t" --bind "$bind" "${smt[@]}" --seed 1
          TABLE=scaling scaling_row "$prec" "$T" "$B" 1 "$t" "$bind" "$tag"
        done
      done
    done
    # mpirun after the compact runs, at the same total batch: 4 sequences over 1, 2 or 4 ranks.
    [ $bind = compact ] && mpirun_rows
  done
}

mpirun_rows() {
  local max=${threads[-1]} r prec T
  [ "$max" -le "$cores" ] || max=$cores
  if [ -z "$MPIRUN" ]; then note 4 "mpirun rows not run: the pack has no Open MPI."; return; fi
  local ranks=()
  for r in 1 2 4; do
    if [ $((max / r)) -ge 1 ]; then ranks+=("$r"); else note 4 "mpirun -np $r not run: $max cores give no thread per rank."; fi
  done
  for T in 1024 64; do
    for prec in fp32 bf16; do
      for r in "${ranks[@]}"; do
        local tag=mpirun-$prec-T$T-np$r
        train_step "$tag" "$cap" "$MPIRUN" -np "$r" --oversubscribe --bind-to none -- \
          --model "$model" -b $((4 / r)) -t "$T" --steps 3 --precision "$prec" --threads $((max / r)) --seed 1
        TABLE=mpirun scaling_row "$prec" "$T" $((4 / r)) "$r" $((max / r)) "none (ranks split the cores)" "$tag"
      done
    done
  done
}
