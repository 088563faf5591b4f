#include "core/lora/peft_files.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "core/io/json_file.h"
#include "core/util/file.h"
#include "simd/error.h"

namespace llmcpu {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// A dotted name's suffixes, shortest first: "a.b.c" -> "c", "b.c", "a.b.c".
std::vector<std::string> suffixes(const std::string& name) {
  std::vector<std::string> out;
  for (size_t dot = name.size(); dot != std::string::npos && dot > 0;) {
    dot = name.rfind('.', dot - 1);
    out.push_back(dot == std::string::npos ? name : name.substr(dot + 1));
  }
  return out;
}

bool ends_with_part(const std::string& name, const std::string& part) {
  return name.size() > part.size() &&
         name.compare(name.size() - part.size(), part.size(), part) == 0 &&
         name[name.size() - part.size() - 1] == '.';
}

// For each target (in the order of their suffix lists), its shortest suffix that is no other
// module's suffix, unless a suffix taken already covers it.
std::set<std::string> minimal_suffixes(const std::set<std::string>& targets,
                                       const std::vector<std::string>& others) {
  std::set<std::string> taken_by_others;
  for (const std::string& o : others) {
    for (const std::string& s : suffixes(o)) taken_by_others.insert(s);
  }
  std::vector<std::pair<std::vector<std::string>, std::string>> items;
  for (const std::string& t : targets) items.push_back({suffixes(t), t});
  std::sort(items.begin(), items.end());
  std::set<std::string> required;
  for (const auto& entry : items) {
    const std::string& item = entry.second;  // (a lambda cannot capture a structured binding)
    for (const std::string& s : entry.first) {
      if (required.count(s) || taken_by_others.count(s)) continue;
      const bool covered = std::any_of(required.begin(), required.end(), [&](const std::string& r) {
        return ends_with_part(item, r);
      });
      if (!covered) required.insert(s);
      break;
    }
  }
  return required;
}

constexpr size_t kMinTargetModulesForOptimization = 20;  // PEFT's

json number(double v) {
  if (std::floor(v) == v && std::fabs(v) < 1e15) return json(static_cast<long long>(v));
  return json(v);
}

const json* key(const json& j, const char* name) {
  auto it = j.find(name);
  return it == j.end() ? nullptr : &*it;
}

}  // namespace

std::vector<std::string> saved_target_modules(const ModelConfig& config,
                                              const std::vector<std::string>& targets) {
  const std::vector<LoraModule> all = lora_modules(config);
  const std::vector<LoraModule> chosen = select_lora_modules(config, targets);
  std::set<std::string> saved;
  const bool all_linear = targets.size() == 1 && targets[0] == "all-linear";
  if (all_linear) {
    for (const LoraModule& m : all) saved.insert(m.name);
  } else {
    saved.insert(targets.begin(), targets.end());
  }
  if (saved.size() >= kMinTargetModulesForOptimization) {
    std::vector<std::string> rest;
    for (const LoraModule& m : all) {
      const bool in = std::any_of(chosen.begin(), chosen.end(),
                                  [&](const LoraModule& c) { return c.name == m.name; });
      if (!in) rest.push_back(m.name);
    }
    const std::set<std::string> smaller = minimal_suffixes(saved, rest);
    if (smaller.size() < saved.size()) saved = smaller;
  }
  return {saved.begin(), saved.end()};
}

