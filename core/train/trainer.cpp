#include "core/train/trainer.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <optional>
#include <regex>

#include <omp.h>

#include "core/comm/zero_shards.h"
#include "core/io/checkpoint.h"
#include "core/io/model_file.h"
#include "core/io/train_state.h"
#include "core/model/generate.h"
#include "core/model/preset.h"
#include "core/train/interrupt.h"
#include "core/util/fault.h"
#include "core/util/file.h"
#include "core/util/rng.h"
#include "simd/error.h"

namespace llmcpu {

namespace fs = std::filesystem;

std::unique_ptr<Gpt2> make_model(const std::string& spec, uint64_t seed, std::string* origin,
                                 Precision precision) {
  std::string checkpoint, preset, description;
  auto model = std::make_unique<Gpt2>(resolve_model_spec(spec, &checkpoint, &preset, &description),
                                      active_kernels(), precision);
  if (!checkpoint.empty()) {
    load_model_file(checkpoint, *model);
    if (origin) *origin = "checkpoint " + checkpoint + " (" + description + ")";
  } else {
    init_gpt2(*model, seed);
    if (origin) *origin = "preset " + preset + ", GPT-2 initialisation, seed " + std::to_string(seed);
  }
  return model;
}

std::string checkpoint_model_path(const std::string& dir, int64_t step) {
  char name[64];
  std::snprintf(name, sizeof name, "model_%08" PRId64 ".bin", step);
  return (fs::path(dir) / name).string();
}

std::string checkpoint_state_path(const std::string& dir, int64_t step) {
  char name[64];
  std::snprintf(name, sizeof name, "state_%08" PRId64 ".bin", step);
  return (fs::path(dir) / name).string();
}

std::vector<int64_t> list_checkpoints(const std::string& dir) {
  std::error_code ec;
  std::vector<int64_t> steps;
  const std::regex pattern("state_([0-9]{8,})\\.bin");
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    std::smatch m;
    const std::string name = entry.path().filename().string();
    if (!std::regex_match(name, m, pattern)) continue;
    // Only the names this program writes: a step that fits int64 (the regex leaves only digits)
    // and whose name is the one checkpoint_state_path gives it (state_000000004.bin is not step
    // 4's file).
    int64_t step = 0;
    const std::string digits = m[1];
    const char* const end = digits.data() + digits.size();
    if (std::from_chars(digits.data(), end, step).ec != std::errc()) continue;
    if (fs::path(checkpoint_state_path(dir, step)).filename() != name) continue;
    if (fs::is_regular_file(checkpoint_model_path(dir, step), ec)) steps.push_back(step);
  }
  std::sort(steps.begin(), steps.end());
  return steps;
}

int64_t latest_checkpoint(const std::string& dir) {
  const std::vector<int64_t> steps = list_checkpoints(dir);
  return steps.empty() ? -1 : steps.back();
}

// A checkpoint's training state, opened and checked in full: its state file and, for a ZeRO-1
// run's checkpoint, every shard the state file names (present, sound, of this step and world, and
// the very files it was written with). Tensor i (0 params, 1 m, 2 v) of source k of sources() is
// rank k of sources()'s packed part (core/comm/zero_shards.h); a whole state is rank 0 of 1.
struct CheckpointFiles {
  std::unique_ptr<TrainStateFile> state;
  std::vector<std::unique_ptr<StateShardFile>> shards;
  int sources() const { return shards.empty() ? 1 : int(shards.size()); }
  const void* tensor(int k, int i) const {
    return shards.empty() ? state->tensor_bytes(i) : shards[k]->tensor_bytes(i);
  }
};

namespace {

std::unique_ptr<CheckpointFiles> open_checkpoint(const std::string& dir, int64_t step) {
  read_checkpoint_header(checkpoint_model_path(dir, step));  // also checks the file's length
  auto files = std::make_unique<CheckpointFiles>();
  const std::string path = checkpoint_state_path(dir, step);
  files->state = std::make_unique<TrainStateFile>(path);
  const TrainState& s = files->state->state();
  if (s.step != step) {
    throw FileError(path, "holds the state of step " + std::to_string(s.step) +
                              ", but its name says step " + std::to_string(step));
  }
  const uint32_t K = s.shards();
  const std::vector<ParameterSpan> spans = ParameterLayout(s.config).spans();
  for (uint32_t k = 0; k < K; ++k) {
    const std::string shard = state_shard_path(path, k, K);
    const StateShardHeader expected{s.step, k, K, files->state->num_parameters(),
                                    packed_size(owned_parts(spans, int(k), int(K)))};
    files->shards.push_back(std::make_unique<StateShardFile>(shard, expected));
    if (files->shards.back()->checksum() != s.shard_checksums[k]) {
      throw FileError(shard, "is not the shard " + fs::path(path).filename().string() +
                                 " was completed with (its checksum differs)");
    }
  }
  return files;
}

}  // namespace

void check_train_options(const TrainOptions& o) {
  auto require = [](bool ok, const std::string& message) {
    if (!ok) throw UsageError(message);
  };
  require(!o.train_data.empty(), "--train-data: required (an llm.c token shard or a glob of shards)");
  require(!o.model.empty() || !o.resume.empty(),
          "--model: required (a checkpoint file or a preset name), unless --resume is given");
  require(o.batch > 0, "--batch: must be positive, got " + std::to_string(o.batch));
  require(o.seq_len > 0, "--seq-len: must be positive, got " + std::to_string(o.seq_len));
  require(o.total_batch >= 0, "--total-batch: must not be negative");
  // In 64 bits: B and T are each below 2^25, so their product cannot wrap here.
  const int64_t bt = int64_t(o.batch) * o.seq_len;
  require(bt <= INT32_MAX, "--batch " + std::to_string(o.batch) + " x --seq-len " +
                               std::to_string(o.seq_len) + " = " + std::to_string(bt) +
                               " tokens in one micro-batch; at most 2147483647");
  require(o.total_batch == 0 || o.total_batch % bt == 0,
          "--total-batch " + std::to_string(o.total_batch) + " must be a multiple of B*T = " +
              std::to_string(bt));
  require(o.steps >= 0, "--steps: must not be negative, got " + std::to_string(o.steps));
  require(o.lr >= 0, "--lr: must not be negative");
  require(o.weight_decay >= 0, "--weight-decay: must not be negative");
  require(o.warmup >= 0, "--warmup: must not be negative");
  require(o.lr_floor >= 0 && o.lr_floor <= 1, "--lr-floor: must be a fraction in 0..1");
  require(o.grad_clip >= 0, "--grad-clip: must not be negative (0 turns clipping off)");
  require(o.val_every >= 0, "--val-every: must not be negative");
  require(o.val_batches > 0, "--val-batches: must be positive");
  require(o.val_every == 0 || !o.val_data.empty(), "--val-every needs --val-data");
  require(o.sample_every >= 0, "--sample-every: must not be negative");
  require(o.sample_tokens > 0, "--sample-tokens: must be positive");
  require(o.checkpoint_every >= 0, "--checkpoint-every: must not be negative");
  require(o.checkpoint_every == 0 || !o.checkpoint_dir.empty() || !o.resume.empty(),
          "--checkpoint-every needs --checkpoint-dir (a resumed run writes into its --resume folder)");
  require(o.keep_checkpoints >= 0, "--keep-checkpoints: must not be negative");
  require(o.zero >= -1 && o.zero <= 1,
          "--zero: must be 0 (every rank keeps the whole optimizer state) or 1 (ZeRO-1), got " +
              std::to_string(o.zero));
  require(o.comm_timeout > 0 && std::isfinite(o.comm_timeout),
          "--comm-timeout: must be a positive number of seconds");
  require(o.max_bad_steps >= 1, "--max-bad-steps: must be at least 1, got " +
                                    std::to_string(o.max_bad_steps));
  parse_precision(o.precision, "--precision");
  parse_recompute(o.recompute, "--recompute");
  parse_lr_schedule(o.lr_schedule, "--lr-schedule");
  if (!o.memory_limit.empty()) parse_memory_size(o.memory_limit, "--memory-limit");
  if (!o.plot_path.empty()) check_plot_options({.output = o.plot_path}, "--plot");
}

