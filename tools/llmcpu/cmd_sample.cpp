// `llmcpu sample`: text from a checkpoint, one token at a time through the KV cache, streamed to
// standard output as it is generated.
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "core/io/model_file.h"
#include "core/model/generate.h"
#include "core/tokenizer/tokenizer.h"
#include "core/util/rng.h"
#include "simd/error.h"
#include "tools/llmcpu/args.h"
#include "tools/llmcpu/commands.h"
#include "tools/llmcpu/placement_flags.h"

namespace llmcpu {

int run_sample(const std::vector<std::string>& args) {
  std::string model_path, prompt, tokenizer_path;
  int tokens = 64, top_k = 0;
  PlacementOptions placement;
  double temperature = 1.0;
  uint64_t seed = 1337;
  ArgParser p("sample",
              "Generates text from a checkpoint, starting after <|endoftext|> and the prompt.");
  p.option("model", 'e', &model_path, "CKPT",
           "llm.c checkpoint (version 3 or 5), or model.safetensors or its folder");
  p.option("prompt", 'p', &prompt, "TEXT", "text to continue (default: none)");
  p.option("tokens", 'g', &tokens, "N", "tokens to generate (default 64)");
  p.option("temperature", 0, &temperature, "T", "softmax temperature; 0 picks the likeliest (default 1)");
  p.option("top-k", 0, &top_k, "K", "sample among the K likeliest tokens (default 0: all)");
  p.option("seed", 0, &seed, "S", "sampling seed (default 1337)");
  p.option("tokenizer", 0, &tokenizer_path, "PATH", "folder with encoder.json and vocab.bpe, or gpt2_tokenizer.bin");
  add_placement_flags(p, &placement);
  if (!p.parse(args)) return 0;
  if (model_path.empty()) throw UsageError("--model is required");
  if (tokens <= 0) throw UsageError("--tokens must be positive");
  if (temperature < 0) throw UsageError("--temperature must not be negative");
  if (top_k < 0) throw UsageError("--top-k must not be negative");
  const Placement placed = apply_placement_flags(placement);  // printed once the files have loaded

  const Tokenizer tok = Tokenizer::load(tokenizer_path.empty() ? default_tokenizer_dir() : tokenizer_path);
  const ModelFileInfo info = read_model_file_header(model_path);
  Gpt2 model(info.config);
  load_model_file(model_path, model);
  const ModelConfig& c = model.config();
  if (tok.vocab_size() > c.padded_vocab_size) {
    throw UsageError("the tokenizer " + tok.source() + " has " +
                     std::to_string(tok.vocab_size()) + " tokens, more than the model's " +
                     std::to_string(c.vocab_size));
  }

  std::vector<int> context = {tok.eot_token() < c.vocab_size ? tok.eot_token() : 0};
  if (!prompt.empty()) {
    if (!tok.can_encode()) {
      throw UsageError("--prompt needs a tokenizer that can encode (a folder with "
                       "encoder.json and vocab.bpe), not " + tok.source());
    }
    tok.encode_append(prompt, context);
  }
  const int length = static_cast<int>(context.size()) + tokens;
  if (length > c.max_seq_len) {
    throw UsageError("the prompt (" + std::to_string(context.size() - 1) + " tokens) and " +
                     "--tokens " + std::to_string(tokens) + " exceed the model's context of " +
                     std::to_string(c.max_seq_len) + " tokens");
  }
  std::fprintf(stderr, "%s\n", placed.summary.c_str());
  Generator gen(model, length);
  Rng rng(seed);
  std::fwrite(prompt.data(), 1, prompt.size(), stdout);
  const auto start = std::chrono::steady_clock::now();
  for (int t : context) gen.step(t);
  int generated = 0;
  while (generated < tokens) {
    const int next = gen.sample(static_cast<float>(temperature), top_k, rng);
    ++generated;
    if (next == tok.eot_token()) break;
    const std::string piece = tok.decode(&next, 1);
    std::fwrite(piece.data(), 1, piece.size(), stdout);
    std::fflush(stdout);
    if (generated < tokens) gen.step(next);
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::fprintf(stderr, "\nsample: %d tokens after a %zu-token context in %.2f s (%.1f tokens/s)\n",
               generated, context.size(), s, generated / s);
  return 0;
}

}  // namespace llmcpu
