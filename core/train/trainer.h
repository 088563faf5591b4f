// The training loop, llm.c's shape: validation loss every N steps (and at the start and the end),
// gradient accumulation up to a total batch in tokens, global-norm clipping, AdamW under a
// learning-rate schedule, samples every N steps, and checkpoints (an llm.c model file plus a
// training-state file, both written atomically) every N steps, at the end and on Ctrl-C, from which
// --resume continues bit for bit. Command-line flags and config keys map one to one onto TrainOptions.
// In bf16 (--precision bf16) the model files are llm.c version 5 (bf16) and the training state
// keeps the fp32 master weights and moments; a run resumes only in the precision it was saved in.
// Deliberately not here: tokenization (samples are reported as token ids) and console formatting.
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/comm/communicator.h"
#include "core/comm/gradient_sync.h"
#include "core/model/generate.h"
#include "core/model/gpt2.h"
#include "core/optim/adamw.h"
#include "core/plugin/offload.h"
#include "core/report/train_reports.h"
#include "core/train/data_loader.h"
#include "core/train/lr_schedule.h"
#include "core/train/memory_plan.h"
#include "core/util/file.h"
#include "simd/error.h"

namespace llmcpu {

struct TrainOptions {
  std::string model;       // an llm.c checkpoint file, a preset file (.toml) or a preset name
  std::string train_data;  // a token shard or a glob of shards
  std::string val_data;    // optional, a shard or a glob
  int batch = 4;           // B
  int seq_len = 64;        // T
  int total_batch = 0;     // tokens per optimizer step; 0: B*T (no accumulation)
  int steps = 10;
  double lr = 3e-4;
  double weight_decay = 0.0;
  std::string lr_schedule = "constant";
  int warmup = 0;
  double lr_floor = 0.0;   // cosine decays to lr * lr_floor
  double grad_clip = 0.0;  // 0: off
  uint64_t seed = 1337;
  bool shuffle = true;
  std::string log_path;    // llm.c log lines (s:STEP trl:LOSS, s:STEP tel:LOSS)
  std::string metrics_path;  // a JSON object per line per step (core/report/metrics.h)
  std::string plot_path;     // the loss plot, *.png or *.svg, redrawn at every validation
  int val_every = 0;       // 0: never
  int val_batches = 20;
  int sample_every = 0;    // 0: never
  int sample_tokens = 64;
  std::string checkpoint_dir;
  int checkpoint_every = 0;  // 0: only at the end (and on Ctrl-C) when checkpoint_dir is set
  int keep_checkpoints = 0;  // 0: keep all
  std::string resume;        // a checkpoint folder to continue from
  std::string save_path;     // an extra llm.c model file written at the end
  std::string precision = "fp32";  // fp32 or bf16 (mixed precision; see core/model/gpt2.h)
  std::string recompute = "none";  // none, gelu or all-pointwise (core/model/activations.h)
  std::string memory_limit;        // plan against this size (e.g. "12G") instead of the machine
  std::string plugin;                  // an offload plugin (core/plugin/offload.h); empty: none
  std::string offload_layers = "all";  // with a plugin: "all" or how many of the last blocks
  std::string device_memory_limit;     // with a plugin: plan against this much device memory
  int max_bad_steps = 5;  // stop after this many steps in a row with a non-finite loss or norm
  double comm_timeout = 300;  // several ranks: seconds a collective may wait before the job ends
  int zero = -1;  // several ranks: 1 ZeRO-1 (the optimizer state sharded), 0 not; -1: 1
};

// The checks of the options that need no file and no machine (ranges that depend on each other,
// the words that name a choice): UsageErrors naming the flag. The Trainer runs them first; the
// command line runs them before anything is read.
void check_train_options(const TrainOptions& o);

// What --offload-layers and --device-memory-limit (text, as given) ask of a device: the options
// enable_offload (core/plugin/offload.h) takes. Throws UsageError for a size that is not one.
OffloadOptions offload_options(const std::string& layers, const std::string& device_memory_limit);

struct StepReport {
  int step;  // 0-based
  int steps;
  float loss;
  double lr;
  double grad_norm;
  double ms;
  double tokens_per_second;
  double eta_seconds;
  // Data parallelism: the communication thread's time in this step, and the share of it that ran
  // while the backward pass computed (0 with one rank).
  double comm_ms = 0;
  double comm_hidden = 0;
};

struct TrainObserver {
  std::function<void(const StepReport&)> on_step;
  std::function<void(int step, float val_loss)> on_val;
  std::function<void(int step, const std::vector<int>& tokens)> on_sample;
  std::function<void(int step, const std::string& model_path)> on_checkpoint;
  // A step whose update was skipped (non-finite loss or gradient norm), and other warnings.
  std::function<void(const std::string& message)> on_warning;
};

// Trouble with the training itself rather than its inputs: steps that kept diverging, a checkpoint
// that could not be written. The message says which checkpoint is the newest good one.
class TrainingError : public Error {
 public:
  using Error::Error;
};

// Builds a model from `spec`: an existing checkpoint file, a preset file (*.toml), or the name of a
// preset in conf/models/ (initialised with init_gpt2(seed)). `origin` receives a line saying which.
// A checkpoint of either version loads into either precision (bf16 widens exactly).
std::unique_ptr<Gpt2> make_model(const std::string& spec, uint64_t seed, std::string* origin,
                                 Precision precision = Precision::kFp32);

// The steps of the complete checkpoints (state and model file both present) in `dir`, ascending. A
// checkpoint's model file is renamed into place before its state file, so a state file marks a
// complete checkpoint; whether its contents are sound is checked on resume.
std::vector<int64_t> list_checkpoints(const std::string& dir);
// The newest complete checkpoint in `dir` (its step), or -1 if there is none.
int64_t latest_checkpoint(const std::string& dir);
std::string checkpoint_model_path(const std::string& dir, int64_t step);

// The micro-batches of B x T tokens one optimizer step reads over all `ranks`: --total-batch / (B*T),
// or one per rank without --total-batch.
int micro_batches_per_step(const TrainOptions& options, int ranks);
// The state file of a step's checkpoint: the whole training state, or for a ZeRO-1 run the
// marker of its per-rank shard files (core/io/train_state.h).
std::string checkpoint_state_path(const std::string& dir, int64_t step);

struct CheckpointFiles;  // a checkpoint's state, opened and checked (trainer.cpp)

class Trainer {
 public:
  // Validates the options (UsageError naming the flag), takes the checkpoint folder's lock (a
  // second trainer on the same folder is refused, naming the first one's PID), loads or resumes the
  // model and the data. What it did that a user should know (a newest checkpoint skipped as
  // corrupt, stale temporary files removed) is in notes().
  // Data parallelism: with a `world` of N ranks (null: a single process) every rank builds its own
  // Trainer with the same options; each step's --total-batch tokens are split over the ranks
  // (--total-batch / (B*T) micro-batches per step, a multiple of N), the gradients and losses are
  // averaged across them, and rank 0 alone writes the model files, the log, the --metrics
  // and --plot files and the --save file.
  // With ZeRO-1 (--zero 1, the default) each rank keeps and updates only its part of the AdamW
  // state and writes it to a shard file of its own at a checkpoint; --resume re-shards a state
  // saved by any number of ranks (or one process) to this run's.
  // LLMCPU_CHECK_REPLICAS=1 in the environment makes every step compare a hash of the weights
  // across the ranks and stop with a TrainingError naming a rank whose weights differ (tests).
  explicit Trainer(const TrainOptions& options, Communicator* world = nullptr);
  ~Trainer();

