// What the libFuzzer targets in this folder share. The readers take files by path (they map them),
// so an input is written to a file in a scratch folder of this process, the same file rewritten for
// each input. An llmcpu::Error (core/util/error.h) is a reader's expected answer to a bad input;
// anything else that leaves a reader (another exception, a crash, a sanitizer report, a hang) is a
// finding, which libFuzzer reports and saves. Not here: the targets' own checks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/model/config.h"
#include "simd/error.h"

namespace llmcpu::fuzz {

// This process's scratch folder: a fresh folder under $TMPDIR (else /dev/shm, else /tmp), made on
// first use and removed at exit.
const std::string& scratch_dir();

// Writes `size` bytes into scratch_dir()/name, replacing what was there; returns the path.
std::string write_file(const std::string& name, const void* data, size_t size);
inline std::string write_file(const std::string& name, std::string_view bytes) {
  return write_file(name, bytes.data(), bytes.size());
}

// Reads a whole file (the targets' fixed partner files); aborts with a message if it cannot.
std::string read_file(const std::string& path);

// The source folder of the fuzz targets (tests/fuzz), where the seed corpora and the partner files
// some targets read (a tiny tokenizer) live.
inline std::string source_dir() { return LLMCPU_FUZZ_SOURCE_DIR; }

// A small valid model shape from kShapeBytes bytes (for the readers that take the model's shape
// beside the file, such as a debug state): L 1..2, NH 1..3, C = NH * 1..3, V 1..64, Vp = V + 0..7,
// maxT 1..8.
inline constexpr size_t kShapeBytes = 6;
inline ModelConfig small_shape(const uint8_t* p) {
  ModelConfig c;
  c.num_layers = 1 + p[0] % 2;
  c.num_heads = 1 + p[1] % 3;
  c.channels = c.num_heads * (1 + p[2] % 3);
  c.vocab_size = 1 + p[3] % 64;
  c.padded_vocab_size = c.vocab_size + p[4] % 8;
  c.max_seq_len = 1 + p[5] % 8;
  return c;
}

// Runs `read`: returns true when it returned, false when it threw an llmcpu::Error. Any other
// exception escapes, so libFuzzer reports it as a crash.
template <class F>
bool accepts(F&& read) {
  try {
    read();
    return true;
  } catch (const Error&) {
    return false;
  }
}

// A broken invariant of a reader that accepted its input: prints `what` and aborts (a finding).
[[noreturn]] void invariant_failed(const char* target, const std::string& what);

}  // namespace llmcpu::fuzz

// LLMCPU_FUZZ_CHECK(target, condition, message): invariant_failed() when condition is false.
#define LLMCPU_FUZZ_CHECK(target, cond, what)                          \
  do {                                                                  \
    if (!(cond)) ::llmcpu::fuzz::invariant_failed(target, (what));      \
  } while (0)
