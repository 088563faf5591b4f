// The training loop: model from a checkpoint or a preset, batches from a shard, forward, backward,
// optional global-norm clipping, AdamW with a learning-rate schedule; a report per step and llm.c's
// log lines. The command-line flags map one to one onto TrainOptions.
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>

#include "core/model/gpt2.h"
#include "core/optim/adamw.h"
#include "core/train/data_loader.h"
#include "core/train/lr_schedule.h"

namespace llmcpu {

struct TrainOptions {
  std::string model;       // an llm.c checkpoint file, a preset file (.toml) or a preset name
  std::string train_data;  // a token shard
  int batch = 4;           // B
  int seq_len = 64;        // T
  int steps = 10;
  double lr = 3e-4;
  double weight_decay = 0.0;
  std::string lr_schedule = "constant";
  int warmup = 0;
  double lr_floor = 0.0;   // cosine decays to lr * lr_floor
  double grad_clip = 0.0;  // 0: off
  uint64_t seed = 1337;
  bool shuffle = true;
  std::string log_path;   // llm.c log lines (s:STEP trl:LOSS)
  std::string save_path;  // checkpoint written at the end
};

struct StepReport {
  int step;  // 0-based
  int steps;
  float loss;
  double lr;
  double grad_norm;
  double ms;
  double tokens_per_second;
};

// Builds a model from `spec`: an existing checkpoint file, a preset file (*.toml), or the name of a
// preset in conf/models/ (initialised with init_gpt2(seed)). `origin` receives a line saying which.
std::unique_ptr<Gpt2> make_model(const std::string& spec, uint64_t seed, std::string* origin);

class Trainer {
 public:
  // Validates the options (UsageError naming the flag), loads the model and the data.
  explicit Trainer(const TrainOptions& options);
  ~Trainer();

  // Runs options.steps steps, calling on_step after each.
  void run(const std::function<void(const StepReport&)>& on_step);

  Gpt2& model() { return *model_; }
  const std::string& model_origin() const { return origin_; }

 private:
  TrainOptions opt_;
  std::unique_ptr<Gpt2> model_;
  std::string origin_;
  std::unique_ptr<DataLoader> data_;
  std::unique_ptr<AdamW> optimizer_;
  LrSchedule schedule_;
  std::FILE* log_ = nullptr;
};

}  // namespace llmcpu
