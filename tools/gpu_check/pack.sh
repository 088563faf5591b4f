# tools/gpu-check.sh --pack DIR: one folder of at most 60 MB that runs the check on a machine where
# nothing can be installed. Sourced by tools/gpu-check.sh.
#
# DIR/gpu-check.sh, DIR/gpu_check/*.sh   the script and its parts
# DIR/payload.tar.gz                     unpacked into DIR/root on the first run:
#   bin/    llmcpu, the Vulkan plugin's op and layer tests and llmcpu_vulkan_probe (stripped)
#   lib/    the plugin and every shared library ldd resolves for them, but glibc's own
#   lib/cxx libstdc++ and libgcc_s, used only where the machine's own are older than the build's
#   lib/gl  libGLdispatch and libGLX (with what they need), which NVIDIA's Vulkan driver loads,
#           used only where the machine has none
#   mpi/    Open MPI's mpirun (orterun), its components and help files, relocated by OPAL_* variables
#   conf/   the model presets; data/ the committed fixtures and a shard of random GPT-2 tokens
# DIR/pack.manifest                      what was packed, from which commit, on which machine

readonly pack_limit_bytes=$((60 * 1000 * 1000))
# glibc's libraries come from the machine that runs the check: never packed.
readonly glibc_re='^(linux-vdso|ld-linux|libc\.so|libm\.so|libmvec\.so|libpthread\.so|libdl\.so|librt\.so|libresolv\.so|libutil\.so|libanl\.so)'

# The shared libraries ldd resolves for the ELF files given (transitively), but glibc's. Fails naming
# the library and the file when one is not found.
ldd_closure() {
  local f lines
  for f in "$@"; do
    lines=$(ldd "$f" 2>&1) || { echo "gpu-check: error: ldd $f: $lines" >&2; return 1; }
    if grep -q "not found" <<<"$lines"; then
      echo "gpu-check: error: $f needs $(grep "not found" <<<"$lines" | awk '{ print $1 }' | paste -sd' ') (not found on this machine)" >&2
      return 1
    fi
    awk '/=> \// { print $1 " " $3 }' <<<"$lines"
  done | sort -u | awk -v re="$glibc_re" '$1 !~ re { print $2 }'
}

# Copies the libraries for the ELF files into $stage/lib (libstdc++, libgcc_s into lib/cxx).
pack_libraries() {
  local stage=$1 lib; shift
  for lib in $(ldd_closure "$@") ; do
    case $(basename "$lib") in
      libstdc++.so.*|libgcc_s.so.*) cp -L "$lib" "$stage/lib/cxx/" ;;
      *) [ -e "$stage/lib/$(basename "$lib")" ] || cp -L "$lib" "$stage/lib/" ;;
    esac
  done
}