Trainer::Trainer(const TrainOptions& options, Communicator* world)
    : opt_(options),
      own_world_(world ? nullptr : single_process_communicator()),
      world_(world ? world : own_world_.get()),
      schedule_((check_train_options(options), parse_lr_schedule(options.lr_schedule, "--lr-schedule")),
                options.lr, options.warmup, options.steps, options.lr_floor) {
  precision_ = parse_precision(opt_.precision, "--precision");
  recompute_ = parse_recompute(opt_.recompute, "--recompute");
  world_->set_timeout(opt_.comm_timeout);
  if (world_->rank() == 0 && !opt_.plot_path.empty()) find_gnuplot();  // before any work
  if (!opt_.resume.empty() && opt_.checkpoint_dir.empty()) opt_.checkpoint_dir = opt_.resume;
  // Before anything is read: a folder that cannot be written, or that another trainer is writing,
  // is refused now rather than at the first checkpoint.
  // Rank 0 alone writes checkpoints, and so alone takes the folder.
  const bool created =
      world_->rank() == 0 && !opt_.checkpoint_dir.empty() && take_checkpoint_folder();
  // A folder made just now is removed again if the run cannot start (a bad --model, data that
  // does not fit): a failed start leaves nothing behind.
  struct NewFolder {
    Trainer* trainer;
    bool remove;
    ~NewFolder() {
      if (remove) trainer->remove_new_checkpoint_folder();
    }
  } new_folder{this, created};
  if (world_->rank() == 0) lock_resume_folder();  // refused: the folder made just now goes again
  std::optional<DataPosition> resume_position;
  if (!opt_.resume.empty()) {
    resume_position = resume_from(opt_.resume);
  } else {
    std::string checkpoint, preset;
    check_memory(resolve_model_spec(opt_.model, &checkpoint, &preset));
    model_ = make_model(opt_.model, opt_.seed, &origin_, precision_);
  }
  const ModelConfig& c = model_->config();
  const int ranks = world_->size();
  const int micro = micro_batches_per_step(opt_, ranks);
  if (micro % ranks != 0) {
    throw UsageError("--total-batch " + std::to_string(opt_.total_batch) + ": " +
                     std::to_string(micro) + " micro-batches of B*T = " +
                     std::to_string(int64_t(opt_.batch) * opt_.seq_len) +
                     " tokens per step do not split over " + std::to_string(ranks) +
                     " ranks (make it a multiple of B*T*" + std::to_string(ranks) + " = " +
                     std::to_string(int64_t(opt_.batch) * opt_.seq_len * ranks) + ")");
  }
  grad_accum_ = micro / ranks;
  if (ranks > 1) sync_ = std::make_unique<GradientSync>(*world_, *model_, opt_.zero != 0);
  if (ranks == 1 && opt_.zero == 1) {
    notes_.push_back("--zero 1 has no effect in a single process (it shards over mpirun's ranks)");
  }
  check_replicas_ = ranks > 1 && std::getenv("LLMCPU_CHECK_REPLICAS") != nullptr &&
                    std::string(std::getenv("LLMCPU_CHECK_REPLICAS")) == "1";
  // Every shape the run computes is planned here (validation uses the training shape): the steps,
  // validations and samples that follow allocate nothing.
  if (!opt_.plugin.empty()) {  // first: the CPU's arena then leaves out the device's blocks
    offload_ = enable_offload(*model_, opt_.plugin,
                              offload_options(opt_.offload_layers, opt_.device_memory_limit));
    if (!model_->offload_active() && memory_request_.host_layers > 0) {
      // The CPU keeps every layer after all: the plan of the run it now is.
      memory_request_.host_layers = 0;
      replan_memory();
    }
  }
  model_->plan_batch(opt_.batch, opt_.seq_len, {.recompute = recompute_});
  inputs_.resize((size_t)opt_.batch * opt_.seq_len);
  targets_.resize(inputs_.size());
  if (opt_.sample_every > 0) {
    generator_ = std::make_unique<Generator>(*model_, std::min(opt_.sample_tokens, c.max_seq_len));
    sample_.reserve(generator_->capacity());
  }
  train_ = std::make_unique<DataLoader>(opt_.train_data, opt_.batch, opt_.seq_len, c.vocab_size,
                                        opt_.shuffle, opt_.seed);
  if (!opt_.val_data.empty()) {
    val_ = std::make_unique<DataLoader>(opt_.val_data, opt_.batch, opt_.seq_len, c.vocab_size,
                                        /*shuffle=*/false, 0);
  }
  for (const DataLoader* loader : {train_.get(), val_.get()}) {
    if (!loader) continue;
    for (const DataLoader::Skipped& s : loader->skipped()) {
      notes_.push_back(s.file + " " + s.why + ": skipped");
    }
  }
  if (resume_position) {
    try {
      train_->restore(*resume_position);
    } catch (const Error& e) {
      throw UsageError("--resume " + opt_.resume + ": " + e.what());
    }
  }
  check_ranks_agree();
  // ZeRO-1 on one machine: one copy of the weights in memory that the ranks share (no gather).
  std::string why_not_shared;
  if (zero()) shared_weights_ = sync_->share_memory(*model_, &why_not_shared);
  if (!why_not_shared.empty()) {
    notes_.push_back("the ranks' weights are not shared (" + why_not_shared +
                     "): each rank keeps its own, updated by all-gather");
  }
  if (shared_weights_ != memory_request_.shared_weights) {  // planned otherwise
    memory_request_.shared_weights = shared_weights_;
    replan_memory();
  }
  if (zero() && !shared_weights_ && precision_ == Precision::kBf16) {
    // Without shared weights the bf16 model computes with the copy of the layers' matmul weights:
    // of their fp32 master this rank keeps its own parts only.
    std::vector<ParameterSpan> others;
    for (const ParameterSpan& r : sync_->others()) {
      if (ParameterLayout::matmul_weight(r.tensor)) others.push_back(r);
    }
    model_->release_master(others);
  }
  // The moments are made (and touched) after the model's own arrays went to shared memory, so the
  // two are never held at once.
  {
    AdamWConfig adamw;
    adamw.weight_decay = opt_.weight_decay;
    std::vector<ParameterSpan> parts{{0, model_->num_parameters(), -1, -1}};
    if (zero()) parts = sync_->parts();
    optimizer_ = std::make_unique<AdamW>(std::move(parts), adamw, model_->kernels(),
                                         model_->bf16_kernels());
  }
  if (resume_files_) restore_optimizer();
  adopt_device();  // after the moments: a resume's go to the device
  optimizer_bytes_.assign(ranks, 0.0);
  optimizer_bytes_[world_->rank()] = double(optimizer_->bytes());
  world_->all_reduce_sum(optimizer_bytes_.data(), optimizer_bytes_.size());
  master_bytes_.assign(ranks, 0.0);
  master_bytes_[world_->rank()] = double(model_->master_bytes());
  world_->all_reduce_sum(master_bytes_.data(), master_bytes_.size());
  if (world_->rank() == 0 && (!opt_.metrics_path.empty() || !opt_.plot_path.empty())) {
    // Before the log is opened: a resumed run's plot starts from the log's earlier lines.
    const std::string run = opt_.model.empty() ? opt_.resume : opt_.model;
    const PlotOptions plot{.output = opt_.plot_path, .title = "llmcpu train " + run};
    reports_ = std::make_unique<TrainReports>(opt_.metrics_path, plot,
                                              opt_.resume.empty() ? -1 : step_, opt_.log_path);
  }
  if (!opt_.log_path.empty() && world_->rank() == 0) {
    log_ = std::fopen(opt_.log_path.c_str(), opt_.resume.empty() ? "w" : "a");
    if (!log_) throw FileError(opt_.log_path, "cannot open log: " + errno_message(errno));
  }
  new_folder.remove = false;
}

