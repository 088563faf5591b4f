#include "core/model/generate.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

#include "core/model/transformer.h"
#include "simd/error.h"

namespace llmcpu {

namespace {

// Runs the transformer over one token at position `pos`: the embedding takes that position's wpe
// row (GPT-2), the rotation of q and k that position's angles (Llama), and attention writes the
// token's key and value heads into layer l's cache and attends over positions 0..pos. Every other
// op is the fp32 executor's with N = 1.
struct DecodeExecutor : Fp32Executor {
  float* kcache;  // (L, max_len, NKV*D)
  float* vcache;  // (L, max_len, NKV*D)
  float* scores;  // (max_len)
  int max_len;
  int pos;
  // A bf16 model without the whole fp32 master (Model::release_master): its matmuls take the bf16
  // copy of the weights and the input rounded to bf16 (into inp16, the widest GEMM input), as its
  // forward pass does.
  const float* master = nullptr;
  size_t count = 0;  // the master's values
  const bf16* copy = nullptr;
  const Bf16Kernels* h = nullptr;
  bf16* inp16 = nullptr;

  void matmul_forward(float* out, const float* inp, const float* weight, const float* bias,
                      size_t N, int C, int OC) {
    // A quantized base's weight (decoded to fp32), or one outside the master (LoRA's trained copy
    // of the head) in fp32.
    if (!copy || quantized(weight) || weight < master || weight >= master + count) {
      return Fp32Executor::matmul_forward(out, inp, weight, bias, N, C, OC);
    }
    h->to_bf16(inp16, inp, N * C);
    h->matmul_forward(out, inp16, copy + (weight - master), bias, N, C, OC);
  }

  bool embedding16 = false;  // the embedding's rows from the copy (a frozen bf16 base)

