// Fuzz target: TOML run configs, as `llmcpu train --config FILE` reads them (core/util/toml_file.h,
// tools/llmcpu/args.h with train's flag table from tools/llmcpu/train_flags.cpp, whose
// resolve_run_config takes the file's path). The input is the file. A config that is accepted is
// then checked as train checks its options before it reads any data (cli_checks.h); nothing is
// trained and no other file is read.
#include "tests/fuzz/cli_checks.h"
#include "tests/fuzz/fuzz_util.h"
#include "tools/llmcpu/args.h"
#include "tools/llmcpu/train_flags.h"

namespace {
constexpr const char* kTarget = "run_config";
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace llmcpu;
  const std::string path = fuzz::write_file("run.toml", data, size);
  TrainOptions o;
  TrainCliExtras x;
  ArgParser p("train", "");
  add_train_flags(p, &o, &x);
  if (!fuzz::accepts([&] { p.parse({"--config", path}); })) return 0;
  LLMCPU_FUZZ_CHECK(kTarget, p.given("config"), "--config was not marked as given");
  fuzz::check_finite(kTarget, o.lr, "lr");
  fuzz::check_finite(kTarget, o.weight_decay, "weight_decay");
  fuzz::check_finite(kTarget, o.lr_floor, "lr_floor");
  fuzz::check_finite(kTarget, o.grad_clip, "grad_clip");
  fuzz::accepts([&] {
    apply_train_flags(x, &o);
    fuzz::check_train_options(kTarget, o);
  });
  fuzz::accepts([&] { fuzz::check_placement(kTarget, x.placement, true); });
  // A flag after the file overrides its key.
  TrainOptions o2;
  TrainCliExtras x2;
  ArgParser p2("train", "");
  add_train_flags(p2, &o2, &x2);
  if (fuzz::accepts([&] { p2.parse({"--config=" + path, "--steps", "7"}); })) {
    LLMCPU_FUZZ_CHECK(kTarget, o2.steps == 7, "a flag did not override the config file");
  }
  return 0;
}
