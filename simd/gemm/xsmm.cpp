// libxsmm kernel cache: libxsmm_smmdispatch JIT-compiles a kernel per descriptor (and keeps its own
// global registry); each thread keeps the descriptors it used last in a small table, so a block
// call costs a short linear search instead of a hash of the descriptor.
#include "simd/gemm/xsmm.h"

#include <libxsmm.h>

namespace llmcpu::xsmm {
namespace {

struct Key {
  int m, n, k, lda, ldb, ldc, flags;
  bool operator==(const Key&) const = default;
};

libxsmm_smmfunction dispatch(const Key& key) {
  const float alpha = 1.0f, beta = (key.flags & 0x10000) ? 1.0f : 0.0f;
  const int flags = key.flags & 0xffff;
  const libxsmm_blasint m = key.m, n = key.n, k = key.k;
  const libxsmm_blasint lda = key.lda, ldb = key.ldb, ldc = key.ldc;
  return libxsmm_smmdispatch(m, n, k, &lda, &ldb, &ldc, &alpha, &beta, &flags, nullptr);
}

}  // namespace

bool available() {
  static const bool ok = [] {
    libxsmm_init();
    // The shapes the driver uses most: a plain and a TRANS_B kernel.
    return dispatch({32, 16, 64, 32, 64, 32, 0}) != nullptr &&
           dispatch({32, 16, 64, 32, 16, 32, LIBXSMM_GEMM_FLAG_TRANS_B}) != nullptr;
  }();
  return ok;
}

bool block(bool b_rows, int m, int n, int k, const float* A, int lda, const float* B, int ldb,
           float* C, int ldc, bool accumulate) {
  constexpr int kEntries = 16;
  struct Entry {
    Key key;
    libxsmm_smmfunction fn;  // null: libxsmm could not make this kernel (not asked again)
  };
  thread_local Entry cache[kEntries];
  thread_local int used = 0, next = 0;
  // The low 16 bits hold libxsmm's flags; bit 16 (not a libxsmm flag) selects beta = 1.
  const int flags = (b_rows ? LIBXSMM_GEMM_FLAG_TRANS_B : 0) | (accumulate ? 0x10000 : 0);
  const Key key{m, n, k, lda, ldb, ldc, flags};
  const Entry* found = nullptr;
  for (int i = 0; i < used; ++i) {
    if (cache[i].key == key) {
      found = &cache[i];
      break;
    }
  }
  if (!found) {
    cache[next] = {key, dispatch(key)};
    found = &cache[next];
    next = (next + 1) % kEntries;
    if (used < kEntries) ++used;
  }
  if (!found->fn) return false;
  found->fn(A, B, C);
  return true;
}

}  // namespace llmcpu::xsmm