std::string adapter_config_text(const ModelConfig& config, const PeftAdapterConfig& a) {
  const LoraOptions& o = a.options;
  json j = json::object();
  j["alpha_pattern"] = json::object();
  j["auto_mapping"] = nullptr;
  j["base_model_name_or_path"] = a.base_model_name_or_path;
  j["bias"] = "none";
  j["corda_config"] = nullptr;
  j["eva_config"] = nullptr;
  j["exclude_modules"] = nullptr;
  j["fan_in_fan_out"] = config.family().llmc_files;  // GPT-2's Conv1D layers
  j["inference_mode"] = true;
  j["init_lora_weights"] = a.init_lora_weights;
  j["layer_replication"] = nullptr;
  j["layers_pattern"] = nullptr;
  j["layers_to_transform"] = nullptr;
  j["loftq_config"] = json::object();
  j["lora_alpha"] = number(o.lora_alpha());
  j["lora_bias"] = false;
  j["lora_dropout"] = double(o.dropout);
  j["megatron_config"] = nullptr;
  j["megatron_core"] = "megatron.core";
  j["modules_to_save"] = o.train.empty() ? json(nullptr) : json(o.train);
  j["peft_type"] = "LORA";
  j["qalora_group_size"] = 16;
  j["r"] = o.r;
  j["rank_pattern"] = json::object();
  j["revision"] = nullptr;
  j["target_modules"] = saved_target_modules(config, o.targets);
  j["target_parameters"] = nullptr;
  j["task_type"] = "CAUSAL_LM";
  j["trainable_token_indices"] = nullptr;
  j["use_dora"] = false;
  j["use_qalora"] = false;
  j["use_rslora"] = o.rslora;
  return j.dump(2, ' ', true);
}

namespace {

[[noreturn]] void refuse(const std::string& path, const std::string& what) {
  throw FileError(path, what);
}

// The keys whose non-default values change what the adapter computes, which llmcpu does not model.
void refuse_unsupported(const json& j, const std::string& path) {
  const json* type = key(j, "peft_type");
  if (!type || *type != "LORA") {
    refuse(path, "peft_type is " + (type ? type->dump() : std::string("missing")) +
                     ", expected \"LORA\" (llmcpu reads LoRA adapters)");
  }
  if (const json* t = key(j, "task_type"); t && !t->is_null() && *t != "CAUSAL_LM") {
    refuse(path, "task_type is " + t->dump() + ", expected \"CAUSAL_LM\"");
  }
  const auto must_be = [&](const char* name, const json& dflt, const char* why) {
    const json* v = key(j, name);
    if (!v || v->is_null() || *v == dflt || ((v->is_array() || v->is_object()) && v->empty())) {
      return;
    }
    refuse(path, std::string(name) + " is " + v->dump() + ": " + why + " is not supported");
  };
  must_be("use_dora", false, "DoRA");
  must_be("rank_pattern", json::object(), "a rank per module (rank_pattern)");
  must_be("alpha_pattern", json::object(), "an alpha per module (alpha_pattern)");
  must_be("layers_to_transform", nullptr, "adapting some layers only (layers_to_transform)");
  must_be("lora_bias", false, "a bias on lora_B (lora_bias)");
  must_be("bias", "none", "training the base's biases (bias)");
  must_be("exclude_modules", nullptr, "exclude_modules");
  must_be("layer_replication", nullptr, "layer_replication");
  must_be("trainable_token_indices", nullptr, "trainable_token_indices");
  must_be("use_qalora", false, "QALoRA");
  must_be("target_parameters", nullptr, "adapters on parameters (target_parameters)");
}

std::vector<std::string> read_targets(const json& j, const std::string& path) {
  const json* targets = key(j, "target_modules");
  if (!targets) refuse(path, "target_modules is missing");
  if (targets->is_string()) {
    if (*targets != "all-linear") {
      refuse(path, "target_modules is the string " + targets->dump() +
                       ": a regular expression, which llmcpu does not match; list the module "
                       "names");
    }
    return {"all-linear"};
  }
  if (!targets->is_array() || targets->empty()) {
    refuse(path, "target_modules is " + targets->dump() + ", expected a list of module names");
  }
  std::vector<std::string> out;
  for (const json& t : *targets) {
    if (!t.is_string()) refuse(path, "target_modules holds " + t.dump() + ", expected names");
    out.push_back(t.get<std::string>());
  }
  return out;
}

PeftAdapterConfig parse_config(const json& j, const std::string& path) {
  if (!j.is_object()) refuse(path, "expected a JSON object");
  refuse_unsupported(j, path);
  PeftAdapterConfig out;
  const json* r = key(j, "r");
  if (!r || !r->is_number_integer() || r->get<long long>() <= 0 || r->get<long long>() > 65536) {
    refuse(path, "r is " + (r ? r->dump() : std::string("missing")) +
                     ", expected a positive integer");
  }
  out.options.r = r->get<int>();
  const json* alpha = key(j, "lora_alpha");
  if (!alpha || !alpha->is_number() || alpha->get<double>() <= 0) {
    refuse(path, "lora_alpha is " + (alpha ? alpha->dump() : std::string("missing")) +
                     ", expected a positive number");
  }
  out.options.alpha = alpha->get<double>();
  out.options.targets = read_targets(j, path);
  if (const json* m = key(j, "modules_to_save"); m && !m->is_null()) {
    if (!m->is_array()) refuse(path, "modules_to_save is " + m->dump() + ", expected a list");
    for (const json& e : *m) {
      if (!e.is_string() || e.get<std::string>().empty()) {
        refuse(path, "modules_to_save holds " + e.dump() + ", expected module names");
      }
      out.options.train.push_back(e.get<std::string>());
    }
  }
  if (const json* d = key(j, "lora_dropout"); d && !d->is_null()) {
    if (!d->is_number() || d->get<double>() < 0 || d->get<double>() >= 1) {
      refuse(path, "lora_dropout is " + d->dump() + ", expected a number in [0, 1)");
    }
    out.options.dropout = d->get<double>();
  }
  if (const json* rs = key(j, "use_rslora"); rs && !rs->is_null()) {
    if (!rs->is_boolean()) refuse(path, "use_rslora is " + rs->dump() + ", expected true or false");
    out.options.rslora = rs->get<bool>();
  }
  if (const json* b = key(j, "base_model_name_or_path"); b && b->is_string()) {
    out.base_model_name_or_path = b->get<std::string>();
  }
  if (const json* init = key(j, "init_lora_weights"); init && init->is_boolean()) {
    out.init_lora_weights = init->get<bool>();
  }
  return out;
}

}  // namespace

