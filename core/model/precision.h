// The arithmetic a model trains in: `fp32` everywhere, or `bf16` mixed precision (bf16 weights'
// working copy and GEMM activations, fp32 master weights, moments, statistics, softmax and loss).
// What each op runs in is documented in core/model/model.h; the kernels are simd/kernels.h and
// simd/bf16.h.
#pragma once

#include <string>
#include <string_view>

namespace llmcpu {

enum class Precision { kFp32, kBf16 };

// "fp32" or "bf16"; anything else is a UsageError naming `flag` and the choices.
Precision parse_precision(std::string_view word, std::string_view flag = "--precision");
const char* precision_name(Precision precision);

}  // namespace llmcpu
