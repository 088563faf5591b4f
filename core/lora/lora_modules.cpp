#include "core/lora/lora_modules.h"

#include <algorithm>

#include "core/io/hf_llama.h"
#include "core/model/parameters.h"
#include "simd/error.h"

namespace llmcpu {

namespace {

bool is_matmul(int role) {
  return role == kQkvw || role == kAttprojw || role == kFcw || role == kFcprojw;
}

// GPT-2's Conv1D modules: c_attn (3C out), attn.c_proj, mlp.c_fc (4C out), mlp.c_proj.
std::vector<LoraModule> gpt2_modules(const ModelConfig& c) {
  const size_t C = c.channels, F = size_t(c.fc_width());
  std::vector<LoraModule> out;
  for (int l = 0; l < c.num_layers; ++l) {
    const std::string p = "transformer.h." + std::to_string(l) + ".";
    out.push_back({p + "attn.c_attn", l, kQkvw, 0, size_t(c.qkv_width()), C});
    out.push_back({p + "attn.c_proj", l, kAttprojw, 0, C, size_t(c.attn_width())});
    out.push_back({p + "mlp.c_fc", l, kFcw, 0, F, C});
    out.push_back({p + "mlp.c_proj", l, kFcprojw, 0, C, F});
  }
  return out;
}

bool selects(const std::string& target, const std::string& module) {
  if (module == target) return true;
  return module.size() > target.size() &&
         module.compare(module.size() - target.size(), target.size(), target) == 0 &&
         module[module.size() - target.size() - 1] == '.';
}

// The modules' last names, in the model's order ("q_proj, k_proj, ...").
std::string last_names(const std::vector<LoraModule>& modules) {
  std::vector<std::string> seen;
  for (const LoraModule& m : modules) {
    const std::string last = m.name.substr(m.name.rfind('.') + 1);
    if (std::find(seen.begin(), seen.end(), last) == seen.end()) seen.push_back(last);
  }
  std::string out;
  for (const std::string& s : seen) out += (out.empty() ? "" : ", ") + s;
  return out;
}

}  // namespace

std::vector<LoraModule> lora_modules(const ModelConfig& c) {
  if (c.family().llmc_files) return gpt2_modules(c);
  std::vector<LoraModule> out;
  for (const HfPiece& p : hf_llama_pieces(c)) {
    if (!is_matmul(p.role)) continue;
    const std::string suffix = ".weight";
    const std::string name = p.name.substr(0, p.name.size() - suffix.size());
    const size_t rows = p.shape[0], in = p.shape[1];
    out.push_back({name, p.layer, p.role, p.offset / in, rows, in});
  }
  return out;
}

std::vector<LoraModule> select_lora_modules(const ModelConfig& c,
                                            const std::vector<std::string>& targets) {
  const std::vector<LoraModule> all = lora_modules(c);
  if (targets.size() == 1 && targets[0] == "all-linear") return all;
  std::vector<bool> chosen(all.size(), false);
  for (const std::string& t : targets) {
    bool any = false;
    for (size_t i = 0; i < all.size(); ++i) {
      if (!selects(t, all[i].name)) continue;
      chosen[i] = true;
      any = true;
    }
    if (!any) {
      throw UsageError("LoRA target '" + t + "' names no linear map of this " +
                       c.family().name + " model: its targets are all-linear or " +
                       last_names(all) + " (or their full module names, e.g. " + all[0].name +
                       ")");
    }
  }
  std::vector<LoraModule> out;
  for (size_t i = 0; i < all.size(); ++i)
    if (chosen[i]) out.push_back(all[i]);
  return out;
}

std::string peft_tensor_name(const LoraModule& m, char which) {
  return "base_model.model." + m.name + ".lora_" + std::string(1, which) + ".weight";
}

}  // namespace llmcpu
