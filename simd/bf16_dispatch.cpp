// Picks the bf16 kernel table: per Highway target, its portable tables (simd/hwy/bf16.cc: bf16
// widened to fp32 inside the GEMM's packing, on libxsmm's blocks where the build has them, and on
// the Highway micro-kernel), on CPUs with AVX512-BF16 a table whose GEMMs and flash attention use
// the dot-product instructions (simd/x86/), and oneDNN's where it makes its bf16 matmuls here.
// Only tables this CPU runs are offered; a name this build knows but this CPU cannot run is
// refused with the reason.
// Not here: the kernels.
#include <cstdlib>
#include <string>
#include <vector>

#include "simd/amx.h"
#include "simd/bf16.h"
#include "simd/error.h"
#include "simd/hwy/registry.h"
#include "simd/isa_cap.h"
#include "simd/kernels.h"
#include "simd/roofs.h"
#include "simd/table_registry.h"
#if LLMCPU_HAVE_X86_KERNELS
#include "simd/x86/bf16_attention.h"
#include "simd/x86/bf16_gemm.h"
#endif
#if LLMCPU_HAVE_ONEDNN
#include "simd/onednn/bf16_matmul.h"
#endif

// Arm BF16: a table of its own, "neon_bf16", whose GEMMs use BFMMLA (simd/arm/); ranked first for
// the best vectorized target where the CPU has BF16, its other entries that target's portable ones
// (flash attention included: the widening one).
#if LLMCPU_HAVE_ARM_KERNELS
#include "simd/arm/bf16_gemm.h"
namespace llmcpu {
namespace {
const Bf16Kernels* arm_bf16_table(const Bf16Kernels& portable, bool best) {
  if (!best || !arm::has_bf16()) return nullptr;
  static Bf16Kernels t = portable;
  t.target = "neon_bf16";
  t.matmul_forward = &arm::bf16_matmul_forward;
  t.matmul_forward_bf16 = &arm::bf16_matmul_forward_bf16;
  t.matmul_backward = &arm::bf16_matmul_backward;
  t.matmul_forward_scratch = &arm::bf16_matmul_forward_scratch;
  t.matmul_backward_scratch = &arm::bf16_matmul_backward_scratch;
  return &t;
}
std::string arm_bf16_not_here() { return "it needs Arm BF16 (BFDOT/BFMMLA), which this CPU lacks"; }
}  // namespace
}  // namespace llmcpu
#else
namespace llmcpu {
namespace {
const Bf16Kernels* arm_bf16_table(const Bf16Kernels&, bool) { return nullptr; }
std::string arm_bf16_not_here() { return "this build has no Arm kernels"; }
}  // namespace
}  // namespace llmcpu
#endif

