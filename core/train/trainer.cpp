#include "core/train/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <utility>

#include "core/io/checkpoint.h"
#include "core/io/model_file.h"
#include "core/lora/merge.h"
#include "core/lora/trained_copies.h"
#include "core/model/preset.h"
#include "core/train/non_finite.h"
#include "core/util/fault.h"
#include "core/util/rng.h"
#include "simd/error.h"

namespace llmcpu {

std::unique_ptr<Model> make_model(const ModelSource& source, uint64_t seed, std::string* origin,
                                  Precision precision, bool base_gradients, QuantFormat base_quant,
                                  const std::vector<int>& keep) {
  auto model = std::make_unique<Model>(source.config, active_kernels(), precision, nullptr,
                                       base_gradients);
  // A frozen base freezes as it is written (init_model's tensors one at a time; a file's at the
  // end): its whole fp32 master exists only while a file loads.
  if (!base_gradients) model->begin_freeze(base_quant, keep);
  if (source.is_file()) {
    load_model_file(source, *model);
    if (origin) *origin = "checkpoint " + source.path + " (" + source.description + ")";
  } else {
    init_model(*model, seed);
    if (origin)
      *origin = source.description + ", " + source.config.family().name + " initialisation, seed " +
                std::to_string(seed);
  }
  if (!base_gradients) {
    model->finish_freeze();
    if (origin && base_quant != QuantFormat::kNone)
      *origin += ", base quantized to " + std::string(quant_format_name(base_quant));
  }
  return model;
}

namespace {

// The options checked, and a resumed run writing into its --resume folder unless told otherwise.
TrainOptions run_options(const TrainOptions& options) {
  check_train_options(options);
  TrainOptions o = options;
  if (!o.resume.empty() && o.checkpoint_dir.empty()) o.checkpoint_dir = o.resume;
  return o;
}

// A model file written at the end (--save, --save-merged) for a model outside llm.c's files
// names a folder: llm.c's .bin holds GPT-2 only.
void check_model_save_path(const char* flag, const std::string& path, const ModelConfig& c) {
  namespace fs = std::filesystem;
  if (path.empty() || c.family().llmc_files) return;
  const std::string model =
      std::string("a ") + c.family().name + " model (model_type " + c.family().model_type + ")";
  const std::string at = std::string(flag) + " " + path + ": ";
  if (fs::path(path).extension() == ".bin") {
    throw UsageError(at + model + " is saved as a Hugging Face " +
                     "folder (model.safetensors, config.json and the tokenizer's files); llm.c's " +
                     ".bin holds GPT-2 only: name a folder");
  }
  std::error_code ec;
  if (fs::exists(path, ec) && !fs::is_directory(path, ec)) {
    throw UsageError(at + "is a file, but " + model + " is saved as a " +
                     "folder (model.safetensors, config.json and the tokenizer's files)");
  }
}

// --save: the model, or a LoRA run's PEFT adapter folder, whatever the model; --save-merged: the
// model with the adapter merged.
void check_save_path(const TrainOptions& o, const ModelConfig& c) {
  namespace fs = std::filesystem;
  check_model_save_path("--save-merged", o.save_merged, c);
  if (!o.save_path.empty() && o.lora()) {
    std::error_code ec;
    if (fs::exists(o.save_path, ec) && !fs::is_directory(o.save_path, ec)) {
      throw UsageError("--save " + o.save_path + ": is a file, but a LoRA run saves its adapter "
                       "as a PEFT folder (adapter_config.json, adapter_model.safetensors)");
    }
    return;
  }
  check_model_save_path("--save", o.save_path, c);
}

// A Hugging Face model resumed from `dir`: its checkpoints' config.json and tokenizer files.
LlamaOrigin resumed_llama_origin(const std::string& dir, const ModelConfig& c) {
  if (c.family().llmc_files) return {};
  std::error_code ec;
  const std::string config = (std::filesystem::path(dir) / "config.json").string();
  return llama_origin(std::filesystem::is_regular_file(config, ec) ? config : "", dir);
}

// The model --model names must have the shape of the checkpoint --resume goes on from.
void check_resumed_model(const TrainOptions& o, const ModelConfig& saved) {
  if (o.model.empty()) return;
  const ModelConfig asked = resolve_model(o.model).config;
  if (!(asked == saved)) {
    throw UsageError("--resume " + o.resume + ": the checkpoint holds a model of shape " +
                     describe(saved) + ", but --model " + o.model + " is " + describe(asked));
  }
}

}  // namespace

Trainer::Trainer(const TrainOptions& options, Communicator* world)
    : opt_(run_options(options)),
      own_world_(world ? nullptr : single_process_communicator()),
      world_(world ? world : own_world_.get()),
      schedule_(opt_.lr_schedule, opt_.lr, opt_.warmup, opt_.steps, opt_.lr_floor) {
  world_->set_timeout(opt_.comm_timeout);
  const bool rank0 = world_->rank() == 0;
  if (rank0 && !opt_.plot_path.empty()) find_gnuplot();  // before any work
  // Rank 0 alone writes checkpoints, and so alone takes the folder. Made just now, it goes again
  // if the run cannot start (the store's destructor as this unwinds).
  store_ = std::make_unique<CheckpointStore>(opt_.checkpoint_dir, opt_.resume, rank0, &notes_);
  Start start = load_model(*store_);
  model_ = std::move(start.model), origin_ = std::move(start.origin), step_ = start.step;
  memory_ = std::move(start.memory);
  llama_origin_ = std::move(start.llama_origin);
  check_save_path(opt_, model_->config());
  store_->check_model(model_->config());
  grad_accum_ = micro_batches_per_rank(opt_, world_->size());
  parallel_ = start_ranks(*model_);
  // Every shape the run computes is planned here (validation uses the training shape): the steps,
  // validations and samples that follow allocate nothing.
  offload_ = attach_device(*model_, memory_);
  plan_steps(*model_, offload_);
  open_data(model_->config(), start.resume);
  parallel_->check_ranks_agree(opt_, *model_, train_.get(), val_.get());
  share_weights(*parallel_, *train_, memory_);
  optimizer_ = make_optimizer(*parallel_, start.resume);
  optimizer_bytes_ = parallel_->per_rank(double(optimizer_->adamw().bytes()));
  master_bytes_ = parallel_->per_rank(double(model_->master_bytes()));
  reports_ = std::make_unique<RunReports>(opt_, rank0, step_);
  store_->keep();
}

Trainer::~Trainer() = default;

// `locked`: the folders are locked before anything is read (the --resume folder for as long as
// the run reads it).
Trainer::Start Trainer::load_model(const CheckpointStore& /*locked*/) {
  Start s;
  if (opt_.resume.empty()) {
    const ModelSource source = resolve_model(opt_.model);  // --model, read once
    s.memory = plan_run_memory(opt_, source.config, *world_, weights_origin(source));
    s.model = make_model(source, opt_.seed, &s.origin, opt_.precision, !opt_.lora(),
                         opt_.base_quant, kept_for_copies(source.config));
    s.llama_origin = llama_origin_of(source);
    if (opt_.lora()) make_adapter(*s.model, source);
    return s;
  }
  s.resume = open_resume_point(opt_.resume, &notes_);
  const ModelConfig& config = s.resume->state().config;
  check_resumed_model(opt_, config);
  check_resume_matches(*s.resume, opt_, world_->size());
  if (!s.resume->state().adapter.empty()) return resume_adapter(std::move(s));
  if (opt_.base_quant != QuantFormat::kNone) {
    throw UsageError("--base-quant with --resume " + opt_.resume +
                     ": the run trains the whole model (its checkpoint holds no adapter)");
  }
  s.memory = plan_run_memory(opt_, config, *world_);
  s.model = std::make_unique<Model>(config, active_kernels(), opt_.precision);
  load_weights(*s.resume->files, *s.model);
  s.step = static_cast<int>(s.resume->state().step);
  s.origin = resume_origin(*s.resume);
  s.llama_origin = resumed_llama_origin(opt_.resume, config);
  return s;
}

// The base tensors a new adapter trains copies of that a frozen bf16 base keeps in fp32 for them
// (the embedding, the head; the norms stay in fp32 anyway). UsageError for a --lora-train entry
// this model cannot take.
std::vector<int> Trainer::kept_for_copies(const ModelConfig& config) const {
  if (!opt_.lora() || !opt_.adapter.empty()) return {};
  try {
    const std::vector<TrainedPiece> pieces =
        select_trained_pieces(config, parse_trained_modules(opt_.lora_train));
    if (!opt_.save_merged.empty()) check_mergeable(config, pieces);
    return trained_roles(pieces);
  } catch (const UsageError& e) {
    throw UsageError("--lora-train " + opt_.lora_train + ": " + e.what());
  }
}

// A LoRA run's adapter: read from --adapter, or new (PEFT's initialisation from the run's seed,
// and copies of the base's tensors it trains in full).
void Trainer::make_adapter(Model& model, const ModelSource& source) {
  const ModelConfig& c = model.config();
  if (!opt_.adapter.empty()) {
    lora_ = std::make_unique<LoraAdapter>(read_peft_adapter(opt_.adapter, c, &lora_saved_));
    if (!opt_.save_merged.empty()) check_mergeable(c, lora_->pieces());
  } else {
    try {
      lora_ = std::make_unique<LoraAdapter>(c, lora_options_of(opt_), opt_.seed ^ 0x4C6F5241ull);
    } catch (const UsageError& e) {
      throw UsageError(std::string("--lora-targets: ") + e.what());
    }
    lora_->copy_base(std::as_const(model).params_flat(), c);
    lora_saved_.base_model_name_or_path = source.is_file() ? opt_.model : source.description;
    lora_saved_.init_lora_weights = true;
  }
  model.attach_lora(lora_->params_for_model(true));
}

// A LoRA run's checkpoint: the base from --model (the checkpoint holds the adapter alone), the
// adapter and its options from the checkpoint.
Trainer::Start Trainer::resume_adapter(Start s) {
  const ResumePoint& point = *s.resume;
  if (opt_.model.empty()) {
    throw UsageError("--resume " + opt_.resume + ": a LoRA run's checkpoint holds its adapter, "
                     "not its base: give --model, the base it was trained on");
  }
  lora_ = std::make_unique<LoraAdapter>(load_adapter(*point.files, &lora_saved_));
  const LoraOptions& o = lora_->options();  // the run's options from now on (memory, ranks)
  opt_.lora_r = o.r, opt_.lora_alpha = o.alpha, opt_.lora_rslora = o.rslora;
  opt_.lora_dropout = o.dropout;
  opt_.lora_targets.clear();
  for (const std::string& t : o.targets) opt_.lora_targets += (opt_.lora_targets.empty() ? "" : ",") + t;
  opt_.lora_train.clear();
  for (const std::string& t : o.train) opt_.lora_train += (opt_.lora_train.empty() ? "" : ",") + t;
  if (!opt_.save_merged.empty()) check_mergeable(point.state().config, lora_->pieces());
  const ModelSource source = resolve_model(opt_.model);
  s.memory = plan_run_memory(opt_, point.state().config, *world_, weights_origin(source));
  const QuantFormat saved = point.state().base_quant;
  if (opt_.base_quant != QuantFormat::kNone && opt_.base_quant != saved) {
    throw UsageError("--resume " + opt_.resume + ": the run was saved with --base-quant " +
                     quant_format_name(saved) + ", now " + quant_format_name(opt_.base_quant) +
                     "; exact resume needs the same base");
  }
  opt_.base_quant = saved;  // the run's, as it was saved
  s.model = make_model(source, opt_.seed, nullptr, opt_.precision, /*base_gradients=*/false,
                       opt_.base_quant);
  s.model->attach_lora(lora_->params_for_model(true));
  s.step = static_cast<int>(point.state().step);
  s.origin = resume_origin(point) + ", base " + source.path;
  s.llama_origin = llama_origin_of(source);
  return s;
}

std::unique_ptr<DataParallel> Trainer::start_ranks(Model& model) {
  return std::make_unique<DataParallel>(*world_, model, opt_.zero, &notes_, lora_.get());
}

OffloadOutcome Trainer::attach_device(Model& model, RunMemory& memory) {
  if (opt_.plugin.empty()) return {};
  OffloadOptions options;
  options.layers = opt_.offload_layers;
  options.memory_limit = opt_.device_memory_limit;
  OffloadOutcome outcome = enable_offload(model, opt_.plugin, options);
  if (!model.offload_active() && memory.request.host_layers > 0) {
    // The CPU keeps every layer after all: the plan of the run it now is.
    memory.request.host_layers = 0;
    memory.replan();
  }
  return outcome;
}

// After the device took its part (`attached`): the CPU's arena then leaves out the device's blocks.
void Trainer::plan_steps(Model& model, const OffloadOutcome& /*attached*/) {
  model.plan_batch(opt_.batch, opt_.seq_len, {.recompute = opt_.recompute});
  inputs_.resize((size_t)opt_.batch * opt_.seq_len);
  targets_.resize(inputs_.size());
  starts_.resize(inputs_.size());
  batches_ = std::make_unique<StepBatches>(opt_.batch, opt_.seq_len, grad_accum_);
  if (opt_.sample_every > 0) {
    const int tokens = std::min(opt_.sample_tokens, model.config().max_seq_len);
    generator_ = std::make_unique<Generator>(model, tokens);
    sample_.reserve(generator_->capacity());
  }
}

void Trainer::open_data(const ModelConfig& c, const std::optional<ResumePoint>& resume) {
  RowOptions rows = opt_.rows;
  rows.pad_token = c.pad_token_id >= 0 ? c.pad_token_id : 0;
  train_ = std::make_unique<DataLoader>(opt_.train_data, opt_.batch, opt_.seq_len, c.vocab_size,
                                        opt_.shuffle, opt_.seed, rows);
  if (!opt_.val_data.empty()) {
    val_ = std::make_unique<DataLoader>(opt_.val_data, opt_.batch, opt_.seq_len, c.vocab_size,
                                        /*shuffle=*/false, 0, rows);
  }
  for (const DataLoader* loader : {train_.get(), val_.get()}) {
    if (!loader) continue;
    for (const DataLoader::Skipped& s : loader->skipped()) {
      notes_.push_back(s.file + " " + s.why + ": skipped");
    }
    if (loader->packed() && model_->offload_active()) {
      throw UsageError("--plugin: " + loader->pattern() +
                       " packs examples into rows, which a device's blocks cannot keep apart; "
                       "--pack off gives each example a row of its own");
    }
    if (loader->masked()) {
      notes_.push_back(loader->pattern() + ": " +
                       describe_rows(loader->row_stats(), opt_.seq_len, loader->packed()));
    }
  }
  if (!resume) return;
  try {
    train_->restore(resume->state().data);
  } catch (const Error& e) {
    throw UsageError("--resume " + opt_.resume + ": " + e.what());
  }
}

// After the data (the ranks agree on it first): ZeRO-1 on one machine shares one copy of the
// weights, and the memory plan follows what became of that.
void Trainer::share_weights(DataParallel& parallel, const DataLoader& /*agreed*/,
                            RunMemory& memory) {
  const bool shared = parallel.share_weights(*model_, &notes_);
  if (shared != memory.request.shared_weights) {  // planned otherwise
    memory.request.shared_weights = shared;
    memory.replan();
  }
}

// After the weights found their place: the moments (a resume's), and a device's part of them.
std::unique_ptr<TrainOptimizer> Trainer::make_optimizer(DataParallel& parallel,
                                                        const std::optional<ResumePoint>& resume) {
  auto optimizer = std::make_unique<TrainOptimizer>(
      *model_, parallel, opt_.weight_decay, resume ? resume->files.get() : nullptr, lora_.get());
  optimizer->adopt_device();  // after the moments: a resume's go to the device
  return optimizer;
}

std::string Trainer::save_checkpoint_now() {
  optimizer_->fetch_device_state();
  TrainState s;
  s.config = model_->config();
  s.B = opt_.batch;
  s.T = opt_.seq_len;
  s.grad_accum = grad_accum_ * world_->size();  // micro-batches per step over all ranks
  s.shuffle = opt_.shuffle;
  s.seed = opt_.seed;
  s.precision = opt_.precision;
  s.base_quant = opt_.base_quant;
  s.step = step_;
  s.adamw_t = optimizer_->adamw().steps_taken();
  s.data = train_->position();
  if (lora_) {
    PeftAdapterConfig described = lora_saved_;
    described.options = lora_->options();
    s.adapter = adapter_config_text(model_->config(), described);
    s.adapter_parameters = lora_->size();
  }
  // The const model: saving does not mark the bf16 copy stale.
  return store_->save({std::move(s), std::as_const(*model_), optimizer_->adamw(), parallel_->zero(),
                       &llama_origin_, lora_.get(), &lora_saved_},
                      *world_, opt_.keep_checkpoints);
}

bool Trainer::run(const TrainObserver& obs) {
  const double tokens_per_step =
      double(size_t(opt_.batch) * opt_.seq_len * grad_accum_) * world_->size();
  double smoothed_ms = 0;
  bool interrupted = false;
  BadSteps bad;  // steps skipped for a non-finite loss or gradient norm
  const int first = step_;
  optimizer_->adopt_device();
  for (int step = step_;; ++step) {
    const bool last = step == opt_.steps;
    // A resumed run does not repeat the validation and sample of the step it resumes at.
    validate_and_sample(step, !opt_.resume.empty() && step == first, obs);
    if (last || step > opt_.steps) break;
    if (parallel_->stop_requested()) {
      interrupted = true;
      break;
    }
    const auto start = std::chrono::steady_clock::now();
    const double loss = compute_gradients();
    if (faults_enabled()) inject_gradient_faults();
    const double norm = optimizer_->gradient_norm();
    const double lr = schedule_.at(step);
    const bool skipped = !std::isfinite(loss) || !std::isfinite(norm);
    // The step's metrics line: every step has one, skipped ones too (core/report/metrics.h).
    const auto report = [&](double ms) {
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
      bad.in_row = 0;
      optimizer_->clip(norm, opt_.grad_clip);
      optimizer_->update(lr);
      parallel_->check_replicas(*model_, step);
    } else {
      skip_step(
          step, loss, norm, bad, [&] { report(elapsed_ms()); }, obs);
    }
    step_ = step + 1;
    const double ms = elapsed_ms();
    smoothed_ms = smoothed_ms == 0 ? ms : 0.9 * smoothed_ms + 0.1 * ms;
    reports_->train_loss(step, static_cast<float>(loss));
    if (obs.on_step) {
      obs.on_step({step, opt_.steps, static_cast<float>(loss), lr, norm, ms,
                   tokens_per_step / (ms / 1000.0), smoothed_ms * (opt_.steps - step - 1) / 1000.0,
                   parallel_->comm_ms(), parallel_->comm_hidden()});
    }
    report(ms);
    if (opt_.checkpoint_every > 0 && step_ % opt_.checkpoint_every == 0 && step_ != opt_.steps) {
      checkpoint(obs);
    }
  }
  finish_run(interrupted, obs);
  return !interrupted;
}

void Trainer::skip_step(int step, double loss, double norm, BadSteps& bad,
                        const std::function<void()>& report, const TrainObserver& obs) {
  // The weights and moments stay as they were; the data and the schedule move on.
  if (bad.in_row++ == 0) bad.first = step;
  // The device's gradients and weights, for the diagnosis of where the step went wrong.
  if (optimizer_->device()) model_->fetch_device_state(true, true);
  const std::string at = "step " + std::to_string(step + 1) + "/" + std::to_string(opt_.steps);
  if (bad.in_row >= opt_.max_bad_steps) {
    reports_->train_loss(step, static_cast<float>(loss));
    report();
    throw TrainingError(
        std::to_string(bad.in_row) + " steps in a row (" + std::to_string(bad.first + 1) + " to " +
        std::to_string(step + 1) + ") had a non-finite loss or gradient norm " +
        "(--max-bad-steps " + std::to_string(opt_.max_bad_steps) + "); at " + at + ": " +
        describe_bad_step(loss, norm) + "; training stopped; " + newest_good_checkpoint() +
        " (a lower --lr, a --warmup or --grad-clip may help)");
  }
  if (obs.on_warning) {
    obs.on_warning(at + ": " + describe_bad_step(loss, norm) + "; update skipped (" +
                   std::to_string(bad.in_row) + " in a row; --max-bad-steps " +
                   std::to_string(opt_.max_bad_steps) + " stops the run)");
  }
}

void Trainer::checkpoint(const TrainObserver& obs) {
  if (opt_.checkpoint_dir.empty()) return;
  const std::string path = save_checkpoint_now();
  if (obs.on_checkpoint) obs.on_checkpoint(step_, path);
}

void Trainer::finish_run(bool interrupted, const TrainObserver& obs) {
  reports_->finish(obs.on_warning);
  checkpoint(obs);
  if (interrupted || world_->rank() != 0) return;
  if (lora_) {
    if (!opt_.save_path.empty()) save_adapter(opt_.save_path);
    if (opt_.save_merged.empty()) return;
    // The run is over: the adapter goes into the base's weights (which the model no longer
    // computes with: as it computed with them, decoded or widened from bf16), and the copies
    // follow.
    model_->restore_master();
    merge_adapter(model_->params_flat(), model_->layout(), model_->config(), *lora_);
    if (model_->precision() == Precision::kBf16) model_->refresh_bf16_weights();
    return save_model(opt_.save_merged);
  }
  if (!opt_.save_path.empty()) save_model(opt_.save_path);
}

void Trainer::save_model(const std::string& path) {
  optimizer_->fetch_device_state();
  const Model& model =
      *model_;  // the const params_flat(): saving does not mark the bf16 copy stale
  const std::string bad = non_finite_message(model.params_flat(), model.layout(), "weights");
  if (!bad.empty()) throw TrainingError("not writing " + path + ": " + bad);
  if (!model.config().family().llmc_files) {  // a Hugging Face folder
    const TensorDtype dtype =
        opt_.precision == Precision::kBf16 ? TensorDtype::kBf16 : TensorDtype::kF32;
    save_llama_folder(path, llama_weights_of(model, dtype), dtype, llama_origin_);
    return;
  }
  save_checkpoint(path, model, checkpoint_version_for(opt_.precision));
}

void Trainer::save_adapter(const std::string& dir) const {
  const float* p = lora_->params();
  for (size_t i = 0; i < lora_->size(); ++i) {
    if (!std::isfinite(p[i])) {
      throw TrainingError("not writing " + dir + ": the adapter's weights are not finite (" +
                          lora_->name_of(i) + ")");
    }
  }
  write_peft_adapter(dir, model_->config(), *lora_, lora_saved_);
}

std::string Trainer::describe_bad_step(double loss, double norm) const {
  const Model& m = *model_;
  std::string what = "loss " + number_text(loss) + ", gradient norm " + number_text(norm);
  if (lora_) {
    const float* g = lora_->grads();
    for (size_t i = 0; i < lora_->size(); ++i) {
      if (!std::isfinite(g[i])) {
        return what + "; the first non-finite gradient is the adapter's " +
               lora_->name_of(i);
      }
    }
    return what + (std::isfinite(loss) ? "; every adapter gradient is finite, but their sum of "
                                         "squares overflowed"
                                       : "; every adapter gradient is finite, the loss is not");
  }
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
  Model& m = *model_;
  if (lora_) {  // nan@grad-lora#K: in the middle of the adapter's last module
    if (fault_at("grad-lora") != FaultAction::kNan) return;
    const size_t last = lora_->modules().size() - 1;
    lora_->grads()[lora_->a_offset(last) + lora_->a_size(last) / 2] = std::nanf("");
    return;
  }
  const ParameterLayout& layout = m.layout();
  for (int t = 0; t < kNumTensorRoles; ++t) {
    if (fault_at(std::string("grad-") + layout.name(t)) != FaultAction::kNan) continue;
    const size_t n = layout.size(t), slice = layout.layer_size(t);
    if (n == 0) continue;
    m.grads_flat()[layout.offset(t) + (n - slice) + slice / 2] = std::nanf("");
  }
}

}  // namespace llmcpu
