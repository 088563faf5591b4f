#include "core/train/checkpoint_store.h"

#include <algorithm>
#include <charconv>
#include <cinttypes>
#include <cstdio>
#include <filesystem>
#include <regex>
#include <utility>

#include "core/comm/zero_shards.h"
#include "core/io/checkpoint.h"
#include "core/io/hf_llama.h"
#include "core/io/json_file.h"
#include "core/model/llama_config.h"
#include "core/train/non_finite.h"
#include "core/util/fault.h"
#include "simd/error.h"

namespace llmcpu {

namespace fs = std::filesystem;

std::string checkpoint_model_path(const std::string& dir, int64_t step, bool llama) {
  char name[64];
  std::snprintf(name, sizeof name, "model_%08" PRId64 "%s", step, llama ? ".safetensors" : ".bin");
  return (fs::path(dir) / name).string();
}

std::string find_checkpoint_model(const std::string& dir, int64_t step) {
  std::error_code ec;
  const std::string llama = checkpoint_model_path(dir, step, true);
  return fs::is_regular_file(llama, ec) ? llama : checkpoint_model_path(dir, step);
}

std::string checkpoint_adapter_path(const std::string& dir, int64_t step) {
  char name[64];
  std::snprintf(name, sizeof name, "adapter_%08" PRId64, step);
  return (fs::path(dir) / name).string();
}

namespace {

// What holds a checkpoint's weights besides its state: the model file, or a LoRA run's adapter
// folder.
std::string checkpoint_weights(const std::string& dir, int64_t step) {
  std::error_code ec;
  const std::string adapter = checkpoint_adapter_path(dir, step);
  return fs::is_directory(adapter, ec) ? adapter : find_checkpoint_model(dir, step);
}

bool weights_present(const std::string& dir, int64_t step) {
  std::error_code ec;
  return fs::is_regular_file(find_checkpoint_model(dir, step), ec) ||
         fs::is_regular_file(fs::path(checkpoint_adapter_path(dir, step)) /
                                 "adapter_model.safetensors",
                             ec);
}

}  // namespace

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
    if (weights_present(dir, step)) steps.push_back(step);
  }
  std::sort(steps.begin(), steps.end());
  return steps;
}

int64_t latest_checkpoint(const std::string& dir) {
  const std::vector<int64_t> steps = list_checkpoints(dir);
  return steps.empty() ? -1 : steps.back();
}

namespace {

// A checkpoint's model file against the model of its state: of its kind, and for a Hugging Face
// model every tensor of the architecture present in its shape (an llm.c file's header and length
// are checked before the state is read).
void check_model_file(const std::string& model, const ModelConfig& c) {
  const bool safetensors = fs::path(model).extension() == ".safetensors";
  if (c.family().llmc_files == safetensors) {
    throw FileError(model, std::string("is ") + (safetensors ? "a safetensors" : "an llm.c") +
                               " model file, but the checkpoint's state holds a model of shape " +
                               describe(c) + " (its model file is model_NNNNNNNN." +
                               (c.family().llmc_files ? "bin)" : "safetensors)"));
  }
  if (safetensors) HfLlamaFile(model, c);
}

}  // namespace