namespace llmcpu {
namespace {

// Flash attention on AVX512-BF16 dot products where the CPU has them (the oneDNN table too: a CPU
// with AMX has AVX512-BF16); the portable tables keep the widening path.
[[maybe_unused]] void use_dot_product_attention(Bf16Kernels& t) {
#if LLMCPU_HAVE_X86_KERNELS
  if (!x86::has_avx512_bf16()) return;
  t.flash_attention_forward = &x86::bf16_flash_attention_forward;
  t.flash_attention_backward = &x86::bf16_flash_attention_backward;
  t.flash_attention_forward_scratch = &x86::bf16_flash_attention_forward_scratch;
  t.flash_attention_backward_scratch = &x86::bf16_flash_attention_backward_scratch;
#else
  (void)t;
#endif
}

struct Entry {
  std::string_view name;      // the bf16 table's own name
  std::string_view fp32_for;  // the fp32 target it goes with ("" for none)
  const Bf16Kernels* table;
};

// Best first within each fp32 target: the AVX512-BF16 tables before the portable ones where this
// core's dot products outrun its FMAs, after them elsewhere.
const TableRegistry<Entry>& registry() {
  static const TableRegistry<Entry> tables([] {
    std::vector<Entry> r{{"scalar", "scalar", &scalar_bf16_kernels()}};
    for (const hwy_tables::TargetTables* t : hwy_tables::supported()) {
      const std::string_view fp32 = hwy_tables::target_name(t->hwy_target, false);
      // The best vectorized target gets the GEMM tables: oneDNN's (AMX) first where the CPU has
      // AMX, then (where bf16_dot_products_first) the own AVX512-BF16 one, which measured faster
      // than oneDNN's AVX512-BF16 kernels on the GPT-2 shapes (bench/RESULTS.md).
      const bool best = t == hwy_tables::supported().front();
#if LLMCPU_HAVE_ONEDNN
      static Bf16Kernels dnnl = t->bf16;
      // AMX needs the kernel's permission for the tile state; without it oneDNN falls back to its
      // AVX-512 kernels and the own GEMM ranks first again.
      const bool amx = request_amx_permission();  // false without AMX-BF16
      // Offered only where oneDNN makes its bf16 matmuls on this CPU (it has none without
      // AVX-512): asked, never assumed.
      const bool dnnl_here = best && onednn::bf16_available();
      if (dnnl_here) {
        dnnl.target = "onednn";
        dnnl.matmul_forward = &onednn::bf16_matmul_forward;
        dnnl.matmul_forward_bf16 = nullptr;  // the caller rounds oneDNN's fp32 output
        dnnl.matmul_backward = &onednn::bf16_matmul_backward;
        dnnl.matmul_forward_scratch = &onednn::bf16_matmul_forward_scratch;
        dnnl.matmul_backward_scratch = &onednn::bf16_matmul_backward_scratch;
        use_dot_product_attention(dnnl);
      }
      if (dnnl_here && amx) r.push_back({dnnl.target, fp32, &dnnl});
#endif
      // The tables on AVX512-BF16 dot products: the own one, then oneDNN's without AMX. Without
      // AVX512-BF16 oneDNN emulates its bf16 products: 2.6-2.9x slower than the portable tables
      // on every GPT-2 124M GEMM (bench_bf16_gemm with LLMCPU_MAX_ISA=avx512 on a Zen 4,
      // bench/RESULTS.md), so there it ranks after them (below).
      std::vector<Entry> dots;
#if LLMCPU_HAVE_X86_KERNELS
      if (fp32 == "avx512" && x86::has_avx512_bf16()) {
        static Bf16Kernels dot = t->bf16;
        dot.target = "avx512bf16";
        dot.matmul_forward = &x86::bf16_matmul_forward;
        dot.matmul_forward_bf16 = &x86::bf16_matmul_forward_bf16;
        dot.matmul_backward = &x86::bf16_matmul_backward;
        dot.matmul_forward_scratch = &x86::bf16_matmul_forward_scratch;
        dot.matmul_backward_scratch = &x86::bf16_matmul_backward_scratch;
        use_dot_product_attention(dot);
        dots.push_back({dot.target, fp32, &dot});
      }
#endif
      bool dnnl_dots = false;
#if LLMCPU_HAVE_X86_KERNELS
      dnnl_dots = x86::has_avx512_bf16();
#endif
#if LLMCPU_HAVE_ONEDNN
      if (dnnl_here && !amx && dnnl_dots) dots.push_back({dnnl.target, fp32, &dnnl});
#endif
      // They rank before the portable tables only where this core's dot products outrun the fp32
      // FMAs that the portable GEMMs widen onto (bf16_dot_products_first).
      const bool dots_first = !dots.empty() && bf16_dot_products_first();
      (void)dnnl_dots;
      if (dots_first) r.insert(r.end(), dots.begin(), dots.end());
      (void)best;
      // Arm BF16's table ranks before the portable one (the block at the top).
      const Bf16Kernels* arm = arm_bf16_table(t->bf16, best);
      if (arm) r.push_back({arm->target, fp32, arm});
      // The portable tables, libxsmm's blocks first (as for fp32).
      if (t->has_xsmm) r.push_back({t->bf16_xsmm.target, fp32, &t->bf16_xsmm});
      r.push_back({t->bf16.target, fp32, &t->bf16});
      if (!dots_first) r.insert(r.end(), dots.begin(), dots.end());
#if LLMCPU_HAVE_ONEDNN
      if (dnnl_here && !amx && !dnnl_dots) r.push_back({dnnl.target, fp32, &dnnl});
#endif
    }
    return r;
  }());
  return tables;
}

// Why a table this build knows is not in the registry on this CPU ("" for a name it does not
// know). The portable tables follow their fp32 targets (kernels_for_target's message).
std::string not_here(std::string_view name) {
  const std::string cap =
      *isa_cap_setting() ? std::string("; this run is capped by ") + isa_cap_setting() : "";
  if (name == "avx512bf16") {
#if LLMCPU_HAVE_X86_KERNELS
    return "it needs AVX512-BF16 dot products (VDPBF16PS), which this CPU lacks" + cap;
#else
    return "this build has no x86 kernels";
#endif
  }
  if (name == "neon_bf16") return arm_bf16_not_here();
  if (name == "onednn") {
#if LLMCPU_HAVE_ONEDNN
    return "oneDNN has no bf16 matmul for this CPU: it needs AVX-512" + cap;
#else
    return "this build has no oneDNN";
#endif
  }
  for (const auto& [bit, target] : hwy_tables::compiled()) {
    if (target == name) return "this CPU does not run the " + std::string(target) + " target" + cap;
  }
  return "";
}

}  // namespace

double bf16_dot_product_ratio() {
  static const double ratio = roofs::dpbf16_over_fma();
  return ratio;
}

bool bf16_dot_products_first() { return bf16_dot_product_ratio() >= 1.0; }

std::vector<std::string_view> available_bf16_targets() { return registry().names(); }

const Bf16Kernels& bf16_kernels_named(std::string_view name, std::string_view what) {
  if (const Entry* e = registry().find(name)) return *e->table;
  const std::string head = std::string(what) + "=" + std::string(name) + ": ";
  const std::string valid = "; valid here: " + registry().name_list();
  if (const std::string why = not_here(name); !why.empty()) {
    throw UsageError(head + "this CPU does not run that bf16 kernel table (" + why + ")" + valid);
  }
  throw UsageError(head + "unknown bf16 kernel table" + valid);
}

const Bf16Kernels& bf16_kernels_for_target(std::string_view name, std::string_view what) {
  const KernelTable& fp32 = kernels_for_target(name, what);  // validates the name
  std::string_view base = fp32.target;
  const size_t plus = base.find('+');
  const bool xsmm = plus != std::string_view::npos;
  if (xsmm) base = base.substr(0, plus);
  // The best table of that target; an fp32 target without libxsmm gets no libxsmm blocks in bf16.
  for (const Entry& e : registry().entries()) {
    if (e.fp32_for == base && (xsmm || e.name.find("+xsmm") == std::string_view::npos)) {
      return *e.table;
    }
  }
  return scalar_bf16_kernels();
}

const Bf16Kernels& active_bf16_kernels() {
  static const Bf16Kernels* const table = [] {
    const char* forced = std::getenv("LLMCPU_BF16_TARGET");
    if (forced && *forced) return &bf16_kernels_named(forced, "LLMCPU_BF16_TARGET");
    return &bf16_kernels_for_target(active_kernels().target, "LLMCPU_TARGET");
  }();
  return *table;
}

SimdBuild simd_build() {
  SimdBuild b;
#if LLMCPU_HAVE_LIBXSMM
  b.libxsmm = true;
#endif
#if LLMCPU_HAVE_ONEDNN
  b.onednn = true;
#endif
  return b;
}

}  // namespace llmcpu
