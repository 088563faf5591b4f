#!/bin/sh
# Builds llmcpu (Release) into build/ and runs every test suite with ctest.
set -eu
cd "$(dirname "$0")/.."
cmake --preset release
cmake --build --preset release
ctest --preset release -j "$(nproc)" --no-tests=error
