# Part 5, the report: OUT/report.md (a summary, then each part's tables and notes) and OUT/report.json
# (the same tables as arrays of objects, numbers as JSON numbers and "-" as null), from the tables
# the parts left in OUT/raw. Prints the summary. Only bash and awk: a bare machine has no python.

# tsv_get TABLE COLUMN [HEADER=VALUE ...]: the COLUMN cell of the first row matching every condition.
tsv_get() {
  local table=$OUT/raw/$1.tsv col=$2; shift 2
  [ -f "$table" ] || { echo -; return; }
  awk -F'\t' -v col="$col" -v conds="$(printf '%s\n' "$@")" '
    NR == 1 { for (i = 1; i <= NF; i++) idx[$i] = i; nc = split(conds, cs, "\n"); next }
    {
      ok = 1
      for (k = 1; k <= nc; k++) { if (cs[k] == "") continue; p = index(cs[k], "=")
        if ($(idx[substr(cs[k], 1, p - 1)]) != substr(cs[k], p + 1)) ok = 0 }
      if (ok) { print $(idx[col]); found = 1; exit }
    }
    END { if (!found) print "-" }' "$table"
}

md_table() {
  local table=$OUT/raw/$1.tsv
  if [ ! -s "$table" ] || [ "$(wc -l <"$table")" -lt 2 ]; then echo "(no rows: not measured)"; echo; return; fi
  awk -F'\t' '{ line = "|"; for (i = 1; i <= NF; i++) line = line " " $i " |"; print line
                if (NR == 1) { line = "|"; for (i = 1; i <= NF; i++) line = line "---|"; print line } }' "$table"
  echo
}

md_notes() {
  [ -s "$OUT/raw/notes-$1.txt" ] && sed 's/^/- /' "$OUT/raw/notes-$1.txt" && echo
  return 0
}

# A table as a JSON array of objects: numeric cells as numbers, "-" as null, the rest as strings.
json_table() {
  local table=$OUT/raw/$1.tsv
  [ -f "$table" ] || { echo "[]"; return; }
  awk -F'\t' '
    function q(s) { gsub(/\\/, "\\\\", s); gsub(/"/, "\\\"", s); return "\"" s "\"" }
    function v(s) { if (s == "-") return "null"
                    if (s ~ /^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?$/) return s; return q(s) }
    NR == 1 { for (i = 1; i <= NF; i++) h[i] = $i; n = NF; printf "["; next }
    { printf "%s{", (NR > 2 ? "," : ""); for (i = 1; i <= n; i++) printf "%s%s:%s", (i > 1 ? "," : ""), q(h[i]), v($i); printf "}" }
    END { if (NR == 0) printf "["; print "]" }' "$table"
}

json_lines() {  # a text file's lines as a JSON array of strings
  local first=1 line
  printf '['
  if [ -f "$1" ]; then
    while IFS= read -r line; do [ $first = 1 ] || printf ','; first=0; json_str "$line"; done <"$1"
  fi
  printf ']'
}

