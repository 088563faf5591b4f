// Training state, llmcpu's own format, for exact resume: everything a run needs to continue bit for
// bit besides the llm.c model file written beside it: the fp32 master weights, the AdamW moments
// and step count, the batch shape, the precision, the number of completed steps and the data
// loader's position (which includes its RNG state). The weights are the fp32 master weights in
// either precision (a bf16 run's model file holds only their bf16 rounding). Little-endian binary:
//   u32 magic 0x5354434C ("LCTS"), u32 version: 4 for a Llama-family model, 3 for GPT-2 (versions
//   1 and 2 are still read: version 2 is version 3 without the shard count, version 1 also
//   without the precision byte and means fp32)
//   i32 maxT, V, L, NH, C, Vp; from version 4: u32 n, char[n] the architecture (the model's
//   config.json text, core/io/hf_llama_config.h; n = 0 for GPT-2); from version 5: u32 n,
//   char[n] the adapter (a LoRA run's: its description as core/lora writes it, opaque here);
//   i32 B, T (1..maxT), grad_accum (positive); u8 shuffle (0 or 1);
//   u64 seed; u8 precision (0 fp32, 1 bf16); version 6 only: u8 the frozen base's format (0 as
//   loaded, 1 int8, 2 nf4: simd/quant/block_quant.h; --base-quant)
//   i64 step (completed optimizer steps), i64 adamw_t (AdamW updates taken: 0..step, one at most
//   per step)
//   u64 epoch, u64 rng_state (xorshift64*'s: never 0), u32 shard (index into the shard order),
//   u64 sample (shuffled: index into the sample order, at most its length), u32 n_shard_order,
//   u32[n], u64 n_sample_order (0 exactly when not shuffled), u32[n] u64 P (the model's
//   parameters, or in version 5 the adapter's); u32 shards;
//   shards = 0: f32 params[P], f32 m[P], f32 v[P]
// (GPT-2's full states are written as version 3, the Llama family's as 4, LoRA states as 6;
// version 5 is version 6 without the base's format byte, read as 0.)
//   shards = K > 0 (a ZeRO-1 run of K ranks): u64 checksum[K] of the K shard files below
//   u64 checksum of all the bytes before it
// A ZeRO-1 run's ranks each write their part (core/comm/zero_shards.h) of the three tensors to a
// shard file of their own, and the state file above, written once all of them are durable, marks
// the set complete. Shard file (state_NNNNNNNN.rank<r>-of-<K>.bin):
//   u32 magic 0x4853434C ("LCSH"), u32 version 1, i64 step, u32 rank r, u32 ranks K, u64 P,
//   u64 Q (the elements rank r of K owns), f32 params[Q], f32 m[Q], f32 v[Q] (packed), u64 checksum
// The tensors are never copied whole: the writers stream them from the model's and the
// optimizer's own buffers, and the readers, after checking the whole file, hand out the mapped
// tensors. Deliberately not here: which model or optimizer they belong to, who owns which part.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/io/data_position.h"
#include "core/model/config.h"
#include "core/model/parameters.h"
#include "core/model/precision.h"
#include "simd/quant/block_quant.h"
#include "core/util/file.h"

