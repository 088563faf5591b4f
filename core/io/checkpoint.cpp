#include "core/io/checkpoint.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/util/file.h"
#include "simd/bf16.h"
#include "simd/error.h"

namespace llmcpu {

namespace {

CheckpointInfo parse_header(const MappedFile& file) {
  const int32_t* h = file.llmc_header("llm.c checkpoint");
  const std::string& path = file.path();
  if (h[0] != kCheckpointMagic) {
    throw FileError(path, "bad magic " + std::to_string(h[0]) + ", expected " +
                              std::to_string(kCheckpointMagic) + " (an llm.c model checkpoint)");
  }
  CheckpointInfo info;
  info.version = h[1];
  if (info.version != kCheckpointFp32 && info.version != kCheckpointBf16) {
    throw FileError(path, "unsupported checkpoint version " + std::to_string(h[1]) +
                              ", expected 3 (fp32) or 5 (bf16)");
  }
  ModelConfig& c = info.config;
  c.max_seq_len = h[2];
  c.vocab_size = h[3];
  c.num_layers = h[4];
  c.num_heads = h[5];
  c.channels = h[6];
  c.padded_vocab_size = h[7];
  try {
    validate(c, path + " header");
  } catch (const ShapeError& e) {
    throw FileError(path, std::string("invalid header: ") + e.what());
  }
  const size_t bytes_per = info.version == kCheckpointFp32 ? 4 : 2;
  const size_t expected = kLlmcHeaderBytes + ParameterLayout(c).total() * bytes_per;
  file.expect_size(expected,
                   "a version " + std::to_string(info.version) + " checkpoint of " + describe(c));
  return info;
}

}  // namespace

CheckpointInfo read_checkpoint_header(const std::string& path) {
  return parse_header(MappedFile(path));
}

void load_checkpoint(const std::string& path, Model& model) {
  load_checkpoint(path, model.config(), model.params_flat());
}

void load_checkpoint(const std::string& path, const ModelConfig& config, float* dst) {
  const MappedFile file(path);
  const CheckpointInfo info = parse_header(file);
  if (!(info.config == config)) {
    throw FileError(
        path, "holds a model of shape " + describe(info.config) + ", expected " + describe(config));
  }
  const size_t n = ParameterLayout(config).total();
  const uint8_t* body = file.data() + kLlmcHeaderBytes;
  if (info.version == kCheckpointFp32) {
    std::memcpy(dst, body, n * sizeof(float));
  } else {
    // bf16 is the top half of an fp32: widening is exact.
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; ++i) {
      uint16_t b;
      std::memcpy(&b, body + 2 * i, 2);
      const uint32_t bits = uint32_t(b) << 16;
      std::memcpy(dst + i, &bits, 4);
    }
  }
}

int checkpoint_version_for(Precision precision) {
  return precision == Precision::kBf16 ? kCheckpointBf16 : kCheckpointFp32;
}

void save_checkpoint(const std::string& path, const Model& model, int version) {
  AtomicFileWriter out(path);
  write_checkpoint(out, model, version);
  out.commit();
}

namespace {

void check_version(const AtomicFileWriter& out, int version) {
  if (version != kCheckpointFp32 && version != kCheckpointBf16) {
    throw Error("write_checkpoint(" + out.path() + "): version " + std::to_string(version) +
                " is not 3 (fp32) or 5 (bf16)");
  }
}

void write_header(AtomicFileWriter& out, const ModelConfig& c, int version) {
  int32_t header[kLlmcHeaderInts] = {};
  header[0] = kCheckpointMagic;
  header[1] = version;
  header[2] = c.max_seq_len;
  header[3] = c.vocab_size;
  header[4] = c.num_layers;
  header[5] = c.num_heads;
  header[6] = c.channels;
  header[7] = c.padded_vocab_size;
  out.write(header, sizeof(header));
}

// The n parameters at `params`, rounded to bf16 (nearest even) in chunks, so a large model needs no
// second full-size buffer.
void write_bf16_rounded(AtomicFileWriter& out, const float* params, size_t n) {
  constexpr size_t kChunk = size_t(1) << 20;
  std::vector<bf16> chunk(std::min(n, kChunk));
  for (size_t i = 0; i < n; i += kChunk) {
    const size_t m = std::min(kChunk, n - i);
    for (size_t j = 0; j < m; ++j) chunk[j] = float_to_bf16(params[i + j]);
    out.write(chunk.data(), m * sizeof(bf16));
  }
}

}  // namespace

void save_checkpoint(const std::string& path, const ModelConfig& config, const float* params,
                     int version) {
  AtomicFileWriter out(path);
  write_checkpoint(out, config, params, version);
  out.commit();
}

void write_checkpoint(AtomicFileWriter& out, const Model& model, int version) {
  check_version(out, version);
  if (model.master_released() && version == kCheckpointFp32) {
    throw Error("write_checkpoint(" + out.path() + "): this model keeps the fp32 master of its " +
                "matmul weights in part only (ZeRO-1); it writes version 5 (bf16)");
  }
  if (version == kCheckpointBf16 && model.bf16_copy_current()) {
    // The working copy is bf16(master) already, the same bytes rounding would give (and the only
    // whole copy once the master is released).
    write_header(out, model.config(), version);
    out.write(model.params_bf16_flat(), model.num_parameters() * sizeof(bf16));
    return;
  }
  write_checkpoint(out, model.config(), model.params_flat(), version);
}

void write_checkpoint(AtomicFileWriter& out, const ModelConfig& config, const float* params,
                      int version) {
  check_version(out, version);
  write_header(out, config, version);
  const size_t n = ParameterLayout(config).total();
  if (version == kCheckpointFp32) {
    out.write(params, n * sizeof(float));
  } else {
    write_bf16_rounded(out, params, n);
  }
}

}  // namespace llmcpu
