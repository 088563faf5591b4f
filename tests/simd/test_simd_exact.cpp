// Identities that hold exactly in the scalar reference must hold exactly on every target: LayerNorm
// over one channel outputs its bias and passes back a zero gradient, whatever the rounding of w*dy
// (a fused multiply-add the compiler slipped in would leave its residual, amplified by rstd = 316).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "simd/kernels.h"

namespace llmcpu {
namespace {

TEST(SimdExact, LayerNormOverOneChannelHasZeroInputGradient) {
  for (std::string_view name : available_targets()) {
    const KernelTable& k = kernels_for_target(name);
    const size_t N = 37;
    std::vector<float> x(N), y(N), mean(N), rstd(N), dy(N), dx(N, 0.0f);
    for (size_t i = 0; i < N; ++i) {
      x[i] = 0.37f * float(i) - 5.1f;
      dy[i] = 1.3f - 0.11f * float(i);
    }
    const float w = 1.1f, b = 0.2f;
    float dw = 0, db = 0;
    k.layernorm_forward(y.data(), mean.data(), rstd.data(), x.data(), &w, &b, N, 1);
    k.layernorm_backward(dx.data(), &dw, &db, dy.data(), x.data(), &w, mean.data(), rstd.data(), N, 1);
    for (size_t i = 0; i < N; ++i) {
      EXPECT_EQ(y[i], b) << name << " row " << i;
      EXPECT_EQ(dx[i], 0.0f) << name << " row " << i;
    }
    EXPECT_EQ(dw, 0.0f) << name;
  }
}

}  // namespace
}  // namespace llmcpu
