// The kernel tables and how one is chosen: every table this CPU runs is complete and named after
// its target, both AVX2 and AVX-512 are offered where the CPU has them (and LLMCPU_MAX_ISA does
// not cap them), an unknown or unsupported LLMCPU_TARGET is a clear error naming the variable and
// the valid values, and a valid one is what the program then uses.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "simd/error.h"
#include "simd/isa_cap.h"
#include "simd/kernels.h"
#include "tests/common/process.h"
#if LLMCPU_TEST_LIBXSMM
#include "simd/gemm/xsmm.h"
#endif

#if defined(__aarch64__)
#include <asm/hwcap.h>
#include <sys/auxv.h>
#endif

namespace llmcpu {
namespace {

using testing::Outcome;
using testing::run_llmcpu;

bool offers(std::string_view name) {
  const std::vector<std::string_view> names = available_targets();
  return std::find(names.begin(), names.end(), name) != names.end();
}

TEST(SimdDispatch, EveryTableIsCompleteAndNamedAfterItsTarget) {
  const std::vector<std::string_view> names = available_targets();
  ASSERT_FALSE(names.empty());
  EXPECT_EQ(names.front(), "scalar");
  for (std::string_view name : names) {
    const KernelTable& t = kernels_for_target(name);
    EXPECT_EQ(t.target, name);
    const void* entries[] = {(void*)t.encoder_forward,
                             (void*)t.encoder_backward,
                             (void*)t.layernorm_forward,
                             (void*)t.layernorm_backward,
                             (void*)t.rmsnorm_forward,
                             (void*)t.rmsnorm_apply,
                             (void*)t.rmsnorm_backward,
                             (void*)t.head_rmsnorm_forward,
                             (void*)t.head_rmsnorm_backward,
                             (void*)t.matmul_forward,
                             (void*)t.matmul_backward,
                             (void*)t.lora_rank_update,
                             (void*)t.lora_project,
                             (void*)t.lora_outer_accumulate,
                             (void*)t.attention_forward,
                             (void*)t.attention_backward,
                             (void*)t.flash_attention_forward,
                             (void*)t.flash_attention_backward,
                             (void*)t.attention_decode,
                             (void*)t.gelu_forward,
                             (void*)t.gelu_backward,
                             (void*)t.swiglu_forward,
                             (void*)t.swiglu_backward,
                             (void*)t.geglu_forward,
                             (void*)t.geglu_backward,
                             (void*)t.residual_forward,
                             (void*)t.softcap_forward,
                             (void*)t.softcap_backward,
                             (void*)t.softmax_xent_forward,
                             (void*)t.softmax_xent_backward,
                             (void*)t.adamw_update,
                             (void*)t.sum_squares,
                             (void*)t.scale};
    for (const void* e : entries) EXPECT_NE(e, nullptr) << name;
  }
}

#if defined(__x86_64__)
TEST(SimdDispatch, OffersEveryX86TargetThisCpuRuns) {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    EXPECT_TRUE(offers("avx2"));
  }
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl")) {
    // Offered unless LLMCPU_MAX_ISA caps this run below AVX-512.
    EXPECT_EQ(offers("avx512"), isa_allows(IsaCap::kAvx512));
    // The default is the best target this run may use, on libxsmm's GEMM where the build has it.
    if (std::getenv("LLMCPU_TARGET") == nullptr && isa_allows(IsaCap::kAvx512)) {
      EXPECT_EQ(active_kernels().target, offers("avx512+xsmm") ? "avx512+xsmm" : "avx512");
    }
  }
}

