// `llmcpu convert`: a Hugging Face GPT-2 (model.safetensors + config.json) to an llm.c checkpoint,
// or an llm.c checkpoint to a model.safetensors + config.json that transformers' GPT2LMHeadModel
// loads; a Llama-family folder to a folder of other weights' dtype (config.json's other keys and
// the tokenizer files kept). The direction follows from IN (llm.c's magic, or a safetensors file
// or folder, and its config.json's model_type). With --adapter, a PEFT LoRA adapter folder for IN
// is merged into IN's weights (core/lora/merge.h) before OUT is written as it would be without.
// The formats live in core/io (safetensors.h, hf_gpt2.h, hf_llama_folder.h, checkpoint.h) and
// core/lora (peft_files.h); this file only reads the words.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/io/checkpoint.h"
#include "core/io/hf_gpt2.h"
#include "core/io/hf_llama_folder.h"
#include "core/io/model_file.h"
#include "core/lora/merge.h"
#include "core/lora/peft_files.h"
#include "core/model/parameters.h"
#include "simd/error.h"
#include "tools/llmcpu/args.h"
#include "tools/llmcpu/commands.h"

namespace llmcpu {

namespace fs = std::filesystem;

namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// IN's parameters in one flat fp32 array (ParameterLayout), with the adapter at `adapter_dir`
// merged into them when one is given (its folder read first, so that an adapter that does not fit
// IN is refused before the weights are read); `merged` says what was merged, for the summary line.
struct Parameters {
  std::unique_ptr<float[]> params;
  std::string merged;  // " + adapter DIR (r=4, alpha=8, 14 modules merged)", or empty
};
Parameters load_parameters(const ModelSource& source, const std::string& adapter_dir) {
  const ModelConfig& c = source.config;
  const ParameterLayout layout(c);
  std::optional<LoraAdapter> adapter;
  if (!adapter_dir.empty()) adapter.emplace(read_peft_adapter(adapter_dir, c));
  Parameters out{std::make_unique_for_overwrite<float[]>(layout.total()), ""};
  load_model_parameters(source, out.params.get());
  if (adapter) {
    merge_adapter(out.params.get(), layout, c, *adapter);
    char text[128];
    std::snprintf(text, sizeof text, " (r=%d, alpha=%g, %zu modules merged)", adapter->options().r,
                  adapter->options().lora_alpha(), adapter->modules().size());
    out.merged = " + adapter " + adapter_dir + text;
  }
  return out;
}

TensorDtype safetensors_dtype(const std::string& dtype) {
  if (dtype == "fp32") return TensorDtype::kF32;
  if (dtype == "bf16") return TensorDtype::kBf16;
  if (dtype == "fp16") return TensorDtype::kF16;
  throw UsageError("--dtype " + dtype + ": expected fp32, bf16 or fp16");
}

// A Llama-family folder -> a folder: the weights in `dtype`, config.json over IN's, IN's tokenizer
// files. llm.c's file has no Llama layout.
void convert_llama(const ModelSource& source, const std::string& out, const std::string& dtype,
                   const std::string& adapter) {
  const auto start = std::chrono::steady_clock::now();
  const ModelConfig& c = source.config;
  const std::string ext = fs::path(out).extension().string();
  if (ext == ".bin") {
    throw UsageError("IN " + source.path + " is a " + c.family().name + " model (model_type " +
                     architecture_name(c.architecture) +
                     "), which an llm.c checkpoint (.bin) cannot hold: llm.c's file has "
                     "GPT-2's layout, and llm.c's Llama 3 checkpoint layout is not adopted (the "
                     "Hugging Face folder is the file of the families other than GPT-2); OUT is "
                     "a folder, not " +
                     out);
  }
  if (ext == ".safetensors") {
    throw UsageError("IN " + source.path + " is a " + c.family().name + " model (model_type " +
                     architecture_name(c.architecture) +
                     "), so OUT is a folder (it gets model.safetensors, config.json and the "
                     "tokenizer's files), not " +
                     out);
  }
  const TensorDtype d = safetensors_dtype(dtype);
  const Parameters p = load_parameters(source, adapter);
  const LlamaOrigin origin = llama_origin_of(source);
  save_llama_folder(out, {c, p.params.get()}, d, origin);
  std::printf("convert: %s (%s, %s)%s -> %s (%s, config.json, %zu tokenizer files) in %.2f s\n",
              source.path.c_str(), describe(c).c_str(), source.description.c_str(),
              p.merged.c_str(), out.c_str(), dtype_name(d), origin.tokenizer_files.size(),
              seconds_since(start));
}

// Hugging Face -> llm.c.
void import_hf(const std::string& in, const std::string& out, const std::string& dtype,
               const std::string& config_path, const std::string& adapter) {
  const auto start = std::chrono::steady_clock::now();
  const ModelSource source = open_model_file(in, ModelFormat::kSafetensors, config_path);
  if (!source.config.family().llmc_files) {
    convert_llama(source, out, dtype, adapter);
    return;
  }
  if (is_hf_model(out)) {
    throw UsageError("IN " + in +
                     " is a Hugging Face model, so OUT is an llm.c "
                     "checkpoint (.bin), not " +
                     out);
  }
  int version = kCheckpointFp32;
  if (dtype == "bf16") {
    version = kCheckpointBf16;
  } else if (dtype != "fp32") {
    throw UsageError("--dtype " + dtype +
                     ": an llm.c checkpoint is fp32 (version 3) or bf16 "
                     "(version 5)");
  }
  const ModelConfig& c = source.config;
  const Parameters p = load_parameters(source, adapter);
  save_checkpoint(out, c, p.params.get(), version);
  std::printf("convert: %s (%s, %s)%s -> %s (llm.c checkpoint version %d, Vp=%d) in %.2f s\n",
              in.c_str(), describe(c).c_str(), source.description.c_str(), p.merged.c_str(),
              out.c_str(), version, c.padded_vocab_size, seconds_since(start));
}

// llm.c -> Hugging Face: OUT is a .safetensors file (config.json written beside it) or a folder
// (created if need be) that gets model.safetensors and config.json.
void export_hf(const std::string& in, const std::string& out, const std::string& dtype,
               const std::string& adapter) {
  const auto start = std::chrono::steady_clock::now();
  const TensorDtype d = safetensors_dtype(dtype);
  if (fs::path(out).extension() == ".bin") {
    throw UsageError("IN " + in +
                     " is an llm.c checkpoint, so OUT is a .safetensors "
                     "file or a folder, not " +
                     out);
  }
  const ModelSource source = open_model_file(in, ModelFormat::kLlmc);
  const ModelConfig& c = source.config;
  const Parameters p = load_parameters(source, adapter);
  const float* params = p.params.get();

  std::error_code ec;
  std::string weights = out, config = (fs::path(out).parent_path() / "config.json").string();
  bool created = false;
  if (fs::path(out).extension() != ".safetensors") {
    created = fs::create_directories(out, ec);
    if (ec) throw FileError(out, "cannot create the folder: " + ec.message());
    weights = (fs::path(out) / "model.safetensors").string();
    config = (fs::path(out) / "config.json").string();
  }
  HfSaveReport report;
  try {
    report = save_hf_gpt2(weights, config, c, params, d);
  } catch (...) {
    if (created) fs::remove(out, ec);  // the folder this call made, empty again
    throw;
  }
  if (report.nonzero_padding_rows > 0) {
    std::fprintf(stderr,
                 "convert: warning: %zu of wte's %d padding rows (%d..%d) were not zero; they are "
                 "not written (no token looks them up and no logit of theirs counts, so the "
                 "model's outputs are the same)\n",
                 report.nonzero_padding_rows, c.padded_vocab_size - c.vocab_size, c.vocab_size,
                 c.padded_vocab_size - 1);
  }
  std::printf("convert: %s (%s, %s)%s -> %s + %s (%s, V=%d) in %.2f s\n", in.c_str(),
              describe(c).c_str(), source.description.c_str(), p.merged.c_str(), weights.c_str(),
              config.c_str(), dtype_name(d), c.vocab_size, seconds_since(start));
}

class ConvertCommand : public Command {
 public:
  void add_flags(ArgParser& p) override {
    p.option("dtype", 0, &dtype_, "D",
             "what OUT holds: fp32 (default) or bf16 (llm.c version 5); for safetensors (a "
             "Llama-family folder too) also fp16");
    p.option("config", 0, &config_path_, "PATH",
             "IN's config.json, if not beside it (a Hugging Face IN)");
    p.option("adapter", 0, &adapter_, "DIR",
             "a PEFT LoRA adapter folder for IN (adapter_config.json, adapter_model.safetensors), "
             "merged into IN's weights (W + scaling B A, as PEFT's merge_and_unload) before OUT "
             "is written");
    p.positionals(&files_);
  }
  void check(const ArgParser&) override {
    if (files_.size() != 2) {
      throw UsageError("expected IN and OUT, got " + std::to_string(files_.size()) +
                       " file names (see llmcpu convert --help)");
    }
    if (dtype_ != "fp32" && dtype_ != "bf16" && dtype_ != "fp16") {
      throw UsageError("--dtype " + dtype_ +
                       ": expected fp32, bf16 or fp16 (fp16 for safetensors only)");
    }
    if (!adapter_.empty()) check_adapter(files_[0], files_[1]);
  }
  int run(const ArgParser& p) override;

