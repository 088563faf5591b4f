#include "core/train/trainer.h"

#include <chrono>
#include <cstring>
#include <filesystem>
#include <vector>

#include "core/io/checkpoint.h"
#include "core/model/preset.h"
#include "core/util/error.h"

namespace llmcpu {

namespace fs = std::filesystem;

std::unique_ptr<Gpt2> make_model(const std::string& spec, uint64_t seed, std::string* origin) {
  if (spec.empty()) throw UsageError("--model: required (a checkpoint file or a preset name)");
  std::error_code ec;
  const bool is_file = fs::is_regular_file(spec, ec);
  if (is_file && fs::path(spec).extension() != ".toml") {
    const CheckpointInfo info = read_checkpoint_header(spec);
    auto model = std::make_unique<Gpt2>(info.config);
    load_checkpoint(spec, *model);
    if (origin) *origin = "checkpoint " + spec + " (version " + std::to_string(info.version) + ")";
    return model;
  }
  std::string preset = is_file ? spec : find_conf_file("models", spec);
  if (preset.empty()) {
    throw UsageError("--model " + spec + ": no such checkpoint file, and no preset conf/models/" +
                     spec + ".toml (try gpt2-d2, gpt2-d4, gpt2-d6, gpt2-124m)");
  }
  auto model = std::make_unique<Gpt2>(load_model_preset(preset));
  init_gpt2(*model, seed);
  if (origin) *origin = "preset " + preset + ", GPT-2 initialisation, seed " + std::to_string(seed);
  return model;
}

namespace {

void check_options(const TrainOptions& o) {
  auto require = [](bool ok, const std::string& message) {
    if (!ok) throw UsageError(message);
  };
  require(!o.train_data.empty(), "--train-data: required (an llm.c token shard)");
  require(o.batch > 0, "--batch: must be positive, got " + std::to_string(o.batch));
  require(o.seq_len > 0, "--seq-len: must be positive, got " + std::to_string(o.seq_len));
  require(o.steps >= 0, "--steps: must not be negative, got " + std::to_string(o.steps));
  require(o.lr >= 0, "--lr: must not be negative");
  require(o.weight_decay >= 0, "--weight-decay: must not be negative");
  require(o.warmup >= 0, "--warmup: must not be negative");
  require(o.lr_floor >= 0 && o.lr_floor <= 1, "--lr-floor: must be a fraction in 0..1");
  require(o.grad_clip >= 0, "--grad-clip: must not be negative (0 turns clipping off)");
}

}  // namespace

Trainer::Trainer(const TrainOptions& options)
    : opt_(options),
      schedule_((check_options(options), parse_lr_schedule(options.lr_schedule, "--lr-schedule")),
                options.lr, options.warmup, options.steps, options.lr_floor) {
  model_ = make_model(opt_.model, opt_.seed, &origin_);
  const ModelConfig& c = model_->config();
  if (opt_.seq_len > c.max_seq_len) {
    throw UsageError("--seq-len " + std::to_string(opt_.seq_len) + " exceeds the model's maxT " +
                     std::to_string(c.max_seq_len));
  }
  model_->plan_batch(opt_.batch, opt_.seq_len);
  data_ = std::make_unique<DataLoader>(opt_.train_data, opt_.batch, opt_.seq_len, c.vocab_size,
                                       opt_.shuffle, opt_.seed);
  AdamWConfig adamw;
  adamw.weight_decay = opt_.weight_decay;
  optimizer_ = std::make_unique<AdamW>(model_->num_parameters(), adamw, model_->kernels());
  if (!opt_.log_path.empty()) {
    log_ = std::fopen(opt_.log_path.c_str(), "w");
    if (!log_) throw FileError(opt_.log_path, std::string("cannot open log: ") + std::strerror(errno));
  }
}

Trainer::~Trainer() {
  if (log_) std::fclose(log_);
}

void Trainer::run(const std::function<void(const StepReport&)>& on_step) {
  const size_t BT = (size_t)opt_.batch * opt_.seq_len;
  std::vector<int> inputs(BT), targets(BT);
  Gpt2& m = *model_;
  for (int step = 0; step < opt_.steps; ++step) {
    const auto start = std::chrono::steady_clock::now();
    data_->next_batch(inputs.data(), targets.data());
    const float loss = m.forward(inputs.data(), targets.data(), opt_.batch, opt_.seq_len);
    m.zero_grad();
    m.backward();
    const double norm = global_norm(m.grads_flat(), m.num_parameters(), m.kernels());
    clip_to_norm(m.grads_flat(), m.num_parameters(), norm, opt_.grad_clip, m.kernels());
    const double lr = schedule_.at(step);
    optimizer_->step(m.params_flat(), m.grads_flat(), lr);
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    if (log_) {
      std::fprintf(log_, "s:%d trl:%f\n", step, loss);
      std::fflush(log_);
    }
    on_step({step, opt_.steps, loss, lr, norm, ms, double(BT) / (ms / 1000.0)});
  }
  if (!opt_.save_path.empty()) save_checkpoint(opt_.save_path, m);
}

}  // namespace llmcpu
