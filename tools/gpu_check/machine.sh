# Part 1, the machine: CPU, cores, NUMA nodes and caches (llmcpu topo), the GPU as its driver
# reports it, and the Vulkan devices the plugin sees. Where no Vulkan driver or no GPU driver is
# found it says which and how to provide it. Leaves raw/vulkan.state: "gpu", "cpu" (only a CPU driver
# such as lavapipe) or "none", which parts 2 and 3 read.

# The library named in an ICD file, and whether it loads here (what it lacks, by ldd).
icd_library_state() {
  local json=$1 lib path='' missing
  lib=$(grep -o '"library_path"[^,}]*' "$json" | sed 's/.*: *"\(.*\)"/\1/')
  [ -n "$lib" ] || { echo "no library_path in it"; return; }
  case $lib in
    /*) path=$lib ;;
    */*) path=$(dirname "$json")/$lib ;;
    *) path=$(find_lib "$lib") ;;
  esac
  if [ -z "$path" ] || [ ! -e "$path" ]; then echo "$lib: not found"; return; fi
  missing=$(ldd "$path" 2>/dev/null | awk '/not found/ { print $1 }' | paste -sd' ')
  if [ -n "$missing" ]; then echo "$lib: needs $missing (not found)"; else echo "$lib: its libraries resolve (ldd)"; fi
}

