// A run's checkpoints on disk: their names (DIR/model_NNNNNNNN.bin and state_NNNNNNNN.bin, and a
// ZeRO-1 run's per-rank shards), the folder's lock, listing them, writing one (atomically: every
// file synced under a temporary name, the state file renamed last), pruning the old ones, and
// reading one back to resume from, skipping a newest one that is corrupt. Deliberately not here:
// when a run checkpoints, and what it restores from one into the model and the optimizer (the
// Trainer's).
// A Llama-family model's checkpoint (llm.c's file has no Llama layout) makes DIR a Hugging Face
// folder: its model file is DIR/model_NNNNNNNN.safetensors (F32 in an fp32 run, BF16 in a bf16
// one), beside it DIR/config.json (the model's, built over the config.json of the folder the run
// started from) and the tokenizer files of that folder, so that `--model
// DIR/model_NNNNNNNN.safetensors` opens it; config.json and the tokenizer files serve every
// checkpoint of the folder, and are written again (atomically) with each, before its state file.
// A LoRA run's checkpoint holds its adapter alone (the base is frozen, and stays where --model
// names it): DIR/adapter_NNNNNNNN/, a PEFT adapter folder, and a state file (version 6) of the
// adapter's weights and moments.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/comm/communicator.h"
#include "core/io/data_position.h"
#include "core/io/hf_llama_folder.h"
#include "core/io/train_state.h"
#include "core/lora/peft_files.h"
#include "core/model/model.h"
#include "core/optim/adamw.h"
#include "core/train/train_options.h"
#include "core/train/training_error.h"
#include "core/util/file.h"