void Trainer::replan_memory() {
  memory_plan_ = plan_memory(memory_request_);
  check_fits(memory_request_, memory_plan_, memory_limit_);
}

OffloadOptions offload_options(const std::string& layers, const std::string& device_memory_limit) {
  OffloadOptions o;
  o.layers = layers;
  if (!device_memory_limit.empty()) {
    o.memory_limit = size_t(parse_memory_size(device_memory_limit, "--device-memory-limit"));
  }
  return o;
}

void Trainer::check_memory(const ModelConfig& config) {
  llmcpu::validate(config, "model");
  if (opt_.seq_len > config.max_seq_len) {
    throw UsageError("--seq-len " + std::to_string(opt_.seq_len) + " exceeds the model's maxT " +
                     std::to_string(config.max_seq_len));
  }
  // The kernel tables are chosen first (the bf16 GEMM engines are measured then, and oneDNN's code
  // and JIT kernels stay resident): what that takes is part of the program the plan measures.
  active_kernels();
  if (precision_ == Precision::kBf16) active_bf16_kernels();
  MemoryRequest r;
  r.config = config;
  r.precision = precision_;
  r.batch = opt_.batch;
  r.seq_len = opt_.seq_len;
  r.recompute = recompute_;
  r.ranks = world_->size();
  r.local_ranks = world_->local_size();
  r.zero = r.ranks > 1 && opt_.zero != 0;
  // As GradientSync::share_memory will (checked again once it has).
  r.shared_weights = r.zero && opt_.plugin.empty() && world_->may_share_memory();
  r.threads = omp_get_max_threads();
  r.total_batch = (long long)micro_batches_per_step(opt_, r.ranks) * opt_.batch * opt_.seq_len;
  if (!opt_.plugin.empty()) {  // planned as if the plugin takes its layers (checked again if not)
    r.host_layers = host_activation_layers(
        OffloadLayers::parse(opt_.offload_layers, config.num_layers, "--offload-layers"),
        config.num_layers);
  }
  memory_plan_ = plan_memory(r);
  r.program = memory_plan_.program;  // a plan made again later, when the model is allocated too
  memory_request_ = r;
  if (opt_.memory_limit.empty()) {
    memory_limit_ = llmcpu::memory_limit(r.local_ranks);
  } else {
    memory_limit_ = {parse_memory_size(opt_.memory_limit, "--memory-limit"), "--memory-limit"};
  }
  check_fits(r, memory_plan_, memory_limit_);
}

bool Trainer::take_checkpoint_folder() {
  const std::string& dir = opt_.checkpoint_dir;
  std::error_code ec;
  const bool created = fs::create_directories(dir, ec);
  if (!fs::is_directory(dir)) {
    throw FileError(dir, "cannot create the checkpoint folder: " + ec.message());
  }
  lock_ = std::make_unique<FolderLock>(dir, "train.lock", "llmcpu train");
  // Holding the lock, this is the only writer: a temporary file here was left by a killed run.
  for (const std::string& path : stale_temporary_files(dir)) {
    const std::string name = fs::path(path).filename().string();
    if (name.rfind("model_", 0) != 0 && name.rfind("state_", 0) != 0) continue;
    if (fs::remove(path, ec)) notes_.push_back("removed " + path + ", left by a killed run");
  }
  // Shards of a ZeRO-1 checkpoint whose state file never came: the run stopped while writing it.
  const std::regex shard_name("(state_[0-9]{8,})\\.rank[0-9]+-of-[0-9]+\\.bin");
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    std::smatch m;
    const std::string name = entry.path().filename().string();
    if (!std::regex_match(name, m, shard_name)) continue;
    if (fs::exists(fs::path(dir) / (m[1].str() + ".bin"), ec)) continue;
    if (fs::remove(entry.path(), ec)) {
      notes_.push_back("removed " + entry.path().string() +
                       ", a shard of an unfinished checkpoint");
    }
  }
  return created;
}