  // Runs from the current step up to options.steps. Returns false if stopped by an interrupt.
  bool run(const TrainObserver& observer);

  Gpt2& model() { return *model_; }
  const std::string& model_origin() const { return origin_; }
  int grad_accum() const { return grad_accum_; }  // micro-batches per step on this rank
  const Communicator& world() const { return *world_; }
  int steps_done() const { return step_; }  // completed optimizer steps
  const TrainOptions& options() const { return opt_; }
  const std::vector<std::string>& notes() const { return notes_; }
  // The memory this run was planned to take and the limit it was checked against, before the
  // model was allocated (core/train/memory_plan.h).
  const MemoryPlan& memory_plan() const { return memory_plan_; }
  const MemoryLimit& memory_limit() const { return memory_limit_; }
  // What became of --plugin (empty message without one): the device's part, or why not.
  const OffloadOutcome& offload() const { return offload_; }
  bool zero() const { return sync_ && sync_->zero(); }
  // ZeRO-1 with one copy of the weights shared by the ranks of this machine
  // (GradientSync::share_memory).
  bool shared_weights() const { return shared_weights_; }
  // The AdamW moments and the fp32 master weights each rank holds, in bytes, index = rank (the same
  // on every rank). Under ZeRO-1 the moments are each rank's parts; in bf16 so is the fp32 master
  // of the layers' matmul weights (the model computes with their bf16 copy).
  const std::vector<double>& optimizer_bytes() const { return optimizer_bytes_; }
  const std::vector<double>& master_bytes() const { return master_bytes_; }
  float validate();
  // Writes DIR/model_N.bin and DIR/state_N.bin for the current step: both files written and synced
  // first, then renamed into place (model, then state) with the folder synced after each. Refuses
  // (TrainingError) weights or moments that are not finite. If anything fails, the previous
  // checkpoints are untouched and the TrainingError names the file, the errno and the newest good
  // checkpoint. Returns the model file's path.
  std::string save_checkpoint_now();
  // "DIR/model_00000010.bin and state_00000010.bin (step 10)", or that there is none.
  std::string newest_good_checkpoint() const;

