// `llmcpu sample`: text from a checkpoint, one token at a time through the KV cache, streamed to
// standard output as it is generated.
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "core/model/config.h"
#include "core/model/generate.h"
#include "core/tokenizer/tokenizer.h"
#include "core/util/rng.h"
#include "simd/error.h"
#include "tools/llmcpu/args.h"
#include "tools/llmcpu/commands.h"
#include "tools/llmcpu/generation_model.h"
#include "tools/llmcpu/placement_flags.h"

namespace llmcpu {

namespace {

class SampleCommand : public GenerationCommand {
 public:
  void add_flags(ArgParser& p) override {
    add_model_flags(p, &flags_);
    p.option("prompt", 'p', &prompt_, "TEXT", "text to continue (default: none)");
    p.option("tokens", 'g', &tokens_, "N",
             "tokens to generate (default 64; with the prompt at most the model's context)",
             {1, kMaxSeqLen});
    add_sampling_flags(p, &flags_);
    add_tokenizer_flag(p, &flags_);
    add_placement_flags(p, &placement_);
  }
  int run(const ArgParser& p) override;

 private:
  std::string prompt_;
  int tokens_ = 64;
};

int SampleCommand::run(const ArgParser&) {
  const Placement placed = apply_placement_flags(placement_);  // printed once the files have loaded
  const GenerationModel loaded(flags_, "sample");
  const Tokenizer& tok = loaded.tokenizer();
  const Model& model = loaded.model();
  const ModelConfig& c = model.config();

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
                     " of --model " + flags_.model +
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
  Rng rng(flags_.seed);
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
    const int next =
        gen.sample(static_cast<float>(flags_.temperature), flags_.top_k, rng, tok.vocab_size());
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