void Trainer::lock_resume_folder() {
  const std::string& dir = opt_.resume;
  std::error_code ec;
  if (dir.empty() || !fs::is_directory(dir, ec)) return;  // resume_from says what is wrong
  if (lock_ && fs::equivalent(dir, opt_.checkpoint_dir, ec)) return;  // written: locked already
  resume_lock_ = std::make_unique<FolderLock>(dir, "train.lock", "llmcpu train", LockMode::kShared);
  if (!resume_lock_->held()) {
    notes_.push_back("--resume " + dir + " is not locked against writers (" +
                     resume_lock_->why_not() + "): a trainer writing it meanwhile goes unnoticed");
  }
}

void Trainer::remove_new_checkpoint_folder() noexcept {
  std::error_code ec;
  if (lock_) fs::remove(lock_->path(), ec);  // while still holding it
  lock_.reset();
  fs::remove(opt_.checkpoint_dir, ec);  // only if empty
}

Trainer::~Trainer() {
  if (log_) std::fclose(log_);
}

DataPosition Trainer::resume_from(const std::string& dir) {
  const std::vector<int64_t> steps = list_checkpoints(dir);
  if (steps.empty()) {
    throw UsageError("--resume " + dir + ": no checkpoint there (expected model_NNNNNNNN.bin and " +
                     "state_NNNNNNNN.bin)");
  }
  // The newest checkpoint whose files are sound: a truncated file or a checksum that does not match
  // (a disk that failed, a copy cut short) is skipped, said so and left where it is.
  int64_t step = -1;
  for (auto it = steps.rbegin(); it != steps.rend() && !resume_files_; ++it) {
    try {
      resume_files_ = open_checkpoint(dir, *it);  // checks every file in full
      step = *it;
    } catch (const FileError& e) {
      notes_.push_back("resume: skipping the checkpoint of step " + std::to_string(*it) + ": " +
                       e.what() + " (its files are left in place)");
    }
  }
  if (!resume_files_) {
    std::string why;
    for (const std::string& note : notes_) why += "\n  " + note;
    throw UsageError("--resume " + dir + ": none of its " + std::to_string(steps.size()) +
                     " checkpoints is sound:" + why);
  }
  const std::string state_path = checkpoint_state_path(dir, step);
  const TrainState& s = resume_files_->state->state();
  if (!opt_.model.empty()) {
    // The model asked for must have the checkpoint's shape.
    std::string checkpoint, preset;
    const ModelConfig asked = resolve_model_spec(opt_.model, &checkpoint, &preset);
    if (!(asked == s.config)) {
      throw UsageError("--resume " + dir + ": the checkpoint holds a model of shape " +
                       describe(s.config) + ", but --model " + opt_.model + " is " + describe(asked));
    }
  }
  auto mismatch = [&](const char* flag, long long saved, long long now) {
    if (saved != now) {
      throw UsageError("--resume " + dir + ": the run was saved with " + flag + " " +
                       std::to_string(saved) + ", now " + std::to_string(now) +
                       "; exact resume needs the same value");
    }
  };
  mismatch("--batch", s.B, opt_.batch);
  mismatch("--seq-len", s.T, opt_.seq_len);
  mismatch("micro-batches per step (--total-batch / (B*T))", s.grad_accum,
           micro_batches_per_step(opt_, world_->size()));
  if (s.shuffle != opt_.shuffle) {
    throw UsageError("--resume " + dir + ": the run was saved " +
                     (s.shuffle ? "with shuffling, now --no-shuffle" : "with --no-shuffle, now shuffling"));
  }
  if (s.seed != opt_.seed) mismatch("--seed", (long long)s.seed, (long long)opt_.seed);
  if (s.precision != precision_) {
    // Refused rather than converted: resume promises the run it interrupted, bit for bit. A bf16
    // run's fp32 master weights live on in its state; to go on in another precision, start a new
    // run from the model file (bf16-rounded weights, fresh AdamW moments).
    throw UsageError("--resume " + dir + ": the run was saved with --precision " +
                     precision_name(s.precision) + ", now " + precision_name(precision_) +
                     "; exact resume needs the same precision (or start a new run with --model " +
                     checkpoint_model_path(dir, step) + ")");
  }
  if (s.step > std::numeric_limits<int>::max()) {
    // The file counts steps in 64 bits, this trainer (and --steps) in int: refused, not wrapped.
    throw UsageError("--resume " + dir + ": the checkpoint is at step " + std::to_string(s.step) +
                     ", past the last step --steps can name (" +
                     std::to_string(std::numeric_limits<int>::max()) + ")");
  }
  check_memory(s.config);
  model_ = std::make_unique<Gpt2>(s.config, active_kernels(), precision_);
  const std::vector<ParameterSpan> spans = model_->layout().spans();
  float* params = model_->params_flat();
  for (int k = 0; k < resume_files_->sources(); ++k) {
    repack(spans, resume_files_->tensor(k, 0), k, resume_files_->sources(), params, 0, 1);
  }
  step_ = static_cast<int>(s.step);
  origin_ = "resumed from " + state_path + " at step " + std::to_string(step_);
  if (s.shards() > 0) origin_ += " (" + std::to_string(s.shards()) + " ZeRO-1 shards)";
  return s.data;
}

void Trainer::restore_optimizer() {
  // Each rank takes its parts of the moments from whichever saved parts hold them: the same
  // ranks, other ranks, or one whole state.
  const CheckpointFiles& files = *resume_files_;
  const std::vector<ParameterSpan> spans = model_->layout().spans();
  const int r = zero() ? world_->rank() : 0, N = zero() ? world_->size() : 1;
  for (int k = 0; k < files.sources(); ++k) {
    repack(spans, files.tensor(k, 1), k, files.sources(), optimizer_->m(), r, N);
    repack(spans, files.tensor(k, 2), k, files.sources(), optimizer_->v(), r, N);
  }
  optimizer_->set_steps_taken(files.state->state().adamw_t);
  resume_files_.reset();
}

namespace {

// A number for a message: "nan", "inf" or "-inf" rather than the C library's "-nan".
std::string number_text(double x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  return std::to_string(x);
}

// "" if `flat` (ParameterLayout order) is finite, else what is not: "the weights hold ... (fcw ...)".
std::string non_finite_message(const float* flat, const ParameterLayout& layout, const char* what) {
  const NonFinite bad = find_non_finite(flat, layout);
  if (!bad) return "";
  return std::string("the ") + what + " hold a non-finite value (" + bad.describe() + ", element " +
         std::to_string(bad.index) + " = " + number_text(bad.value) + ")";
}

}  // namespace