 private:
  // Loads the model and the step from the newest sound checkpoint in `dir`; returns the data
  // position to restore. The optimizer state is read by restore_optimizer once its parts are known.
  DataPosition resume_from(const std::string& dir);
  void restore_optimizer();
  // Creates (if needed) and locks the checkpoint folder; true if it was created.
  bool take_checkpoint_folder();
  // Removes the lock and the folder take_checkpoint_folder created, if nothing else is in it.
  void remove_new_checkpoint_folder() noexcept;
  // Locks the --resume folder for reading (shared) for the whole run, unless the run writes into
  // it (then the checkpoint folder's exclusive lock covers it): a trainer writing it and one
  // resuming from it never overlap.
  void lock_resume_folder();
  // A step's loss or gradient norm is not finite: what is (for the warning), and fault injection.
  std::string describe_bad_step(double loss, double norm) const;
  void inject_gradient_faults();
  // The tokens of the sample at `step` (in sample_, reused).
  const std::vector<int>& sample(int step);
  void log_line(const char* fmt, int step, float value);
  // Refuses (UsageError naming the flag) a rank whose flags, model or data differ from rank 0's.
  void check_ranks_agree() const;
  // Plans the run's memory for a model of `config` and refuses (UsageError) a plan that does not
  // fit: called before the model is allocated.
  void check_memory(const ModelConfig& config);
  // The plan of memory_request_ after the run changed it (the device kept no layers, the ranks
  // could not share their weights), checked against the limit again.
  void replan_memory();
  // An interrupt on any rank (mpirun forwards Ctrl-C to all of them, not at the same moment).
  bool stop_requested();
  // The global gradient norm (over the ranks' parts under ZeRO-1), and clipping to it.
  double gradient_norm();
  void clip_gradients(double norm);
  // With a device that owns part of the model (enable_offload, before run()): the CPU's
  // AdamW leaves that part to the device's and hands it the moments (a resume's); once per run.
  // Refused with several ranks.
  void adopt_device();
  // The device's parameters and moments into the model and the CPU's AdamW (their copy), before
  // anything is written or sampled.
  void fetch_device_state();
  // The AdamW update; under ZeRO-1 each part goes to the other ranks as soon as it is updated.
  void update_weights(double lr);
  // Every rank's weights hash the same (LLMCPU_CHECK_REPLICAS).
  void check_replicas(int step);
  // Writes this rank's shard of a ZeRO-1 checkpoint; returns its checksum.
  uint64_t write_own_shard(const std::string& state_path);

  TrainOptions opt_;
  std::unique_ptr<Communicator> own_world_;  // the single process, when no world was given
  Communicator* world_;
  std::unique_ptr<GradientSync> sync_;  // with more than one rank
  bool shared_weights_ = false;
  std::vector<double> optimizer_bytes_, master_bytes_;
  bool check_replicas_ = false;
  double comm_busy_ms_ = 0, comm_waited_ms_ = 0;  // this step's
  Precision precision_ = Precision::kFp32;
  Recompute recompute_ = Recompute::kNone;
  MemoryRequest memory_request_;
  MemoryPlan memory_plan_;
  MemoryLimit memory_limit_;
  std::unique_ptr<Gpt2> model_;
  std::string origin_;
  int grad_accum_ = 1;
  int step_ = 0;  // completed optimizer steps
  std::unique_ptr<DataLoader> train_;
  std::unique_ptr<DataLoader> val_;
  std::unique_ptr<AdamW> optimizer_;
  OffloadOutcome offload_;
  BlockDevice* device_ = nullptr;  // adopted: owns part of the model and its AdamW
  float device_grad_scale_ = 1.0f;   // this step's clipping factor, for the device's AdamW
  std::unique_ptr<Generator> generator_;  // with --sample-every
  std::vector<int> inputs_, targets_;     // (B, T) one batch of training or validation data
  std::vector<int> sample_;
  LrSchedule schedule_;
  std::FILE* log_ = nullptr;
  std::unique_ptr<TrainReports> reports_;  // rank 0, with --metrics or --plot
  std::unique_ptr<FolderLock> lock_;       // the checkpoint folder's, exclusive
  std::unique_ptr<FolderLock> resume_lock_;  // the --resume folder's, shared (when not written)
  std::vector<std::string> notes_;
  std::unique_ptr<CheckpointFiles> resume_files_;  // between resume_from and restore_optimizer
};

}  // namespace llmcpu
