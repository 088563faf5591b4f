// ZeRO-1's split of the optimizer over ranks: of every span of the parameter layout
// (ParameterLayout::spans: a tensor, or one layer's slice of one), rank r of N owns the part
// shard_of(span.count, r, N) gives. The owner alone reduces that part's gradient (reduce-scatter),
// keeps its AdamW moments, updates it and sends the result to the others (all-gather; on one
// machine the ranks share the weights, GradientSync::share_memory). A rank's
// moments, and its file in a checkpoint, hold its parts packed one after another in flat order, so
// the packed array of rank 0 of 1 is the flat array itself. Deliberately not here: the collectives
// (core/comm/gradient_sync), the arithmetic (core/optim/adamw).
#pragma once

#include <cstddef>
#include <vector>

#include "core/model/parameters.h"

namespace llmcpu {

// Rank `rank` of `ranks`'s part of each of `spans`, one per span in the same order (a part may be
// empty: a span smaller than the world).
std::vector<ParameterSpan> owned_parts(const std::vector<ParameterSpan>& spans, int rank,
                                       int ranks);
// The other ranks' parts of each span, given this rank's `parts` of `spans`: the runs before and
// after its part (two per span, either may be empty).
std::vector<ParameterSpan> others_parts(const std::vector<ParameterSpan>& spans,
                                        const std::vector<ParameterSpan>& parts);

// Copies into `to` (rank r of N's packed array) every element it shares with `from` (rank k of
// K's packed array, not necessarily aligned: a mapped file's); elements that `from` does not hold
// are left as they are. Filling from all K
// ranks' arrays re-shards a ZeRO state from K ranks to N (K or N may be 1: the whole array).
void repack(const std::vector<ParameterSpan>& spans, const void* from, int k, int K, float* to,
            int r, int N);

}  // namespace llmcpu
