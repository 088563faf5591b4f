// Fuzz target: the command line of each subcommand (tools/llmcpu/args.h, positional_args.h), with
// the flag sets of train, verify, sample, prepare, tokenize and topo, parsed and then validated as
// the command does before it touches a file (cli_checks.h); nothing runs and no file is read. The
// input: byte 0 picks the subcommand, the rest are its words separated by newlines. --config is
// left out (fuzz_run_config reads config files). The flag sets of the commands other than train
// are written again here from tools/llmcpu/cmd_*.cpp, where they are local to each command.
#include <cmath>
#include <string>
#include <string_view>
#include <vector>

#include "core/model/precision.h"
#include "core/verify/verify.h"
#include "tests/fuzz/cli_checks.h"
#include "tests/fuzz/fuzz_util.h"
#include "tools/llmcpu/args.h"
#include "tools/llmcpu/placement_flags.h"
#include "tools/llmcpu/plugin_flags.h"
#include "tools/llmcpu/positional_args.h"
#include "tools/llmcpu/train_flags.h"

namespace llmcpu {
namespace {

constexpr const char* kTarget = "cli";
constexpr size_t kMaxWords = 64;

void train(const std::vector<std::string>& args) {
  TrainOptions o;
  TrainCliExtras x;
  ArgParser p("train", "");
  add_train_flags(p, &o, &x);
  if (!p.parse(args)) return;
  fuzz::check_train_options(kTarget, o);
  fuzz::check_placement(kTarget, x.placement, true);
}

void verify(const std::vector<std::string>& args) {
  std::string model, state, write_state, precision = "fp32";
  PlacementOptions placement;
  PluginFlags plugin;
  VerifyTolerances tol;
  ArgParser p("verify", "");
  p.option("model", 'e', &model, "M.bin", "");
  p.option("state", 's', &state, "S.bin", "");
  p.option("write-state", 0, &write_state, "OUT.bin", "");
  p.option("precision", 0, &precision, "P", "");
  add_placement_flags(p, &placement);
  add_plugin_flags(p, &plugin);
  add_tolerance_flags(p, &tol);
  if (!p.parse(args)) return;
  if (model.empty() || state.empty()) throw UsageError("--model and --state are required");
  parse_precision(precision, "--precision");
  fuzz::check_placement(kTarget, placement, true);
  apply_offload_tolerances(p, /*offloading=*/false, &tol);
  LLMCPU_FUZZ_CHECK(kTarget, tol.logits > 0 && std::isfinite(tol.logits) && tol.grads > 0 &&
                                 std::isfinite(tol.grads),
                    "a tolerance that is not a positive number was accepted");
}

void sample(const std::vector<std::string>& args) {
  std::string model, prompt, tokenizer;
  int tokens = 64, top_k = 0;
  PlacementOptions placement;
  double temperature = 1.0;
  uint64_t seed = 1337;
  ArgParser p("sample", "");
  p.option("model", 'e', &model, "CKPT", "");
  p.option("prompt", 'p', &prompt, "TEXT", "");
  p.option("tokens", 'g', &tokens, "N", "");
  p.option("temperature", 0, &temperature, "T", "");
  p.option("top-k", 0, &top_k, "K", "");
  p.option("seed", 0, &seed, "S", "");
  p.option("tokenizer", 0, &tokenizer, "PATH", "");
  add_placement_flags(p, &placement);
  if (!p.parse(args)) return;
  fuzz::check_finite(kTarget, temperature, "--temperature");
  if (model.empty()) throw UsageError("--model is required");
  if (tokens <= 0 || temperature < 0 || top_k < 0) throw UsageError("bad value");
  fuzz::check_placement(kTarget, placement, true);
}

void prepare(const std::vector<std::string>& args) {
  std::string out_dir, name, tokenizer, inputs_help;
  uint64_t shard_tokens = 100000000, val_tokens = 0;
  ArgParser p("prepare", "");
  p.option("input", 'i', &inputs_help, "FILE...", "");
  p.option("out-dir", 'o', &out_dir, "DIR", "");
  p.option("name", 0, &name, "NAME", "");
  p.option("val-tokens", 0, &val_tokens, "N", "");
  p.option("shard-tokens", 0, &shard_tokens, "N", "");
  p.option("tokenizer", 0, &tokenizer, "PATH", "");
  const SplitArgs split = split_args(
      args, {"--out-dir", "-o", "--name", "--val-tokens", "--shard-tokens", "--tokenizer"},
      {"--input", "-i"});
  size_t words = split.flags.size() + split.plain.size();
  for (const auto& [flag, list] : split.lists) words += list.size();
  LLMCPU_FUZZ_CHECK(kTarget, words <= args.size(), "split_args made up words");
  if (!p.parse(split.flags)) return;
  if (!split.plain.empty()) throw UsageError("unexpected argument");
}

void tokenize(const std::vector<std::string>& args) {
  std::string tokenizer;
  bool decode = false;
  ArgParser p("tokenize", "");
  p.option("tokenizer", 0, &tokenizer, "PATH", "");
  p.flag("decode", 'd', &decode, "");
  const SplitArgs split = split_args(args, {"--tokenizer"});
  if (!p.parse(split.flags)) return;
  if (split.plain.size() > 1 || (!decode && split.plain.empty())) throw UsageError("FILE");
}

void topo(const std::vector<std::string>& args) {
  PlacementOptions o;
  std::string synthetic, xml;
  bool json = false;
  ArgParser p("topo", "");
  p.option("topology", 0, &synthetic, "DESC", "");
  p.option("topology-xml", 0, &xml, "FILE", "");
  add_placement_flags(p, &o, /*with_numa=*/false);
  p.flag("json", 0, &json, "");
  if (!p.parse(args)) return;
  fuzz::check_placement(kTarget, o, false);
}

}  // namespace
}  // namespace llmcpu

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace llmcpu;
  if (size == 0) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  std::vector<std::string> args;
  for (size_t pos = 0; pos <= text.size() && args.size() < kMaxWords;) {
    const size_t end = std::min(text.find('\n', pos), text.size());
    std::string word(text.substr(pos, end - pos));
    pos = end + 1;
    if (word == "--config" || word.rfind("--config=", 0) == 0) continue;
    args.push_back(std::move(word));
  }
  void (*const commands[])(const std::vector<std::string>&) = {train, verify, sample,
                                                               prepare, tokenize, topo};
  fuzz::accepts([&] { commands[data[0] % 6](args); });
  return 0;
}
