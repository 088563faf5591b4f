// llm.c model checkpoints: int32[256] header {20240326, version, maxT, V, L, NH, C, Vp}, then the
// 16 parameter tensors in ParameterLayout order: fp32 for version 3, bf16 for version 5. Reading
// accepts both (bf16 is widened exactly to fp32, into either precision's master weights); writing
// produces either, atomically; version 5 holds the weights rounded to bf16 (nearest even), which is
// what a bf16 model's working copy holds.
#pragma once

#include <string>

#include "core/model/config.h"
#include "core/model/model.h"
#include "core/util/file.h"

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
void load_checkpoint(const std::string& path, Model& model);
// The same into a flat fp32 array laid out by ParameterLayout(config) (conversion: no model).
void load_checkpoint(const std::string& path, const ModelConfig& config, float* params);

// Writes `model`'s parameters as a checkpoint of `version` (kCheckpointFp32 or kCheckpointBf16) via
// a temporary file and rename: a failed write leaves an existing file at `path` untouched.
void save_checkpoint(const std::string& path, const Model& model, int version = kCheckpointFp32);
// The same from a flat fp32 array laid out by ParameterLayout(config) (conversion: no model).
void save_checkpoint(const std::string& path, const ModelConfig& config, const float* params,
                     int version = kCheckpointFp32);
// The same bytes into an open writer, which the caller finishes and publishes (a checkpoint's model
// and state files are renamed into place only once both are written).
void write_checkpoint(AtomicFileWriter& out, const Model& model, int version = kCheckpointFp32);
// The same bytes from a flat fp32 array laid out by ParameterLayout(config) (bf16 rounded from it).
void write_checkpoint(AtomicFileWriter& out, const ModelConfig& config, const float* params,
                      int version = kCheckpointFp32);

// The version a model of this precision is saved in: 3 for fp32, 5 for bf16 (as llm.c does).
int checkpoint_version_for(Precision precision);

}  // namespace llmcpu
