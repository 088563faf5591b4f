// `llmcpu bench`'s op table follows the training step: the rows core/bench/layer_ops.h records from
// the model's own passes are compared with a count written here from GPT-2's published structure
// (Radford et al. 2019, llm.c's train_gpt2.c), not from the recorder. Per block: ln1, the qkv
// matmul (C -> 3C), causal attention, the attention projection (C -> C), a residual sum, ln2, the
// fc matmul (C -> 4C), GELU, the fc projection (4C -> C), a residual sum. Around the blocks: the
// token and position embedding, the final layernorm and the head tied to wte (C -> Vp) with the
// softmax cross-entropy over chunks of rows; backward the same in reverse (a residual sum's
// gradient passes through, no kernel); then the gradients' norm (for clipping), a pass over all of
// them, and AdamW over every parameter, which also zeroes the gradients for the next step (no pass
// of its own).
// A matmul (M, K) x (K, N) is 2 M K N FLOPs forward and twice that backward (dinp and dweight), so
// a step's matmuls make 6 x tokens x the matmul weights' size (the "6ND" rule).
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "core/bench/layer_ops.h"
#include "core/model/activations.h"
#include "core/model/llama_config.h"
#include "simd/bf16.h"
#include "simd/kernels.h"

namespace llmcpu::bench {
namespace {

ModelConfig config_of(int L, int NH, int C, int V, int maxT) {
  return {.max_seq_len = maxT,
          .vocab_size = V,
          .padded_vocab_size = padded_vocab(V),
          .num_layers = L,
          .num_heads = NH,
          .channels = C};
}

std::vector<LayerOp> recorded(const ModelConfig& c, int B, int T, Precision precision) {
  return layer_ops(c, B, T, precision, kernels_for_target("scalar"),
                   bf16_kernels_for_target("scalar"));
}

std::string mkn(size_t M, size_t K, size_t N) {
  return "N=" + std::to_string(M) + " C=" + std::to_string(K) + " OC=" + std::to_string(N);
}

struct Row {
  std::string op, pass, shape;
  int calls;
};

// The rows of a step whose head is one chunk (B*T rows), in the order of each kernel's first call.
std::vector<Row> expected_rows(const ModelConfig& c, int B, int T) {
  const size_t L = c.num_layers, C = c.channels, NH = c.num_heads, BT = size_t(B) * T;
  const size_t V = c.vocab_size, Vp = c.padded_vocab_size;
  const int Li = int(L), lns = 2 * Li + 1;  // ln1, ln2 per block and the final layernorm
  const std::string bt = "B=" + std::to_string(B) + " T=" + std::to_string(T);
  const std::string ln = "N=" + std::to_string(BT) + " C=" + std::to_string(C);
  const std::string att = bt + " NH=" + std::to_string(NH) + " hs=" + std::to_string(C / NH);
  const std::string wide = "N=" + std::to_string(BT * 4 * C);
  const std::string xent =
      "N=" + std::to_string(BT) + " V=" + std::to_string(V) + " Vp=" + std::to_string(Vp);
  const size_t params = Vp * C + size_t(c.max_seq_len) * C  // wte, wpe
                        + L * (12 * C * C + 13 * C)         // the blocks' weights and biases
                        + 2 * C;                            // lnfw, lnfb
  return {
      {"encoder", "forward", bt + " C=" + std::to_string(C), 1},
      {"layernorm", "forward", ln, lns},
      {"matmul qkv", "forward", mkn(BT, C, 3 * C), Li},
      {"attention", "forward", att, Li},
      {"matmul attention proj", "forward", mkn(BT, C, C), Li},
      {"residual", "forward", "N=" + std::to_string(BT * C), 2 * Li},
      {"matmul fc", "forward", mkn(BT, C, 4 * C), Li},
      {"gelu", "forward", wide, Li},
      {"matmul fc proj", "forward", mkn(BT, 4 * C, C), Li},
      {"matmul lm head", "forward", mkn(BT, C, Vp), 1},
      {"softmax + cross-entropy", "forward", xent, 1},
      {"softmax + cross-entropy", "backward", xent, 1},
      {"matmul lm head", "backward", mkn(BT, C, Vp), 1},
      {"layernorm", "backward", ln, lns},  // the final layernorm's, first
      {"matmul fc proj", "backward", mkn(BT, 4 * C, C), Li},
      {"gelu", "backward", wide, Li},
      {"matmul fc", "backward", mkn(BT, C, 4 * C), Li},
      {"matmul attention proj", "backward", mkn(BT, C, C), Li},
      {"attention", "backward", att, Li},
      {"matmul qkv", "backward", mkn(BT, C, 3 * C), Li},
      {"encoder", "backward", bt + " C=" + std::to_string(C), 1},
      {"gradient norm", "update", "params=" + std::to_string(params), 1},
      {"adamw", "update", "params=" + std::to_string(params), 1},
  };
}

// The recorded rows are `want`, in order, each with its call to time.
void expect_rows(const std::vector<LayerOp>& ops, const std::vector<Row>& want) {
  ASSERT_EQ(ops.size(), want.size());
  for (size_t i = 0; i < ops.size(); ++i) {
    EXPECT_EQ(ops[i].op, want[i].op) << "row " << i;
    EXPECT_EQ(ops[i].pass, want[i].pass) << ops[i].op;
    EXPECT_EQ(ops[i].shape, want[i].shape) << ops[i].op << " " << ops[i].pass;
    EXPECT_EQ(ops[i].per_step, want[i].calls) << ops[i].op << " " << ops[i].pass;
    EXPECT_TRUE(ops[i].prepare) << ops[i].op << " " << ops[i].pass;
  }
}

bool is_matmul(const LayerOp& op) { return op.op.rfind("matmul ", 0) == 0; }

// Sum over a step's matmuls of FLOPs per call times calls.
double matmul_flops(const std::vector<LayerOp>& ops) {
  double f = 0;
  for (const LayerOp& op : ops) f += is_matmul(op) ? op.flops * op.per_step : 0;
  return f;
}

// 6 x tokens x (the blocks' four matmul weights, 12 C^2 each, and the head's Vp C).
double six_nd(const ModelConfig& c, int B, int T) {
  const double C = c.channels;
  return 6.0 * B * T * (12.0 * c.num_layers * C * C + C * c.padded_vocab_size);
}

TEST(BenchStepTable, RowsFollowGpt2sStructure) {
  const ModelConfig c = config_of(3, 2, 32, 100, 16);
  const int B = 2, T = 5;
  for (Precision precision : {Precision::kFp32, Precision::kBf16}) {
    SCOPED_TRACE(precision_name(precision));
    const std::vector<LayerOp> ops = recorded(c, B, T, precision);
    expect_rows(ops, expected_rows(c, B, T));
    EXPECT_EQ(matmul_flops(ops), six_nd(c, B, T));
  }
}

// A matmul's FLOPs are 2 M K N forward and 4 M K N backward; attention's two products (q k^T
// and p v, hs each) over the causal (query, key) pairs are 4 hs per pair forward. In bf16 the
// matmuls read half the bytes of their inputs and weights; they and attention (products of bf16
// q, k, v) are rated against the bf16 GEMM.
TEST(BenchStepTable, CostsOfTheMatmulsAndAttention) {
  const ModelConfig c = config_of(2, 4, 64, 300, 32);
  const int B = 3, T = 7;
  const double BT = B * T, C = 64, hs = 16, pairs = B * 4.0 * T * (T + 1) / 2;
  const std::vector<LayerOp> fp32 = recorded(c, B, T, Precision::kFp32);
  const std::vector<LayerOp> bf16 = recorded(c, B, T, Precision::kBf16);
  ASSERT_EQ(fp32.size(), bf16.size());
  for (size_t i = 0; i < fp32.size(); ++i) {
    const LayerOp &f = fp32[i], &h = bf16[i];
    const double times = f.pass == "forward" ? 2 : 4;
    if (f.op == "matmul qkv") {
      EXPECT_EQ(f.flops, times * BT * C * 3 * C);
    } else if (f.op == "matmul fc proj") {
      EXPECT_EQ(f.flops, times * BT * 4 * C * C);
    } else if (f.op == "attention" && f.pass == "forward") {
      EXPECT_EQ(f.flops, 4 * hs * pairs);
    }
    EXPECT_EQ(f.flops, h.flops) << f.op << " " << f.pass;
    EXPECT_EQ(f.roof, Roof::kFp32) << f.op;
    const bool products = is_matmul(h) || h.op == "attention";  // of bf16 operands in bf16
    EXPECT_EQ(h.roof, products ? Roof::kBf16 : Roof::kFp32) << h.op;
    if (is_matmul(f)) {
      EXPECT_LT(h.bytes, f.bytes) << f.op << " " << f.pass;
    }
  }
}

// Where B*T rows are more than one chunk of the head, each chunk is a call: the full chunks one
// row, the last, shorter one a row of its own, and their rows add up to B*T. The rows are cut in
// as few chunks as keep each chunk's logits within 192 MiB, evenly.
TEST(BenchStepTable, HeadChunksAddUpToTheTokens) {
  const ModelConfig c = config_of(1, 2, 32, 1 << 20, 64);  // 4 MiB of logits a row: 48 a chunk
  EXPECT_EQ(head_chunk_rows(c, 48), 48u);
  EXPECT_EQ(head_chunk_rows(c, 49), 25u);                                       // 25 + 24
  EXPECT_EQ(head_chunk_rows(c, 200), 40u);                                      // 5 x 40
  EXPECT_EQ(head_chunk_rows(config_of(12, 12, 768, 50257, 1024), 4096), 820u);  // 4 x 820 + 816
  const int B = 1, T = 51;
  const size_t rows = head_chunk_rows(c, size_t(B) * T);
  ASSERT_EQ(rows, 26u);
  const std::vector<LayerOp> ops = recorded(c, B, T, Precision::kFp32);
  for (const char* pass : {"forward", "backward"}) {
    std::vector<std::pair<std::string, int>> head;
    for (const LayerOp& op : ops) {
      if (op.op == "matmul lm head" && op.pass == pass) head.emplace_back(op.shape, op.per_step);
    }
    const std::vector<std::pair<std::string, int>> want = {{mkn(26, 32, 1 << 20), 1},
                                                           {mkn(25, 32, 1 << 20), 1}};
    EXPECT_EQ(head, want) << pass;
  }
  EXPECT_EQ(matmul_flops(ops), six_nd(c, B, T));
}

// GPT-2 124M at B=4, T=1024 records without its activations' memory (the views point at address
// space nothing reads), and its matmuls make 6ND.
TEST(BenchStepTable, Gpt2SmallAtFullContext) {
  const ModelConfig c = config_of(12, 12, 768, 50257, 1024);
  const std::vector<LayerOp> ops = recorded(c, 4, 1024, Precision::kBf16);
  EXPECT_EQ(matmul_flops(ops), six_nd(c, 4, 1024));
  EXPECT_EQ(ops.back().op, "adamw");
  EXPECT_EQ(ops.back().shape, "params=124475904");
}

// The Llama family's step, from LlamaForCausalLM's structure (transformers' modeling_llama): per
// block input_layernorm (RMSNorm), q|k|v (C -> (NH + 2 NKV) D), the rotation of the NH + NKV q and
// k heads, grouped-query attention, o_proj (NH D -> C), a residual sum, post_attention_layernorm,
// gate|up (C -> 2H), SwiGLU, down_proj (H -> C), a residual sum; the embedding has no positions,
// the final norm is RMSNorm and the head is untied here (its own matrix). Backward in reverse, the
// rotation undone on dqkv after attention. The matmuls make 6 x tokens x the matmul weights.
TEST(BenchStepTable, RowsFollowLlamasStructure) {
  ModelConfig c = config_of(3, 6, 48, 100, 16);
  c.architecture = Architecture::kLlama;
  c.num_kv_heads = 2, c.head_dim = 12, c.hidden = 80, c.tied_head = false;
  c.qkv_bias = c.attn_proj_bias = c.mlp_bias = false;
  c.rope.head_dim = 12;
  const int B = 2, T = 5, L = 3;
  const size_t BT = 10, C = 48, QKV = (6 + 4) * 12, A = 6 * 12, H = 80, Vp = 128;
  const std::string bt = "B=2 T=5", norm = "N=10 C=48";
  const std::string att = bt + " NH=6 NKV=2 hs=12", rope = "N=10 heads=8 D=12";
  const std::string act = "N=10 H=80", xent = "N=10 V=100 Vp=128";
  const size_t params = 2 * Vp * C + L * (QKV * C + C * A + 2 * H * C + H * C + 2 * C) + C;
  const std::vector<Row> want = {
      {"encoder", "forward", bt + " C=48", 1},
      {"rmsnorm", "forward", norm, 2 * L + 1},
      {"matmul qkv", "forward", mkn(BT, C, QKV), L},
      {"rope", "forward", rope, L},
      {"attention", "forward", att, L},
      {"matmul attention proj", "forward", mkn(BT, A, C), L},
      {"residual", "forward", "N=" + std::to_string(BT * C), 2 * L},
      {"matmul fc", "forward", mkn(BT, C, 2 * H), L},
      {"swiglu", "forward", act, L},
      {"matmul fc proj", "forward", mkn(BT, H, C), L},
      {"matmul lm head", "forward", mkn(BT, C, Vp), 1},
      {"softmax + cross-entropy", "forward", xent, 1},
      {"softmax + cross-entropy", "backward", xent, 1},
      {"matmul lm head", "backward", mkn(BT, C, Vp), 1},
      {"rmsnorm", "backward", norm, 2 * L + 1},
      {"matmul fc proj", "backward", mkn(BT, H, C), L},
      {"swiglu", "backward", act, L},
      {"matmul fc", "backward", mkn(BT, C, 2 * H), L},
      {"matmul attention proj", "backward", mkn(BT, A, C), L},
      {"attention", "backward", att, L},
      {"rope", "backward", rope, L},
      {"matmul qkv", "backward", mkn(BT, C, QKV), L},
      {"encoder", "backward", bt + " C=48", 1},
      {"gradient norm", "update", "params=" + std::to_string(params), 1},
      {"adamw", "update", "params=" + std::to_string(params), 1},
  };
  for (Precision precision : {Precision::kFp32, Precision::kBf16}) {
    SCOPED_TRACE(precision_name(precision));
    const std::vector<LayerOp> ops = recorded(c, B, T, precision);
    expect_rows(ops, want);
    const double weights = L * double(QKV * C + C * A + 2 * H * C + H * C) + double(Vp * C);
    EXPECT_EQ(matmul_flops(ops), 6.0 * B * T * weights);
  }
}

// Gemma 2's and 3's steps, from transformers' modeling_gemma2 / modeling_gemma3 structure: the
// embedding scaled by sqrt(C); per block input_layernorm, q|k|v, (Gemma 3: q_norm and k_norm per
// head), the rotation, attention (a window on the sliding layers: layers 0 and 2 of 3 here, as
// layer_types says), o_proj, post_attention_layernorm on its output, the residual sum,
// pre_feedforward_layernorm, gate|up, GeGLU, down_proj, post_feedforward_layernorm, the residual
// sum; the final norm, the tied head and (soft-capped) logits. Backward in reverse. Run, each row
// prepares and times its call (the recorder writes nothing of the step's own memory).
TEST(BenchStepTable, RowsFollowGemmasStructure) {
  for (const char* type : {"gemma2", "gemma3_text"}) {
    SCOPED_TRACE(type);
    const bool gemma3 = std::string(type) == "gemma3_text";
    const nlohmann::json cfg = {
        {"model_type", type},
        {"hidden_size", 48},
        {"intermediate_size", 80},
        {"num_hidden_layers", 3},
        {"num_attention_heads", 4},
        {"num_key_value_heads", 2},
        {"head_dim", 16},
        {"max_position_embeddings", 64},
        {"vocab_size", 100},
        {"sliding_window", 3},
        {"layer_types", {"sliding_attention", "full_attention", "sliding_attention"}},
        {"final_logit_softcapping", 30.0}};
    const ModelConfig c = read_llama_config(cfg, "config.json");
    const int B = 2, T = 5, L = 3;
    const size_t BT = 10, C = 48, QKV = (4 + 4) * 16, A = 4 * 16, H = 80, Vp = 128;
    const std::string bt = "B=2 T=5", norm = "N=10 C=48", att = bt + " NH=4 NKV=2 hs=16";
    const std::string act = "N=10 H=80", xent = "N=10 V=100 Vp=128", cap = "N=1280";
    const std::string rope = "N=10 heads=6 D=16", qk = "N=10 heads=6 D=16";
    const size_t params =
        Vp * C + L * (QKV * C + C * A + 2 * H * C + H * C + 4 * C + (gemma3 ? 2 * 16 : 0)) + C;
    std::vector<Row> want = {
        {"encoder", "forward", bt + " C=48", 1},
        {"embedding scale", "forward, backward", "N=480", 2},
        {"rmsnorm", "forward", norm, 2 * L + 1},
        {"matmul qkv", "forward", mkn(BT, C, QKV), L},
        {"q/k norm", "forward", qk, L},
        {"rope", "forward", rope, L},
        {"attention", "forward", att + " W=3", 2},
        {"matmul attention proj", "forward", mkn(BT, A, C), L},
        {"post-norm", "forward", norm, 2 * L},
        {"residual", "forward", "N=480", 2 * L},
        {"matmul fc", "forward", mkn(BT, C, 2 * H), L},
        {"geglu", "forward", act, L},
        {"matmul fc proj", "forward", mkn(BT, H, C), L},
        {"attention", "forward", att, 1},
        {"matmul lm head", "forward", mkn(BT, C, Vp), 1},
        {"logit soft-cap", "forward", cap, 1},
        {"softmax + cross-entropy", "forward", xent, 1},
        {"softmax + cross-entropy", "backward", xent, 1},
        {"logit soft-cap", "backward", cap, 1},
        {"matmul lm head", "backward", mkn(BT, C, Vp), 1},
        {"rmsnorm", "backward", norm, 4 * L + 1},
        {"matmul fc proj", "backward", mkn(BT, H, C), L},
        {"geglu", "backward", act, L},
        {"matmul fc", "backward", mkn(BT, C, 2 * H), L},
        {"matmul attention proj", "backward", mkn(BT, A, C), L},
        {"attention", "backward", att + " W=3", 2},
        {"rope", "backward", rope, L},
        {"q/k norm", "backward", qk, L},
        {"matmul qkv", "backward", mkn(BT, C, QKV), L},
        {"attention", "backward", att, 1},
        {"encoder", "backward", bt + " C=48", 1},
        {"gradient norm", "update", "params=" + std::to_string(params), 1},
        {"adamw", "update", "params=" + std::to_string(params), 1},
    };
    if (!gemma3) {  // no q/k norms
      std::erase_if(want, [](const Row& r) { return r.op == "q/k norm"; });
    }
    for (Precision precision : {Precision::kFp32, Precision::kBf16}) {
      SCOPED_TRACE(precision_name(precision));
      const std::vector<LayerOp> ops = recorded(c, B, T, precision);
      expect_rows(ops, want);
      for (const LayerOp& op : ops) op.prepare()();  // each call runs on its own inputs
    }
  }
}

}  // namespace
}  // namespace llmcpu::bench