 private:
  void check_adapter(const std::string& in, const std::string& out) const;

  std::string dtype_ = "fp32", config_path_, adapter_;
  std::vector<std::string> files_;
};

// --adapter names a folder, neither IN nor OUT: OUT written as the adapter's folder or over IN
// would mix with or replace the files the merge reads.
void ConvertCommand::check_adapter(const std::string& in, const std::string& out) const {
  std::error_code ec;
  if (!fs::is_directory(adapter_, ec)) {
    throw UsageError("--adapter " + adapter_ +
                     ": expected a PEFT adapter folder (adapter_config.json and "
                     "adapter_model.safetensors)" +
                     (fs::exists(adapter_, ec) ? ", not a file" : ", and there is none"));
  }
  const auto same = [&](const std::string& a, const std::string& b) {
    std::error_code e;
    return fs::equivalent(a, b, e) && !e;
  };
  if (same(out, adapter_)) {
    throw UsageError("--adapter " + adapter_ + " and OUT " + out +
                     ": OUT would be written into the adapter's folder; name another");
  }
  if (same(in, adapter_)) {
    throw UsageError("--adapter " + adapter_ + " is IN " + in +
                     ": IN is the base model the adapter was trained on");
  }
  if (same(in, out)) {
    throw UsageError("IN and OUT are both " + in +
                     " with --adapter: write the merged model elsewhere (the base stays as it is)");
  }
}

int ConvertCommand::run(const ArgParser&) {
  const std::string& in = files_[0];
  const std::string& out = files_[1];
  std::error_code ec;
  if (!fs::exists(in, ec)) throw FileError(in, "no such file or folder");
  // A folder is a Hugging Face model's (hf_model_paths says what it lacks otherwise).
  if (model_file_format(in) == ModelFormat::kSafetensors || fs::is_directory(in, ec)) {
    import_hf(in, out, dtype_, config_path_, adapter_);
  } else {
    if (!config_path_.empty()) {
      throw UsageError("--config: only for a Hugging Face IN; " + in + " is an llm.c checkpoint");
    }
    export_hf(in, out, dtype_, adapter_);
  }
  return 0;
}

}  // namespace

std::unique_ptr<Command> make_convert_command() { return std::make_unique<ConvertCommand>(); }

}  // namespace llmcpu