namespace llmcpu {

inline constexpr uint32_t kTrainStateMagic = 0x5354434C;
inline constexpr uint32_t kTrainStateVersion = 6;  // the newest read; LoRA states are 6
inline constexpr uint32_t kStateShardMagic = 0x4853434C;
inline constexpr uint32_t kStateShardVersion = 1;

// Everything in a training state but its three tensors.
struct TrainState {
  ModelConfig config;
  int B = 0, T = 0, grad_accum = 1;
  bool shuffle = true;
  uint64_t seed = 0;
  Precision precision = Precision::kFp32;
  QuantFormat base_quant = QuantFormat::kNone;  // a LoRA run's frozen base (version 6)
  int64_t step = 0;
  int64_t adamw_t = 0;
  DataPosition data;
  // A LoRA run's (version 5 and 6): its adapter's description and parameter count, which the three
  // tensors then hold instead of the model's (the base is frozen, and not in the state).
  std::string adapter;
  uint64_t adapter_parameters = 0;
  // 0: the tensors are in the state file; K > 0: in the K shard files of a ZeRO-1 run, whose
  // checksums (each file's last 8 bytes) are these.
  std::vector<uint64_t> shard_checksums;
  uint32_t shards() const { return uint32_t(shard_checksums.size()); }
};

// Written atomically (temporary file, fsync, rename), the tensors streamed from where they live:
// params, m, v are P = ParameterLayout(state.config).total() floats each, ParameterLayout order;
// with state.shards() > 0 (the marker of a sharded state) they must be empty.
void save_train_state(const std::string& path, const TrainState& state,
                      std::span<const float> params, std::span<const float> m,
                      std::span<const float> v);
// The same bytes into an open writer, which the caller finishes and publishes.
void write_train_state(AtomicFileWriter& out, const TrainState& state,
                       std::span<const float> params, std::span<const float> m,
                       std::span<const float> v);

// An open training-state file, checked in full on opening: throws FileError naming the file for a
// bad magic or version, a length that does not add up, a checksum mismatch (a corrupt or partly
// written file), or sizes that do not fit the model shape. Only then can read_tensors() copy the
// tensors out, so a bad file never overwrites anything.
class TrainStateFile {
 public:
  explicit TrainStateFile(const std::string& path);

  const TrainState& state() const { return state_; }
  const std::string& path() const { return file_.path(); }
  size_t num_parameters() const { return num_parameters_; }  // P
  // Copies the fp32 master weights and the AdamW moments into params, m, v (P floats each).
  // Only for a state with its tensors (shards() == 0).
  void read_tensors(std::span<float> params, std::span<float> m, std::span<float> v) const;
  // The mapped tensors, P floats each (0: params, 1: m, 2: v), not necessarily aligned: copy them
  // out with memcpy. Only for a state with its tensors.
  const void* tensor_bytes(int i) const;

 private:
  MappedFile file_;
  TrainState state_;
  size_t num_parameters_ = 0;
  size_t tensors_offset_ = 0;  // byte offset of params[0]; m and v follow
};

// Which part of the state a shard file holds.
struct StateShardHeader {
  int64_t step = 0;
  uint32_t rank = 0, ranks = 1;
  uint64_t num_parameters = 0;  // P, the whole model's
  uint64_t count = 0;           // Q, its part's
};

// "DIR/state_00000010.rank1-of-2.bin"
std::string state_shard_path(const std::string& state_path, uint32_t rank, uint32_t ranks);

// A shard into an open writer: the elements of `parts` (runs of the flat arena `params`) packed,
// then the packed moments m and v (header.count each). Returns the file's checksum (for the
// marker).
uint64_t write_state_shard(AtomicFileWriter& out, const StateShardHeader& header,
                           const float* params, std::span<const ParameterSpan> parts,
                           std::span<const float> m, std::span<const float> v);

// An open shard file, checked in full on opening (magic, version, checksum, lengths) and against
// what the caller expects of it (FileError naming the file and the field otherwise).
class StateShardFile {
 public:
  StateShardFile(const std::string& path, const StateShardHeader& expected);
  uint64_t checksum() const { return checksum_; }
  // The packed tensors, Q floats each (0: params, 1: m, 2: v), as TrainStateFile::tensor_bytes.
  const void* tensor_bytes(int i) const;

 private:
  MappedFile file_;
  uint64_t count_ = 0;
  size_t tensors_offset_ = 0;
  uint64_t checksum_ = 0;
};

// The state without its tensors (the whole file is still checked).
TrainState load_train_state(const std::string& path);

// The checksum that ends a training-state file, of the `bytes` bytes before it (for tests and fuzz
// targets that edit a file and must keep it consistent).
uint64_t train_state_checksum(const void* data, size_t bytes);

}  // namespace llmcpu