std::string Trainer::newest_good_checkpoint() const {
  const std::string& dir = opt_.checkpoint_dir;
  const std::vector<int64_t> steps = dir.empty() ? std::vector<int64_t>{} : list_checkpoints(dir);
  for (auto it = steps.rbegin(); it != steps.rend(); ++it) {
    try {
      open_checkpoint(dir, *it);
      return "the newest good checkpoint is " + checkpoint_model_path(dir, *it) + " and " +
             fs::path(checkpoint_state_path(dir, *it)).filename().string() + " (step " +
             std::to_string(*it) + ")";
    } catch (const FileError&) {
    }
  }
  return dir.empty() ? "no checkpoint is written (no --checkpoint-dir)"
                     : "there is no good checkpoint in " + dir + " yet";
}

namespace {

// Deletes a checkpoint: its state file first (it marks the checkpoint complete), then the rest.
void remove_checkpoint(const std::string& dir, int64_t step) {
  std::error_code ec;
  const std::string state = checkpoint_state_path(dir, step);
  fs::remove(state, ec);
  fs::remove(checkpoint_model_path(dir, step), ec);
  const std::string shard_prefix = fs::path(state).stem().string() + ".rank";
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (entry.path().filename().string().starts_with(shard_prefix)) fs::remove(entry.path(), ec);
  }
}

// "" if the n packed floats at p are finite, else where the first one that is not sits.
std::string non_finite_packed(const float* p, size_t n, const char* what, int rank) {
  for (size_t i = 0; i < n; ++i) {
    if (!std::isfinite(p[i])) {
      return std::string("the ") + what + " of rank " + std::to_string(rank) +
             " hold a non-finite value (element " + std::to_string(i) + " of its part = " +
             number_text(p[i]) + ")";
    }
  }
  return "";
}

}  // namespace

uint64_t Trainer::write_own_shard(const std::string& state_path) {
  const int rank = world_->rank(), ranks = world_->size();
  const size_t Q = optimizer_->size();
  const StateShardHeader header{step_, uint32_t(rank), uint32_t(ranks), model_->num_parameters(),
                                Q};
  const AdamW& adamw = *optimizer_;
  const Gpt2& model = *model_;  // the const params_flat(): saving does not mark the bf16 copy stale
  AtomicFileWriter out(state_shard_path(state_path, rank, ranks), "shard-write");
  const uint64_t sum = write_state_shard(out, header, model.params_flat(), adamw.parts(),
                                         {adamw.m(), Q}, {adamw.v(), Q});
  out.commit();  // durable before the marker can name it
  return sum;
}

std::string Trainer::save_checkpoint_now() {
  fetch_device_state();
  const std::string& dir = opt_.checkpoint_dir;
  const std::string model_path = checkpoint_model_path(dir, step_);
  const std::string state_path = checkpoint_state_path(dir, step_);
  const bool sharded = zero();
  const int rank = world_->rank(), ranks = world_->size();
  // Without ZeRO-1 every rank holds the same weights and moments: rank 0 writes them.
  if (!sharded && rank != 0) return model_path;
  const size_t P = model_->num_parameters();
  const Gpt2& model = *model_;  // the const params_flat(): saving does not mark the bf16 copy stale
  const ParameterLayout& layout = model.layout();
  const AdamW& adamw = *optimizer_;
  std::string bad;
  if (!sharded) {
    using Named = std::pair<const float*, const char*>;
    for (const auto& [flat, what] : {Named{model.params_flat(), "weights"},
                                     Named{adamw.m(), "AdamW first moments"},
                                     Named{adamw.v(), "AdamW second moments"}}) {
      if (bad.empty()) bad = non_finite_message(flat, layout, what);
    }
  } else {  // this rank's parts
    for (const ParameterSpan& p : adamw.parts()) {
      if (!bad.empty()) break;
      bad = non_finite_packed(model.params_flat() + p.offset, p.count, "weights", rank);
    }
    if (bad.empty()) bad = non_finite_packed(adamw.m(), adamw.size(), "AdamW first moments", rank);
    if (bad.empty()) bad = non_finite_packed(adamw.v(), adamw.size(), "AdamW second moments", rank);
  }
  if (sharded) {  // every rank refuses, or none does
    double refusing = bad.empty() ? 0 : 1;
    world_->all_reduce_sum(&refusing, 1);
    if (refusing > 0 && bad.empty()) {
      bad = "another rank's training state is not finite (it says where)";
    }
  }
  if (!bad.empty()) {
    throw TrainingError("not writing the checkpoint of step " + std::to_string(step_) + ": " +
                        bad + "; " + newest_good_checkpoint() + "; training stopped");
  }
  TrainState s;
  s.config = model.config();
  s.B = opt_.batch;
  s.T = opt_.seq_len;
  s.grad_accum = grad_accum_ * ranks;  // micro-batches per step over all ranks
  s.shuffle = opt_.shuffle;
  s.seed = opt_.seed;
  s.precision = precision_;
  s.step = step_;
  s.adamw_t = optimizer_->steps_taken();
  s.data = train_->position();
  try {
    // Every file is written and synced under a temporary name before the state file is renamed
    // into place, so a full disk or an I/O error never leaves half a checkpoint: the state file
    // goes last, and its presence marks the checkpoint complete (list_checkpoints).
    std::optional<AtomicFileWriter> model_file;
    std::string failed;  // this rank's failure, sharded
    try {
      if (rank == 0) {
        model_file.emplace(model_path, "model-write");
        write_checkpoint(*model_file, model, checkpoint_version_for(precision_));
        model_file->finish();
      }
      if (sharded) {
        s.shard_checksums.assign(ranks, 0);
        s.shard_checksums[rank] = write_own_shard(state_path);
      }
    } catch (const FileError& e) {
      if (!sharded) throw;
      failed = e.what();
    }
    if (sharded) {
      // The state file names every shard once all of them are durable (or none is written).
      double failures = failed.empty() ? 0 : 1;
      world_->all_reduce_sum(&failures, 1);
      if (!failed.empty()) throw FileError(state_shard_path(state_path, rank, ranks), failed);
      if (failures > 0) {
        throw FileError(state_path, std::to_string(int(failures)) +
                                        " other rank(s) could not write their shard (they say "
                                        "why)");
      }
      for (int r = 0; r < ranks; ++r) world_->broadcast(&s.shard_checksums[r], sizeof(uint64_t), r);
      if (rank != 0) return model_path;
    }
    AtomicFileWriter state_file(state_path, "state-write");
    if (sharded) {
      write_train_state(state_file, s, {}, {}, {});
    } else {
      write_train_state(state_file, s, {model.params_flat(), P}, {adamw.m(), P}, {adamw.v(), P});
    }
    state_file.finish();
    model_file->publish();
    if (fault_at("between-renames") == FaultAction::kKill) fault_kill_now();
    state_file.publish();
  } catch (const FileError& e) {
    throw TrainingError("the checkpoint of step " + std::to_string(step_) +
                        " could not be written: " + e.what() + "; " + newest_good_checkpoint() +
                        "; training stopped");
  }
  if (opt_.keep_checkpoints > 0) {
    const std::vector<int64_t> steps = list_checkpoints(dir);
    for (size_t i = 0; i + opt_.keep_checkpoints < steps.size(); ++i) {
      remove_checkpoint(dir, steps[i]);
    }
  }
  return model_path;
}