# Open MPI's launcher with its components but those for networks between machines (InfiniBand, UCX,
# OFI, PSM and the like: large, and a single machine does not need them) and OpenSHMEM, and PMIx's.
readonly fabric_re='^(libuc[mpst]|libpsm|libibverbs|libfabric|librdmacm|libnl-|libefa|libinfinipath|liboshmem|libcuda)' 
pack_open_mpi() {
  local stage=$1 orterun pkglib pkgdata pmix_lib pmix_dir c deps skipped=0
  orterun=$(command -v orterun || true)
  if [ -z "$orterun" ] || ! command -v ompi_info >/dev/null; then
    say "Open MPI (orterun, ompi_info) not found: the pack has no mpirun, part 4 will say so"
    return 0
  fi
  pkglib=$(ompi_info --path pkglibdir --parsable 2>/dev/null | awk -F: '/pkglibdir/ { print $NF }')
  pkgdata=$(ompi_info --path pkgdatadir --parsable 2>/dev/null | awk -F: '/pkgdatadir/ { print $NF }')
  [ -d "$pkglib" ] && [ -d "$pkgdata" ] || { say "Open MPI's folders not found (ompi_info --path): no mpirun packed"; return 0; }
  mkdir -p "$stage/mpi/bin" "$stage/mpi/lib/openmpi" "$stage/mpi/share/openmpi" "$stage/mpi/etc"
  cp -L "$orterun" "$stage/mpi/bin/orterun"
  cp -r "$pkgdata/." "$stage/mpi/share/openmpi/"
  for c in "$pkglib"/mca_*.so; do
    deps=$(ldd "$c" 2>/dev/null | awk '/=>/ { print $1 }')
    if grep -Eq "$fabric_re" <<<"$deps" || ldd "$c" | grep -q "not found"; then
      skipped=$((skipped + 1))
    else
      cp "$c" "$stage/mpi/lib/openmpi/"
    fi
  done
  pack_libraries "$stage" "$orterun" "$stage"/mpi/lib/openmpi/mca_*.so
  # PMIx's own components and help files live under its prefix (Debian: .../pmix2).
  pmix_lib=$(ldd "$stage"/lib/libopen-pal.so.* 2>/dev/null | awk '/libpmix/ { print $3 }')
  [ -n "$pmix_lib" ] || pmix_lib=$(ldconfig -p | awk '/libpmix\.so\.2 / { print $NF; exit }')
  for pmix_dir in "$(dirname "$(readlink -f "$pmix_lib")")" /usr/lib/*/pmix2/lib; do
    [ -d "$pmix_dir/pmix" ] || continue
    mkdir -p "$stage/mpi/pmix/lib/pmix" "$stage/mpi/pmix/share"
    cp "$pmix_dir"/pmix/*.so "$stage/mpi/pmix/lib/pmix/" 2>/dev/null
    [ -d "$pmix_dir/../share/pmix" ] && cp -r "$pmix_dir/../share/pmix" "$stage/mpi/pmix/share/"
    pack_libraries "$stage" "$stage"/mpi/pmix/lib/pmix/*.so
    break
  done
  say "Open MPI: orterun and $(ls "$stage/mpi/lib/openmpi" | wc -l) components packed ($skipped left out: they need libraries a single machine does not)"
}

# A shard of random GPT-2 token ids in llm.c's format (header: magic 20240520, version 1, count).
write_random_shard() {
  perl -e 'srand(1337); my $n = 131072;
           print pack("l<256", 20240520, 1, $n, (0) x 253);
           print pack("S<*", map { int(rand(50257)) } 1 .. $n);' >"$1"
}

pack_main() {
  local dir=$1 build=$2 src stage f bytes
  src=$(cd "$parts_dir/../.." && pwd)
  if [ -e "$dir" ] && [ -n "$(ls -A "$dir" 2>/dev/null)" ] && [ ! -f "$dir/pack.manifest" ]; then
    die_usage "--pack $dir: the folder exists and is not a pack; give an empty or new folder"
  fi
  local programs=(llmcpu llmcpu_vulkan_block_ops_tests llmcpu_vulkan_layers_tests llmcpu_vulkan_probe)
  for f in "${programs[@]}" libllmcpu_vulkan.so; do
    [ -f "$build/$f" ] || die_usage "$build/$f not found: build it first (cmake --preset release && cmake --build build), with the Vulkan plugin (apt-get install libvulkan-dev glslc)"
  done
  for f in perl strip tar gzip ldd; do command -v $f >/dev/null || die_usage "'$f' is needed to pack"; done
  stage=$(mktemp -d)
  trap 'rm -rf "$stage"' RETURN
  mkdir -p "$stage/bin" "$stage/lib/cxx" "$stage/lib/gl" "$stage/conf" "$stage/data/fixtures"
  for f in "${programs[@]}"; do cp "$build/$f" "$stage/bin/"; strip --strip-unneeded "$stage/bin/$f"; done
  cp "$build/libllmcpu_vulkan.so" "$stage/lib/"
  strip --strip-unneeded "$stage/lib/libllmcpu_vulkan.so"
  pack_libraries "$stage" "$stage"/bin/* "$stage/lib/libllmcpu_vulkan.so" || return 2
  # NVIDIA's Vulkan driver (libGLX_nvidia.so.0) loads libGLdispatch.so.0 from libglvnd.
  local gl=()
  for f in libGLdispatch.so.0 libGLX.so.0; do
    f=$(ldconfig -p | awk -v n="$f" '$1 == n { print $NF; exit }')
    [ -n "$f" ] && gl+=("$f")
  done
  if [ ${#gl[@]} -gt 0 ]; then
    cp -L "${gl[@]}" "$stage/lib/gl/"
    for f in $(ldd_closure "${gl[@]}"); do [ -e "$stage/lib/$(basename "$f")" ] || cp -L "$f" "$stage/lib/gl/"; done
  else
    say "libGLdispatch.so.0 not found here (apt-get install libglvnd0 libglx0): a machine without it cannot load NVIDIA's Vulkan driver from the pack"
  fi
  pack_open_mpi "$stage"
  cp -r "$src/conf/models" "$stage/conf/"
  cp "$src"/tests/fixtures/*_model.bin "$src"/tests/fixtures/*_state.bin "$stage/data/fixtures/"
  write_random_shard "$stage/data/random_train.bin"

  mkdir -p "$dir/gpu_check"
  rm -rf "$dir/root" "$dir/payload.tar.gz"
  tar -C "$stage" -czf "$dir/payload.tar.gz" . || return 2
  cp "$src/tools/gpu-check.sh" "$dir/"
  cp "$src"/tools/gpu_check/*.sh "$dir/gpu_check/"
  {
    echo "llmcpu gpu-check pack"
    echo "commit: $(git -C "$src" rev-parse --short HEAD 2>/dev/null || echo unknown)$(git -C "$src" diff --quiet HEAD 2>/dev/null || echo ' (with uncommitted changes)')"
    echo "made: $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo), $(. /etc/os-release && echo "$PRETTY_NAME")"
    echo "payload: $(stat -c %s "$dir/payload.tar.gz") bytes, sha256 $(sha256sum "$dir/payload.tar.gz" | cut -d' ' -f1)"
    (cd "$stage" && find . -type f -printf '%s %p\n' | sort -k2)
  } >"$dir/pack.manifest"
  bytes=$(du -sb "$dir" | cut -f1)
  if [ "$bytes" -gt $pack_limit_bytes ]; then
    echo "gpu-check: error: the pack $dir is $bytes bytes, over the 60 MB limit" >&2
    return 2
  fi
  say "packed $dir: $(awk -v b="$bytes" 'BEGIN { printf "%.1f MB", b / 1e6 }') ($(grep -c '^[0-9]' "$dir/pack.manifest") files); run it there with: $dir/gpu-check.sh [--out DIR] [--quick]"
}