summary() {
  table_new summary $'figure\tvalue'
  local chosen T r prec steps
  table_row summary "CPU" "$(tsv_get machine value item=CPU); $(tsv_get machine value 'item=topology (llmcpu topo)')"
  chosen=$(awk -F'\t' 'NR > 1 && $11 == "yes" { print $2 " (" $3 "; " $4 ")" }' "$OUT/raw/devices.tsv" 2>/dev/null)
  table_row summary "Vulkan device of the plugin" "${chosen:-none}"
  table_row summary "device tests" "$(awk -F'\t' 'NR > 1 { p += $2; f += $3; s += $4 } END { printf "%d passed, %d failed, %d skipped", p, f, s }' "$OUT/raw/tests.tsv" 2>/dev/null)"
  table_row summary "verify on the device" "$(awk -F'\t' 'NR > 1 { n++; if ($8 == "OK") k++ } END { printf "%d of %d OK", k, n }' "$OUT/raw/verify.tsv" 2>/dev/null)"
  for T in $(awk -F'\t' 'NR > 1 { print $1 }' "$OUT/raw/steps.tsv" 2>/dev/null | sort -un); do
    steps=$(awk -F'\t' -v T="$T" 'NR > 1 && $1 == T {
        if ($3 == "CPU") s = s sprintf("CPU %s ms", $5)
        else s = s sprintf("; %s layers %s ms (%sx, copy hidden %s%%)", $4, $5, $7, $10) } END { print s }' "$OUT/raw/steps.tsv")
    table_row summary "step, B=$(tsv_get steps B T="$T") T=$T" "$steps"
  done
  for prec in fp32 bf16; do
    r=$(awk -F'\t' -v p="$prec" 'NR > 1 && $2 == p && $7 != "-" { n++; g[n] = $7; s[n] = $8 } END {
          if (n == 0) exit; lo = 1; hi = 1; for (i = 1; i <= n; i++) { if (g[i] + 0 < g[lo] + 0) lo = i; if (g[i] + 0 > g[hi] + 0) hi = i }
          printf "%.0f to %.0f GFLOP/s (%s%% to %s%% of the FMA roof)", g[lo], g[hi], s[lo], s[hi] }' "$OUT/raw/gemm.tsv" 2>/dev/null)
    [ -n "$r" ] && table_row summary "GEMM shader, $prec" "$r"
  done
  for prec in fp32 bf16; do
    for T in 64 1024; do
      r=$(awk -F'\t' -v p="$prec" -v T="$T" 'NR > 1 && $1 == p && $2 == T && $6 == "compact" && $7 != "-" { last = $5 " threads " $8 " tokens/s, " $9 "x 1 thread, efficiency " $10 "%" } END { print last }' "$OUT/raw/scaling.tsv" 2>/dev/null)
      [ -n "$r" ] && table_row summary "CPU scaling, $prec T=$T" "$r"
      r=$(awk -F'\t' -v p="$prec" -v T="$T" 'NR > 1 && $1 == p && $2 == T && $7 != "-" { s = s (s == "" ? "" : "; ") "np " $4 "x" $5 " " $8 " tokens/s (" $10 "%)" } END { print s }' "$OUT/raw/mpirun.tsv" 2>/dev/null)
      [ -n "$r" ] && table_row summary "mpirun, $prec T=$T" "$r"
    done
  done
  r=$(awk -F'\t' 'NR > 1 && $5 != "ok" { s = s (s == "" ? "" : "; ") "part " $1 " " $5 } END { print s }' "$OUT/raw/parts.tsv")
  table_row summary "parts not ok" "${r:-none}"
}

part_main() {
  summary
  local md=$OUT/report.md json=$OUT/report.json
  {
    echo "# llmcpu gpu-check report"
    echo
    sed 's/^/- /' "$OUT/raw/env.txt"
    echo "- total: ${TOTAL_SECS} s before the report"
    echo
    echo "## Summary"
    echo
    md_table summary
    echo "## Parts"
    echo
    md_table parts
    echo "## 1. The machine"
    echo
    md_table machine
    [ -s "$OUT/raw/topo.txt" ] && { echo '```'; cat "$OUT/raw/topo.txt"; echo '```'; echo; }
    echo "Vulkan devices (llmcpu_vulkan_probe devices):"
    echo
    md_table devices
    echo "Cooperative matrix shapes offered (VK_KHR_cooperative_matrix, VK_NV_cooperative_matrix):"
    echo
    md_table coopmat
    md_notes 1
    echo "## 2. Correct on the GPU"
    echo
    md_table tests
    md_table verify
    md_notes 2
    echo "## 3. Fast on the GPU"
    echo
    md_table steps
    md_table roof
    md_table gemm
    md_notes 3
    echo "## 4. CPU scaling"
    echo
    md_table scaling
    echo "mpirun (ranks x threads per rank, the same total batch):"
    echo
    md_table mpirun
    md_notes 4
  } >"$md"
  {
    printf '{"report":"llmcpu gpu-check","version":1,"quick":%s,"total_s":%s,' \
      "$([ "$QUICK" = 1 ] && echo true || echo false)" "${TOTAL_SECS:-null}"
    printf '"env":%s,"topology":%s,"tables":{' "$(json_lines "$OUT/raw/env.txt")" "$(json_lines "$OUT/raw/topo.txt")"
    local t first=1
    for t in summary parts machine devices coopmat tests verify steps roof gemm scaling mpirun; do
      [ $first = 1 ] || printf ','; first=0
      printf '"%s":%s' "$t" "$(json_table $t)"
    done
    printf '},"notes":{'
    for t in 1 2 3 4; do printf '%s"%s":%s' "$([ $t = 1 ] || echo ,)" "$t" "$(json_lines "$OUT/raw/notes-$t.txt")"; done
    printf '}}\n'
  } >"$json"
  echo
  echo "== llmcpu gpu-check summary ($OUT/report.md)"
  echo
  md_table summary
}