# Where find_lib NAME is: LD_LIBRARY_PATH's folders first, then the linker cache.
find_lib() {
  local d
  for d in ${LD_LIBRARY_PATH//:/ }; do [ -e "$d/$1" ] && { echo "$d/$1"; return; }; done
  ldconfig -p 2>/dev/null | awk -v n="$1" '$1 == n { print $NF; exit }'
}

# NVIDIA's Vulkan driver file names libGLX_nvidia.so.0, which fails to start without a display on
# some machines (vkCreateInstance: VK_ERROR_INCOMPATIBLE_DRIVER); the same driver's EGL library
# libEGL_nvidia.so.0 serves Vulkan headless. Writes a driver file naming it and, when the devices
# then enumerate, raw/vk.env for the later parts. Returns 0 when that worked.
try_nvidia_egl() {
  local icds=$1 icd api egl=$OUT/raw/nvidia_egl_icd.json
  [ -z "$VK_FILES_FROM_USER" ] || return 1
  icd=$(for f in ${icds//:/ }; do grep -l 'libGLX_nvidia' "$f" 2>/dev/null; done | head -1)
  [ -n "$icd" ] && [ -n "$(find_lib libEGL_nvidia.so.0)" ] || return 1
  api=$(grep -o '"api_version"[^,}]*' "$icd" | sed 's/.*: *"\(.*\)"/\1/')
  printf '{"file_format_version":"1.0.0","ICD":{"library_path":"libEGL_nvidia.so.0","api_version":"%s"}}\n' "${api:-1.3.0}" >"$egl"
  VK_DRIVER_FILES=$egl VK_ICD_FILENAMES=$egl bounded "$OUT/logs/probe-devices-egl.log" 30 \
    sh -c '"$0" devices >"$1"' "$PROBE" "$OUT/raw/devices.json" || return 1
  echo "export VK_DRIVER_FILES=$egl VK_ICD_FILENAMES=$egl" >"$OUT/raw/vk.env"
  table_row machine "Vulkan driver (used)" "$egl: libEGL_nvidia.so.0 (NVIDIA's GLX driver file failed without a display)"
  note 1 "NVIDIA's Vulkan driver file ($icd, libGLX_nvidia.so.0) gave no device here: $(grep -m1 -o 'VK_ERROR[A-Z_]*' "$OUT/raw/devices-glx.json" 2>/dev/null || echo 'no device'); the same driver's libEGL_nvidia.so.0 does, and the later parts use it (VK_DRIVER_FILES=$egl)."
  return 0
}

part_main() {
  table_new machine $'item\tvalue'
  local cpu topo_line
  cpu=$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)
  table_row machine "CPU" "${cpu:-unknown}"
  table_row machine "CPU flags (SIMD)" "$(grep -m1 -o -w 'avx2\|avx512f\|avx512_bf16\|amx_tile\|amx_bf16' /proc/cpuinfo | sort -u | paste -sd' ')"
  table_row machine "memory" "$(awk '/^MemTotal/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo)"
  table_row machine "kernel" "$(uname -r)"
  table_row machine "system" "$(. /etc/os-release 2>/dev/null && echo "${PRETTY_NAME:-unknown}")"
  if bounded "$OUT/logs/topo.log" 15 "$LLMCPU" topo; then
    sed 1d "$OUT/logs/topo.log" >"$OUT/raw/topo.txt"
    topo_line=$(grep -m1 '^machine:' "$OUT/raw/topo.txt" | sed 's/^machine: //')
    table_row machine "topology (llmcpu topo)" "$topo_line"
    table_row machine "caches" "$(grep -m1 '^caches:' "$OUT/raw/topo.txt" | sed 's/^caches: //')"
  else
    note 1 "llmcpu topo failed: $(tail -n 2 "$OUT/logs/topo.log" | paste -sd' ')"
  fi
  table_row machine "pack" "$(grep '^pack:' "$OUT/raw/env.txt" | sed 's/^pack: //')"
  if grep -q '^llmcpu does not start' "$OUT/raw/env.txt"; then note 1 "$(grep '^llmcpu does not start' "$OUT/raw/env.txt")"; fi

  local nvsmi=-
  if command -v nvidia-smi >/dev/null; then
    bounded "$OUT/logs/nvidia-smi.log" 15 nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm \
      --format=csv,noheader && nvsmi=$(sed -n '2,$p' "$OUT/logs/nvidia-smi.log" | paste -sd';')
  fi
  table_row machine "GPU (nvidia-smi)" "$nvsmi"

  # The Vulkan drivers: the ICD files the loader will read, and whether each one's library loads.
  local icds icd state
  icds=${VK_DRIVER_FILES:-${VK_ICD_FILENAMES:-}}
  table_row machine "Vulkan loader" "the pack's libvulkan.so.1 ($(ls "$ROOT"/lib/libvulkan.so.* 2>/dev/null | head -1 | xargs -r basename))"
  if [ -z "$icds" ]; then
    table_row machine "Vulkan drivers (ICD files)" "none found"
  else
    for icd in ${icds//:/ }; do
      state=$(icd_library_state "$icd")
      table_row machine "Vulkan driver $(basename "$icd")" "$icd: $state"
    done
  fi

  # The devices, as llmcpu_vulkan_probe enumerates them with the loader and drivers above.
  echo none >"$OUT/raw/vulkan.state"
  table_new devices $'index\tname\ttype\tdriver\tVulkan\tmemory (MiB)\tsubgroup size\tcooperative matrix\tdedicated transfer queue\tusable\tchosen'
  bounded "$OUT/logs/probe-devices.log" 30 sh -c '"$0" devices >"$1"' "$PROBE" "$OUT/raw/devices.json"
  local rc=$? flat=$OUT/raw/devices.flat n i chosen type
  if [ $rc -ne 0 ] && [ -n "$icds" ]; then
    # What the loader says about each driver, for the report's notes and the log.
    VK_LOADER_DEBUG=error,warn,driver bounded "$OUT/logs/probe-devices-loader.log" 30 "$PROBE" devices
    cp "$OUT/raw/devices.json" "$OUT/raw/devices-glx.json"
    if try_nvidia_egl "$icds"; then rc=0; fi
  fi
  json_flat "$OUT/raw/devices.json" >"$flat" 2>/dev/null
  n=$(awk -F'\t' '$1 ~ /^devices\.[0-9]+\.name$/' "$flat" | wc -l)
  chosen=$(json_get "$flat" chosen)
  for ((i = 0; i < n; i++)); do
    local p=devices.$i coop
    coop=$( { [ "$(json_get "$flat" $p.cooperative_matrix.khr)" = true ] && echo KHR
              [ "$(json_get "$flat" $p.cooperative_matrix.nv)" = true ] && echo NV; } | paste -sd+)
    table_row devices "$i" "$(json_get "$flat" $p.name)" "$(json_get "$flat" $p.type)" \
      "$(json_get "$flat" $p.driverName) $(json_get "$flat" $p.driverInfo)" "$(json_get "$flat" $p.apiVersion)" \
      "$(calc %.0f 'b / 1048576' b="$(json_get "$flat" $p.device_local_heap_bytes)")" \
      "$(json_get "$flat" $p.subgroupSize)" "${coop:-none}" "$(json_get "$flat" $p.dedicated_transfer)" \
      "$(json_get "$flat" $p.usable)" "$([ "$i" = "$chosen" ] && echo yes || echo no)"
  done
  # The cooperative matrix shapes each device offers (what a tensor-core GEMM shader could use).
  table_new coopmat $'device\textension\tM\tN\tK\tA type\tB type\tC type\tresult type\tscope'
  awk -F'\t' '$1 ~ /^devices\.[0-9]+\.cooperative_matrix\.(khr|nv)_properties\.[0-9]+\./ {
      split($1, k, "."); id = k[2] "." k[4] "." k[5]; if (!(id in seen)) { seen[id] = 1; order[++n] = id }
      v[id, k[6]] = $2 }
    END { for (i = 1; i <= n; i++) { id = order[i]; split(id, k, ".")
            printf "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", k[1], (k[2] ~ /^khr/ ? "KHR" : "NV"),
              v[id, "M"], v[id, "N"], v[id, "K"], v[id, "A"], v[id, "B"], v[id, "C"], v[id, "result"], v[id, "scope"] } }' \
    "$flat" >>"$OUT/raw/coopmat.tsv"
  if [ "$rc" -ne 0 ] || [ "$n" -eq 0 ] || [ "$chosen" = - ] || [ "$chosen" = null ]; then
    if [ -z "$icds" ]; then
      note 1 "No Vulkan driver found (no ICD file in /etc/vulkan/icd.d, /usr/share/vulkan/icd.d, /usr/local/share/vulkan/icd.d or NVIDIA's /usr/local/nvidia/share/vulkan/icd.d). On an NVIDIA machine point the loader at the driver's file: export VK_DRIVER_FILES=/path/to/nvidia_icd.json (find / -name nvidia_icd.json), then run again; for a CPU-only check install Debian's mesa-vulkan-drivers (lavapipe). Parts 2 and 3 run no device work."
    else
      note 1 "The Vulkan loader found driver files but no usable device (the loader: $(grep -i -m2 'error' "$OUT/logs/probe-devices-loader.log" 2>/dev/null | paste -sd' ' | cut -c1-300)): see the driver rows above for a library that does not load (NVIDIA's needs libGLdispatch.so.0 from libglvnd0; unpack Debian's libvulkan1 and libglvnd0 .debs with dpkg -x where the machine lacks them). Parts 2 and 3 run no device work."
    fi
  else
    type=$(json_get "$flat" "devices.$chosen.type")
    case $type in
      discrete|integrated|virtual) echo gpu >"$OUT/raw/vulkan.state" ;;
      *) echo cpu >"$OUT/raw/vulkan.state"
         note 1 "The plugin's device is a CPU Vulkan driver ($(json_get "$flat" "devices.$chosen.name")), no GPU: parts 2 and 3 check correctness on it, and their times are not GPU times.$(command -v nvidia-smi >/dev/null && echo " nvidia-smi is here, so NVIDIA's Vulkan driver is missing from the loader's view: export VK_DRIVER_FILES=/path/to/nvidia_icd.json and run again.")" ;;
    esac
  fi
}
