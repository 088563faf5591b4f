#include "core/model/precision.h"

#include "simd/error.h"

namespace llmcpu {

Precision parse_precision(std::string_view word, std::string_view flag) {
  if (word == "fp32") return Precision::kFp32;
  if (word == "bf16") return Precision::kBf16;
  throw UsageError(std::string(flag) + " '" + std::string(word) +
                   "' is not a precision; expected fp32 or bf16");
}

const char* precision_name(Precision precision) {
  return precision == Precision::kBf16 ? "bf16" : "fp32";
}

}  // namespace llmcpu
