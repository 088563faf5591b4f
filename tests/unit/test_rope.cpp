// Rotary tables (core/model/rope.h) against tests/fixtures/rope_reference.py, written from Hugging
// Face's transformers (modeling_rope_utils and LlamaRotaryEmbedding) in float64: the inverse
// frequencies of the default, linear and llama3 rope types, and cos and sin at positions up to
// 16383 (131071 once), for the head sizes and thetas of the Llama family's models. Then the configurations that
// are refused, by field.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "core/model/rope.h"
#include "simd/error.h"
#include "tests/common/process.h"

namespace llmcpu {
namespace {

using testing::run_shell;
using testing::shell_quote;

const char* type_name(RopeType t) {
  return t == RopeType::kLinear ? "linear" : t == RopeType::kLlama3 ? "llama3" : "default";
}

struct Reference {
  std::vector<double> inv;
  std::map<std::pair<int, int>, std::pair<double, double>> cos_sin;  // (p, j) -> (cos, sin)
};

Reference reference(const RopeConfig& c, const std::vector<int>& positions) {
  std::ostringstream cmd;
  cmd.precision(17);
  cmd << LLMCPU_PYTHON << " " << shell_quote(LLMCPU_FIXTURE_DIR "/rope_reference.py") << " "
      << c.theta << " " << c.head_dim << " " << type_name(c.type) << " " << c.factor << " "
      << c.low_freq_factor << " " << c.high_freq_factor << " "
      << c.original_max_position_embeddings;
  for (const int p : positions) cmd << " " << p;
  const testing::Outcome r = run_shell(cmd.str() + " 2>&1");
  EXPECT_EQ(r.status, 0) << cmd.str() << "\n" << r.output;
  Reference ref;
  std::istringstream in(r.output);
  for (std::string kind; in >> kind;) {
    if (kind == "inv") {
      int j = 0;
      double v = 0;
      in >> j >> v;
      ref.inv.push_back(v);
      continue;
    }
    int p = 0, j = 0;
    double v = 0;
    in >> p >> j >> v;
    auto& cs = ref.cos_sin[{p, j}];
    (kind == "cos" ? cs.first : cs.second) = v;
  }
  return ref;
}

// Both sides compute inv_freq, the angle p * inv_freq and its cosine and sine with the same double
// operations in the same order (the C library's pow, cos and sin; Python calls them too), so the
// doubles agree exactly; the table rounds a value in [-1, 1] to float, which errs by at most half
// an ulp of float at 1, 2^-25.
constexpr double kTableBound = 0x1p-25;

void compare(const RopeConfig& c, int last_position = 16383) {
  std::vector<int> positions = {0, 1, 2, 3, 17, 1000, 4095, 8191, 8192};
  positions.push_back(last_position);
  const Reference ref = reference(c, positions);
  const std::vector<double> inv = rope_inverse_frequencies(c);
  ASSERT_EQ(inv.size(), ref.inv.size());
  for (size_t j = 0; j < inv.size(); ++j) EXPECT_EQ(inv[j], ref.inv[j]) << "inv_freq " << j;
  std::vector<float> cos, sin;
  rope_tables(c, positions.back() + 1, cos, sin);
  const size_t half = static_cast<size_t>(c.head_dim / 2);
  ASSERT_EQ(cos.size(), (positions.back() + 1) * half);
  for (const int p : positions) {
    for (size_t j = 0; j < half; ++j) {
      const auto& [rc, rs] = ref.cos_sin.at({p, static_cast<int>(j)});
      EXPECT_NEAR(cos[p * half + j], rc, kTableBound) << "cos p=" << p << " j=" << j;
      EXPECT_NEAR(sin[p * half + j], rs, kTableBound) << "sin p=" << p << " j=" << j;
    }
  }
}

TEST(Rope, DefaultTablesMatchTransformers) {
  for (const int d : {2, 24, 64, 128}) {
    for (const double theta : {10000.0, 100000.0, 500000.0, 1000000.0}) {
      SCOPED_TRACE("D=" + std::to_string(d) + " theta=" + std::to_string(theta));
      compare({.head_dim = d, .theta = theta});
    }
  }
}

TEST(Rope, LinearScalingMatchesTransformers) {
  compare({.head_dim = 64, .theta = 10000, .type = RopeType::kLinear, .factor = 4});
}

// Llama 3.1 (factor 8) and Llama 3.2 (factor 32); each has frequencies in all three bands.
TEST(Rope, Llama3ScalingMatchesTransformers) {
  for (const double factor : {8.0, 32.0}) {
    for (const int d : {24, 64, 128}) {
      SCOPED_TRACE("D=" + std::to_string(d) + " factor=" + std::to_string(factor));
      compare({.head_dim = d,
               .theta = 500000,
               .type = RopeType::kLlama3,
               .factor = factor,
               .low_freq_factor = 1,
               .high_freq_factor = 4,
               .original_max_position_embeddings = 8192},
              d == 64 ? 131071 : 16383);  // (Llama 3.2's whole context once)
    }
  }
  // The three bands, at D = 128: some frequencies unchanged, some divided by the factor, some
  // between.
  const RopeConfig c{.head_dim = 128, .theta = 500000, .type = RopeType::kLlama3, .factor = 32};
  const std::vector<double> plain = rope_inverse_frequencies({.head_dim = 128, .theta = 500000});
  const std::vector<double> scaled = rope_inverse_frequencies(c);
  int same = 0, divided = 0, between = 0;
  for (size_t j = 0; j < plain.size(); ++j) {
    same += scaled[j] == plain[j];
    divided += scaled[j] == plain[j] / 32;
    between += scaled[j] < plain[j] && scaled[j] > plain[j] / 32;
  }
  EXPECT_GT(same, 0);
  EXPECT_GT(divided, 0);
  EXPECT_GT(between, 0);
  EXPECT_EQ(same + divided + between, 64);
}

TEST(Rope, ImpossibleConfigurationsAreRefusedByField) {
  const auto refused = [](const RopeConfig& c, const std::string& field) {
    try {
      validate(c, "config.json");
      ADD_FAILURE() << "accepted; expected a refusal naming " << field;
    } catch (const ShapeError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("config.json"), std::string::npos) << what;
      EXPECT_NE(what.find(field), std::string::npos) << what;
    }
  };
  refused({.head_dim = 0}, "head_dim");
  refused({.head_dim = 7}, "head_dim");
  refused({.head_dim = 64, .theta = 0}, "rope_theta");
  refused({.head_dim = 64, .theta = NAN}, "rope_theta");
  refused({.head_dim = 64, .type = RopeType::kLinear, .factor = 0.5}, "factor");
  refused({.head_dim = 64, .type = RopeType::kLlama3, .factor = 8, .low_freq_factor = 4,
           .high_freq_factor = 1},
          "low_freq_factor");
  refused({.head_dim = 64, .type = RopeType::kLlama3, .factor = 8,
           .original_max_position_embeddings = 0},
          "original_max_position_embeddings");
  EXPECT_NO_THROW(validate({.head_dim = 64}, "config.json"));
}

}  // namespace
}  // namespace llmcpu
