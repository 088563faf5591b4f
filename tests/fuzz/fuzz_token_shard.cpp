// Fuzz target: llm.c token shards (core/io/token_shard.h) and the data loader that reads batches
// from them (core/train/data_loader.h). The input is the whole file. An accepted shard must be
// exactly as long as its header says; every token is read (AddressSanitizer sees any read past
// the file); check_vocab must agree with a direct scan; and a loader over the shard, sequential or
// shuffled (chosen by the input's length), must fill a few batches with the shard's own tokens.
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
  LLMCPU_FUZZ_CHECK(kTarget, size == kLlmcHeaderBytes + shard->size() * 2,
                    "a shard was accepted whose length does not match its header");
  int largest = -1;
  for (size_t i = 0; i < shard->size(); ++i) largest = std::max<int>(largest, shard->tokens()[i]);
  for (const int vocab : {50257, 300, 1}) {
    const bool ok = fuzz::accepts([&] { shard->check_vocab(vocab); });
    LLMCPU_FUZZ_CHECK(kTarget, ok == (largest < vocab),
                      "check_vocab(" + std::to_string(vocab) + ") disagrees with the tokens");
  }
  constexpr int B = 2, T = 3;
  std::unique_ptr<DataLoader> loader;
  const bool shuffle = size % 2 == 1;
  if (!fuzz::accepts([&] { loader = std::make_unique<DataLoader>(path, B, T, 65536, shuffle, size); })) {
    LLMCPU_FUZZ_CHECK(kTarget, shard->size() < size_t(B * T + 1),
                      "the loader refused a shard that holds a batch");
    return 0;
  }
  std::vector<int> inputs(B * T), targets(B * T);
  for (int step = 0; step < 3; ++step) {
    loader->next_batch(inputs.data(), targets.data());
    for (int i = 0; i < B * T; ++i) {
      LLMCPU_FUZZ_CHECK(kTarget, inputs[i] <= largest && targets[i] <= largest,
                        "a batch holds a token that is not in the shard");
    }
  }
  return 0;
}
