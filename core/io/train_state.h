// Training state, llmcpu's own format, for exact resume: everything a run needs to continue bit for
// bit besides the llm.c model file written beside it: the fp32 master weights, the AdamW moments
// and step count, the batch shape, the precision, the number of completed steps and the data
// loader's position (which includes its RNG state). The weights are the fp32 master weights in
// either precision (a bf16 run's model file holds only their bf16 rounding). Little-endian binary:
//   u32 magic 0x5354434C ("LCTS"), u32 version 2 (version 1, still read, is version 2 without the
//   precision byte and means fp32)
//   i32 maxT, V, L, NH, C, Vp; i32 B, T, grad_accum; u8 shuffle; u64 seed
//   u8 precision (0 fp32, 1 bf16)
//   i64 step (completed optimizer steps), i64 adamw_t
//   u64 epoch, u64 rng_state, u32 shard, u64 sample, u32 n_shard_order, u32[n], u64 n_sample_order,
//   u32[n] u64 P; f32 params[P], f32 m[P], f32 v[P] u64 checksum of all the bytes before it
// The three tensors are never copied whole: the writer streams them from the model's and the
// optimizer's own buffers, and the reader, after checking the whole file, copies them from the
// mapped file straight into those buffers. Deliberately not here: which model or optimizer they
// belong to.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "core/model/config.h"
#include "core/model/precision.h"
#include "core/train/data_loader.h"
#include "core/util/file.h"

namespace llmcpu {

inline constexpr uint32_t kTrainStateMagic = 0x5354434C;
inline constexpr uint32_t kTrainStateVersion = 2;

// Everything in a training state but its three tensors.
struct TrainState {
  ModelConfig config;
  int B = 0, T = 0, grad_accum = 1;
  bool shuffle = true;
  uint64_t seed = 0;
  Precision precision = Precision::kFp32;
  int64_t step = 0;
  int64_t adamw_t = 0;
  DataPosition data;
};

// Written atomically (temporary file, fsync, rename), the tensors streamed from where they live:
// params, m, v are P = ParameterLayout(state.config).total() floats each, ParameterLayout order.
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
  size_t num_parameters() const { return num_parameters_; }  // P
  // Copies the fp32 master weights and the AdamW moments into params, m, v (P floats each).
  void read_tensors(std::span<float> params, std::span<float> m, std::span<float> v) const;

 private:
  MappedFile file_;
  TrainState state_;
  size_t num_parameters_ = 0;
  size_t tensors_offset_ = 0;  // byte offset of params[0]; m and v follow
};

// The state without its tensors (the whole file is still checked).
TrainState load_train_state(const std::string& path);

// The checksum that ends a training-state file, of the `bytes` bytes before it (for tests and fuzz
// targets that edit a file and must keep it consistent).
uint64_t train_state_checksum(const void* data, size_t bytes);

}  // namespace llmcpu
