// Fuzz target: llm.c token shards (core/io/token_shard.h), uint16 (version 1) and uint32 (version
// 7), and the data loader that reads batches from them (core/train/data_loader.h). The input is the
// whole file. An accepted shard must be exactly as long as its header and width say; every token is
// read (AddressSanitizer sees any read past the file); check_vocab must agree with a direct scan
// and copy() with at(); and a loader over the shard, sequential or shuffled (chosen by the input's
// length), must fill a few batches with the shard's own tokens.
#include <algorithm>
#include <vector>

#include "core/io/token_shard.h"
#include "core/train/data_loader.h"
#include "tests/fuzz/fuzz_util.h"

namespace {
constexpr const char* kTarget = "token_shard";
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace llmcpu;
  const std::string path = fuzz::write_file("shard.bin", data, size);
  std::unique_ptr<TokenShard> shard;
  if (!fuzz::accepts([&] { shard = std::make_unique<TokenShard>(path); })) return 0;
  LLMCPU_FUZZ_CHECK(kTarget, shard->token_bytes() == 2 || shard->token_bytes() == 4,
                    "a shard was accepted whose ids are neither uint16 nor uint32");
  LLMCPU_FUZZ_CHECK(kTarget, size == kLlmcHeaderBytes + shard->size() * shard->token_bytes(),
                    "a shard was accepted whose length does not match its header");
  int64_t largest = -1;
  for (size_t i = 0; i < shard->size(); ++i) largest = std::max<int64_t>(largest, shard->at(i));
  for (const int vocab : {128256, 50257, 300, 1}) {
    const bool ok = fuzz::accepts([&] { shard->check_vocab(vocab); });
    LLMCPU_FUZZ_CHECK(kTarget, ok == (largest < vocab),
                      "check_vocab(" + std::to_string(vocab) + ") disagrees with the tokens");
  }
  std::vector<int> head(std::min<size_t>(shard->size(), 64));
  shard->copy(0, head.size(), head.data());
  for (size_t i = 0; i < head.size(); ++i) {
    LLMCPU_FUZZ_CHECK(kTarget, uint32_t(head[i]) == shard->at(i), "copy() disagrees with at()");
  }
  constexpr int B = 2, T = 3, kVocab = 1 << 24;
  std::unique_ptr<DataLoader> loader;
  const bool shuffle = size % 2 == 1;
  if (!fuzz::accepts(
          [&] { loader = std::make_unique<DataLoader>(path, B, T, kVocab, shuffle, size); })) {
    LLMCPU_FUZZ_CHECK(kTarget, shard->size() < size_t(B * T + 1) || largest >= kVocab,
                      "the loader refused a shard that holds a batch");
    return 0;
  }
  std::vector<int> inputs(B * T), targets(B * T);
  for (int step = 0; step < 3; ++step) {
    loader->next_batch(inputs.data(), targets.data());
    for (int i = 0; i < B * T; ++i) {
      LLMCPU_FUZZ_CHECK(
          kTarget,
          inputs[i] >= 0 && inputs[i] <= largest && targets[i] >= 0 && targets[i] <= largest,
          "a batch holds a token that is not in the shard");
    }
  }
  return 0;
}