int micro_batches_per_step(const TrainOptions& o, int ranks) {
  return o.total_batch == 0 ? ranks : int(o.total_batch / (int64_t(o.batch) * o.seq_len));
}

void Trainer::check_ranks_agree() const {
  if (world_->size() == 1) return;
  // What every rank must share, one "name: value" line each; rank 0's lines are the reference.
  const Gpt2& m = *model_;
  auto num = [](double v) {
    char buf[40];
    std::snprintf(buf, sizeof buf, "%.17g", v);
    return std::string(buf);
  };
  auto data = [](const DataLoader* d) {
    return d ? d->pattern() + " (" + std::to_string(d->num_shards()) + " shards, " +
                   std::to_string(d->total_samples()) + " samples)"
             : std::string("none");
  };
  const std::pair<const char*, std::string> fields[] = {
      {"--model", describe(m.config())},
      {"the model's weights (norm)", num(global_norm(m.params_flat(), m.num_parameters(),
                                                     m.kernels()))},
      {"--resume", opt_.resume},
      {"--train-data", data(train_.get())},
      {"--val-data", data(val_.get())},
      {"--batch", std::to_string(opt_.batch)},
      {"--seq-len", std::to_string(opt_.seq_len)},
      {"--total-batch", std::to_string(opt_.total_batch)},
      {"--steps", std::to_string(opt_.steps)},
      {"--lr", num(opt_.lr)},
      {"--lr-schedule", opt_.lr_schedule},
      {"--warmup", std::to_string(opt_.warmup)},
      {"--lr-floor", num(opt_.lr_floor)},
      {"--weight-decay", num(opt_.weight_decay)},
      {"--grad-clip", num(opt_.grad_clip)},
      {"--seed", std::to_string(opt_.seed)},
      {"--no-shuffle", opt_.shuffle ? "no" : "yes"},
      {"--precision", opt_.precision},
      {"--val-every", std::to_string(opt_.val_every)},
      {"--val-batches", std::to_string(opt_.val_batches)},
      {"--max-bad-steps", std::to_string(opt_.max_bad_steps)},
      {"--checkpoint-dir", opt_.checkpoint_dir},
      {"--checkpoint-every", std::to_string(opt_.checkpoint_every)},
      {"--zero", std::to_string(opt_.zero)},
  };
  std::string mine;
  for (const auto& [name, value] : fields) mine += std::string(name) + ": " + value + "\n";
  uint64_t length = mine.size();
  world_->broadcast(&length, sizeof length, 0);
  std::string root(length, '\0');
  if (world_->rank() == 0) root = mine;
  world_->broadcast(root.data(), length, 0);
  double disagree = root == mine ? 0 : 1;
  world_->all_reduce_sum(&disagree, 1);
  if (disagree == 0) return;
  if (root == mine) {
    throw UsageError(std::to_string(int(disagree)) + " of " + std::to_string(world_->size()) +
                     " ranks were started with flags or data other than rank 0's (their errors "
                     "say which); every rank needs the same");
  }
  size_t a = 0, b = 0;  // the first line that differs
  for (;;) {
    const size_t ea = mine.find('\n', a), eb = root.find('\n', b);
    if (ea == std::string::npos || eb == std::string::npos) break;
    const std::string ours = mine.substr(a, ea - a), theirs = root.substr(b, eb - b);
    if (ours != theirs) {
      throw UsageError("this rank has " + ours + ", rank 0 has " +
                       theirs.substr(theirs.find(": ") + 2) + "; every rank needs the same");
    }
    a = ea + 1, b = eb + 1;
  }
  throw UsageError("this rank's flags differ from rank 0's; every rank needs the same");
}

bool Trainer::stop_requested() {
  double asked = interrupt_requested() ? 1 : 0;
  world_->all_reduce_sum(&asked, 1);  // every rank stops at the same step, or none does
  return asked > 0;
}

void Trainer::adopt_device() {
  Gpt2& m = *model_;
  BlockDevice* device = m.offload_device();
  if (device == device_) return;
  if (device && world_->size() > 1) {
    throw UsageError("--offload-layers with " + std::to_string(world_->size()) +
                     " ranks: a device's part of the model is not reduced over ranks yet; run "
                     "one process per device without mpirun, or leave --plugin out");
  }
  device_ = device;
  optimizer_->skip(m.device_spans());
  // The moments are the whole arena's here (one process): a resume's reach the device.
  if (device_) device_->set_moments(optimizer_->m(), optimizer_->v());
}

void Trainer::fetch_device_state() {
  if (!device_) return;
  model_->fetch_device_state(true, false);
  device_->read_state(nullptr, nullptr, optimizer_->m(), optimizer_->v());
}

double Trainer::gradient_norm() {
  Gpt2& m = *model_;
  if (device_) {  // the device's gradients are zero here: its part of the sum comes from it
    return std::sqrt(m.kernels().sum_squares(m.grads_flat(), m.num_parameters()) +
                     device_->grad_sum_squares());
  }
  if (!zero()) return global_norm(m.grads_flat(), m.num_parameters(), m.kernels());
  // Each rank's parts hold the summed gradients; together they are every gradient once.
  double sum = 0;
  for (const ParameterSpan& p : sync_->parts()) {
    if (p.count > 0) sum += m.kernels().sum_squares(m.grads_flat() + p.offset, p.count);
  }
  world_->all_reduce_sum(&sum, 1);
  return std::sqrt(sum);
}

void Trainer::clip_gradients(double norm) {
  Gpt2& m = *model_;
  for (const ParameterSpan& p : optimizer_->parts()) {
    clip_to_norm(m.grads_flat() + p.offset, p.count, norm, opt_.grad_clip, m.kernels());
  }
  device_grad_scale_ = clip_factor(norm, opt_.grad_clip);  // the device's, in its AdamW
}

