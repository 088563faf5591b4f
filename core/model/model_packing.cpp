// Model's packed rows (model.h's forward with starts; core/model/packing.h): the batch's starts
// checked and kept, each token's position in its example, and a rope model's tables gathered at
// those positions, one row per token, which the passes then read in place of the arena's.
#include <algorithm>
#include <cstring>

#include "core/model/model.h"
#include "core/model/packing.h"

namespace llmcpu {

void Model::plan_packing(int B, int T) {
  const size_t BT = size_t(B) * size_t(T);
  starts_ = AlignedBuffer<int>(BT);
  positions_ = AlignedBuffer<int>(BT);
  packed_ = false;
  if (config_.family().positions != PositionKind::kRope) return;
  const size_t tables = config_.rope_local.head_dim > 0 ? 4 : 2;
  token_rope_ = AlignedBuffer<float>(tables * BT * size_t(config_.head_size() / 2));
}

void Model::take_starts(const int* starts, int B, int T) {
  packed_ = false;
  if (!starts) return;
  if (offload_active()) {
    throw Error(
        "packed rows are not supported with a device plugin: its blocks attend across "
        "the whole row (leave --plugin out, or give one example per row)");
  }
  check_starts(starts, B, T);
  const size_t BT = size_t(B) * size_t(T);
  std::memcpy(starts_.data(), starts, BT * sizeof(int));
  example_positions(positions_.data(), starts_.data(), B, T);
  packed_ = true;
  if (token_rope_.size() == 0) return;
  // The arena's tables (positions 0 .. T-1), in whichever set of views its precision carved.
  const bool bf16 = arena_.acts.rope_cos == nullptr;
  const auto& a = arena_.acts;
  const auto& h = arena_.acts_bf16;
  const float* tables[4] = {bf16 ? h.rope_cos : a.rope_cos, bf16 ? h.rope_sin : a.rope_sin,
                            bf16 ? h.rope_cos_local : a.rope_cos_local,
                            bf16 ? h.rope_sin_local : a.rope_sin_local};
  const size_t half = size_t(config_.head_size() / 2), n = BT * half;
  for (size_t i = 0; i < token_rope_.size() / n; ++i) {
    gather_table_rows(token_rope_.data() + i * n, tables[i], positions_.data(), BT, half);
  }
}

}  // namespace llmcpu
