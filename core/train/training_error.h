// The error of the training itself rather than of its inputs (those are UsageError and FileError,
// simd/error.h): steps that kept diverging, a checkpoint that could not be written, ranks whose
// weights drifted apart. The message says which checkpoint is the newest good one.
#pragma once

#include "simd/error.h"

namespace llmcpu {

class TrainingError : public Error {
 public:
  using Error::Error;
};

}  // namespace llmcpu
