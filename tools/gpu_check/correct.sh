# Part 2, correct on the device: the plugin's op tests (every block op against the scalar
# references) and layer tests (the pipeline, the device's AdamW, state round trips, the plan), then
# `llmcpu verify` on the committed PyTorch fixtures with layers on the device, fp32 and bf16.

# gtest_suite BINARY SECONDS: one row of the tests table from the binary's summary lines.
gtest_suite() {
  local bin=$1 secs=$2 name log rc passed failed skipped
  name=$(basename "$bin") log=$OUT/logs/$(basename "$bin").log
  bounded "$log" "$secs" "$bin" --gtest_color=no
  rc=$?
  passed=$(awk '/^\[  PASSED  \] [0-9]+ test/ { print $4 }' "$log")
  failed=$(awk '/^\[  FAILED  \] [0-9]+ test/ { print $4 }' "$log")
  skipped=$(awk '/^\[  SKIPPED \] [0-9]+ test/ { print $4 }' "$log")
  [ -n "$passed$failed" ] || passed=-
  table_row tests "$name" "${passed:-0}" "${failed:-0}" "${skipped:-0}" "$BOUNDED_SECS" "$(outcome $rc)"
  if [ -n "$failed" ]; then
    note 2 "$name failed: $(awk '/^\[  FAILED  \] [A-Za-z]/ { print $4 }' "$log" | sort -u | paste -sd' ')"
  fi
}

# verify_row FIXTURE PRECISION LAYERS: llmcpu verify on tests/fixtures/FIXTURE_{model,state}.bin.
verify_row() {
  local fx=$1 prec=$2 layers=$3 log=$OUT/logs/verify-$1-$2-$3.log rc logits worst worst_name limit
  bounded "$log" 30 "$LLMCPU" verify --model "$DATA/fixtures/${fx}_model.bin" \
    --state "$DATA/fixtures/${fx}_state.bin" --precision "$prec" --plugin "$PLUGIN" --offload-layers "$layers"
  rc=$?
  # Table lines: tensor, elements, max|diff|, rel.error, limit, ok|FAIL.
  logits=$(awk '$1 == "logits" && NF >= 6 { print $4 }' "$log")
  read -r worst worst_name limit < <(awk '$1 != "logits" && $1 != "loss" && NF == 6 && $2 ~ /^[0-9]+$/ {
      if ($4 + 0 >= w + 0) { w = $4; n = $1; l = $5 } } END { print (n == "" ? "- - -" : w " " n " " l) }' "$log")
  # An offload that fell back to the CPU would verify the CPU: only the device's run counts.
  if [ $rc -eq 0 ] && ! grep -q '^offload: vulkan' "$log"; then rc=3; note 2 "verify $fx $prec: the plugin did not take the layers: $(grep -m1 'offload' "$log")"; fi
  table_row verify "$fx" "$prec" "$layers" "${logits:--}" "${worst:--}" "${worst_name:--}" "${limit:--}" \
    "$(grep -q '^verify: OK' "$log" && [ $rc -eq 0 ] && echo OK || echo "FAIL ($(outcome $rc))")"
}

part_main() {
  table_new tests $'suite\tpassed\tfailed\tskipped\ttime (s)\tresult'
  table_new verify $'fixture\tprecision\toffload layers\tlogits rel. error\tworst gradient rel. error\tworst tensor\tlimit\tresult'
  local state
  state=$(cat "$OUT/raw/vulkan.state" 2>/dev/null || echo none)
  if [ "$state" = none ]; then
    note 2 "Not run: no usable Vulkan device (part 1 says why)."
    return 0
  fi
  gtest_suite "$ROOT/bin/llmcpu_vulkan_block_ops_tests" 120
  gtest_suite "$ROOT/bin/llmcpu_vulkan_layers_tests" 60
  local fx prec
  for prec in fp32 bf16; do
    for fx in tiny small edge; do verify_row $fx $prec all; done
  done
  verify_row small fp32 1
}