PeftAdapterConfig read_adapter_config(const std::string& dir) {
  const std::string path = (fs::path(dir) / "adapter_config.json").string();
  if (!fs::exists(path)) {
    throw FileError(path, "no adapter_config.json: --adapter takes a PEFT adapter folder (" +
                              dir + ")");
  }
  return parse_config(read_json_file(path), path);
}

PeftAdapterConfig parse_adapter_config(const std::string& text, const std::string& where) {
  const json j = json::parse(text, nullptr, false);
  if (j.is_discarded()) throw FileError(where, "the adapter's config is not JSON");
  return parse_config(j, where);
}

LoraAdapter read_peft_adapter(const std::string& dir, const ModelConfig& config,
                              PeftAdapterConfig* read_config) {
  PeftAdapterConfig c = read_adapter_config(dir);
  const std::string path = (fs::path(dir) / "adapter_model.safetensors").string();
  if (!fs::exists(path)) {
    const bool pickle = fs::exists(fs::path(dir) / "adapter_model.bin");
    throw FileError(path, pickle ? "missing; the folder has adapter_model.bin, a pickle, which "
                                   "llmcpu does not read (save with safe_serialization=True)"
                                 : "missing: a PEFT adapter folder holds its tensors there");
  }
  const std::string config_path = (fs::path(dir) / "adapter_config.json").string();
  try {
    select_trained_pieces(config, c.options.train);
  } catch (const UsageError& e) {
    throw FileError(config_path, std::string("modules_to_save: ") + e.what());
  }
  LoraAdapter adapter = [&] {
    try {
      return LoraAdapter(config, c.options);
    } catch (const UsageError& e) {
      throw FileError(config_path, std::string("target_modules: ") + e.what());
    }
  }();
  const SafetensorsFile file(path);
  std::set<std::string> expected;
  const size_t r = size_t(c.options.r);
  for (size_t i = 0; i < adapter.modules().size(); ++i) {
    const LoraModule& m = adapter.modules()[i];
    for (const char which : {'A', 'B'}) {
      const std::string name = peft_tensor_name(m, which);
      expected.insert(name);
      const SafeTensor* t = file.find(name);
      if (!t) {
        throw FileError(path, "no tensor " + name + ": target_modules selects " + m.name +
                                  " of the base model");
      }
      const std::vector<size_t> want =
          which == 'A' ? std::vector<size_t>{r, m.in} : std::vector<size_t>{m.rows, r};
      if (t->shape != want || t->dtype == TensorDtype::kI32) {
        throw FileError(path, name + " is " + t->shape_string() + " " + dtype_name(t->dtype) +
                                  ", expected (" + std::to_string(want[0]) + ", " +
                                  std::to_string(want[1]) +
                                  ") floats (r = " + std::to_string(r) + " and the base's " +
                                  m.name + ")");
      }
      float* dst = adapter.params() + (which == 'A' ? adapter.a_offset(i) : adapter.b_offset(i));
      tensor_to_f32(*t, dst);
      if (t->dtype != TensorDtype::kF64) c.dtype = t->dtype;  // written back as it came
    }
  }
  for (const TrainedPiece& p : adapter.pieces()) {
    const std::string name = "base_model.model." + p.name;
    expected.insert(name);
    const SafeTensor* t = file.find(name);
    if (!t) {
      throw FileError(path, "no tensor " + name + ": modules_to_save selects " +
                                p.name.substr(0, p.name.rfind('.')) + " of the base model");
    }
    if (t->shape != p.shape || t->dtype == TensorDtype::kI32) {
      std::string want;
      for (size_t d : p.shape) want += (want.empty() ? "" : ", ") + std::to_string(d);
      throw FileError(path, name + " is " + t->shape_string() + " " + dtype_name(t->dtype) +
                                ", expected (" + want + ") floats (the base's)");
    }
    tensor_to_f32(*t, adapter.params() + adapter.copy_offset(p.role) + p.offset);
    if (t->dtype != TensorDtype::kF64) c.copies_dtype = t->dtype;
  }
  for (const SafeTensor& t : file.tensors()) {
    if (!expected.count(t.name)) {
      throw FileError(path, "unexpected tensor " + t.name +
                                ": not the lora_A or lora_B of a module target_modules selects, "
                                "nor a tensor of a module modules_to_save selects");
    }
  }
  if (read_config) *read_config = c;
  return adapter;
}

