// Fuzz target: llmcpu's training-state files (core/io/train_state.h), as --resume reads them. The
// input is the whole file; it is read as it is and, since a mutated file rarely keeps its checksum,
// a second time with its last 8 bytes replaced by the right checksum, so that fuzzing reaches the
// fields behind it. An accepted state must add up to the file's length and have a valid shape and
// batch; for a small model (at most kMaxParameters) its tensors are read, and its data position is
// restored into a loader over a fixed shard (B=1, T=4, 8 samples) and must then give batches.
#include <cstring>
#include <memory>
#include <vector>

#include "core/io/token_shard.h"
#include "core/io/train_state.h"
#include "core/model/parameters.h"
#include "core/train/data_loader.h"
#include "tests/fuzz/fuzz_util.h"

namespace llmcpu {
namespace {

constexpr const char* kTarget = "train_state";
constexpr size_t kMaxParameters = size_t(1) << 16;
constexpr int B = 1, T = 4;

const std::string& shard_path() {
  static const std::string path = [] {
    std::vector<uint16_t> tokens(B * T * 8 + 1);
    for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = uint16_t(i);
    const std::string p = fuzz::scratch_dir() + "/tokens.bin";
    write_token_shard(p, tokens);
    return p;
  }();
  return path;
}

void read_state(const std::string& path, size_t size) {
  std::unique_ptr<TrainStateFile> file;
  if (!fuzz::accepts([&] { file = std::make_unique<TrainStateFile>(path); })) return;
  const TrainState& s = file->state();
  const size_t P = file->num_parameters();
  LLMCPU_FUZZ_CHECK(kTarget, P == ParameterLayout(s.config).total(),
                    "the parameter count does not match the model shape");
  LLMCPU_FUZZ_CHECK(kTarget, s.B > 0 && s.T > 0 && s.grad_accum > 0 && s.step >= 0,
                    "an invalid batch shape or step count was accepted");
  LLMCPU_FUZZ_CHECK(kTarget, s.T <= s.config.max_seq_len, "a T past the model's maxT was accepted");
  LLMCPU_FUZZ_CHECK(kTarget, s.adamw_t >= 0 && s.adamw_t <= s.step,
                    "more AdamW updates than completed steps were accepted");
  if (s.shards() > 0) {
    // A ZeRO-1 run's state: the tensors are in its shard files, never read from this one.
    std::vector<float> w(P <= kMaxParameters ? P : 0), m(w.size()), v(w.size());
    LLMCPU_FUZZ_CHECK(kTarget, !fuzz::accepts([&] { file->read_tensors(w, m, v); }),
                      "read_tensors read tensors from a state whose tensors are in shard files");
  } else {
    LLMCPU_FUZZ_CHECK(kTarget, size >= 12 * P + 8, "the tensors do not fit in the file");
  }
  if (s.shards() == 0 && P <= kMaxParameters) {
    std::vector<float> w(P), m(P), v(P);
    file->read_tensors(w, m, v);
    std::vector<float> wrong(P + 1);
    LLMCPU_FUZZ_CHECK(kTarget, !fuzz::accepts([&] { file->read_tensors(wrong, m, v); }),
                      "read_tensors accepted a destination of the wrong size");
  }
  DataLoader loader(shard_path(), B, T, 65536, s.shuffle, s.seed);
  if (!fuzz::accepts([&] { loader.restore(s.data); })) return;
  std::vector<int> inputs(B * T), targets(B * T);
  for (int step = 0; step < 10; ++step) {
    loader.next_batch(inputs.data(), targets.data());
    for (int i = 0; i < B * T; ++i) {
      LLMCPU_FUZZ_CHECK(kTarget, targets[i] == inputs[i] + 1,
                        "a restored position reads a batch that is not a sample of the shard");
    }
  }
}

}  // namespace
}  // namespace llmcpu

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace llmcpu;
  read_state(fuzz::write_file("state.bin", data, size), size);
  if (size >= 16) {
    std::vector<uint8_t> fixed(data, data + size);
    const uint64_t sum = train_state_checksum(fixed.data(), size - 8);
    std::memcpy(fixed.data() + size - 8, &sum, 8);
    read_state(fuzz::write_file("state.bin", fixed.data(), size), size);
  }
  return 0;
}
