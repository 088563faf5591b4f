// libxsmm kernels for one instruction set each: libxsmm's code generator writes a kernel per
// descriptor for the table's ISA (AVX2 or AVX-512), which is copied into executable memory and kept
// for the life of the process in a registry of (ISA, descriptor). libxsmm's own dispatch would JIT
// every kernel for the best ISA of the host, so the avx2+xsmm table would run AVX-512 code on an
// AVX-512 CPU and its figures there would not be AVX2's. Each thread keeps the kernels it used last
// in a small table in front of the registry, so a block call costs a short linear search.
#include "simd/gemm/xsmm.h"

#include <libxsmm.h>
#include <libxsmm_generator.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <map>
#include <mutex>
#include <tuple>
#include <vector>

namespace llmcpu::xsmm {
namespace {

struct Key {
  Isa isa;
  int m, n, k, lda, ldb, ldc, flags;
  bool operator==(const Key&) const = default;
  bool operator<(const Key& o) const {
    return std::tie(isa, m, n, k, lda, ldb, ldc, flags) <
           std::tie(o.isa, o.m, o.n, o.k, o.lda, o.ldb, o.ldc, o.flags);
  }
};

constexpr int kBeta1 = 0x10000;  // not a libxsmm flag: selects beta = 1 over beta = 0

unsigned int arch_of(Isa isa) {
  return isa == Isa::kAvx512 ? LIBXSMM_X86_AVX512_CORE : LIBXSMM_X86_AVX2;
}

// Generates the kernel of `key` for its ISA and maps it executable; null where libxsmm cannot
// generate it (or the memory cannot be had).
libxsmm_smmfunction generate(const Key& key) {
  libxsmm_descriptor_blob blob;
  const float beta = (key.flags & kBeta1) ? 1.0f : 0.0f;
  const libxsmm_gemm_descriptor* desc =
      libxsmm_sgemm_descriptor_init(&blob, key.m, key.n, key.k, key.lda, key.ldb, key.ldc, 1.0f,
                                    beta, key.flags & 0xffff, LIBXSMM_GEMM_PREFETCH_NONE);
  if (!desc) return nullptr;
  std::vector<unsigned char> buffer(size_t(1) << 20);
  libxsmm_generated_code code;
  std::memset(&code, 0, sizeof code);
  code.generated_code = buffer.data();
  code.buffer_size = static_cast<unsigned int>(buffer.size());
  code.code_type = 2;  // binary code, to be copied into executable memory
  code.arch = arch_of(key.isa);
  libxsmm_generator_gemm_kernel(&code, desc);
  if (code.last_error != 0 || code.code_size == 0) return nullptr;
  const size_t page = size_t(sysconf(_SC_PAGESIZE));
  const size_t bytes = (code.code_size + page - 1) / page * page;
  void* exec = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (exec == MAP_FAILED) return nullptr;
  std::memcpy(exec, buffer.data(), code.code_size);
  if (mprotect(exec, bytes, PROT_READ | PROT_EXEC) != 0) {
    munmap(exec, bytes);
    return nullptr;
  }
  return reinterpret_cast<libxsmm_smmfunction>(exec);
}

// Every kernel made in this process, kept (and mapped) until it ends; a refused shape is kept as
// null so that it is not generated again.
libxsmm_smmfunction registered(const Key& key) {
  static std::mutex mutex;
  static std::map<Key, libxsmm_smmfunction> kernels;
  const std::lock_guard<std::mutex> lock(mutex);
  auto it = kernels.find(key);
  if (it == kernels.end()) it = kernels.emplace(key, generate(key)).first;
  return it->second;
}

}  // namespace

bool available(Isa isa) {
  static const bool init = (libxsmm_init(), true);
  (void)init;
  // The shapes the driver uses most: a plain and a TRANS_B kernel.
  return registered({isa, 32, 16, 64, 32, 64, 32, 0}) != nullptr &&
         registered({isa, 32, 16, 64, 32, 16, 32, LIBXSMM_GEMM_FLAG_TRANS_B}) != nullptr;
}

bool block(Isa isa, bool b_rows, int m, int n, int k, const float* A, int lda, const float* B,
           int ldb, float* C, int ldc, bool accumulate) {
  constexpr int kEntries = 16;
  struct Entry {
    Key key;
    libxsmm_smmfunction fn;  // null: libxsmm could not make this kernel (not asked again)
  };
  thread_local Entry cache[kEntries];
  thread_local int used = 0, next = 0;
  const int flags = (b_rows ? LIBXSMM_GEMM_FLAG_TRANS_B : 0) | (accumulate ? kBeta1 : 0);
  const Key key{isa, m, n, k, lda, ldb, ldc, flags};
  const Entry* found = nullptr;
  for (int i = 0; i < used; ++i) {
    if (cache[i].key == key) {
      found = &cache[i];
      break;
    }
  }
  if (!found) {
    cache[next] = {key, registered(key)};
    found = &cache[next];
    next = (next + 1) % kEntries;
    if (used < kEntries) ++used;
  }
  if (!found->fn) return false;
  found->fn(A, B, C);
  return true;
}

}  // namespace llmcpu::xsmm
