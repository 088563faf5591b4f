# Helpers shared by tools/gpu-check.sh and its parts: messages, time budgets, bounded commands, and
# the tables every part writes (tab-separated, one header line; report.sh turns them into markdown
# and JSON). Sourced, never run.

die_usage() { echo "gpu-check: error: $*" >&2; exit 2; }
say() { echo "gpu-check: $*" >&2; }
now() { date +%s.%N; }
# Whole seconds between two now() values, rounded up.
secs_since() { awk -v a="$1" -v b="$(now)" 'BEGIN { d = b - a; printf "%d\n", (d == int(d)) ? d : int(d) + 1 }'; }
# calc FORMAT EXPR [name=value ...]: awk arithmetic on numbers held as strings, printed with the
# printf FORMAT, e.g. calc %.1f 'a / b' a=1 b=3. Prints "-" when an operand is "-" or empty, or the
# result is not a finite number.
calc() {
  local fmt=$1 expr=$2 kv args=(); shift 2
  for kv in "$@"; do
    case ${kv#*=} in '' | -) echo -; return ;; esac
    args+=(-v "$kv")
  done
  awk "${args[@]}" -v fmt="$fmt" "BEGIN { v = ($expr); if (v != v || v == v + 1 && v != 0) print \"-\"; else printf fmt \"\\n\", v }" 2>/dev/null || echo -
}

# A table: table_new NAME 'col1<TAB>col2 (unit)...'; table_row NAME v1 v2 ...; cells hold no tabs or
# newlines (they are replaced by spaces). A cell "-" means "not measured" (null in the JSON).
table_new() { printf '%s\n' "$2" >"$OUT/raw/$1.tsv"; }
table_row() {
  local name=$1 cell line='' first=1; shift
  for cell in "$@"; do
    cell=${cell//$'\t'/ }; cell=${cell//$'\n'/ }; cell=${cell//|//}
    if [ $first = 1 ]; then line=$cell first=0; else line=$line$'\t'$cell; fi
  done
  printf '%s\n' "$line" >>"$OUT/raw/$name.tsv"
}
# A note under a part's section in the report (one line of markdown).
note() { printf '%s\n' "$2" >>"$OUT/raw/notes-$1.txt"; say "$2"; }

# The part's budget: PART_DEADLINE (epoch seconds) is set by run.sh for each part's process.
part_left() { awk -v d="$PART_DEADLINE" -v n="$(now)" 'BEGIN { l = d - n; printf "%d\n", l < 0 ? 0 : l }'; }

# bounded LOG SECONDS CMD...: runs CMD with its output in LOG, killed (with everything it started)
# after SECONDS or when the part's budget runs out, whichever is first. Returns CMD's status, 124
# when it was killed for time, 125 when the part had no time left to start it. BOUNDED_SECS is the
# wall time it took.
bounded() {
  local log=$1 want=$2 left t0 rc; shift 2
  left=$(part_left)
  if [ "$left" -lt 3 ]; then
    echo "not started: the part's time budget is spent" >"$log"
    BOUNDED_SECS=0
    return 125
  fi
  [ "$want" -le "$left" ] || want=$left
  t0=$(now)
  echo "\$ $*" >"$log"
  timeout -k 5 "$want" "$@" >>"$log" 2>&1 </dev/null
  rc=$?
  BOUNDED_SECS=$(awk -v a="$t0" -v b="$(now)" 'BEGIN { printf "%.1f\n", b - a }')
  [ $rc -eq 137 ] && rc=124
  [ $rc -eq 124 ] && echo "killed after ${want} s (time budget)" >>"$log"
  return $rc
}

# What a bounded() status means, for a table cell.
outcome() {
  case $1 in
    0) echo ok ;;
    124) echo "timed out" ;;
    125) echo "not run (budget spent)" ;;
    *) echo "failed (exit $1)" ;;
  esac
}

