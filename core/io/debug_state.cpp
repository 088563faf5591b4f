#include "core/io/debug_state.h"

#include <cstdint>
#include <cstring>

#include "core/io/hf_llama.h"
#include "core/model/parameters.h"
#include "core/util/file.h"
#include "core/util/tokens.h"
#include "simd/error.h"

namespace llmcpu {

DebugState load_debug_state(const std::string& path, const ModelConfig& config) {
  if (!config.family().llmc_files) return load_llama_reference(path, config);
  const MappedFile file(path);
  const int32_t* h = file.llmc_header("llm.c debug state");
  if (h[0] != kDebugStateMagic) {
    throw FileError(path, "bad magic " + std::to_string(h[0]) + ", expected " +
                              std::to_string(kDebugStateMagic) + " (an llm.c debug state)");
  }
  if (h[1] != kDebugStateVersion) {
    throw FileError(path, "unsupported debug state version " + std::to_string(h[1]) +
                              ", expected " + std::to_string(kDebugStateVersion) +
                              (h[1] == 1 ? " (version 1 predates the padded vocabulary)" : ""));
  }
  DebugState s;
  s.B = h[2];
  s.T = h[3];
  if (s.B <= 0 || s.B > (1 << 20)) {
    throw FileError(path, "batch size B=" + std::to_string(s.B) + " in header is not in 1..2^20");
  }
  if (s.T <= 0 || s.T > config.max_seq_len) {
    throw FileError(path, "sequence length T=" + std::to_string(s.T) +
                              " in header is not in 1..maxT=" + std::to_string(config.max_seq_len) +
                              " (the model's context)");
  }
  const size_t BT = (size_t)s.B * s.T, V = config.vocab_size;
  const size_t P = ParameterLayout(config).total();
  // BT <= 2^44 and P < 2^40, but the logits, BT * V * 4, can pass 2^64 and wrap around to a small
  // length: such a header could never describe a real file.
  const std::string what = "a debug state of B=" + std::to_string(s.B) + " T=" +
                           std::to_string(s.T) + " for the model " + describe(config);
  size_t logits_bytes = 0, expected = 0;
  if (__builtin_mul_overflow(BT, V * 4, &logits_bytes) ||
      __builtin_add_overflow(kLlmcHeaderBytes + 2 * BT * 4 + 4 + P * 4, logits_bytes, &expected)) {
    throw FileError(path, what + " would be more than 2^64 bytes long: the header is corrupt");
  }
  file.expect_size(expected, what);
  const uint8_t* p = file.data() + kLlmcHeaderBytes;
  auto take = [&p](auto& vec, size_t n) {
    vec.resize(n);
    std::memcpy(vec.data(), p, n * sizeof(vec[0]));
    p += n * sizeof(vec[0]);
  };
  take(s.inputs, BT);
  take(s.targets, BT);
  for (const auto* tokens : {&s.inputs, &s.targets}) {
    check_tokens_in_vocab(tokens->data(), BT, config.vocab_size, [&](const std::string& problem) {
      throw FileError(path, (tokens == &s.inputs ? "input " : "target ") + problem);
    });
  }
  take(s.logits, BT * V);
  std::memcpy(&s.loss, p, 4);
  p += 4;
  take(s.grads, P);
  return s;
}

void save_debug_state(const std::string& path, const ModelConfig& config, const DebugState& s) {
  const size_t BT = (size_t)s.B * s.T;
  if (s.inputs.size() != BT || s.targets.size() != BT || s.logits.size() != BT * config.vocab_size ||
      s.grads.size() != ParameterLayout(config).total()) {
    throw Error("save_debug_state(" + path + "): tensor sizes do not match B, T and the model");
  }
  int32_t header[kLlmcHeaderInts] = {};
  header[0] = kDebugStateMagic;
  header[1] = kDebugStateVersion;
  header[2] = s.B;
  header[3] = s.T;
  AtomicFileWriter out(path);
  out.write(header, sizeof(header));
  out.write(s.inputs.data(), BT * 4);
  out.write(s.targets.data(), BT * 4);
  out.write(s.logits.data(), s.logits.size() * 4);
  out.write(&s.loss, 4);
  out.write(s.grads.data(), s.grads.size() * 4);
  out.commit();
}

}  // namespace llmcpu
