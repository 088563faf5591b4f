// Fuzz target: the spans sidecar of a token shard (core/io/token_spans.h). The input is the whole
// file, read against a shard of the token count its header names (and of one token more, which
// must be refused). An accepted sidecar must hold every rule of the format: the length its counts
// give, example starts from 0 strictly increasing below num_tokens, spans sorted, non-empty, each
// inside one example after its first token; fill_mask must mark exactly the spans' tokens, and
// the writer given what was read must write the input's bytes back.
#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include "core/io/token_spans.h"
#include "tests/fuzz/fuzz_util.h"

namespace {
constexpr const char* kTarget = "token_spans";
constexpr size_t kMaskTokens = 1 << 16;  // the mask is checked over at most this many tokens
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace llmcpu;
  const std::string path = fuzz::write_file("shard.spans", data, size);
  uint64_t claimed = 0;
  if (size >= 16) std::memcpy(&claimed, data + 8, 8);
  std::unique_ptr<TokenSpans> s;
  if (!fuzz::accepts([&] { s = std::make_unique<TokenSpans>(path, claimed); })) return 0;
  LLMCPU_FUZZ_CHECK(kTarget, !fuzz::accepts([&] { TokenSpans other(path, claimed + 1); }),
                    "a sidecar was accepted for a shard of another token count");
  const uint64_t n = s->num_tokens();
  LLMCPU_FUZZ_CHECK(kTarget, size == 1024 + 8 * s->num_examples() + 16 * s->num_spans(),
                    "a sidecar was accepted whose length does not match its counts");
  LLMCPU_FUZZ_CHECK(kTarget, s->num_examples() >= 1 && s->example_start(0) == 0,
                    "the first example does not start at token 0");
  for (size_t i = 0; i < s->num_examples(); ++i) {
    LLMCPU_FUZZ_CHECK(kTarget, s->example_start(i) < s->example_end(i) && s->example_end(i) <= n,
                      "an example is empty or runs past the shard");
  }
  for (size_t k = 0; k < s->num_spans(); ++k) {
    const TokenSpan p = s->span(k);
    const size_t e = s->example_of(p.begin);
    LLMCPU_FUZZ_CHECK(kTarget,
                      p.begin < p.end && p.begin > s->example_start(e) &&
                          p.end <= s->example_end(e) && (k == 0 || s->span(k - 1).end <= p.begin),
                      "span " + std::to_string(k) + " breaks a rule of the format");
  }
  const size_t checked = static_cast<size_t>(std::min<uint64_t>(n, kMaskTokens));
  std::vector<uint8_t> mask(checked), want(checked, 0);
  s->fill_mask(0, checked, mask.data());
  for (size_t k = 0; k < s->num_spans(); ++k) {
    for (uint64_t j = s->span(k).begin; j < s->span(k).end && j < checked; ++j) want[j] = 1;
  }
  LLMCPU_FUZZ_CHECK(kTarget, mask == want, "fill_mask disagrees with the spans");
  std::vector<TokenSpan> spans;
  for (size_t k = 0; k < s->num_spans(); ++k) spans.push_back(s->span(k));
  const std::string copy = fuzz::scratch_dir() + "/copy.spans";
  write_token_spans(copy, n, s->example_starts(), spans);
  const std::string back = fuzz::read_file(copy);
  LLMCPU_FUZZ_CHECK(kTarget, back.size() == size && std::memcmp(back.data(), data, size) == 0,
                    "the writer does not give back the bytes the reader accepted");
  return 0;
}
