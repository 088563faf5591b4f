// Picks the kernel table: the best vectorized target this CPU runs, or the one LLMCPU_TARGET names.
// Not here: the kernels themselves (simd/scalar/, simd/hwy/).
#include <cstdlib>
#include <string>

#include "simd/error.h"
#include "simd/hwy/registry.h"
#include "simd/isa_cap.h"
#include "simd/kernels.h"
#include "simd/table_registry.h"

namespace llmcpu {
namespace {

struct Entry {
  std::string_view name;
  const KernelTable* table;
};

const TableRegistry<Entry>& registry() {
  static const TableRegistry<Entry> tables([] {
    std::vector<Entry> r{{"scalar", &scalar_kernels()}};
    for (const hwy_tables::TargetTables* t : hwy_tables::supported()) {
      // libxsmm's GEMM ranks before the Highway one: GPT-2 124M's fp32 step at B=4 is 1.3x
      // (AVX-512, T=1024) and 1.7x (AVX2, T=64) as fast on it (`llmcpu bench`, bench/RESULTS.md).
      // A block libxsmm cannot make a kernel for runs on the Highway micro-kernel instead.
      if (t->has_xsmm) r.push_back({t->xsmm_gemm.target, &t->xsmm_gemm});
      r.push_back({t->hwy_gemm.target, &t->hwy_gemm});
    }
    return r;
  }());
  return tables;
}

}  // namespace

std::vector<std::string_view> available_targets() { return registry().names(); }

std::vector<std::string> compiled_targets() {
  std::vector<std::string> r{"scalar"};
  for (const auto& [bit, target] : hwy_tables::compiled()) {
    r.emplace_back(target);
    if (hwy_tables::xsmm_compiled(bit)) r.emplace_back(hwy_tables::target_name(bit, true));
  }
  return r;
}

const KernelTable& kernels_for_target(std::string_view name, std::string_view what) {
  if (const Entry* e = registry().find(name)) return *e->table;
  std::string compiled;
  for (const auto& [bit, target] : hwy_tables::compiled()) {
    compiled += (compiled.empty() ? "" : ", ") + std::string(target);
    if (target == name || name == std::string(target) + "+xsmm") {
      const std::string cap =
          *isa_cap_setting() ? std::string(" (this run is capped by ") + isa_cap_setting() + ")"
                             : "";
      throw UsageError(std::string(what) + "=" + std::string(name) +
                       ": this CPU does not run that target" + cap +
                       "; valid here: " + registry().name_list());
    }
  }
  throw UsageError(std::string(what) + "=" + std::string(name) +
                   ": unknown kernel target; valid here: " + registry().name_list() +
                   " (compiled into this build: scalar, " + compiled + ")");
}

const KernelTable& active_kernels() {
  static const KernelTable* const table = [] {
    const char* forced = std::getenv("LLMCPU_TARGET");
    if (forced && *forced) return &kernels_for_target(forced, "LLMCPU_TARGET");
    const std::vector<Entry>& e = registry().entries();
    return e.size() > 1 ? e[1].table : e[0].table;  // best vectorized table, else the reference
  }();
  return *table;
}

}  // namespace llmcpu
