// Training state, llmcpu's own format, for exact resume: everything a run needs to continue bit for
// bit besides the llm.c model file written beside it: the fp32 master weights, the AdamW moments and
// step count, the batch shape, the precision, the number of completed steps and the data loader's
// position (which includes its RNG state). The weights are the fp32 master weights in either
// precision (a bf16 run's model file holds only their bf16 rounding). Little-endian binary:
//   u32 magic 0x5354434C ("LCTS"), u32 version 2 (version 1, still read, is version 2 without the
//   precision byte and means fp32)
//   i32 maxT, V, L, NH, C, Vp; i32 B, T, grad_accum; u8 shuffle; u64 seed
//   u8 precision (0 fp32, 1 bf16)
//   i64 step (completed optimizer steps), i64 adamw_t
//   u64 epoch, u64 rng_state, u32 shard, u64 sample, u32 n_shard_order, u32[n], u64 n_sample_order, u32[n]
//   u64 P; f32 params[P], f32 m[P], f32 v[P]
//   u64 checksum of all the bytes before it
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/model/config.h"
#include "core/model/precision.h"
#include "core/train/data_loader.h"

namespace llmcpu {

inline constexpr uint32_t kTrainStateMagic = 0x5354434C;
inline constexpr uint32_t kTrainStateVersion = 2;

struct TrainState {
  ModelConfig config;
  int B = 0, T = 0, grad_accum = 1;
  bool shuffle = true;
  uint64_t seed = 0;
  Precision precision = Precision::kFp32;
  int64_t step = 0;
  int64_t adamw_t = 0;
  DataPosition data;
  std::vector<float> params, m, v;  // flat, ParameterLayout order
};

// Throws FileError naming the file: bad magic or version, a length that does not add up, a checksum
// mismatch (a corrupt or partly written file), or sizes that do not fit the model shape.
TrainState load_train_state(const std::string& path);

// Written atomically (temporary file, fsync, rename).
void save_train_state(const std::string& path, const TrainState& state);

}  // namespace llmcpu
