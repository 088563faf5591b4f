// A LoRA run's frozen base (Model::freeze_base, restore_master; core/model/quantized_base.h) and
// its memory plan:
// - kept in bf16 alone: the passes give the same bits as before freezing (the GEMMs read the same
//   bf16 copy), the fp32 master of the layers' matmul weights is given back, and restore_master
//   brings it back as the copy widened;
// - quantized (int8, nf4): the passes are those of a model whose weights are the format's decoded
//   values (block_quant.h's decoder), within the GEMMs' rounding, and restore_master writes
//   exactly those values;
// - the plan counts the frozen forms, and the fp32 weights while the base loads;
// - freezing a model that trains its base, or twice, is refused.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <tuple>
#include <vector>

#include "core/model/model.h"
#include "core/model/quantized_base.h"
#include "core/train/memory_plan.h"
#include "simd/error.h"
#include "tests/unit/lora_configs.h"

namespace llmcpu {
namespace {

ModelConfig wide_llama() {
  const nlohmann::json cfg = {{"model_type", "llama"},
                              {"hidden_size", 256},
                              {"intermediate_size", 320},
                              {"num_hidden_layers", 2},
                              {"num_attention_heads", 4},
                              {"num_key_value_heads", 2},
                              {"max_position_embeddings", 16},
                              {"vocab_size", 40},
                              {"rms_norm_eps", 1e-6}};
  return read_llama_config(cfg, "config.json");
}

std::vector<int> tokens(size_t n, int salt) {
  std::vector<int> t(n);
  for (size_t i = 0; i < n; ++i) t[i] = int((i * 7 + size_t(salt)) % 40);
  return t;
}

constexpr int kB = 2, kT = 8;

float loss_of(Model& m) {
  m.plan_batch(kB, kT);
  const std::vector<int> x = tokens(kB * kT, 1), y = tokens(kB * kT, 2);
  return m.forward(x.data(), y.data(), kB, kT);
}

TEST(FrozenBase, Bf16BaseComputesTheSameWithoutItsMaster) {
  Model m(wide_llama(), active_kernels(), Precision::kBf16, nullptr, /*base_gradients=*/false);
  init_model(m, 5);
  // A bf16 base (as loaded from a bf16 file): its embedding gathered from the copy is then exact.
  float* w = m.params_flat() + m.layout().offset(kWte);
  for (size_t i = 0; i < m.layout().size(kWte); ++i) w[i] = bf16_to_float(float_to_bf16(w[i]));
  const std::vector<float> original(m.params_flat(), m.params_flat() + m.num_parameters());
  const float before = loss_of(m);
  const size_t held = m.master_bytes();
  m.freeze_base(QuantFormat::kNone);
  EXPECT_TRUE(m.embedding_in_bf16());
  size_t frozen = m.layout().size(kWte) + m.layout().size(kLmHead);
  for (const ParameterSpan& s : QuantizedBase::spans(m.layout())) frozen += s.count;
  EXPECT_LE(m.master_bytes(), held - frozen * sizeof(float) + 2 * 4096 * 10);  // page edges
  EXPECT_EQ(loss_of(m), before);
  EXPECT_THROW(m.refresh_bf16_weights(), Error);  // nothing to rebuild it from
  m.restore_master();
  EXPECT_FALSE(m.embedding_in_bf16());
  for (size_t i = 0; i < m.num_parameters(); ++i)  // the frozen tensors widened from bf16
    ASSERT_EQ(m.params_flat()[i], bf16_to_float(float_to_bf16(original[i]))) << i;
  EXPECT_EQ(loss_of(m), before);  // the copy rebuilt from the restored master: the same bits
}

class QuantizedFrozenBase : public ::testing::TestWithParam<std::tuple<QuantFormat, Precision>> {};

TEST_P(QuantizedFrozenBase, ComputesWithTheDecodedWeights) {
  const auto [format, precision] = GetParam();
  Model q(wide_llama(), active_kernels(), precision, nullptr, false);
  Model d(wide_llama(), active_kernels(), precision, nullptr, false);
  init_model(q, 9);
  // d: the same model with every layer matmul weight replaced by its decoded values.
  std::copy_n(q.params_flat(), q.num_parameters(), d.params_flat());
  const ParameterLayout& layout = q.layout();
  for (const ParameterSpan& s : QuantizedBase::spans(layout)) {
    const size_t rows = layout.dims(s.tensor)[1], cols = layout.dims(s.tensor)[2];
    std::vector<uint8_t> codes(rows * quant_code_bytes_per_row(format, cols));
    std::vector<float> scales(rows * quant_blocks_per_row(cols));
    quantize_rows(format, q.params_flat() + s.offset, rows, cols, codes.data(), scales.data());
    dequantize_rows(format, codes.data(), scales.data(), cols, 0, rows, 0, cols,
                    d.params_flat() + s.offset, cols);
  }
  q.freeze_base(format);
  EXPECT_EQ(q.base_format(), format);
  EXPECT_EQ(q.quantized_base_bytes(), QuantizedBase::bytes(format, layout));
  d.freeze_base(QuantFormat::kNone);
  const float want = loss_of(d), got = loss_of(q);
  // Both sums of the same terms, in another blocking: fp32 and bf16 GEMMs alike.
  EXPECT_NEAR(got, want, 1e-5 * std::fabs(want));
  q.restore_master();
  d.restore_master();
  for (const ParameterSpan& s : QuantizedBase::spans(layout))
    for (size_t i = s.offset; i < s.offset + s.count; ++i) {
      const float dec = d.params_flat()[i];  // d's master: decoded (bf16: rounded to bf16)
      ASSERT_EQ(precision == Precision::kBf16 ? bf16_to_float(float_to_bf16(q.params_flat()[i]))
                                              : q.params_flat()[i],
                dec)
          << i;
    }
}

INSTANTIATE_TEST_SUITE_P(
    Formats, QuantizedFrozenBase,
    ::testing::Combine(::testing::Values(QuantFormat::kInt8, QuantFormat::kNf4),
                       ::testing::Values(Precision::kFp32, Precision::kBf16)),
    [](const ::testing::TestParamInfo<std::tuple<QuantFormat, Precision>>& info) {
      return std::string(quant_format_name(std::get<0>(info.param))) + "_" +
             precision_name(std::get<1>(info.param));
    });

// Frozen as init_model writes it (begin_freeze ... finish_freeze, each tensor taking its frozen
// form as soon as it is drawn): the same model, bit for bit, as frozen once all was written.
TEST(FrozenBase, FreezingAsTheBaseIsWrittenIsFreezingAtTheEnd) {
  for (const QuantFormat format : {QuantFormat::kNone, QuantFormat::kNf4}) {
    Model at_end(wide_llama(), active_kernels(), Precision::kBf16, nullptr, false);
    init_model(at_end, 3);
    at_end.freeze_base(format);
    Model streamed(wide_llama(), active_kernels(), Precision::kBf16, nullptr, false);
    streamed.begin_freeze(format);
    init_model(streamed, 3);
    streamed.finish_freeze();
    EXPECT_EQ(streamed.master_bytes(), at_end.master_bytes());
    EXPECT_EQ(loss_of(streamed), loss_of(at_end)) << quant_format_name(format);
    streamed.restore_master();
    at_end.restore_master();
    for (size_t i = 0; i < at_end.num_parameters(); ++i)
      ASSERT_EQ(streamed.params_flat()[i], at_end.params_flat()[i]) << i;
  }
}

TEST(FrozenBase, FreezingIsRefusedForATrainedBaseOrTwice) {
  Model trained(testing::lora_llama_config(1));
  EXPECT_THROW(trained.freeze_base(QuantFormat::kNf4), Error);
  Model frozen(testing::lora_llama_config(1), active_kernels(), Precision::kFp32, nullptr, false);
  frozen.freeze_base(QuantFormat::kInt8);
  EXPECT_THROW(frozen.freeze_base(QuantFormat::kInt8), Error);
}

TEST(FrozenBase, ThePlanCountsTheFrozenFormsAndTheLoad) {
  MemoryRequest r;
  r.config = wide_llama();
  r.precision = Precision::kBf16;
  r.batch = kB, r.seq_len = kT;
  r.program = 0;
  r.lora_parameters = 1000;
  const ParameterLayout layout(r.config);
  size_t M = 0;
  for (const ParameterSpan& s : QuantizedBase::spans(layout)) M += s.count;
  const double P = double(layout.total());
  const double E = double(layout.size(kWte) + layout.size(kLmHead));  // in the bf16 copy alone
  const MemoryPlan none = plan_memory(r);
  EXPECT_DOUBLE_EQ(none.parameters, (P - M - E) * 6 + E * 2 + double(M) * 2 + 1000 * 6);
  EXPECT_DOUBLE_EQ(none.loading, P * 4);
  // A base frozen as it is drawn or read holds its frozen forms and one span in fp32 while it
  // loads; read from a mapped file, that span's pages of the file too (4 bytes an element at most).
  size_t chunk = 0;
  for (const ParameterSpan& s : layout.spans()) chunk = std::max(chunk, s.count);
  r.base_streamed = true;
  EXPECT_DOUBLE_EQ(plan_memory(r).loading, none.parameters - 1000 * 6 + double(chunk) * 4);
  r.base_mapped = true;
  EXPECT_DOUBLE_EQ(plan_memory(r).loading, none.parameters - 1000 * 6 + double(chunk) * 8);
  r.base_streamed = r.base_mapped = false;
  r.base_quant = QuantFormat::kNf4;
  const MemoryPlan nf4 = plan_memory(r);
  EXPECT_DOUBLE_EQ(nf4.parameters, (P - M - E) * 6 + E * 2 +
                                       double(QuantizedBase::bytes(QuantFormat::kNf4, layout)) +
                                       6000);
  EXPECT_GE(nf4.total(), nf4.loading);
  r.precision = Precision::kFp32;
  r.base_quant = QuantFormat::kNone;
  EXPECT_DOUBLE_EQ(plan_memory(r).parameters, P * 4 + 1000 * 4);
}

}  // namespace
}  // namespace llmcpu