namespace llmcpu {

// The model file of a step's checkpoint: DIR/model_NNNNNNNN.bin (llm.c's), or for a Llama-family
// model DIR/model_NNNNNNNN.safetensors.
std::string checkpoint_model_path(const std::string& dir, int64_t step, bool llama = false);
// The model file a checkpoint in `dir` has: the .safetensors where one exists, else the .bin.
std::string find_checkpoint_model(const std::string& dir, int64_t step);
// A LoRA run's adapter folder of a step's checkpoint: DIR/adapter_NNNNNNNN.
std::string checkpoint_adapter_path(const std::string& dir, int64_t step);
// The state file of a step's checkpoint: the whole training state, or for a ZeRO-1 run the
// marker of its per-rank shard files (core/io/train_state.h).
std::string checkpoint_state_path(const std::string& dir, int64_t step);

// The steps of the complete checkpoints (state and model file, of either kind, both present) in
// `dir`, ascending. A
// checkpoint's model file is renamed into place before its state file, so a state file marks a
// complete checkpoint; whether its contents are sound is checked on resume.
std::vector<int64_t> list_checkpoints(const std::string& dir);
// The newest complete checkpoint in `dir` (its step), or -1 if there is none.
int64_t latest_checkpoint(const std::string& dir);

// A checkpoint's training state, opened and checked in full: its state file and, for a ZeRO-1
// run's checkpoint, every shard the state file names (present, sound, of this step and world, and
// the very files it was written with), and its model file (the kind the state's model has: a
// Llama-family model's safetensors of every tensor of its architecture, in its shape). Tensor i (0
// params, 1 m, 2 v) of source k of sources() is rank k of sources()'s packed part
// (core/comm/zero_shards.h); a whole state is rank 0 of 1.
struct CheckpointFiles {
  std::unique_ptr<TrainStateFile> state;
  std::vector<std::unique_ptr<StateShardFile>> shards;
  int sources() const { return shards.empty() ? 1 : int(shards.size()); }
  const void* tensor(int k, int i) const {
    return shards.empty() ? state->tensor_bytes(i) : shards[k]->tensor_bytes(i);
  }
};
// Throws FileError for a file that is missing, cut short or does not match the others.
std::unique_ptr<CheckpointFiles> open_checkpoint(const std::string& dir, int64_t step);

// Where a run resumes: the newest checkpoint of --resume whose files are sound.
struct ResumePoint {
  std::string dir;
  int64_t step = -1;
  std::unique_ptr<CheckpointFiles> files;
  const TrainState& state() const { return files->state->state(); }
};
// The newest sound checkpoint in `dir`; each newer one that is not is skipped with a note in
// `notes` and left in place. UsageError naming --resume when there is none, or none is sound.
ResumePoint open_resume_point(const std::string& dir, std::vector<std::string>* notes);
// Refuses (UsageError naming --resume and the flag) options under which `point` cannot go on bit
// for bit: another B, T, micro-batches per step over `ranks`, shuffling, seed or precision, or a
// step past what --steps can name.
void check_resume_matches(const ResumePoint& point, const TrainOptions& o, int ranks);
// "resumed from DIR/state_N.bin at step N (K ZeRO-1 shards)".
std::string resume_origin(const ResumePoint& point);
// The checkpoint's weights into `model` (of its shape), from however many shards they were saved
// in.
void load_weights(const CheckpointFiles& files, Model& model);
// Rank `rank` of `ranks`' parts of the AdamW moments and its step count into `adamw`, from
// whichever saved parts hold them: the same ranks, other ranks, or one whole state. `spans`: the
// arena's (the model's layout's, or a LoRA run's adapter's).
void load_moments(const CheckpointFiles& files, const std::vector<ParameterSpan>& spans, int rank,
                  int ranks, AdamW& adamw);
// A LoRA checkpoint: the adapter its state describes (FileError naming the state when it does not
// fit the model), with the state's weights, and what its adapter_config.json says.
LoraAdapter load_adapter(const CheckpointFiles& files, PeftAdapterConfig* saved);
// The same adapter with zero weights, from the state file alone (its shards not read).
LoraAdapter described_adapter(const TrainStateFile& state, PeftAdapterConfig* saved);

// What one checkpoint holds: the run's state and, by reference, the weights and moments.
struct CheckpointContents {
  TrainState state;  // every field but the shard checksums, which writing fills in
  const Model& model;
  const AdamW& adamw;
  bool sharded;  // ZeRO-1: each rank writes its own parts to a shard
  // A Llama-family model: where its config.json's other keys and its tokenizer files come from.
  const LlamaOrigin* origin = nullptr;
  // A LoRA run: its adapter, the arena the weights and moments are of (state.adapter describes
  // it), and its folder's other keys.
  const LoraAdapter* adapter = nullptr;
  const PeftAdapterConfig* adapter_saved = nullptr;
};

class CheckpointStore {
 public:
  // `writer` (rank 0 with a folder): creates and locks `dir` (a second trainer on it is refused,
  // naming the first one's PID) and removes what a killed run left there; and locks the --resume
  // folder `resume` for reading when it is another one. What it removed or could not lock goes
  // to `notes`. A folder created here is removed again when the store is destroyed before keep().
  CheckpointStore(std::string dir, const std::string& resume, bool writer,
                  std::vector<std::string>* notes);
  ~CheckpointStore();
  CheckpointStore(const CheckpointStore&) = delete;
  CheckpointStore& operator=(const CheckpointStore&) = delete;
  // The run started: the folder stays whatever happens next.
  void keep() { created_ = false; }
  // Refuses (UsageError naming --checkpoint-dir) a Llama-family model for a folder whose
  // checkpoints are of another model: their config.json, which this run would rewrite, is theirs.
  void check_model(const ModelConfig& config) const;
  const std::string& dir() const { return dir_; }

  // Writes DIR/model_N.bin (a Llama-family model: model_N.safetensors, config.json and the
  // tokenizer files) and DIR/state_N.bin (and under ZeRO-1 each rank's shard: every rank calls this
  // then) for c.state.step, then removes all but the newest `keep_newest` (0: none).
  // Refuses (TrainingError) weights or moments that are not finite; any failure leaves the
  // previous checkpoints untouched and the TrainingError names the file, the errno and the newest
  // good checkpoint. Returns the model file's path.
  std::string save(CheckpointContents c, Communicator& world, int keep_newest) const;
  // "the newest good checkpoint is DIR/model_00000010.bin and state_00000010.bin (step 10)", or
  // that there is none.
  std::string newest_good() const;

 private:
  void take_folder(std::vector<std::string>* notes);
  void remove_new_folder() noexcept;
  void lock_resume_folder(const std::string& resume, std::vector<std::string>* notes);
  std::string refusal(const CheckpointContents& c, Communicator& world) const;
  void write_files(CheckpointContents& c, Communicator& world) const;

  std::string dir_;
  bool created_ = false;
  std::unique_ptr<FolderLock> lock_;         // the checkpoint folder's, exclusive
  std::unique_ptr<FolderLock> resume_lock_;  // the --resume folder's, shared (when not written)
};

}  // namespace llmcpu
