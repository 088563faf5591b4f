// Where the tests find the committed PyTorch fixtures and the llmcpu program, and the training run
// each fixture's reference losses come from.
#pragma once

#include <fstream>
#include <string>
#include <vector>

#include "core/train/trainer.h"

namespace llmcpu::testing {

inline std::string fixture(const std::string& name, const std::string& suffix) {
  return std::string(LLMCPU_FIXTURE_DIR) + "/" + name + "_" + suffix;
}

struct FixtureShape {
  const char* name;
  int B, T;
};

// The committed fixtures (tests/fixtures/make_fixtures.sh) and the batch shape each was made with.
inline constexpr FixtureShape kFixtures[] = {{"tiny", 2, 13}, {"small", 3, 32}, {"edge", 1, 7}};

// PyTorch's losses of 10 AdamW steps on a fixture (NAME_losses.txt; empty when missing).
inline std::vector<double> reference_losses(const std::string& name) {
  std::vector<double> r;
  std::ifstream in(fixture(name, "losses.txt"));
  for (double v; in >> v;) r.push_back(v);
  return r;
}

// The run make_fixture.py recorded them with: lr 1e-3, weight decay 0.01, the shard in order.
inline TrainOptions reference_run_options(const FixtureShape& f) {
  TrainOptions o;
  o.model = fixture(f.name, "model.bin");
  o.train_data = fixture(f.name, "train.bin");
  o.batch = f.B;
  o.seq_len = f.T;
  o.steps = 10;
  o.lr = 1e-3;
  o.weight_decay = 0.01;
  o.shuffle = false;
  return o;
}

}  // namespace llmcpu::testing
