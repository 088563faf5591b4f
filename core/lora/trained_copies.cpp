#include "core/lora/trained_copies.h"

#include <algorithm>
#include <functional>
#include <numeric>

#include "core/io/hf_llama.h"
#include "core/lora/adapter.h"
#include "core/lora/lora_modules.h"
#include "core/model/lora_views.h"
#include "core/model/parameters.h"
#include "simd/error.h"

namespace llmcpu {

namespace {

std::string module_of(const std::string& tensor) { return tensor.substr(0, tensor.rfind('.')); }

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// The element offset of a piece of role `role` in layer `layer` (-1: outside the layers).
size_t offset_in(const ParameterLayout& layout, int role, int layer, size_t within) {
  return (layer < 0 ? 0 : size_t(layer) * layout.layer_size(role)) + within;
}

// Every piece a run may train, in the model's order.
std::vector<TrainedPiece> candidates(const ModelConfig& c) {
  const ParameterLayout layout(c);
  const size_t C = c.channels, V = c.vocab_size;
  std::vector<TrainedPiece> out;
  const auto add = [&](std::string name, int role, int layer, std::vector<size_t> shape) {
    out.push_back({std::move(name), role, offset_in(layout, role, layer, 0), std::move(shape)});
  };
  if (c.family().llmc_files) {  // GPT-2: GPT2LMHeadModel's names
    add("transformer.wte.weight", kWte, -1, {V, C});
    add("transformer.wpe.weight", kWpe, -1, {size_t(c.max_seq_len), C});
    for (int l = 0; l < c.num_layers; ++l) {
      const std::string p = "transformer.h." + std::to_string(l) + ".";
      add(p + "ln_1.weight", kLn1w, l, {C});
      add(p + "ln_1.bias", kLn1b, l, {C});
      add(p + "ln_2.weight", kLn2w, l, {C});
      add(p + "ln_2.bias", kLn2b, l, {C});
    }
    add("transformer.ln_f.weight", kLnfw, -1, {C});
    add("transformer.ln_f.bias", kLnfb, -1, {C});
  } else {
    for (const HfPiece& p : hf_llama_pieces(c)) {
      if (!trainable_copy_role(p.role)) continue;
      out.push_back({p.name, p.role, offset_in(layout, p.role, p.layer, p.offset), p.shape});
    }
  }
  const bool head_listed = std::any_of(out.begin(), out.end(),
                                       [](const TrainedPiece& p) { return p.role == kLmHead; });
  if (!head_listed) add("lm_head.weight", kLmHead, -1, {V, C});  // a tied head is a module too
  return out;
}

// The modules that hold others, and the linear layers: what an entry may not select.
std::vector<std::string> refused_modules(const ModelConfig& c) {
  std::vector<std::string> out;
  const bool gpt2 = c.family().llmc_files;
  const std::string root = gpt2 ? "transformer" : "model";
  out.push_back(root);
  out.push_back(root + (gpt2 ? ".h" : ".layers"));
  for (int l = 0; l < c.num_layers; ++l) {
    const std::string p = root + (gpt2 ? ".h." : ".layers.") + std::to_string(l);
    out.push_back(p);
    out.push_back(p + (gpt2 ? ".attn" : ".self_attn"));
    out.push_back(p + ".mlp");
  }
  for (const LoraModule& m : lora_modules(c)) out.push_back(m.name);
  return out;
}

std::string last_names(const std::vector<TrainedPiece>& pieces) {
  std::vector<std::string> seen;
  for (const TrainedPiece& p : pieces) {
    const std::string m = module_of(p.name);
    const std::string last = m.substr(m.rfind('.') + 1);
    if (std::find(seen.begin(), seen.end(), last) == seen.end()) seen.push_back(last);
  }
  std::string out;
  for (const std::string& s : seen) out += (out.empty() ? "" : ", ") + s;
  return out;
}

}  // namespace

size_t TrainedPiece::count() const {
  return std::accumulate(shape.begin(), shape.end(), size_t(1), std::multiplies<size_t>());
}

std::vector<TrainedPiece> select_trained_pieces(const ModelConfig& c,
                                                const std::vector<std::string>& entries) {
  const std::vector<TrainedPiece> all = candidates(c);
  const std::string valid = " (this model's modules to train: " + last_names(all) + ")";
  std::vector<bool> chosen(all.size(), false);
  for (const std::string& e : entries) {
    for (const std::string& m : refused_modules(c)) {
      if (!ends_with(m, e)) continue;
      throw UsageError(e + ": selects " + m + ", which --lora-train cannot train: it trains "
                       "embeddings, the head and norms" + valid);
    }
    bool any = false;
    for (size_t i = 0; i < all.size(); ++i) {
      if (!ends_with(module_of(all[i].name), e)) continue;
      chosen[i] = true, any = true;
    }
    if (!any) throw UsageError(e + ": selects no module" + valid);
  }
  std::vector<TrainedPiece> out;
  for (size_t i = 0; i < all.size(); ++i) {
    if (!chosen[i]) continue;
    const auto partial = std::find_if(all.begin(), all.end(), [&](const TrainedPiece& p) {
      return p.role == all[i].role && !chosen[size_t(&p - all.data())];
    });
    if (partial != all.end()) {
      throw UsageError("selects " + module_of(all[i].name) + " but not " +
                       module_of(partial->name) + "; llmcpu trains a module in every layer or in "
                       "none" + valid);
    }
    out.push_back(all[i]);
  }
  return out;
}

std::vector<int> trained_roles(const std::vector<TrainedPiece>& pieces) {
  std::vector<int> roles;
  for (const TrainedPiece& p : pieces) roles.push_back(p.role);
  std::sort(roles.begin(), roles.end());
  roles.erase(std::unique(roles.begin(), roles.end()), roles.end());
  return roles;
}

size_t trained_copy_size(const ModelConfig& config, int role) {
  const ParameterLayout layout(config);
  return role == kLmHead && !layout.untied_head() ? layout.size(kWte) : layout.size(role);
}

std::vector<std::string> parse_trained_modules(const std::string& list) {
  return parse_lora_targets(list);
}

}  // namespace llmcpu
