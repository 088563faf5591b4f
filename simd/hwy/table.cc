// Gathers the vectorized kernels of one Highway target into KernelTables, once per compiled target,
// and lists the targets this CPU runs. Each kernel family lives in its own file (encoder.cc,
// layernorm.cc, matmul.cc, ...) and exports a Fill* function per target; this file only calls them.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "simd/hwy/table.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
// Must come after foreach_target.h.
#include "hwy/highway.h"
#include "simd/hwy/registry.h"
#include "simd/isa_cap.h"
#include "simd/kernels.h"

HWY_BEFORE_NAMESPACE();
namespace llmcpu {
namespace HWY_NAMESPACE {

// Defined per target in the family files.
void FillEncoder(KernelTable& t);
void FillLayerNorm(KernelTable& t);
void FillRmsNorm(KernelTable& t);
void FillHeadRmsNorm(KernelTable& t);
bool FillMatmul(KernelTable& t, bool use_xsmm);
void FillLora(KernelTable& t);
void FillAttention(KernelTable& t);
void FillFlashAttention(KernelTable& t);
void FillRope(KernelTable& t);
void FillGelu(KernelTable& t);
void FillSwiGlu(KernelTable& t);
void FillSoftCap(KernelTable& t);
void FillResidual(KernelTable& t);
void FillSoftmaxXent(KernelTable& t);
void FillAdamW(KernelTable& t);
void FillReduce(KernelTable& t);
void FillBf16(Bf16Kernels& t, std::string_view target, bool use_xsmm);

// Built on first use, so a target's code runs only once the dispatcher knows the CPU has it.
const hwy_tables::TargetTables* Tables() {
  static hwy_tables::TargetTables tables = [] {
    hwy_tables::TargetTables r;
    r.hwy_target = HWY_TARGET;
    KernelTable t{};
    FillEncoder(t);
    FillLayerNorm(t);
    FillRmsNorm(t);
    FillHeadRmsNorm(t);
    FillLora(t);
    FillAttention(t);
    FillFlashAttention(t);
    FillRope(t);
    FillGelu(t);
    FillSwiGlu(t);
    FillSoftCap(t);
    FillResidual(t);
    FillSoftmaxXent(t);
    FillAdamW(t);
    FillReduce(t);
    r.hwy_gemm = t;
    r.xsmm_gemm = t;
    FillMatmul(r.hwy_gemm, false);
    r.has_xsmm = FillMatmul(r.xsmm_gemm, true);
    r.hwy_gemm.target = hwy_tables::target_name(HWY_TARGET, false);
    r.xsmm_gemm.target = hwy_tables::target_name(HWY_TARGET, true);
    FillBf16(r.bf16, r.hwy_gemm.target, false);
    if (r.has_xsmm) FillBf16(r.bf16_xsmm, r.xsmm_gemm.target, true);
    return r;
  }();
  return &tables;
}

}  // namespace HWY_NAMESPACE
}  // namespace llmcpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include <string>

namespace llmcpu::hwy_tables {

HWY_EXPORT(Tables);

std::vector<std::pair<int64_t, std::string_view>> compiled() {
  std::vector<std::pair<int64_t, std::string_view>> r;
  for (int64_t bits = HWY_TARGETS; bits != 0; bits &= bits - 1) {
    const int64_t t = bits & -bits;  // lowest bit first: Highway orders targets best first
    r.emplace_back(t, target_name(t));
  }
  return r;
}

bool xsmm_compiled(int64_t hwy_target) {
#if LLMCPU_HAVE_LIBXSMM && HWY_ARCH_X86
  return hwy_target <= HWY_AVX2;  // better targets have lower bits, as simd/hwy/matmul.cc tests
#else
  (void)hwy_target;
  return false;
#endif
}

const std::vector<const TargetTables*>& supported() {
  static const std::vector<const TargetTables*> tables = [] {
    std::vector<const TargetTables*> r;
    isa_cap();  // keeps Highway to the targets LLMCPU_MAX_ISA allows
    for (const int64_t t : hwy::SupportedAndGeneratedTargets()) {
      // HWY_EXPORT's table holds an initialising entry, one entry per dynamic target in bit order,
      // then the portable fallback; this mirrors hwy::ChosenTarget::GetIndex().
      const bool fallback = (t & (HWY_SCALAR | HWY_EMU128)) != 0;
      const size_t index =
          fallback ? HWY_MAX_DYNAMIC_TARGETS + 1
                   : hwy::Num0BitsBelowLS1Bit_Nonzero64(uint64_t(HWY_CHOSEN_TARGET_SHIFT(t)));
      const TargetTables* tables = HWY_DISPATCH_TABLE(Tables)[index]();
      if (tables->hwy_target != t) {
        throw std::logic_error(std::string("kernel table of Highway target ") + hwy::TargetName(t) +
                               " reports target " + hwy::TargetName(tables->hwy_target));
      }
      r.push_back(tables);
    }
    return r;
  }();
  return tables;
}

std::string_view target_name(int64_t hwy_target, bool xsmm) {
  // libxsmm exists for x86 only; the other targets never ask for an "+xsmm" name.
  switch (hwy_target) {
    case HWY_AVX3_DL:
      return xsmm ? "avx512_dl+xsmm" : "avx512_dl";
    case HWY_AVX3:
      return xsmm ? "avx512+xsmm" : "avx512";
    case HWY_AVX2:
      return xsmm ? "avx2+xsmm" : "avx2";
    case HWY_SSE4:
      return xsmm ? "sse4+xsmm" : "sse4";
    case HWY_SSSE3:
      return xsmm ? "ssse3+xsmm" : "ssse3";
    case HWY_SVE2_128:
      return "sve2_128";
    case HWY_SVE_256:
      return "sve_256";
    case HWY_SVE2:
      return "sve2";
    case HWY_SVE:
      return "sve";
    case HWY_NEON:
      return "neon";
    case HWY_EMU128:
      return xsmm ? "emu128+xsmm" : "emu128";
    case HWY_SCALAR:
      return xsmm ? "hwy_scalar+xsmm" : "hwy_scalar";
    default:
      return "unknown";
  }
}

}  // namespace llmcpu::hwy_tables
#endif  // HWY_ONCE
