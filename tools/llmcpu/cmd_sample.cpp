// `llmcpu sample`: text from a checkpoint, one token at a time through the KV cache, streamed to
// standard output as it is generated.
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "core/io/model_file.h"
#include "core/lora/peft_files.h"
#include "core/model/config.h"
#include "core/model/generate.h"
#include "core/tokenizer/tokenizer.h"
#include "core/util/rng.h"
#include "simd/error.h"
#include "tools/llmcpu/args.h"
#include "tools/llmcpu/commands.h"
#include "tools/llmcpu/placement_flags.h"
#include "tools/llmcpu/tokenizer_notes.h"

namespace llmcpu {

namespace {

class SampleCommand : public Command {
 public:
  void add_flags(ArgParser& p) override {
    p.option("model", 'e', &model_path_, "CKPT",
             "llm.c checkpoint (version 3 or 5), or model.safetensors or its folder");
    p.option("adapter", 0, &adapter_, "DIR",
             "a PEFT LoRA adapter folder on the model (what it computes: W x + scale B A x)");
    p.option("prompt", 'p', &prompt_, "TEXT", "text to continue (default: none)");
    p.option("tokens", 'g', &tokens_, "N",
             "tokens to generate (default 64; with the prompt at most the model's context)",
             {1, kMaxSeqLen});
    p.option("temperature", 0, &temperature_, "T",
             "softmax temperature; 0 picks the likeliest (default 1)", {0, 1e6});
    p.option("top-k", 0, &top_k_, "K", "sample among the K likeliest tokens (default 0: all)",
             {0, kMaxVocabSize});
    p.option("seed", 0, &seed_, "S", "sampling seed (default 1337)", kAnyUint64);
    p.option(
        "tokenizer", 0, &tokenizer_path_, "PATH",
        "tokenizer.json (or its folder), folder with encoder.json and vocab.bpe, or "
        "gpt2_tokenizer.bin (default: the "
        "model's folder if it holds a tokenizer.json or encoder.json and vocab.bpe, else the cache "
        "folder's)");
    add_placement_flags(p, &placement_);
  }
  void check(const ArgParser&) override {
    if (model_path_.empty()) throw UsageError("--model is required");
    check_placement_flags(placement_);
  }
  const PlacementOptions* placement() const override { return &placement_; }
  int run(const ArgParser& p) override;

 private:
  std::string model_path_, adapter_, prompt_, tokenizer_path_;
  int tokens_ = 64, top_k_ = 0;
  PlacementOptions placement_;
  double temperature_ = 1.0;
  uint64_t seed_ = 1337;
};

int SampleCommand::run(const ArgParser&) {
  const Placement placed = apply_placement_flags(placement_);  // printed once the files have loaded

  const ModelSource source = open_model_file(model_path_);
  std::string tokenizer = tokenizer_path_;  // else the one beside the model, else GPT-2's default
  if (tokenizer.empty()) tokenizer = source.tokenizer;
  if (tokenizer.empty()) tokenizer = default_tokenizer_dir();
  const Tokenizer tok = Tokenizer::load(tokenizer);
  print_tokenizer_notes(tok, "sample");
  Model model(source.config, active_kernels(), Precision::kFp32, nullptr, adapter_.empty());
  load_model_file(source, model);
  const ModelConfig& c = model.config();
  std::unique_ptr<LoraAdapter> adapter;  // kept while the model computes with it
  if (!adapter_.empty()) {
    adapter = std::make_unique<LoraAdapter>(read_peft_adapter(adapter_, c));
    model.attach_lora(adapter->params_for_model(false));
    model.plan_batch(1, 1);  // the adapters' activations, for generation's one token
  }

  // Samples start from the token that starts every document in training (BOS, or end-of-text).
  const int first = tok.document_token();
  std::vector<int> context = {first >= 0 ? first : 0};
  if (!prompt_.empty()) {
    if (!tok.can_encode()) {
      throw UsageError(
          "--prompt needs a tokenizer that can encode (a tokenizer.json, or a folder with "
          "encoder.json and vocab.bpe), not " +
          tok.source());
    }
    tok.encode_append(prompt_, context);
  }
  // A tokenizer may know more tokens than the model has rows (Gemma 3's image token is past its
  // V): only the ids actually fed in must fit.
  for (size_t i = 0; i < context.size(); ++i) {
    const int id = context[i];
    if (id < c.vocab_size) continue;
    throw UsageError(std::string(i == 0 ? "the document token " : "--prompt's token ") +
                     std::to_string(id) + " (" + tok.decode(&id, 1) + ") of --tokenizer " +
                     tok.source() + " is past the V=" + std::to_string(c.vocab_size) +
                     " of --model " + model_path_ +
                     (i == 0 ? ": the tokenizer is not the model's" : ""));
  }
  // Both are bounded (the prompt by what was read, --tokens by its range): no int overflows here.
  const int64_t length = static_cast<int64_t>(context.size()) + tokens_;
  if (length > c.max_seq_len) {
    throw UsageError("the prompt (" + std::to_string(context.size() - 1) + " tokens) and " +
                     "--tokens " + std::to_string(tokens_) + " exceed the model's context of " +
                     std::to_string(c.max_seq_len) + " tokens");
  }
  std::fprintf(stderr, "%s\n", placed.summary.c_str());
  Generator gen(model, static_cast<int>(length));
  Rng rng(seed_);
  std::fwrite(prompt_.data(), 1, prompt_.size(), stdout);
  const auto start = std::chrono::steady_clock::now();
  for (int t : context) gen.step(t);
  int generated = 0;
  TokenStream text(tok);
  const auto show = [](const std::string& piece) {
    std::fwrite(piece.data(), 1, piece.size(), stdout);
    std::fflush(stdout);
  };
  while (generated < tokens_) {
    // Only ids the tokenizer can decode (Qwen3's rows past its 151669 tokens are never drawn).
    const int next = gen.sample(static_cast<float>(temperature_), top_k_, rng, tok.vocab_size());
    ++generated;
    if (next == tok.eot_token()) break;
    show(text.push(next));
    if (generated < tokens_) gen.step(next);
  }
  show(text.finish());
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::fprintf(stderr, "\nsample: %d tokens after a %zu-token context in %.2f s (%.1f tokens/s)\n",
               generated, context.size(), s, generated / s);
  return 0;
}

}  // namespace

std::unique_ptr<Command> make_sample_command() { return std::make_unique<SampleCommand>(); }

}  // namespace llmcpu
