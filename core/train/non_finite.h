// The messages that say where a training state stopped being finite: a loss, a gradient norm, the
// first non-finite weight, moment or gradient, named by tensor and element. Deliberately not here:
// what a run does about it (skip the step, refuse a checkpoint: the Trainer and CheckpointStore).
#pragma once

#include <cstddef>
#include <string>

#include "core/model/parameters.h"

namespace llmcpu {

// A number for a message: "nan", "inf" or "-inf" rather than the C library's "-nan".
std::string number_text(double x);

// "" if `flat` (ParameterLayout order) is finite, else what is not: "the weights hold ... (fcw
// ...)".
std::string non_finite_message(const float* flat, const ParameterLayout& layout, const char* what);

// "" if the n packed floats at p (rank `rank`'s part) are finite, else where the first one that is
// not sits.
std::string non_finite_packed(const float* p, size_t n, const char* what, int rank);

}  // namespace llmcpu
