#include "tools/llmcpu/generation_model.h"

#include <filesystem>

#include "core/lora/peft_files.h"
#include "core/model/config.h"
#include "simd/error.h"
#include "tools/llmcpu/placement_flags.h"
#include "tools/llmcpu/tokenizer_notes.h"

namespace llmcpu {

namespace {

// --tokenizer, else the one beside the model, else GPT-2's default.
Tokenizer load_tokenizer(const std::string& flag, const ModelSource& source, const char* command) {
  std::string path = flag;
  if (path.empty()) path = source.tokenizer;
  if (path.empty()) path = default_tokenizer_dir();
  Tokenizer tok = Tokenizer::load(path);
  print_tokenizer_notes(tok, command);
  return tok;
}

}  // namespace

void add_model_flags(ArgParser& p, GenerationFlags* f) {
  p.option("model", 'e', &f->model, "CKPT",
           "llm.c checkpoint (version 3 or 5), or model.safetensors or its folder");
  p.option("adapter", 0, &f->adapter, "DIR",
           "a PEFT LoRA adapter folder on the model (what it computes: W x + scale B A x)");
}

void add_sampling_flags(ArgParser& p, GenerationFlags* f) {
  p.option("temperature", 0, &f->temperature, "T",
           "softmax temperature; 0 picks the likeliest (default 1)", {0, 1e6});
  p.option("top-k", 0, &f->top_k, "K", "sample among the K likeliest tokens (default 0: all)",
           {0, kMaxVocabSize});
  p.option("seed", 0, &f->seed, "S", "sampling seed (default 1337)", kAnyUint64);
}

void add_tokenizer_flag(ArgParser& p, GenerationFlags* f) {
  p.option("tokenizer", 0, &f->tokenizer, "PATH",
           "tokenizer.json (or its folder), folder with encoder.json and vocab.bpe, or "
           "gpt2_tokenizer.bin (default: the "
           "model's folder if it holds a tokenizer.json or encoder.json and vocab.bpe, else the "
           "cache folder's)");
}

void check_generation_flags(const GenerationFlags& f) {
  if (f.model.empty()) throw UsageError("--model is required");
}

void GenerationCommand::check(const ArgParser&) {
  check_generation_flags(flags_);
  check_placement_flags(placement_);
}

GenerationModel::GenerationModel(const GenerationFlags& f, const char* command)
    : source_(open_model_file(f.model)), tokenizer_(load_tokenizer(f.tokenizer, source_, command)) {
  model_ = std::make_unique<Model>(source_.config, active_kernels(), Precision::kFp32, nullptr,
                                   f.adapter.empty());
  load_model_file(source_, *model_);
  if (!f.adapter.empty()) {
    adapter_ = std::make_unique<LoraAdapter>(read_peft_adapter(f.adapter, model_->config()));
    model_->attach_lora(adapter_->params_for_model(false));
    model_->plan_batch(1, 1);  // the adapters' activations, for generation's one token
  }
}

GenerationModel::~GenerationModel() = default;

std::string GenerationModel::tokenizer_dir() const {
  namespace fs = std::filesystem;
  const std::string& s = tokenizer_.source();
  return fs::is_directory(s) ? s : fs::path(s).parent_path().string();
}

}  // namespace llmcpu
