// An owning, 64-byte aligned, uninitialised array: the storage behind every arena (parameters,
// gradients, optimizer moments, activations). Pages are not touched here, so the threads that
// compute on a region can be the first to touch it. An array of 2 MiB or more is aligned to 2 MiB
// and asks Linux for transparent huge pages (a no-op where they are off): a GEMM that walks a
// weight's rows 12 KB apart, or AdamW's seven streams, otherwise misses the TLB on every 4 KiB page.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <utility>

#include <sys/mman.h>
#include <unistd.h>

namespace llmcpu {

namespace detail {
inline constexpr size_t kLine = 64;  // every buffer's least alignment (AlignedBuffer::kAlignment)

// `bytes` (whole 64-byte lines) from aligned_alloc, 2 MiB aligned and advised as huge pages when
// they span one; nullptr when they cannot be had. Released with std::free. (Inline: the kernel
// benchmarks and tests that link only llmcpu_simd use the buffer too.)
inline void* allocate_buffer(size_t bytes) {
  constexpr size_t kHugePage = size_t{2} << 20;
  if (bytes < kHugePage) return std::aligned_alloc(kLine, bytes);
  // Whole huge pages, so that the advice covers the array and nothing another buffer holds.
  const size_t whole = (bytes + kHugePage - 1) / kHugePage * kHugePage;
  if (whole < bytes) return nullptr;
  void* p = std::aligned_alloc(kHugePage, whole);
#ifdef MADV_HUGEPAGE
  // Advice only: where the kernel refuses it the pages stay 4 KiB and nothing else changes.
  if (p) madvise(p, whole, MADV_HUGEPAGE);
#endif
  return p;
}
}  // namespace detail

// [p, p + bytes) reads as zeros from now on: the whole pages inside it are given back to the
// system (touching them again takes fresh pages), the bytes it shares with the pages at its ends
// are zeroed. Returns the bytes given back.
inline size_t release_pages(void* p, size_t bytes) {
  const uintptr_t page = uintptr_t(sysconf(_SC_PAGESIZE));
  const uintptr_t begin = uintptr_t(p), end = begin + bytes;
  const uintptr_t first = (begin + page - 1) / page * page, last = end / page * page;
  if (last <= first) {
    std::memset(p, 0, bytes);
    return 0;
  }
  std::memset(p, 0, first - begin);
  std::memset(reinterpret_cast<void*>(last), 0, end - last);
  madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED);
  return last - first;
}

template <typename T>
class AlignedBuffer {
 public:
  static constexpr size_t kAlignment = detail::kLine;

  AlignedBuffer() = default;
  explicit AlignedBuffer(size_t count) : size_(count) {
    if (count == 0) return;
    const size_t bytes = (count * sizeof(T) + kAlignment - 1) / kAlignment * kAlignment;
    data_ = static_cast<T*>(detail::allocate_buffer(bytes));
    if (!data_) throw std::bad_alloc();
  }
  // An array of zeros whose pages the system provides as they are first written, and which it
  // does not reserve memory for up front (MAP_NORESERVE): a frozen model's fp32 master, most of
  // which is never written or is given back (release_pages) once its tensors take another form.
  static AlignedBuffer zeros_on_demand(size_t count) {
    AlignedBuffer b;
    if (count == 0) return b;
    const size_t bytes = count * sizeof(T);
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
#ifdef MADV_HUGEPAGE
    madvise(p, bytes, MADV_HUGEPAGE);
#endif
    b.data_ = static_cast<T*>(p), b.size_ = count, b.mapped_ = bytes;
    return b;
  }
  AlignedBuffer(AlignedBuffer&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)),
        size_(std::exchange(other.size_, 0)),
        mapped_(std::exchange(other.mapped_, 0)) {}
  AlignedBuffer& operator=(AlignedBuffer&& other) noexcept {
    if (this != &other) {
      release();
      data_ = std::exchange(other.data_, nullptr);
      size_ = std::exchange(other.size_, 0);
      mapped_ = std::exchange(other.mapped_, 0);
    }
    return *this;
  }
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;
  ~AlignedBuffer() { release(); }

  T* data() { return data_; }
  const T* data() const { return data_; }
  size_t size() const { return size_; }
  T& operator[](size_t i) { return data_[i]; }
  const T& operator[](size_t i) const { return data_[i]; }

 private:
  void release() {
    if (mapped_ != 0) {
      munmap(data_, mapped_);
    } else {
      std::free(data_);
    }
  }
  T* data_ = nullptr;
  size_t size_ = 0;
  size_t mapped_ = 0;  // bytes mapped by zeros_on_demand (0: from allocate_buffer)
};

}  // namespace llmcpu