void Trainer::update_weights(double lr) {
  Gpt2& m = *model_;
  const Gpt2::UpdateSpans weights = m.weights_for_update();  // bf16: the copy too, same pass
  if (!zero() || shared_weights_) {
    // Shared weights: each rank updates its parts (and their bf16 copy) in place; once every rank
    // is past the fence, every rank computes with all of them.
    optimizer_->step(weights.master, m.grads_flat(), lr, weights.copy);
    if (device_) {  // the same update of the device's part, where its weights live
      device_->adamw_step(adamw_step_of(optimizer_->config(), lr, optimizer_->steps_taken()),
                          device_grad_scale_);
      m.device_parameters_changed();
    }
    if (shared_weights_) {
      const double ms = sync_->fence();
      comm_busy_ms_ += ms, comm_waited_ms_ += ms;
    }
    return;
  }
  // ZeRO-1: each part goes out while the optimizer works on the next; in bf16 the layers' matmul
  // weights go out as their bf16 copy (this rank keeps no fp32 master of the others' parts).
  // Two pointers: the std::function holds them without allocating.
  optimizer_->step(weights.master, m.grads_flat(), lr, weights.copy, [this, &weights](size_t i) {
    if (weights.copy && ParameterLayout::matmul_weight(sync_->spans()[i].tensor)) {
      sync_->gather(nullptr, weights.copy, i);
    } else {
      sync_->gather(weights.master, nullptr, i);
    }
  });
  const auto [busy, waited] = sync_->wait();
  comm_busy_ms_ += busy, comm_waited_ms_ += waited;
  if (!weights.copy) return;
  // The other ranks' parts of the other tensors arrived in fp32; their bf16 copy is rounded here.
  const auto to_bf16 = m.bf16_kernels()->to_bf16;
  for (const ParameterSpan& r : sync_->others()) {
    if (r.count > 0 && !ParameterLayout::matmul_weight(r.tensor)) {
      to_bf16(weights.copy + r.offset, weights.master + r.offset, r.count);
    }
  }
}

void Trainer::check_replicas(int step) {
  // The weights the model computes with: fp32, and in bf16 the copy of the matmul weights (whose
  // fp32 master each rank keeps only in part).
  const Gpt2& m = *model_;
  uint64_t mine = 0;
  for (const ParameterSpan& s : m.layout().spans()) {
    const bool copy = m.params_bf16_flat() && ParameterLayout::matmul_weight(s.tensor);
    const uint64_t h =
        copy ? train_state_checksum(m.params_bf16_flat() + s.offset, s.count * sizeof(bf16))
             : train_state_checksum(m.params_flat() + s.offset, s.count * sizeof(float));
    mine = (mine ^ h) * 0x9E3779B97F4A7C15ull;
  }
  uint64_t root = mine;
  world_->broadcast(&root, sizeof root, 0);
  double differ = mine == root ? 0 : 1;
  world_->all_reduce_sum(&differ, 1);
  if (differ == 0) return;
  throw TrainingError("after step " + std::to_string(step + 1) + ", " +
                      (mine != root ? std::string("this rank's") : std::string("some rank's")) +
                      " weights differ from rank 0's (LLMCPU_CHECK_REPLICAS)");
}

float Trainer::validate() {
  // The same batches as one process reads, each computed by one rank (batch i by rank i % N).
  const int rank = world_->rank(), ranks = world_->size();
  val_->reset();
  const uint64_t batches = std::min<uint64_t>(opt_.val_batches, val_->total_samples());
  double total = 0;
  for (uint64_t i = 0; i < batches; i += ranks) {
    val_->next_batch_of(rank, ranks, inputs_.data(), targets_.data());
    if (i + rank < batches) {
      total += model_->forward(inputs_.data(), targets_.data(), opt_.batch, opt_.seq_len);
    }
  }
  world_->all_reduce_sum(&total, 1);
  return static_cast<float>(total / double(batches));
}

const std::vector<int>& Trainer::sample(int step) {
  // Its own RNG, seeded from the run's seed and the step: sampling never disturbs training.
  Rng rng(opt_.seed ^ (0xA5A5A5A5ull + uint64_t(step) * 0x9E3779B97F4A7C15ull));
  model_->fetch_device_state(true, false);  // the generator reads the master weights
  const ModelConfig& c = model_->config();
  const int eot = c.vocab_size > 50256 ? 50256 : c.vocab_size - 1;
  Generator& gen = *generator_;
  gen.reset();
  sample_.clear();
  int token = eot;
  while (gen.position() < gen.capacity()) {
    gen.step(token);
    token = gen.sample(1.0f, 0, rng);
    sample_.push_back(token);
  }
  return sample_;
}

void Trainer::log_line(const char* fmt, int step, float value) {
  if (!log_) return;
  std::fprintf(log_, fmt, step, value);
  std::fflush(log_);
}

