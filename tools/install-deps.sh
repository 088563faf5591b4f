#!/bin/sh
# Installs everything llmcpu needs to build and test, from Debian packages. Run as root (or with sudo).
set -eu
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO=sudo
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends \
  g++ cmake ninja-build pkg-config \
  libgtest-dev libbenchmark-dev libtomlplusplus-dev \
  libhwloc-dev \
  libpcre2-dev nodejs \
  python3 python3-torch python3-numpy
# npm (for tools/fetch-data.sh): Debian's, unless an npm came with the installed node (NodeSource's
# nodejs bundles one and conflicts with Debian's npm package).
command -v npm >/dev/null 2>&1 || $SUDO apt-get install -y -qq --no-install-recommends npm
