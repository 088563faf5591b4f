// What `sample` and `chat` generate from, and the flags that say so: the model (--model: an llm.c
// checkpoint or a Hugging Face model), a PEFT LoRA adapter on it (--adapter), the tokenizer
// (--tokenizer, else the one beside the model, else GPT-2's default folder) and the sampling
// flags (--temperature, --top-k, --seed). Loaded once, for generation through
// core/model/generate.h. Not here: what each command does with them (its prompt, its loop, its
// output).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "core/io/model_file.h"
#include "core/lora/adapter.h"
#include "core/model/model.h"
#include "core/tokenizer/tokenizer.h"
#include "tools/llmcpu/args.h"
#include "tools/llmcpu/commands.h"

namespace llmcpu {

struct GenerationFlags {
  std::string model, adapter, tokenizer;
  double temperature = 1.0;
  int top_k = 0;
  uint64_t seed = 1337;
};

// --model (-e) and --adapter.
void add_model_flags(ArgParser& p, GenerationFlags* f);
// --temperature, --top-k and --seed.
void add_sampling_flags(ArgParser& p, GenerationFlags* f);
// --tokenizer.
void add_tokenizer_flag(ArgParser& p, GenerationFlags* f);
// UsageError when --model is missing.
void check_generation_flags(const GenerationFlags& f);

// A command that generates: its generation flags and thread placement flags, checked alike.
class GenerationCommand : public Command {
 public:
  void check(const ArgParser& p) override;
  const PlacementOptions* placement() const override { return &placement_; }

 protected:
  GenerationFlags flags_;
  PlacementOptions placement_;
};

// The model in fp32 with its adapter attached, and its tokenizer. Throws FileError naming a file
// that is missing or malformed; prints the tokenizer's notes to standard error as `command`'s.
class GenerationModel {
 public:
  GenerationModel(const GenerationFlags& f, const char* command);
  ~GenerationModel();

  const ModelSource& source() const { return source_; }
  const Tokenizer& tokenizer() const { return tokenizer_; }
  const Model& model() const { return *model_; }
  // The folder the tokenizer was read from (where its tokenizer_config.json would be).
  std::string tokenizer_dir() const;

 private:
  ModelSource source_;
  Tokenizer tokenizer_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<LoraAdapter> adapter_;  // kept while the model computes with it
};

}  // namespace llmcpu
