// What the per-target code (simd/hwy/table.cc) hands to the dispatcher (simd/dispatch.cpp): for
// each Highway target compiled into this build and supported by this CPU, its kernel tables. Plain
// C++: no Highway types cross this boundary.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "simd/bf16.h"
#include "simd/kernels.h"

namespace llmcpu::hwy_tables {

struct TargetTables {
  int64_t hwy_target = 0;   // Highway's target bit (HWY_AVX3, HWY_AVX2, ...)
  KernelTable hwy_gemm{};   // every kernel in Highway, GEMM on the Highway micro-kernel
  KernelTable xsmm_gemm{};  // same, with libxsmm block kernels for the matmuls
  bool has_xsmm = false;    // xsmm_gemm is filled (x86 build with libxsmm, JIT works)
  Bf16Kernels bf16{};       // the bf16 path: Highway kernels, portable GEMM on Highway blocks
  Bf16Kernels bf16_xsmm{};  // same, GEMM on libxsmm's blocks (filled where has_xsmm)
};

// Targets this build compiled, best first, whether or not this CPU runs them: (bit, name).
std::vector<std::pair<int64_t, std::string_view>> compiled();

// Whether this build compiled the target's table with libxsmm GEMMs (x86, AVX2 and better, with
// libxsmm found), whether or not the JIT works on this CPU.
bool xsmm_compiled(int64_t hwy_target);

// The tables of every compiled target this CPU runs, best first.
const std::vector<const TargetTables*>& supported();

// "avx512", "avx2", "neon", ... for a Highway target bit ("hwy_scalar" for its portable fallback);
// with xsmm, the name of the same target's table with libxsmm GEMMs ("avx512+xsmm").
std::string_view target_name(int64_t hwy_target, bool xsmm = false);

}  // namespace llmcpu::hwy_tables
