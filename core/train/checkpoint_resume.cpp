// Reading a checkpoint back (CheckpointStore's other half, core/train/checkpoint_store.h): the
// newest sound one, its checks against the options, and its weights and moments into a model and
// an optimizer of this run's shape and ranks.
#include <filesystem>
#include <limits>

#include "core/comm/zero_shards.h"
#include "core/train/checkpoint_store.h"
#include "simd/error.h"

namespace llmcpu {

ResumePoint open_resume_point(const std::string& dir, std::vector<std::string>* notes) {
  const std::vector<int64_t> steps = list_checkpoints(dir);
  if (steps.empty()) {
    throw UsageError(
        "--resume " + dir + ": no checkpoint there (expected model_NNNNNNNN.bin, or " +
        "model_NNNNNNNN.safetensors for a Llama-family model, or a LoRA run's folder " +
        "adapter_NNNNNNNN, and state_NNNNNNNN.bin)");
  }
  // The newest checkpoint whose files are sound: a truncated file or a checksum that does not match
  // (a disk that failed, a copy cut short) is skipped, said so and left where it is.
  ResumePoint point;
  point.dir = dir;
  for (auto it = steps.rbegin(); it != steps.rend() && !point.files; ++it) {
    try {
      point.files = open_checkpoint(dir, *it);  // checks every file in full
      point.step = *it;
    } catch (const FileError& e) {
      notes->push_back("resume: skipping the checkpoint of step " + std::to_string(*it) + ": " +
                       e.what() + " (its files are left in place)");
    }
  }
  if (!point.files) {
    std::string why;
    for (const std::string& note : *notes) why += "\n  " + note;
    throw UsageError("--resume " + dir + ": none of its " + std::to_string(steps.size()) +
                     " checkpoints is sound:" + why);
  }
  return point;
}

void check_resume_matches(const ResumePoint& point, const TrainOptions& o, int ranks) {
  const std::string& dir = point.dir;
  const TrainState& s = point.state();
  auto mismatch = [&](const char* flag, long long saved, long long now) {
    if (saved != now) {
      throw UsageError("--resume " + dir + ": the run was saved with " + flag + " " +
                       std::to_string(saved) + ", now " + std::to_string(now) +
                       "; exact resume needs the same value");
    }
  };
  mismatch("--batch", s.B, o.batch);
  mismatch("--seq-len", s.T, o.seq_len);
  mismatch("micro-batches per step (--total-batch / (B*T))", s.grad_accum,
           micro_batches_per_step(o, ranks));
  if (s.shuffle != o.shuffle) {
    throw UsageError(
        "--resume " + dir + ": the run was saved " +
        (s.shuffle ? "with shuffling, now --no-shuffle" : "with --no-shuffle, now shuffling"));
  }
  if (s.seed != o.seed) mismatch("--seed", (long long)s.seed, (long long)o.seed);
  if (s.precision != o.precision) {
    // Refused rather than converted: resume promises the run it interrupted, bit for bit. A bf16
    // run's fp32 master weights live on in its state; to go on in another precision, start a new
    // run from the model file (bf16-rounded weights, fresh AdamW moments).
    throw UsageError("--resume " + dir + ": the run was saved with --precision " +
                     precision_name(s.precision) + ", now " + precision_name(o.precision) +
                     "; exact resume needs the same precision (or start a new run with --model " +
                     find_checkpoint_model(dir, point.step) + ")");
  }
  if (s.step > std::numeric_limits<int>::max()) {
    // The file counts steps in 64 bits, this trainer (and --steps) in int: refused, not wrapped.
    throw UsageError("--resume " + dir + ": the checkpoint is at step " + std::to_string(s.step) +
                     ", past the last step --steps can name (" +
                     std::to_string(std::numeric_limits<int>::max()) + ")");
  }
}

std::string resume_origin(const ResumePoint& point) {
  const TrainState& s = point.state();
  std::string origin = "resumed from " + checkpoint_state_path(point.dir, point.step) +
                       " at step " + std::to_string(int(s.step));
  if (s.shards() > 0) origin += " (" + std::to_string(s.shards()) + " ZeRO-1 shards)";
  return origin;
}

void load_weights(const CheckpointFiles& files, Model& model) {
  const std::vector<ParameterSpan> spans = model.layout().spans();
  float* params = model.params_flat();
  for (int k = 0; k < files.sources(); ++k) {
    repack(spans, files.tensor(k, 0), k, files.sources(), params, 0, 1);
  }
}

void load_moments(const CheckpointFiles& files, const std::vector<ParameterSpan>& spans, int rank,
                  int ranks, AdamW& adamw) {
  for (int k = 0; k < files.sources(); ++k) {
    repack(spans, files.tensor(k, 1), k, files.sources(), adamw.m(), rank, ranks);
    repack(spans, files.tensor(k, 2), k, files.sources(), adamw.v(), rank, ranks);
  }
  adamw.set_steps_taken(files.state->state().adamw_t);
}

LoraAdapter described_adapter(const TrainStateFile& state, PeftAdapterConfig* saved) {
  const TrainState& s = state.state();
  const std::string& path = state.path();
  const PeftAdapterConfig c = parse_adapter_config(s.adapter, path + " (its adapter)");
  LoraAdapter adapter = [&] {
    try {
      return LoraAdapter(s.config, c.options);
    } catch (const UsageError& e) {
      throw FileError(path, std::string("its adapter does not fit its model: ") + e.what());
    }
  }();
  if (adapter.size() != s.adapter_parameters) {
    throw FileError(path, "holds " + std::to_string(s.adapter_parameters) +
                              " adapter parameters, but its adapter has " +
                              std::to_string(adapter.size()));
  }
  if (saved) *saved = c;
  return adapter;
}

LoraAdapter load_adapter(const CheckpointFiles& files, PeftAdapterConfig* saved) {
  LoraAdapter adapter = described_adapter(*files.state, saved);
  const std::vector<ParameterSpan> spans = adapter.spans();
  for (int k = 0; k < files.sources(); ++k) {
    repack(spans, files.tensor(k, 0), k, files.sources(), adapter.params(), 0, 1);
  }
  return adapter;
}

}  // namespace llmcpu
