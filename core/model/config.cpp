#include "core/model/config.h"

#include <cmath>
#include <functional>

#include "core/model/parameters.h"
#include "simd/error.h"

namespace llmcpu {

namespace {

// The sizes and options of a family whose config.json states them.
void validate_options(const ModelConfig& c,
                      const std::function<void(bool, const std::string&)>& require,
                      const std::string& source) {
  require(c.num_kv_heads > 0 && c.num_heads % c.num_kv_heads == 0,
          "num_key_value_heads must divide num_attention_heads");
  require(c.head_dim > 0 && c.head_dim <= 4096 && c.head_dim % 2 == 0,
          "head_dim must be even and in 2..4096");
  require(c.hidden > 0 && c.hidden <= (1 << 20), "intermediate_size must be in 1..1048576");
  require(std::isfinite(c.norm_eps) && c.norm_eps > 0, "rms_norm_eps must be a positive number");
  require(c.sliding_window >= 0 && c.sliding_window <= kMaxSeqLen,
          "sliding_window must be in 0.." + std::to_string(kMaxSeqLen));
  require(c.sliding_window == 0 || c.sliding_layers.size() == size_t(c.num_layers),
          "a sliding window needs each layer's kind (sliding or full)");
  require(c.pad_token_id >= -1 && c.pad_token_id < c.vocab_size,
          "pad_token_id must be a token of the vocabulary");
  require(c.query_pre_attn_scalar >= 0 && std::isfinite(c.query_pre_attn_scalar),
          "query_pre_attn_scalar must be positive");
  require(c.attn_softcap >= 0 && std::isfinite(c.attn_softcap) && c.final_softcap >= 0 &&
              std::isfinite(c.final_softcap),
          "the soft-caps must be positive");
  if (c.rope_local.head_dim > 0) {
    require(c.rope_local.head_dim == c.head_dim, "the local rotation's head_dim must be head_dim");
    validate(c.rope_local, source);
  }
  if (c.family().positions != PositionKind::kRope) return;
  require(c.rope.head_dim == c.head_dim, "the rotary embedding's head_dim must be head_dim");
  validate(c.rope, source);
}

}  // namespace

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
  if (!c.family().llmc_files) {
    validate_options(c, require, source);
  } else {
    require(c.channels % c.num_heads == 0, "C must be a multiple of NH");
    require(c.num_kv_heads == 0 && c.head_dim == 0 && c.hidden == 0 && c.qkv_bias &&
                c.attn_proj_bias && c.mlp_bias && c.tied_head && c.sliding_window == 0 &&
                c.pad_token_id == -1 && c.query_pre_attn_scalar == 0 && c.attn_softcap == 0 &&
                c.final_softcap == 0 && c.rope_local.head_dim == 0,
            "a GPT-2 model has no settings its llm.c header cannot state");
  }
  require(ParameterLayout(c).total() < (size_t(1) << 40), "too many parameters");
}

std::string describe(const ModelConfig& c) {
  std::string s;
  const auto field = [&s](const char* key, int v) {
    if (!s.empty()) s += ' ';
    s += key;
    s += '=';
    s += std::to_string(v);
  };
  // GPT-2's shape is its llm.c header's; the others name their family and state all their sizes.
  const bool options = !c.family().llmc_files;
  if (options) s = architecture_name(c.architecture);
  field("L", c.num_layers);
  field("NH", c.num_heads);
  if (options) field("NKV", c.num_kv_heads), field("D", c.head_dim);
  field("C", c.channels);
  if (options) field("H", c.hidden);
  field("V", c.vocab_size);
  field("Vp", c.padded_vocab_size);
  field("maxT", c.max_seq_len);
  if (c.sliding_window > 0) field("W", c.sliding_window);
  return s;
}

}  // namespace llmcpu