std::unique_ptr<CheckpointFiles> open_checkpoint(const std::string& dir, int64_t step) {
  const std::string model = find_checkpoint_model(dir, step);
  const bool lora_files = weights_present(dir, step) && !fs::exists(model);
  if (!lora_files && fs::path(model).extension() == ".bin") read_checkpoint_header(model);
  auto files = std::make_unique<CheckpointFiles>();
  const std::string path = checkpoint_state_path(dir, step);
  files->state = std::make_unique<TrainStateFile>(path);
  const TrainState& s = files->state->state();
  if (s.step != step) {
    throw FileError(path, "holds the state of step " + std::to_string(s.step) +
                              ", but its name says step " + std::to_string(step));
  }
  if (s.adapter.empty() == lora_files) {
    throw FileError(path, s.adapter.empty() ? "a model's state, but beside it is an adapter folder"
                                            : "a LoRA run's state, but its adapter folder " +
                                                  checkpoint_adapter_path(dir, step) +
                                                  " is missing");
  }
  std::vector<ParameterSpan> spans;
  if (lora_files) {
    spans = described_adapter(*files->state, nullptr).spans();  // checks it fits the model
  } else {
    check_model_file(model, s.config);
    spans = ParameterLayout(s.config).spans();
  }
  const uint32_t K = s.shards();
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

namespace {

// Whether NAME.tmp.<digits> is a temporary file a checkpoint write makes: a model or state file
// (or shard), or a Llama-family checkpoint's config.json and tokenizer files.
bool written_here(const std::string& temporary) {
  if (temporary.starts_with("model_") || temporary.starts_with("state_")) return true;
  const std::string name = temporary.substr(0, temporary.rfind(".tmp."));
  const std::vector<std::string>& tokenizer = tokenizer_file_names();
  return name == "config.json" ||
         std::find(tokenizer.begin(), tokenizer.end(), name) != tokenizer.end();
}

}  // namespace

CheckpointStore::CheckpointStore(std::string dir, const std::string& resume, bool writer,
                                 std::vector<std::string>* notes)
    : dir_(std::move(dir)) {
  // Before anything is read: a folder that cannot be written, or that another trainer is writing,
  // is refused now rather than at the first checkpoint.
  if (writer && !dir_.empty()) take_folder(notes);
  try {
    if (writer) lock_resume_folder(resume, notes);
  } catch (...) {
    remove_new_folder();  // refused: the folder made just now goes again
    throw;
  }
}

CheckpointStore::~CheckpointStore() { remove_new_folder(); }

void CheckpointStore::remove_new_folder() noexcept {
  if (!created_) return;
  // A folder made for a run that could not start (a bad --model, data that does not fit): a failed
  // start leaves nothing behind.
  std::error_code ec;
  if (lock_) fs::remove(lock_->path(), ec);  // while still holding it
  lock_.reset();
  fs::remove(dir_, ec);  // only if empty
}

void CheckpointStore::take_folder(std::vector<std::string>* notes) {
  std::error_code ec;
  const bool created = fs::create_directories(dir_, ec);
  if (!fs::is_directory(dir_)) {
    throw FileError(dir_, "cannot create the checkpoint folder: " + ec.message());
  }
  lock_ = std::make_unique<FolderLock>(dir_, "train.lock", "llmcpu train");
  created_ = created;
  // Holding the lock, this is the only writer: a temporary file here (or in a LoRA checkpoint's
  // adapter folder) was left by a killed run.
  std::vector<std::string> stale = stale_temporary_files(dir_);
  const std::regex adapter_folder("adapter_[0-9]{8,}");
  for (const auto& entry : fs::directory_iterator(dir_, ec)) {
    if (!entry.is_directory(ec) ||
        !std::regex_match(entry.path().filename().string(), adapter_folder)) {
      continue;
    }
    for (const std::string& path : stale_temporary_files(entry.path().string())) {
      const std::string name = fs::path(path).filename().string();
      if (name.starts_with("adapter_model.safetensors.tmp.") ||
          name.starts_with("adapter_config.json.tmp.")) {
        stale.push_back(path);
      }
    }
  }
  for (const std::string& path : stale) {
    const std::string name = fs::path(path).filename().string();
    if (!written_here(name) && !name.starts_with("adapter_")) continue;
    if (fs::remove(path, ec)) notes->push_back("removed " + path + ", left by a killed run");
  }
  // Shards of a ZeRO-1 checkpoint whose state file never came: the run stopped while writing it.
  const std::regex shard_name("(state_[0-9]{8,})\\.rank[0-9]+-of-[0-9]+\\.bin");
  for (const auto& entry : fs::directory_iterator(dir_, ec)) {
    std::smatch m;
    const std::string name = entry.path().filename().string();
    if (!std::regex_match(name, m, shard_name)) continue;
    if (fs::exists(fs::path(dir_) / (m[1].str() + ".bin"), ec)) continue;
    if (fs::remove(entry.path(), ec)) {
      notes->push_back("removed " + entry.path().string() +
                       ", a shard of an unfinished checkpoint");
    }
  }
}

// The --resume folder is locked for reading (shared) for the whole run, unless the run writes into
// it (then the checkpoint folder's exclusive lock covers it): a trainer writing it and one
// resuming from it never overlap.
void CheckpointStore::lock_resume_folder(const std::string& dir, std::vector<std::string>* notes) {
  std::error_code ec;
  if (dir.empty() || !fs::is_directory(dir, ec)) return;  // open_resume_point says what is wrong
  if (lock_ && fs::equivalent(dir, dir_, ec)) return;     // written: locked already
  resume_lock_ = std::make_unique<FolderLock>(dir, "train.lock", "llmcpu train", LockMode::kShared);
  if (!resume_lock_->held()) {
    notes->push_back("--resume " + dir + " is not locked against writers (" +
                     resume_lock_->why_not() + "): a trainer writing it meanwhile goes unnoticed");
  }
}

void CheckpointStore::check_model(const ModelConfig& config) const {
  if (!lock_ || config.family().llmc_files) return;
  std::error_code ec;
  const fs::path json = fs::path(dir_) / "config.json";
  if (!fs::is_regular_file(json, ec)) return;
  bool llama_checkpoints = false;
  for (const int64_t step : list_checkpoints(dir_)) {
    llama_checkpoints |= fs::is_regular_file(checkpoint_model_path(dir_, step, true), ec);
  }
  if (!llama_checkpoints) return;
  std::string theirs;
  try {
    const ModelConfig c = read_llama_config(read_json_file(json.string()), json.string());
    if (c == config) return;
    theirs = describe(c);
  } catch (const Error& e) {
    theirs = e.what();
  }
  throw UsageError("--checkpoint-dir " + dir_ + ": its checkpoints are of another model (" +
                   json.string() + ": " + theirs + "; this run's is " + describe(config) +
                   "), and their config.json serves them all: checkpoint into another folder");
}

std::string CheckpointStore::newest_good() const {
  const std::vector<int64_t> steps = dir_.empty() ? std::vector<int64_t>{} : list_checkpoints(dir_);
  for (auto it = steps.rbegin(); it != steps.rend(); ++it) {
    try {
      open_checkpoint(dir_, *it);
      return "the newest good checkpoint is " + checkpoint_weights(dir_, *it) + " and " +
             fs::path(checkpoint_state_path(dir_, *it)).filename().string() + " (step " +
             std::to_string(*it) + ")";
    } catch (const FileError&) {
    }
  }
  return dir_.empty() ? "no checkpoint is written (no --checkpoint-dir)"
                      : "there is no good checkpoint in " + dir_ + " yet";
}

namespace {

// Deletes a checkpoint: its state file first (it marks the checkpoint complete), then the rest.
void remove_checkpoint(const std::string& dir, int64_t step) {
  std::error_code ec;
  const std::string state = checkpoint_state_path(dir, step);
  fs::remove(state, ec);
  fs::remove(checkpoint_model_path(dir, step), ec);
  fs::remove(checkpoint_model_path(dir, step, true), ec);
  fs::remove_all(checkpoint_adapter_path(dir, step), ec);
  const std::string shard_prefix = fs::path(state).stem().string() + ".rank";
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (entry.path().filename().string().starts_with(shard_prefix)) fs::remove(entry.path(), ec);
  }
}

// Writes this rank's shard of a ZeRO-1 checkpoint; returns its checksum.
// The arena a checkpoint's weights and moments are of: the model's, or a LoRA run's adapter's.
const float* trained_params(const CheckpointContents& c) {
  return c.adapter ? c.adapter->params() : c.model.params_flat();
}
size_t trained_size(const CheckpointContents& c) {
  return c.adapter ? c.adapter->size() : c.model.num_parameters();
}

uint64_t write_own_shard(const CheckpointContents& c, const std::string& state_path, int rank,
                         int ranks) {
  const size_t Q = c.adamw.size();
  const StateShardHeader header{c.state.step, uint32_t(rank), uint32_t(ranks), trained_size(c),
                                Q};
  AtomicFileWriter out(state_shard_path(state_path, rank, ranks), "shard-write");
  const uint64_t sum = write_state_shard(out, header, trained_params(c), c.adamw.parts(),
                                         {c.adamw.m(), Q}, {c.adamw.v(), Q});
  out.commit();  // durable before the marker can name it
  return sum;
}

// Rank 0's model files of a checkpoint, written and finished: llm.c's file, or a Hugging Face
// model's safetensors with config.json and the tokenizer files (hf_llama_folder.h).
void stage_model_files(StagedFiles& files, const std::string& dir, const CheckpointContents& c) {
  const int64_t step = c.state.step;
  if (c.adapter) {  // in place before the state file, which alone marks the checkpoint complete
    write_peft_adapter(checkpoint_adapter_path(dir, step), c.model.config(), *c.adapter,
                       *c.adapter_saved, "model-write");
    return;
  }
  if (c.model.config().family().llmc_files) {
    AtomicFileWriter& out = files.add(checkpoint_model_path(dir, step), "model-write");
    write_checkpoint(out, c.model, checkpoint_version_for(c.state.precision));
    out.finish();
    return;
  }
  const TensorDtype dtype =
      c.state.precision == Precision::kBf16 ? TensorDtype::kBf16 : TensorDtype::kF32;
  const LlamaOrigin none;
  const std::string name = fs::path(checkpoint_model_path(dir, step, true)).filename().string();
  stage_llama_folder(files, dir, name, llama_weights_of(c.model, dtype), dtype,
                     c.origin ? *c.origin : none, "model-write");
}

}  // namespace