# A JSON string literal of $1.
json_str() {
  local s=$1
  s=${s//\\/\\\\}; s=${s//\"/\\\"}; s=${s//$'\t'/\\t}; s=${s//$'\n'/\\n}; s=${s//$'\r'/\\r}
  printf '"%s"' "$(printf '%s' "$s" | tr -d '\000-\010\013\014\016-\037')"
}

# json_flat FILE: a JSON document as "path<TAB>value" lines, one per scalar (strings unquoted, with
# \" \\ \n \t \/ \uXXXX (ASCII only) decoded), e.g. "devices.0.name<TAB>NVIDIA H100". Enough for
# llmcpu_vulkan_probe's output without python or jq, which a bare machine may lack.
json_flat() {
  awk '
    function emit(v) { print path() "\t" v }
    function path(   i, p) { p = ""; for (i = 1; i <= depth; i++) p = p (i > 1 ? "." : "") key[i]; return p }
    BEGIN { RS = "\001"; depth = 0 }
    {
      s = $0; n = length(s); i = 1; expect_key = 0
      while (i <= n) {
        c = substr(s, i, 1)
        if (c ~ /[ \t\r\n,:]/) {
          if (c == "," && depth > 0) { if (kind[depth] == "o") expect_key = 1; else key[depth]++ }
          i++; continue
        }
        if (c == "{" || c == "[") {
          depth++; kind[depth] = (c == "{") ? "o" : "a"; key[depth] = (c == "{") ? "" : 0
          expect_key = (c == "{"); i++; continue
        }
        if (c == "}" || c == "]") { depth--; expect_key = 0; i++; continue }
        if (c == "\"") {
          v = ""; i++
          while (i <= n) {
            c = substr(s, i, 1)
            if (c == "\\") {
              e = substr(s, i + 1, 1); i += 2
              if (e == "n") v = v "\n"; else if (e == "t") v = v "\t"; else if (e == "r") v = v " "
              else if (e == "u") { h = substr(s, i, 4); i += 4; v = v ((h ~ /^00[2-7]/) ? sprintf("%c", hex(h)) : "?") }
              else v = v e
              continue
            }
            if (c == "\"") { i++; break }
            v = v c; i++
          }
          if (expect_key) { key[depth] = v; expect_key = 0 } else emit(v)
          continue
        }
        j = i; while (j <= n && substr(s, j, 1) !~ /[ \t\r\n,:}\]]/) j++
        emit(substr(s, i, j - i)); i = j
      }
    }
    function hex(h,   k, d, r) { r = 0; for (k = 1; k <= 4; k++) { d = index("0123456789abcdef", tolower(substr(h, k, 1))) - 1; r = r * 16 + d } return r }
  ' "$1"
}
# json_get FLAT PATH: the value at PATH in json_flat's output (file), or "-".
json_get() { awk -F'\t' -v p="$2" '$1 == p { print $2; found = 1; exit } END { if (!found) print "-" }' "$1"; }

# train_step NAME SECONDS LAUNCHER... -- TRAIN-FLAGS...: one `llmcpu train` run (under LAUNCHER, e.g.
# mpirun, or nothing) with its metrics in logs/NAME.jsonl and its output in logs/NAME.log. Sets
# STEP_RC (bounded()'s status), STEP_MS (the median step time after the first step, which pays for
# first touches; the only step when there is one) and, from --offload-report's lines after the
# first step, OFF_COPY_MS OFF_COMPUTE_MS OFF_HIDDEN OFF_UP_KB OFF_DOWN_KB (means; "-" when absent).
train_step() {
  local name=$1 secs=$2 launcher=() log metrics; shift 2
  while [ $# -gt 0 ] && [ "$1" != -- ]; do launcher+=("$1"); shift; done
  shift
  log=$OUT/logs/$name.log metrics=$OUT/logs/$name.jsonl
  rm -f "$metrics"
  bounded "$log" "$secs" "${launcher[@]}" "$LLMCPU" train --train-data "$DATA/random_train.bin" \
    --metrics "$metrics" "$@"
  STEP_RC=$?
  STEP_MS=-
  if [ -s "$metrics" ]; then
    STEP_MS=$(grep -o '"ms":[0-9.eE+-]*' "$metrics" | cut -d: -f2 |
      awk '{ v[NR] = $1 } END { if (NR == 0) { print "-"; exit }
             n = 0; for (i = (NR > 1 ? 2 : 1); i <= NR; i++) w[++n] = v[i]
             for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (w[j] < w[i]) { t = w[i]; w[i] = w[j]; w[j] = t }
             printf "%.1f\n", (n % 2) ? w[(n + 1) / 2] : (w[n / 2] + w[n / 2 + 1]) / 2 }')
  fi
  # "offload: copy 0.042 ms, compute 1254.029 ms, hidden 0.0% of copying, up 0.51 kB, down 0.26 kB"
  read -r OFF_COPY_MS OFF_COMPUTE_MS OFF_HIDDEN OFF_UP_KB OFF_DOWN_KB < <(awk '
    /^offload: copy / {
      ++k
      for (i = 1; i <= NF; i++) {
        if ($i == "copy") c = $(i + 1); if ($i == "compute") m = $(i + 1)
        if ($i == "hidden") h = $(i + 1); if ($i == "up") { u = $(i + 1); uu = $(i + 2) }
        if ($i == "down") { d = $(i + 1); du = $(i + 2) }
      }
      sub(/%/, "", h); sub(/,/, "", uu); sub(/,/, "", du)
      u = kb(u, uu); d = kb(d, du)
      if (k > 1) { n++; sc += c; sm += m; sh += h; su += u; sd += d } else { fc = c; fm = m; fh = h; fu = u; fd = d }
    }
    function kb(v, unit) { return unit ~ /^MB/ ? v * 1000 : unit ~ /^GB/ ? v * 1e6 : unit ~ /^B/ ? v / 1000 : v }
    END {
      if (k == 0) { print "- - - - -"; exit }
      if (n == 0) { printf "%.3f %.3f %.1f %.2f %.2f\n", fc, fm, fh, fu, fd; exit }
      printf "%.3f %.3f %.1f %.2f %.2f\n", sc / n, sm / n, sh / n, su / n, sd / n
    }' "$log")
}
