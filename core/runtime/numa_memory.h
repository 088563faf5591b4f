// Where the big arenas' pages land. Linux puts a page on the NUMA node of the thread that first
// writes it, so the parameter, gradient and optimizer arenas are zeroed by the OpenMP threads with
// the static partition the kernels use over the same flat index range (AdamW, the gradient norm),
// and the activation arenas are first written by the kernels themselves. With --numa interleave the
// pages are bound round-robin over the NUMA nodes with hwloc instead; where the system refuses
// (EPERM in containers, ENOSYS) a warning is printed once and first touch decides. Deliberately not
// here: thread binding (pinning.h); without pinned threads first touch means little.
#pragma once

#include <cstddef>
#include <string>

namespace llmcpu {

enum class NumaMode {
  kLocal,       // first touch by the threads that compute on the data (the default)
  kInterleave,  // pages bound round-robin over the NUMA nodes, then zeroed as for kLocal
  kOff,         // no NUMA handling: arenas zeroed by the calling thread
};

// "local", "interleave" or "off"; anything else is a UsageError naming `flag`.
NumaMode parse_numa_mode(const std::string& word, const std::string& flag = "--numa");
const char* numa_mode_name(NumaMode mode);

// Process-wide; set by the placement step before the arenas are made.
void set_numa_mode(NumaMode mode);
NumaMode numa_mode();

// Zeroes p[0, n) as the mode says: for kLocal and kInterleave with
// `#pragma omp parallel for schedule(static)` over [0, n), the partition of the kernels that sweep
// a whole arena with the same thread count.
void first_touch_zero(float* p, size_t n);

// For an arena the kernels fill themselves (activations): binds its pages interleaved under
// kInterleave; does nothing otherwise (the computing threads touch them first).
void place_arena(void* p, size_t bytes);

}  // namespace llmcpu
