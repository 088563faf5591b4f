// Fault injection for the tests of llmcpu's failure paths: a killed checkpoint write, a full disk,
// an I/O error, a gradient that turns into NaN. Production code asks at a few named points whether a
// fault is wanted there; unless the environment variable LLMCPU_FAULT is set, the answer is always
// kNone and costs one branch on a flag read once.
//
//   LLMCPU_FAULT=ACTION@POINT[#N][,ACTION@POINT[#N]...]
//     N: the Nth time this process reaches POINT (counting from 1; default 1)
//   actions: kill (SIGKILL this process), enospc, eio (the operation fails with that errno),
//            nan (a NaN is written into the data at hand)
//   points:  model-write, state-write   halfway through writing a checkpoint's model / state file
//            shard-write                halfway through writing a rank's shard of a ZeRO-1 state
//            between-renames            after a checkpoint's model file is renamed into place,
//                                       before its state file is
//            grad-NAME                  the gradient of parameter tensor NAME (e.g. grad-fcw), once
//                                       per optimizer step, after the backward pass
// Deliberately not here: anything a user would set. A malformed LLMCPU_FAULT is a UsageError.
#pragma once

#include <string_view>

namespace llmcpu {

enum class FaultAction { kNone, kKill, kEnospc, kEio, kNan };

// Whether LLMCPU_FAULT is set at all (read once).
bool faults_enabled();

// Counts a visit to `point` and returns the action LLMCPU_FAULT asks for on this visit.
FaultAction fault_at(std::string_view point);

// SIGKILLs this process (the action kKill; never returns).
[[noreturn]] void fault_kill_now();

}  // namespace llmcpu