// LLMCPU_MAX_ISA=avx2 makes any x86 CPU offer what an AVX2-only one does: no AVX-512 table, fp32
// or bf16, and a forced one refused with the cap named; a bad value is refused by name.
TEST(SimdDispatch, TheIsaCapOffersOnlyAvx2Tables) {
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) {
    GTEST_SKIP() << "not run here: this CPU has no AVX2";
  }
  const Outcome v = run_llmcpu("version", "LLMCPU_MAX_ISA=avx2 LLMCPU_TARGET= LLMCPU_BF16_TARGET=");
  ASSERT_EQ(v.status, 0) << v.output;
  EXPECT_NE(v.output.find("capped by LLMCPU_MAX_ISA=avx2"), std::string::npos) << v.output;
  EXPECT_NE(v.output.find("runs:          scalar, avx2"), std::string::npos) << v.output;
  EXPECT_NE(v.output.find("fp32 kernels:  avx2"), std::string::npos) << v.output;
  EXPECT_NE(v.output.find("bf16 kernels:  avx2"), std::string::npos) << v.output;
  // What it offers (the lines after "kernels built:", which lists what was compiled).
  const std::string offered = v.output.substr(v.output.find("this CPU:"));
  EXPECT_EQ(offered.find("avx512"), std::string::npos) << v.output;
  EXPECT_EQ(offered.find("onednn"), std::string::npos) << v.output;
  for (const char* forced :
       {"LLMCPU_TARGET=avx512", "LLMCPU_BF16_TARGET=avx512bf16", "LLMCPU_BF16_TARGET=onednn"}) {
    const Outcome r = run_llmcpu("version", std::string("LLMCPU_MAX_ISA=avx2 ") + forced);
    EXPECT_EQ(r.status, 2) << forced << ": " << r.output;
    EXPECT_NE(r.output.find(forced), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("capped by LLMCPU_MAX_ISA=avx2"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("valid here: scalar, avx2+xsmm, avx2"), std::string::npos) << r.output;
    EXPECT_EQ(r.output.find("internal error"), std::string::npos) << r.output;
  }
  const Outcome bad = run_llmcpu("version", "LLMCPU_MAX_ISA=avx3");
  EXPECT_EQ(bad.status, 2) << bad.output;
  EXPECT_NE(bad.output.find("LLMCPU_MAX_ISA=avx3: unknown instruction-set cap; valid: avx2"),
            std::string::npos)
      << bad.output;
}
#endif

#if LLMCPU_TEST_LIBXSMM
// The libxsmm tables rank first, so a block libxsmm refuses must not fail a run: xsmm::block
// reports it and leaves C alone (the table then runs the block on the Highway micro-kernel), and
// the refusal is remembered; a block it makes is computed, by the kernels of either instruction
// set. libxsmm 1.17 makes every valid shape the driver asks for, so the refused one here has B's
// leading dimension shorter than its rows.
TEST(SimdDispatch, LibxsmmBlockReportsABlockItCannotMake) {
  // Kernels of each instruction set this CPU runs (AVX2 ones on an AVX-512 CPU too).
  std::vector<xsmm::Isa> isas;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    isas.push_back(xsmm::Isa::kAvx2);
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq")) {
    isas.push_back(xsmm::Isa::kAvx512);
  }
  for (const xsmm::Isa isa : isas) {
    if (!xsmm::available(isa)) {
      ADD_FAILURE() << "libxsmm makes no kernel for an instruction set this CPU runs";
      continue;
    }
    const char* name = isa == xsmm::Isa::kAvx2 ? "avx2" : "avx512";
    // C (m x n, ldc = m) = [C +] A (m x k, lda = m) B, B(p, j) at p*ldb + j (b_rows) or j*ldb + p.
    auto check = [&](bool b_rows, int m, int n, int k, int ldb, bool accumulate) {
      // Small integers: every sum is exact in fp32, whatever the order.
      std::vector<float> A(size_t(m) * k), B(size_t(k) * n), C(size_t(m) * n, 7.0f);
      for (size_t i = 0; i < A.size(); ++i) A[i] = float(int(i % 7) - 3);
      for (size_t i = 0; i < B.size(); ++i) B[i] = float(int(i % 5) - 2);
      const bool made =
          xsmm::block(isa, b_rows, m, n, k, A.data(), m, B.data(), ldb, C.data(), m, accumulate);
      size_t wrong = 0;
      for (int j = 0; j < n; ++j) {
        for (int r = 0; r < m; ++r) {
          float want = made && !accumulate ? 0.0f : 7.0f;
          for (int p = 0; made && p < k; ++p) {
            want += A[size_t(p) * m + r] * B[b_rows ? size_t(p) * ldb + j : size_t(j) * ldb + p];
          }
          wrong += C[size_t(j) * m + r] != want;
        }
      }
      EXPECT_EQ(wrong, 0u) << name << " m=" << m << " n=" << n << " k=" << k << " made=" << made;
      return made;
    };
    EXPECT_TRUE(check(false, 64, 16, 33, 33, false)) << name;
    EXPECT_TRUE(check(true, 64, 64, 512, 64, true)) << name;
    EXPECT_FALSE(check(true, 64, 64, 8, 32, false)) << name;  // ldb = 32 < n = 64: refused
    EXPECT_FALSE(check(true, 64, 64, 8, 32, false)) << name;  // and remembered as refused
  }
}
#endif

