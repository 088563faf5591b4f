// The training loop, llm.c's shape: validation loss every N steps (and at the start and the end),
// gradient accumulation up to a total batch in tokens, global-norm clipping, AdamW under a
// learning-rate schedule, samples every N steps, and checkpoints (an llm.c model file, for a
// Llama-family model a Hugging Face safetensors with config.json beside it, plus a training-state
// file, all written atomically) every N steps, at the end and on Ctrl-C, from which --resume
// continues bit for bit. Command-line flags and config keys map one to one onto
// TrainOptions. In bf16 (--precision bf16) the model files are llm.c version 5 (bf16) and the
// training state keeps the fp32 master weights and moments; a run resumes only in the precision it
// was saved in. The parts: the options (train_options.h), the checkpoint store
// (checkpoint_store.h), data parallelism (data_parallel.h), the optimizer (train_optimizer.h), the
// memory plan (run_memory.h) and the reports (run_reports.h); this is the loop over them and the
// order they are set up in. Deliberately not here: tokenization (samples are reported as token ids)
// and console formatting.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/comm/communicator.h"
#include "core/io/model_file.h"
#include "core/lora/adapter.h"
#include "core/lora/peft_files.h"
#include "core/model/generate.h"
#include "core/model/model.h"
#include "core/plugin/offload.h"
#include "core/train/checkpoint_store.h"
#include "core/train/data_loader.h"
#include "core/train/data_parallel.h"
#include "core/train/lr_schedule.h"
#include "core/train/run_memory.h"
#include "core/train/run_reports.h"
#include "core/train/step_batches.h"
#include "core/train/train_optimizer.h"
#include "core/train/train_options.h"
#include "core/train/training_error.h"

namespace llmcpu {

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

// Builds a model from what --model resolved to (resolve_model): a model file's weights, or a
// preset's shape initialised with init_model(seed). `origin` receives a line saying which.
// A checkpoint of either version loads into either precision (bf16 widens exactly).
// base_gradients false: a frozen base (LoRA; Model's), frozen once loaded (Model::freeze_base)
// in base_quant, a bf16 base keeping the TensorRoles `keep` in fp32 too (Model::begin_freeze).
std::unique_ptr<Model> make_model(const ModelSource& source, uint64_t seed, std::string* origin,
                                  Precision precision = Precision::kFp32,
                                  bool base_gradients = true,
                                  QuantFormat base_quant = QuantFormat::kNone,
                                  const std::vector<int>& keep = {});

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

  Model& model() { return *model_; }
  // A LoRA run's adapter (null in full fine-tuning): what the run trains, the base frozen.
  const LoraAdapter* adapter() const { return lora_.get(); }
  const Model& model() const { return *model_; }
  const std::string& model_origin() const { return origin_; }
  int grad_accum() const { return grad_accum_; }  // micro-batches per step on this rank
  const Communicator& world() const { return *world_; }
  int steps_done() const { return step_; }  // completed optimizer steps
  const TrainOptions& options() const { return opt_; }
  const std::vector<std::string>& notes() const { return notes_; }
  // The memory this run was planned to take and the limit it was checked against, before the
  // model was allocated (core/train/memory_plan.h).
  const MemoryPlan& memory_plan() const { return memory_.plan; }
  const MemoryLimit& memory_limit() const { return memory_.limit; }
  // What became of --plugin (empty message without one): the device's part, or why not.
  const OffloadOutcome& offload() const { return offload_; }
  bool zero() const { return parallel_->zero(); }
  // ZeRO-1 with one copy of the weights shared by the ranks of this machine
  // (GradientSync::share_memory).
  bool shared_weights() const { return parallel_->shared_weights(); }
  // The AdamW moments and the fp32 master weights each rank holds, in bytes, index = rank (the same
  // on every rank). Under ZeRO-1 the moments are each rank's parts; in bf16 so is the fp32 master
  // of the layers' matmul weights (the model computes with their bf16 copy).
  const std::vector<double>& optimizer_bytes() const { return optimizer_bytes_; }
  const std::vector<double>& master_bytes() const { return master_bytes_; }
  float validate();
  // Writes DIR/model_N.bin (a Llama-family model: model_N.safetensors, config.json and the
  // tokenizer files) and DIR/state_N.bin for the current step: every file written and synced
  // first, then renamed into place (the model's, then the state) with the folder synced after each.
  // Refuses (TrainingError) weights or moments that are not finite. If anything fails, the previous
  // checkpoints are untouched and the TrainingError names the file, the errno and the newest good
  // checkpoint. Returns the model file's path.
  std::string save_checkpoint_now();
  // "DIR/model_00000010.bin and state_00000010.bin (step 10)", or that there is none.
  std::string newest_good_checkpoint() const { return store_->newest_good(); }