  void encoder_forward(float* out, const int* inp, const float* wte, const float* wpe, int B, int T,
                       int C) {
    const float* w = wpe ? wpe + (size_t)pos * C : nullptr;
    if (embedding16) return gather_rows(*h, out, inp, copy + (wte - master), w, size_t(B) * T, T, C);
    Fp32Executor::encoder_forward(out, inp, wte, w, B, T, C);
  }
  void rope_forward(float* x, const float* cos, const float* sin, size_t N, int T, int heads, int D,
                    size_t row_stride) {
    k.rope_forward(x, cos, sin, N, T, pos, heads, D, row_stride);
  }
  // qkv is the token's row of NH query heads, then NKV key heads and NKV value heads, D each
  // (GPT-2: NKV = NH, D = C/NH).
  void attention_forward(int l, float* out, float* /*lse*/, const float* qkv, int /*B*/, int /*T*/,
                         int NH, int NKV, int D, const AttentionOptions& opt) {
    const size_t row = size_t(NKV) * D;  // one position's keys (or values)
    float* kc = kcache + (size_t)l * max_len * row;
    float* vc = vcache + (size_t)l * max_len * row;
    std::copy_n(qkv + size_t(NH) * D, row, kc + (size_t)pos * row);
    std::copy_n(qkv + size_t(NH) * D + row, row, vc + (size_t)pos * row);
    k.attention_decode(out, scores, qkv, kc, vc, pos, NH, NKV, D, opt);
  }
};

// sample_token over caller-owned scratch: ids (V) and weights (V).
int sample_into(const float* logits, int V, float temperature, int top_k, Rng& rng, int* ids,
                double* weights) {
  if (temperature <= 0) return int(std::max_element(logits, logits + V) - logits);
  std::iota(ids, ids + V, 0);
  const int k = (top_k <= 0 || top_k > V) ? V : top_k;
  if (k < V) {
    std::partial_sort(ids, ids + k, ids + V, [&](int a, int b) { return logits[a] > logits[b]; });
  }
  float maxval = -INFINITY;
  for (int i = 0; i < k; ++i) maxval = std::max(maxval, logits[ids[i]]);
  double total = 0;
  for (int i = 0; i < k; ++i) {
    weights[i] = std::exp(double(logits[ids[i]] - maxval) / temperature);
    total += weights[i];
  }
  double u = rng.uniform() * total;
  for (int i = 0; i < k; ++i) {
    u -= weights[i];
    if (u < 0) return ids[i];
  }
  return ids[k - 1];
}

}  // namespace

Generator::Generator(const Model& model, int max_len) : model_(model), max_len_(max_len) {
  const ModelConfig& c = model.config();
  if (max_len <= 0 || max_len > c.max_seq_len) {
    throw ShapeError("generation length " + std::to_string(max_len) +
                     " must be in 1..maxT=" + std::to_string(c.max_seq_len));
  }
  const size_t L = c.num_layers, row = size_t(c.kv_heads()) * c.head_size();
  acts_ = ActivationArena(c, 1, 1, {.keep_logits = true});
  kcache_ = AlignedBuffer<float>(L * max_len * row);
  vcache_ = AlignedBuffer<float>(L * max_len * row);
  scores_ = AlignedBuffer<float>(max_len);
  if (model.precision() == Precision::kBf16) {
    inp16_ = AlignedBuffer<bf16>(std::max({c.channels, c.attn_width(), c.hidden_size()}));
  }
  if (c.family().positions == PositionKind::kRope) {
    // The arena's tables cover its one position; a step at position p reads row p of these.
    rope_tables(c.rope, max_len, rope_cos_, rope_sin_);
    acts_.acts.rope_cos = rope_cos_.data();
    acts_.acts.rope_sin = rope_sin_.data();
    if (c.rope_local.head_dim > 0) {  // Gemma 3's sliding layers
      rope_tables(c.rope_local, max_len, rope_cos_local_, rope_sin_local_);
      acts_.acts.rope_cos_local = rope_cos_local_.data();
      acts_.acts.rope_sin_local = rope_sin_local_.data();
    }
  }
  ids_.resize(c.vocab_size);
  weights_.resize(c.vocab_size);
}

const float* Generator::step(int token) {
  const ModelConfig& c = model_.config();
  if (pos_ >= max_len_) {
    throw ShapeError("generation reached its length limit of " + std::to_string(max_len_) +
                     " tokens");
  }
  if (token < 0 || token >= c.vocab_size) {
    throw ShapeError("token " + std::to_string(token) + " is outside the vocabulary 0.." +
                     std::to_string(c.vocab_size - 1));
  }
  DecodeExecutor x{{model_.kernels(), model_.quantized_base()}, kcache_.data(), vcache_.data(),
                   scores_.data(),     max_len_,       pos_};
  if (model_.master_released()) {
    x.master = model_.params_flat();
    x.count = model_.num_parameters();
    x.copy = model_.params_bf16_flat();
    x.h = model_.bf16_kernels();
    x.inp16 = inp16_.data();
    x.embedding16 = model_.embedding_in_bf16();
  }
  const ActivationViews<float>& a = acts_.acts;
  model_forward(x, c, model_.compute_params(), a, &token, 1, 1, model_.lora_views());
  x.matmul_forward(a.logits, a.lnf, model_.params().head(), nullptr, 1, c.channels,
                   c.padded_vocab_size);
  if (c.final_softcap > 0) x.softcap_forward(a.logits, c.padded_vocab_size, float(c.final_softcap));
  ++pos_;
  return acts_.acts.logits;
}

void Generator::rewind(int position) {
  if (position < 0 || position > pos_) {
    throw ShapeError("cannot rewind generation to position " + std::to_string(position) +
                     ": it holds positions 0.." + std::to_string(pos_ - 1));
  }
  pos_ = position;  // the cache's rows past it are overwritten by the next steps
}

int Generator::sample(float temperature, int top_k, Rng& rng, int candidates) {
  const int V = model_.config().vocab_size;
  const int n = candidates > 0 && candidates < V ? candidates : V;
  return sample_into(acts_.acts.logits, n, temperature, top_k, rng, ids_.data(), weights_.data());
}

int sample_token(const float* logits, int V, float temperature, int top_k, Rng& rng) {
  std::vector<int> ids(V);
  std::vector<double> weights(V);
  return sample_into(logits, V, temperature, top_k, rng, ids.data(), weights.data());
}

}  // namespace llmcpu
