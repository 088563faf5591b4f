// llm.c model checkpoints: int32[256] header {20240326, version, maxT, V, L, NH, C, Vp}, then the 16
// parameter tensors in ParameterLayout order: fp32 for version 3, bf16 for version 5.
// Reading accepts both (bf16 is widened exactly to fp32); writing produces version 3, atomically.
#pragma once

#include <string>

#include "core/model/config.h"
#include "core/model/gpt2.h"

namespace llmcpu {

inline constexpr int kCheckpointMagic = 20240326;
inline constexpr int kCheckpointFp32 = 3;
inline constexpr int kCheckpointBf16 = 5;

struct CheckpointInfo {
  ModelConfig config;
  int version = 0;
};

// Reads and checks the header and the file length; throws FileError naming the file and the field.
CheckpointInfo read_checkpoint_header(const std::string& path);

// Loads the checkpoint's parameters into `model`, whose config must equal the file's.
void load_checkpoint(const std::string& path, Gpt2& model);

// Writes `model`'s parameters as a version-3 checkpoint via a temporary file and rename: a failed
// write leaves an existing file at `path` untouched.
void save_checkpoint(const std::string& path, const Gpt2& model);

}  // namespace llmcpu
