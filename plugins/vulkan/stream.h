// The copy-compute pipeline. A pass is cut into chunks (batch elements of a micro-batch);
// each chunk is an upload (host -> staging -> device), a compute command buffer and a download
// (device -> staging -> host). Chunks rotate over kSlots slots, each with its own staging and
// device buffers, and are submitted in software-pipelined order
//     step j:  upload(j) | compute(j-1) | download(j-2)
// so that the upload of chunk i+1, the compute of chunk i and the download of chunk i-1 are in
// flight together. Three timeline semaphores (uploaded, computed, downloaded; one value per chunk)
// order them: compute(i) waits uploaded(i) and downloaded(i-kSlots) (its output buffer is free);
// upload(i) waits computed(i-kSlots) (its input buffer is free); download(i) waits computed(i).
// Uploads and downloads go to the dedicated transfer queue when the device has one, else to the
// compute queue. Timestamps around every stage give copy and compute time and the share of copy
// time that overlapped compute (report()); in verbose mode each run prints the spans it used. Not
// here: what a chunk computes or where the model's buffers live (model.h, passes.cpp).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "plugins/vulkan/device.h"

namespace llmcpu::vk {

inline constexpr int kSlots = 3;

// host -> staging -> dst at dst_off; dst VK_NULL_HANDLE: the slot's device input buffer.
struct Upload {
  const void* host;
  size_t bytes;
  VkBuffer dst;
  size_t dst_off;
};
// src at src_off -> staging -> host; src VK_NULL_HANDLE: the slot's device output buffer.
// add: the host adds the downloaded floats to *host (exact fp32 adds) instead of copying.
struct Download {
  void* host;
  size_t bytes;
  VkBuffer src;
  size_t src_off;
  bool add;
};

struct SlotBuffers {
  VkBuffer in;   // device input buffer (uploads with dst VK_NULL_HANDLE land here)
  VkBuffer out;  // device output buffer (downloads with src VK_NULL_HANDLE read here)
};

struct Chunk {
  std::vector<Upload> uploads;
  std::vector<Download> downloads;
  std::function<void(VkCommandBuffer, const SlotBuffers&)> compute;  // may be empty
};

// Device time of the ops since the last take_totals(), from timestamp queries.
struct Totals {
  double copy_ns = 0, compute_ns = 0, hidden_ns = 0, wall_ns = 0;
  uint64_t bytes_up = 0, bytes_down = 0;
};

class Stream {
 public:
  explicit Stream(Device& dev);
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  // Bytes one slot holds in each of its four buffers (staging in/out, device in/out); grows the
  // slots (waiting for the device first) when asked for more. Never above maxStorageBufferRange.
  size_t capacity() const { return capacity_; }
  void reserve(size_t bytes);

  // Runs n chunks; plan(i, chunk) fills chunk i (its lists arrive empty). Returns when every
  // download is in host memory.
  void run(size_t n, const std::function<void(size_t, Chunk&)>& plan);

  // Records a barrier between two dispatches (or a dispatch and a copy or fill) of one compute
  // command buffer: every earlier compute and transfer access before every later one.
  static void compute_barrier(VkCommandBuffer cb);

  Totals take_totals();
  // The order of the last run's submissions with the semaphore waits of each, e.g.
  // "U0 U1 C0<U0 U2 C1<U1 D0<C0 ..." (tests, verbose mode).
  const std::string& last_order() const { return order_; }

 private:
  struct Slot {
    Buffer stage_in, dev_in, dev_out, stage_out;
    VkCommandBuffer up = VK_NULL_HANDLE, comp = VK_NULL_HANDLE, down = VK_NULL_HANDLE;
  };
  enum Stage { kUp, kComp, kDown };
  void destroy_slots();
  void submit(VkQueue q, VkCommandBuffer cb, Stage stage, uint64_t value,
              std::initializer_list<std::pair<Stage, uint64_t>> waits);
  void wait(Stage stage, uint64_t value);
  void begin(VkCommandBuffer cb);
  void stamp(VkCommandBuffer cb, uint32_t query, bool end);
  void record_upload(size_t i, Chunk& c, Slot& s);
  void record_download(size_t i, Chunk& c, Slot& s);
  void read_out(size_t i, Chunk& c, Slot& s);
  void collect_times(size_t n);
  // run's steps: the timestamp queries for `need` of them; one note in order_ ("C4<U4,D1"); the
  // upload of chunk j (planned by `plan`), the compute of chunk i, the download of chunk i (after
  // chunk i-kSlots's read-out), each submitted with the waits that order them.
  void reset_queries(uint32_t need);
  void note(char stage, size_t i, std::initializer_list<std::pair<char, size_t>> waits);
  void upload_step(size_t j, const std::function<void(size_t, Chunk&)>& plan);
  void compute_step(size_t i);
  void download_step(size_t i);

  Device& dev_;
  size_t capacity_ = 0;
  Slot slots_[kSlots];
  static constexpr size_t kChunks = kSlots + 3;
  Chunk chunks_[kChunks];  // chunk i's lists live until it is read out, kSlots + 2 steps later
  VkCommandPool compute_pool_ = VK_NULL_HANDLE, transfer_pool_ = VK_NULL_HANDLE;
  VkSemaphore sem_[3] = {};
  uint64_t base_ = 0;  // semaphore value of the last chunk of the previous run
  VkQueryPool queries_ = VK_NULL_HANDLE;
  uint32_t query_capacity_ = 0;
  std::vector<uint8_t> stamped_;  // per query: written in this run
  Totals totals_;
  std::string order_;
};

}  // namespace llmcpu::vk