void write_peft_adapter(const std::string& dir, const ModelConfig& config,
                        const LoraAdapter& adapter, const PeftAdapterConfig& saved,
                        const char* fault_point) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw FileError(dir, "cannot create the adapter folder: " + ec.message());
  std::vector<TensorToWrite> tensors;
  const size_t r = size_t(adapter.options().r);
  for (size_t i = 0; i < adapter.modules().size(); ++i) {
    const LoraModule& m = adapter.modules()[i];
    tensors.push_back({peft_tensor_name(m, 'A'), {r, m.in}, adapter.params() + adapter.a_offset(i)});
    tensors.push_back(
        {peft_tensor_name(m, 'B'), {m.rows, r}, adapter.params() + adapter.b_offset(i)});
  }
  for (const TrainedPiece& p : adapter.pieces()) {
    tensors.push_back({"base_model.model." + p.name, p.shape,
                       adapter.params() + adapter.copy_offset(p.role) + p.offset, nullptr,
                       saved.copies_dtype});
  }
  AtomicFileWriter weights((fs::path(dir) / "adapter_model.safetensors").string(), fault_point);
  write_safetensors(weights, tensors, saved.dtype, {{"format", "pt"}});
  PeftAdapterConfig c = saved;
  c.options = adapter.options();
  const std::string text = adapter_config_text(config, c);
  AtomicFileWriter json_file((fs::path(dir) / "adapter_config.json").string());
  json_file.write(text.data(), text.size());
  weights.finish();
  json_file.finish();
  weights.publish();
  json_file.publish();
}

}  // namespace llmcpu
