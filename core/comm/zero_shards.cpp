#include "core/comm/zero_shards.h"

#include <algorithm>
#include <cstring>

#include "core/comm/communicator.h"

namespace llmcpu {

std::vector<ParameterSpan> owned_parts(const std::vector<ParameterSpan>& spans, int rank,
                                       int ranks) {
  std::vector<ParameterSpan> parts;
  parts.reserve(spans.size());
  for (const ParameterSpan& s : spans) {
    const Shard own = shard_of(s.count, rank, ranks);
    parts.push_back({s.offset + own.begin, own.count, s.tensor, s.layer});
  }
  return parts;
}

std::vector<ParameterSpan> others_parts(const std::vector<ParameterSpan>& spans,
                                        const std::vector<ParameterSpan>& parts) {
  std::vector<ParameterSpan> others;
  others.reserve(2 * spans.size());
  for (size_t i = 0; i < spans.size(); ++i) {
    const ParameterSpan& s = spans[i];
    const size_t own_end = parts[i].offset + parts[i].count;
    others.push_back({s.offset, parts[i].offset - s.offset, s.tensor, s.layer});
    others.push_back({own_end, s.offset + s.count - own_end, s.tensor, s.layer});
  }
  return others;
}

void repack(const std::vector<ParameterSpan>& spans, const void* from, int k, int K, float* to,
            int r, int N) {
  size_t from_at = 0, to_at = 0;  // where the current span's part starts in each packed array
  for (const ParameterSpan& s : spans) {
    const Shard a = shard_of(s.count, k, K), b = shard_of(s.count, r, N);
    const size_t begin = std::max(a.begin, b.begin);
    const size_t end = std::min(a.begin + a.count, b.begin + b.count);
    if (begin < end) {
      std::memcpy(to + to_at + (begin - b.begin),
                  static_cast<const char*>(from) + (from_at + begin - a.begin) * sizeof(float),
                  (end - begin) * sizeof(float));
    }
    from_at += a.count;
    to_at += b.count;
  }
}

}  // namespace llmcpu