 private:
  // The set-up, in the order the constructor takes it, each step from what the ones before made:
  // the checkpoint folder locked before anything is read; the model loaded or resumed, its memory
  // planned before it is allocated; the ranks; the device, before the batch is planned (the CPU's
  // arena then leaves out the device's blocks); the data; the ranks' agreement; the shared
  // weights, before the optimizer's moments (never both copies at once); the reports.
  struct Start {
    std::unique_ptr<Model> model;
    std::string origin;
    int step = 0;
    RunMemory memory;
    std::optional<ResumePoint> resume;
    LlamaOrigin llama_origin;  // a Llama-family model: its config.json and tokenizer files
  };
  Start load_model(const CheckpointStore& locked);
  Start resume_adapter(Start s);
  std::unique_ptr<DataParallel> start_ranks(Model& model);
  OffloadOutcome attach_device(Model& model, RunMemory& memory);
  void plan_steps(Model& model, const OffloadOutcome& attached);
  void open_data(const ModelConfig& config, const std::optional<ResumePoint>& resume);
  void share_weights(DataParallel& parallel, const DataLoader& agreed, RunMemory& memory);
  std::unique_ptr<TrainOptimizer> make_optimizer(DataParallel& parallel,
                                                 const std::optional<ResumePoint>& resume);

  // One step of run(): validation and sample, then the micro-batches, the update, the reports.
  void validate_and_sample(int step, bool resumed_here, const TrainObserver& obs);
  // The step's gradients and its loss (the mean over its counted targets, all ranks).
  double compute_gradients();
  // A step skipped for a non-finite loss or norm: a warning, or after --max-bad-steps in a row a
  // TrainingError (`report` writes the step's figures first).
  struct BadSteps {
    int in_row = 0, first = 0;
  };
  void skip_step(int step, double loss, double norm, BadSteps& bad,
                 const std::function<void()>& report, const TrainObserver& obs);
  void checkpoint(const TrainObserver& obs);
  // The end of run(): the reports, the last checkpoint, --save.
  void finish_run(bool interrupted, const TrainObserver& obs);
  void make_adapter(Model& model, const ModelSource& source);
  std::vector<int> kept_for_copies(const ModelConfig& config) const;
  void save_adapter(const std::string& dir) const;
  void save_model(const std::string& path);  // --save's file or folder for this model
  // A step's loss or gradient norm is not finite: what is (for the warning), and fault injection.
  std::string describe_bad_step(double loss, double norm) const;
  void inject_gradient_faults();
  // The tokens of the sample at `step` (in sample_, reused).
  const std::vector<int>& sample(int step);

  // Declared in the order they may be destroyed in reverse: the model outlives what reads it,
  // the ranks' sync outlives the model, the folder's lock goes first.
  TrainOptions opt_;
  std::unique_ptr<Communicator> own_world_;  // the single process, when no world was given
  Communicator* world_;
  LrSchedule schedule_;
  std::unique_ptr<DataParallel> parallel_;
  RunMemory memory_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<LoraAdapter> lora_;  // a LoRA run's
  PeftAdapterConfig lora_saved_;       // what its adapter_config.json says besides the adapter
  std::string origin_;
  // A Llama-family model: what the folders written from it (checkpoints, --save) carry over.
  LlamaOrigin llama_origin_;
  int grad_accum_ = 1;
  int step_ = 0;  // completed optimizer steps
  std::unique_ptr<DataLoader> train_;
  std::unique_ptr<DataLoader> val_;
  OffloadOutcome offload_;
  std::unique_ptr<TrainOptimizer> optimizer_;
  std::unique_ptr<Generator> generator_;  // with --sample-every
  std::unique_ptr<StepBatches> batches_;  // the step's training batches
  std::vector<int> inputs_, targets_, starts_;  // (B, T) one batch of validation data
  std::vector<int> sample_;
  std::vector<double> optimizer_bytes_, master_bytes_;
  std::unique_ptr<RunReports> reports_;
  std::vector<std::string> notes_;
  std::unique_ptr<CheckpointStore> store_;
};

}  // namespace llmcpu
