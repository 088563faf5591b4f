#include "core/model/config.h"

#include "core/model/parameters.h"
#include "simd/error.h"

namespace llmcpu {

void validate(const ModelConfig& c, const std::string& source) {
  auto require = [&](bool ok, const std::string& what) {
    if (!ok) throw ShapeError(source + ": " + what + " (model " + describe(c) + ")");
  };
  require(c.max_seq_len > 0 && c.max_seq_len <= kMaxSeqLen,
          "maxT must be in 1.." + std::to_string(kMaxSeqLen));
  require(c.vocab_size > 0 && c.vocab_size <= kMaxVocabSize,
          "V must be in 1.." + std::to_string(kMaxVocabSize));
  require(c.padded_vocab_size >= c.vocab_size && c.padded_vocab_size <= kMaxVocabSize,
          "Vp must be at least V and at most " + std::to_string(kMaxVocabSize));
  require(c.num_layers > 0 && c.num_layers <= 4096, "L must be in 1..4096");
  require(c.num_heads > 0 && c.num_heads <= 4096, "NH must be in 1..4096");
  require(c.channels > 0 && c.channels <= 65536, "C must be in 1..65536");
  require(c.channels % c.num_heads == 0, "C must be a multiple of NH");
  require(ParameterLayout(c).total() < (size_t(1) << 40), "too many parameters");
}

std::string describe(const ModelConfig& c) {
  return "L=" + std::to_string(c.num_layers) + " NH=" + std::to_string(c.num_heads) +
         " C=" + std::to_string(c.channels) + " V=" + std::to_string(c.vocab_size) +
         " Vp=" + std::to_string(c.padded_vocab_size) + " maxT=" + std::to_string(c.max_seq_len);
}

}  // namespace llmcpu