std::string CheckpointStore::save(CheckpointContents c, Communicator& world,
                                  int keep_newest) const {
  const int64_t step = c.state.step;
  const std::string model_path =
      c.adapter ? checkpoint_adapter_path(dir_, step)
                : checkpoint_model_path(dir_, step, !c.model.config().family().llmc_files);
  // Without ZeRO-1 every rank holds the same weights and moments: rank 0 writes them.
  if (!c.sharded && world.rank() != 0) return model_path;
  if (const std::string bad = refusal(c, world); !bad.empty()) {
    throw TrainingError("not writing the checkpoint of step " + std::to_string(step) + ": " + bad +
                        "; " + newest_good() + "; training stopped");
  }
  try {
    write_files(c, world);
  } catch (const FileError& e) {
    throw TrainingError("the checkpoint of step " + std::to_string(step) +
                        " could not be written: " + e.what() + "; " + newest_good() +
                        "; training stopped");
  }
  if (world.rank() != 0) return model_path;
  if (keep_newest > 0) {
    const std::vector<int64_t> steps = list_checkpoints(dir_);
    for (size_t i = 0; i + keep_newest < steps.size(); ++i) remove_checkpoint(dir_, steps[i]);
  }
  return model_path;
}

// What is not finite in the state a checkpoint would hold ("" when all is); sharded, every rank
// refuses or none does.
std::string CheckpointStore::refusal(const CheckpointContents& c, Communicator& world) const {
  const float* params = trained_params(c);  // const: saving does not mark the bf16 copy stale
  const AdamW& adamw = c.adamw;
  std::string bad;
  if (!c.sharded && c.adapter) {
    const size_t P = c.adapter->size();
    bad = non_finite_packed(params, P, "adapter weights", 0);
    if (bad.empty()) bad = non_finite_packed(adamw.m(), P, "AdamW first moments", 0);
    if (bad.empty()) bad = non_finite_packed(adamw.v(), P, "AdamW second moments", 0);
    return bad;
  }
  if (!c.sharded) {
    using Named = std::pair<const float*, const char*>;
    for (const auto& [flat, what] :
         {Named{params, "weights"}, Named{adamw.m(), "AdamW first moments"},
          Named{adamw.v(), "AdamW second moments"}}) {
      if (bad.empty()) bad = non_finite_message(flat, c.model.layout(), what);
    }
    return bad;
  }
  const int rank = world.rank();  // this rank's parts
  for (const ParameterSpan& p : adamw.parts()) {
    if (!bad.empty()) break;
    bad = non_finite_packed(params + p.offset, p.count, "weights", rank);
  }
  if (bad.empty()) bad = non_finite_packed(adamw.m(), adamw.size(), "AdamW first moments", rank);
  if (bad.empty()) bad = non_finite_packed(adamw.v(), adamw.size(), "AdamW second moments", rank);
  double refusing = bad.empty() ? 0 : 1;
  world.all_reduce_sum(&refusing, 1);
  if (refusing > 0 && bad.empty())
    bad = "another rank's training state is not finite (it says where)";
  return bad;
}