bool Trainer::run(const TrainObserver& obs) {
  const size_t BT = (size_t)opt_.batch * opt_.seq_len;
  std::vector<int>& inputs = inputs_;
  std::vector<int>& targets = targets_;
  Gpt2& m = *model_;
  double smoothed_ms = 0;
  bool interrupted = false;
  int bad_in_row = 0, first_bad = 0;  // steps skipped for a non-finite loss or gradient norm
  const int first = step_;
  const double tokens_per_step = double(BT * grad_accum_ * world_->size());
  adopt_device();
  for (int step = step_;; ++step) {
    const bool last = step == opt_.steps;
    // A resumed run does not repeat the validation and sample of the step it resumes at.
    const bool resumed_here = !opt_.resume.empty() && step == first;
    if (val_ && opt_.val_every > 0 && !resumed_here && (step % opt_.val_every == 0 || last)) {
      const float val_loss = validate();
      log_line("s:%d tel:%f\n", step, val_loss);
      if (obs.on_val) obs.on_val(step, val_loss);
      if (reports_) reports_->validation(step, val_loss, obs.on_warning);
    }
    if (opt_.sample_every > 0 && obs.on_sample && step > 0 && !resumed_here &&
        (step % opt_.sample_every == 0 || last)) {
      obs.on_sample(step, sample(step));
    }
    if (last || step > opt_.steps) break;
    if (stop_requested()) {
      interrupted = true;
      break;
    }

    const auto start = std::chrono::steady_clock::now();
    m.zero_grad();
    double loss = 0;
    for (int micro = 0; micro < grad_accum_; ++micro) {
      train_->next_batch_of(world_->rank(), world_->size(), inputs.data(), targets.data());
      // The last micro-batch completes the gradients: their average goes out layer by layer.
      // Each micro-batch's loss is scaled by 1 / (micro-batches over all ranks): the sum the
      // ranks' gradients are reduced to is then already their average.
      loss += m.forward_backward(inputs.data(), targets.data(), opt_.batch, opt_.seq_len,
                                 1.0f / float(grad_accum_ * world_->size()),
                                 micro == grad_accum_ - 1 ? sync_.get() : nullptr);
    }
    loss /= grad_accum_;
    comm_busy_ms_ = comm_waited_ms_ = 0;
    if (sync_) {
      const auto [busy, waited] = sync_->wait();
      comm_busy_ms_ += busy, comm_waited_ms_ += waited;
      world_->all_reduce_sum(&loss, 1);
      loss /= world_->size();
    }
    if (faults_enabled()) inject_gradient_faults();
    const double norm = gradient_norm();
    const double lr = schedule_.at(step);
    const bool skipped = !std::isfinite(loss) || !std::isfinite(norm);
    // The step's metrics line: every step has one, skipped ones too (core/report/metrics.h).
    const auto report = [&](double ms) {
      if (!reports_) return;
      reports_->step({.step = step,
                      .loss = static_cast<float>(loss),
                      .lr = lr,
                      .grad_norm = norm,
                      .ms = ms,
                      .tokens_per_s = tokens_per_step / (ms / 1000.0),
                      .skipped = skipped});
    };
    const auto elapsed_ms = [&start] {
      return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
          .count();
    };
    if (!skipped) {
      bad_in_row = 0;
      clip_gradients(norm);
      update_weights(lr);
      if (check_replicas_) check_replicas(step);
    } else {
      // The weights and moments stay as they were; the data and the schedule move on.
      if (bad_in_row++ == 0) first_bad = step;
      // The device's gradients and weights, for the diagnosis of where the step went wrong.
      if (device_) m.fetch_device_state(true, true);
      const std::string at = "step " + std::to_string(step + 1) + "/" + std::to_string(opt_.steps);
      if (bad_in_row >= opt_.max_bad_steps) {
        log_line("s:%d trl:%f\n", step, static_cast<float>(loss));
        report(elapsed_ms());
        throw TrainingError(
            std::to_string(bad_in_row) + " steps in a row (" + std::to_string(first_bad + 1) +
            " to " + std::to_string(step + 1) + ") had a non-finite loss or gradient norm " +
            "(--max-bad-steps " + std::to_string(opt_.max_bad_steps) + "); at " + at + ": " +
            describe_bad_step(loss, norm) + "; training stopped; " + newest_good_checkpoint() +
            " (a lower --lr, a --warmup or --grad-clip may help)");
      }
      if (obs.on_warning) {
        obs.on_warning(at + ": " + describe_bad_step(loss, norm) + "; update skipped (" +
                       std::to_string(bad_in_row) + " in a row; --max-bad-steps " +
                       std::to_string(opt_.max_bad_steps) + " stops the run)");
      }
    }
    step_ = step + 1;
    const double ms = elapsed_ms();
    smoothed_ms = smoothed_ms == 0 ? ms : 0.9 * smoothed_ms + 0.1 * ms;
    log_line("s:%d trl:%f\n", step, static_cast<float>(loss));
    const double tokens_per_second = tokens_per_step / (ms / 1000.0);
    if (obs.on_step) {
      const double hidden =
          comm_busy_ms_ > 0 ? std::max(0.0, 1.0 - comm_waited_ms_ / comm_busy_ms_) : 1.0;
      obs.on_step({step, opt_.steps, static_cast<float>(loss), lr, norm, ms, tokens_per_second,
                   smoothed_ms * (opt_.steps - step - 1) / 1000.0, comm_busy_ms_,
                   sync_ ? hidden : 0.0});
    }
    report(ms);
    if (!opt_.checkpoint_dir.empty() && opt_.checkpoint_every > 0 &&
        step_ % opt_.checkpoint_every == 0 && step_ != opt_.steps) {
      const std::string path = save_checkpoint_now();
      if (obs.on_checkpoint) obs.on_checkpoint(step_, path);
    }
  }
  if (reports_) reports_->finish(obs.on_warning);
  if (!opt_.checkpoint_dir.empty()) {
    const std::string path = save_checkpoint_now();
    if (obs.on_checkpoint) obs.on_checkpoint(step_, path);
  }
  if (!opt_.save_path.empty() && !interrupted && world_->rank() == 0) {
    fetch_device_state();
    const Gpt2& model = m;  // the const params_flat(): saving does not mark the bf16 copy stale
    const std::string bad = non_finite_message(model.params_flat(), model.layout(), "weights");
    if (!bad.empty()) throw TrainingError("not writing " + opt_.save_path + ": " + bad);
    save_checkpoint(opt_.save_path, model, checkpoint_version_for(precision_));
  }
  return !interrupted;
}

std::string Trainer::describe_bad_step(double loss, double norm) const {
  const Gpt2& m = *model_;
  std::string what = "loss " + number_text(loss) + ", gradient norm " + number_text(norm);
  if (const NonFinite g = find_non_finite(m.grads_flat(), m.layout())) {
    return what + "; the first non-finite gradient is " + g.describe() + " (element " +
           std::to_string(g.index) + " = " + number_text(g.value) + ")";
  }
  if (const NonFinite w = find_non_finite(m.params_flat(), m.layout())) {
    return what + "; the weights themselves are not finite from " + w.describe() +
           " on (an earlier update overflowed)";
  }
  if (!std::isfinite(loss)) return what + "; every gradient is finite, the loss is not";
  return what + "; every gradient is finite, but their sum of squares overflowed";
}

void Trainer::inject_gradient_faults() {
  // LLMCPU_FAULT=nan@grad-NAME#K (core/util/fault.h): a NaN in the middle of the last layer's slice
  // of that gradient (or of the whole tensor, for those without layers) at this process's Kth step.
  Gpt2& m = *model_;
  const ParameterLayout& layout = m.layout();
  for (int t = 0; t < kNumParameterTensors; ++t) {
    if (fault_at(std::string("grad-") + ParameterLayout::name(t)) != FaultAction::kNan) continue;
    const size_t n = layout.size(t);
    const size_t slice = (t >= 2 && t <= 13) ? n / layout.dims(t)[0] : n;
    m.grads_flat()[layout.offset(t) + (n - slice) + slice / 2] = std::nanf("");
  }
}

}  // namespace llmcpu