#if defined(__aarch64__)
TEST(SimdDispatch, OffersNeonOnEveryArm64Cpu) {
  // Advanced SIMD is part of every ARMv8-A CPU; without SVE it is the best target and the default.
  EXPECT_TRUE(offers("neon"));
  const bool sve = (getauxval(AT_HWCAP) & HWCAP_SVE) != 0;
  EXPECT_EQ(offers("sve") || offers("sve2") || offers("sve_256") || offers("sve2_128"), sve);
  const char* forced = std::getenv("LLMCPU_TARGET");
  if (forced != nullptr && *forced != '\0') {
    EXPECT_EQ(active_kernels().target, forced);  // e.g. LLMCPU_TARGET=neon on an SVE CPU
  } else if (sve) {
    EXPECT_EQ(active_kernels().target.substr(0, 3), "sve");
  } else {
    EXPECT_EQ(active_kernels().target, "neon");
  }
}
#endif

TEST(SimdDispatch, UnknownTargetNamesTheVariableAndTheValidValues) {
  try {
    kernels_for_target("avx9000", "LLMCPU_TARGET");
    FAIL() << "no error for an unknown target";
  } catch (const UsageError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("LLMCPU_TARGET=avx9000"), std::string::npos) << msg;
    for (std::string_view name : available_targets()) {
      EXPECT_NE(msg.find(std::string(name)), std::string::npos) << msg;
    }
  }
}

TEST(SimdDispatch, CompiledButUnsupportedTargetIsRefused) {
  // A target of another architecture is never compiled here; neon on x86 or avx2 on aarch64 is
  // refused as unknown, with the same list of valid values.
  const char* foreign = offers("neon") ? "avx2" : "neon";
  EXPECT_THROW(kernels_for_target(foreign, "LLMCPU_TARGET"), UsageError);
}

TEST(SimdDispatch, EnvironmentVariableChoosesTheProgramsKernels) {
  if (std::string_view(LLMCPU_BINARY).empty()) {
    GTEST_SKIP() << "kernels-only build: no llmcpu program";
  }
  const std::string fixture = std::string(LLMCPU_FIXTURE_DIR) + "/edge_";
  const std::string args =
      "verify --model " + fixture + "model.bin --state " + fixture + "state.bin";
  for (std::string_view name : available_targets()) {
    const Outcome ok = run_llmcpu(args, "LLMCPU_TARGET=" + std::string(name));
    EXPECT_EQ(ok.status, 0) << ok.output;
    EXPECT_NE(ok.output.find(", " + std::string(name) + " kernels"), std::string::npos)
        << ok.output;
  }
  const Outcome bad = run_llmcpu(args, "LLMCPU_TARGET=bogus");
  EXPECT_NE(bad.status, 0);
  EXPECT_NE(bad.output.find("LLMCPU_TARGET=bogus"), std::string::npos) << bad.output;
  EXPECT_NE(bad.output.find("scalar"), std::string::npos) << bad.output;
}

}  // namespace
}  // namespace llmcpu