// Every file is written and synced under a temporary name before the state file is renamed into
// place, so a full disk or an I/O error never leaves half a checkpoint: the state file goes last,
// and its presence marks the checkpoint complete (list_checkpoints).
void CheckpointStore::write_files(CheckpointContents& c, Communicator& world) const {
  const int64_t step = c.state.step;
  const std::string state_path = checkpoint_state_path(dir_, step);
  const int rank = world.rank(), ranks = world.size();
  StagedFiles model_files;
  std::string failed;  // this rank's failure, sharded
  try {
    if (rank == 0) stage_model_files(model_files, dir_, c);
    if (c.sharded) {
      c.state.shard_checksums.assign(ranks, 0);
      c.state.shard_checksums[rank] = write_own_shard(c, state_path, rank, ranks);
    }
  } catch (const FileError& e) {
    if (!c.sharded) throw;
    failed = e.what();
  }
  if (c.sharded) {
    // The state file names every shard once all of them are durable (or none is written).
    double failures = failed.empty() ? 0 : 1;
    world.all_reduce_sum(&failures, 1);
    if (!failed.empty()) throw FileError(state_shard_path(state_path, rank, ranks), failed);
    if (failures > 0) {
      throw FileError(state_path, std::to_string(int(failures)) +
                                      " other rank(s) could not write their shard (they say why)");
    }
    uint64_t* sums = c.state.shard_checksums.data();
    for (int r = 0; r < ranks; ++r) world.broadcast(&sums[r], sizeof(uint64_t), r);
    if (rank != 0) return;
  }
  const size_t P = trained_size(c);
  AtomicFileWriter state_file(state_path, "state-write");
  if (c.sharded) {
    write_train_state(state_file, c.state, {}, {}, {});
  } else {
    write_train_state(state_file, c.state, {trained_params(c), P}, {c.adamw.m(), P},
                      {c.adamw.v(), P});
  }
  state_file.finish();
  model_files.publish();
  if (fault_at("between-renames") == FaultAction::kKill) fault_kill_now();
  state_file.publish();
}

}  // namespace llmcpu
