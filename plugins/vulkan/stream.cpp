// The copy-compute pipeline over timeline semaphores. See stream.h.
#include "plugins/vulkan/stream.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <utility>

namespace llmcpu::vk {
namespace {

constexpr size_t kStageAlign = 256;
constexpr uint32_t kQueriesPerChunk = 6;  // begin and end of upload, compute, download
size_t align_up(size_t x, size_t a) { return (x + a - 1) / a * a; }

}  // namespace

Stream::Stream(Device& dev) : dev_(dev) {
  VkDevice d = dev_.device();
  try {
    VkCommandPoolCreateInfo pci{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
    pci.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
    pci.queueFamilyIndex = dev_.compute_family();
    LLMCPU_VK(vkCreateCommandPool(d, &pci, nullptr, &compute_pool_));
    pci.queueFamilyIndex = dev_.transfer_family();
    LLMCPU_VK(vkCreateCommandPool(d, &pci, nullptr, &transfer_pool_));
    for (Slot& s : slots_) {
      VkCommandBufferAllocateInfo ai{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
      ai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
      ai.commandBufferCount = 1;
      ai.commandPool = compute_pool_;
      LLMCPU_VK(vkAllocateCommandBuffers(d, &ai, &s.comp));
      ai.commandPool = transfer_pool_;
      LLMCPU_VK(vkAllocateCommandBuffers(d, &ai, &s.up));
      LLMCPU_VK(vkAllocateCommandBuffers(d, &ai, &s.down));
    }
    VkSemaphoreTypeCreateInfo tci{VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO};
    tci.semaphoreType = VK_SEMAPHORE_TYPE_TIMELINE;
    tci.initialValue = 0;
    VkSemaphoreCreateInfo sci{VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO};
    sci.pNext = &tci;
    for (VkSemaphore& s : sem_) LLMCPU_VK(vkCreateSemaphore(d, &sci, nullptr, &s));
    reserve(4 << 20);
  } catch (...) {
    this->~Stream();
    throw;
  }
}

Stream::~Stream() {
  VkDevice d = dev_.device();
  vkDeviceWaitIdle(d);
  destroy_slots();
  for (VkSemaphore& s : sem_) {
    if (s) vkDestroySemaphore(d, s, nullptr);
    s = VK_NULL_HANDLE;
  }
  if (queries_) vkDestroyQueryPool(d, queries_, nullptr);
  queries_ = VK_NULL_HANDLE;
  if (compute_pool_) vkDestroyCommandPool(d, compute_pool_, nullptr);
  if (transfer_pool_) vkDestroyCommandPool(d, transfer_pool_, nullptr);
  compute_pool_ = transfer_pool_ = VK_NULL_HANDLE;
}

void Stream::destroy_slots() {
  for (Slot& s : slots_) {
    for (Buffer* b : {&s.stage_in, &s.dev_in, &s.dev_out, &s.stage_out}) dev_.destroy(*b);
  }
  capacity_ = 0;
}

void Stream::reserve(size_t bytes) {
  if (bytes <= capacity_) return;
  if (bytes > dev_.max_binding_bytes()) {
    throw VulkanError("a chunk of " + std::to_string(bytes) +
                      " bytes exceeds maxStorageBufferRange (" +
                      std::to_string(dev_.max_binding_bytes()) + " bytes) of " + dev_.name());
  }
  LLMCPU_VK(vkDeviceWaitIdle(dev_.device()));
  destroy_slots();
  const size_t cap = align_up(bytes, kStageAlign);
  for (Slot& s : slots_) {
    s.stage_in = dev_.create_buffer(cap, MemoryKind::kUpload);
    s.dev_in = dev_.create_buffer(cap, MemoryKind::kDevice);
    s.dev_out = dev_.create_buffer(cap, MemoryKind::kDevice);
    s.stage_out = dev_.create_buffer(cap, MemoryKind::kDownload);
  }
  capacity_ = cap;
}

void Stream::compute_barrier(VkCommandBuffer cb) {
  // Both ways between compute and transfer commands (a chunk may start with a copy or a fill into
  // a buffer the previous chunk's dispatches still read).
  VkMemoryBarrier mb{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  mb.srcAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT |
                     VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
  mb.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT |
                     VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
  const VkPipelineStageFlags st =
      VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT;
  vkCmdPipelineBarrier(cb, st, st, 0, 1, &mb, 0, nullptr, 0, nullptr);
}

void Stream::begin(VkCommandBuffer cb) {
  LLMCPU_VK(vkResetCommandBuffer(cb, 0));
  VkCommandBufferBeginInfo bi{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  bi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  LLMCPU_VK(vkBeginCommandBuffer(cb, &bi));
}

void Stream::stamp(VkCommandBuffer cb, uint32_t query, bool end) {
  if (!dev_.timestamps() || query >= query_capacity_) return;
  vkCmdWriteTimestamp(
      cb, end ? VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT : VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, queries_,
      query);
  stamped_[query] = 1;
}

void Stream::submit(VkQueue q, VkCommandBuffer cb, Stage stage, uint64_t value,
                    std::initializer_list<std::pair<Stage, uint64_t>> waits) {
  VkSemaphore wsem[3];
  uint64_t wval[3];
  VkPipelineStageFlags wstage[3];
  uint32_t nw = 0;
  for (const auto& [st, v] : waits) {
    if (v <= base_) continue;  // a chunk before this run: long complete
    wsem[nw] = sem_[st], wval[nw] = v, wstage[nw] = VK_PIPELINE_STAGE_ALL_COMMANDS_BIT;
    ++nw;
  }
  VkTimelineSemaphoreSubmitInfo ts{VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO};
  ts.waitSemaphoreValueCount = nw;
  ts.pWaitSemaphoreValues = wval;
  ts.signalSemaphoreValueCount = 1;
  ts.pSignalSemaphoreValues = &value;
  VkSubmitInfo si{VK_STRUCTURE_TYPE_SUBMIT_INFO};
  si.pNext = &ts;
  si.waitSemaphoreCount = nw;
  si.pWaitSemaphores = wsem;
  si.pWaitDstStageMask = wstage;
  si.commandBufferCount = 1;
  si.pCommandBuffers = &cb;
  si.signalSemaphoreCount = 1;
  si.pSignalSemaphores = &sem_[stage];
  LLMCPU_VK(vkQueueSubmit(q, 1, &si, VK_NULL_HANDLE));
}

void Stream::wait(Stage stage, uint64_t value) {
  if (value <= base_) return;
  VkSemaphoreWaitInfo wi{VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO};
  wi.semaphoreCount = 1;
  wi.pSemaphores = &sem_[stage];
  wi.pValues = &value;
  LLMCPU_VK(vkWaitSemaphores(dev_.device(), &wi, UINT64_MAX));
}

void Stream::record_upload(size_t i, Chunk& c, Slot& s) {
  begin(s.up);
  const uint32_t q = uint32_t(i) * kQueriesPerChunk;
  size_t off = 0;
  if (!c.uploads.empty()) stamp(s.up, q, false);
  for (const Upload& u : c.uploads) {
    if (off + u.bytes > capacity_)
      throw VulkanError("internal: chunk uploads exceed the staging slot");
    std::memcpy(static_cast<char*>(s.stage_in.mapped) + off, u.host, u.bytes);
    VkBufferCopy region{off, u.dst_off, u.bytes};
    vkCmdCopyBuffer(s.up, s.stage_in.buffer, u.dst ? u.dst : s.dev_in.buffer, 1, &region);
    totals_.bytes_up += u.bytes;
    off = align_up(off + u.bytes, kStageAlign);
  }
  if (!c.uploads.empty()) stamp(s.up, q + 1, true);
  LLMCPU_VK(vkEndCommandBuffer(s.up));
}

void Stream::record_download(size_t i, Chunk& c, Slot& s) {
  begin(s.down);
  const uint32_t q = uint32_t(i) * kQueriesPerChunk + 4;
  size_t off = 0;
  if (!c.downloads.empty()) stamp(s.down, q, false);
  for (const Download& d : c.downloads) {
    if (off + d.bytes > capacity_)
      throw VulkanError("internal: chunk downloads exceed the staging slot");
    VkBufferCopy region{d.src_off, off, d.bytes};
    vkCmdCopyBuffer(s.down, d.src ? d.src : s.dev_out.buffer, s.stage_out.buffer, 1, &region);
    off = align_up(off + d.bytes, kStageAlign);
  }
  if (!c.downloads.empty()) stamp(s.down, q + 1, true);
  LLMCPU_VK(vkEndCommandBuffer(s.down));
}

void Stream::read_out(size_t i, Chunk& c, Slot& s) {
  wait(kDown, base_ + i + 1);
  size_t off = 0;
  for (const Download& d : c.downloads) {
    const char* src = static_cast<const char*>(s.stage_out.mapped) + off;
    if (d.add) {
      float* dst = static_cast<float*>(d.host);
      const float* f = reinterpret_cast<const float*>(src);
      for (size_t k = 0; k < d.bytes / sizeof(float); ++k) dst[k] += f[k];
    } else {
      std::memcpy(d.host, src, d.bytes);
    }
    totals_.bytes_down += d.bytes;
    off = align_up(off + d.bytes, kStageAlign);
  }
}

void Stream::run(size_t n, const std::function<void(size_t, Chunk&)>& plan) {
  if (n == 0) return;
  if (dev_.timestamps()) reset_queries(uint32_t(n) * kQueriesPerChunk);
  order_.clear();
  try {
    for (size_t j = 0; j < n + 2; ++j) {
      if (j < n) upload_step(j, plan);
      if (j >= 1 && j - 1 < n) compute_step(j - 1);
      if (j >= 2 && j - 2 < n) download_step(j - 2);
    }
    constexpr size_t K = kSlots;
    for (size_t i = n > K ? n - K : 0; i < n; ++i) read_out(i, chunks_[i % kChunks], slots_[i % K]);
  } catch (...) {
    vkDeviceWaitIdle(dev_.device());
    base_ += n;
    throw;
  }
  collect_times(n);
  if (dev_.verbose()) std::fprintf(stderr, "vulkan: run of %zu chunks: %s\n", n, order_.c_str());
  base_ += n;
}

void Stream::reset_queries(uint32_t need) {
  VkDevice d = dev_.device();
  if (need > query_capacity_) {
    if (queries_) vkDestroyQueryPool(d, queries_, nullptr);
    queries_ = VK_NULL_HANDLE;
    query_capacity_ = 0;
    VkQueryPoolCreateInfo qci{VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO};
    qci.queryType = VK_QUERY_TYPE_TIMESTAMP;
    qci.queryCount = std::max<uint32_t>(need, 192);
    LLMCPU_VK(vkCreateQueryPool(d, &qci, nullptr, &queries_));
    query_capacity_ = qci.queryCount;
  }
  vkResetQueryPool(d, queries_, 0, query_capacity_);
  stamped_.assign(query_capacity_, 0);
}

void Stream::note(char stage, size_t i, std::initializer_list<std::pair<char, size_t>> waits) {
  if (!order_.empty()) order_ += ' ';
  order_ += stage + std::to_string(i);
  char sep = '<';
  for (const auto& [w, k] : waits) {
    order_ += sep + std::string(1, w) + std::to_string(k);
    sep = ',';
  }
}

void Stream::upload_step(size_t j, const std::function<void(size_t, Chunk&)>& plan) {
  constexpr size_t K = kSlots;
  Chunk& c = chunks_[j % kChunks];
  c.uploads.clear(), c.downloads.clear(), c.compute = nullptr;
  plan(j, c);
  Slot& s = slots_[j % K];
  wait(kUp, base_ + j + 1 - std::min(j + 1, K));
  record_upload(j, c, s);
  submit(dev_.transfer_queue(), s.up, kUp, base_ + j + 1,
         {{kComp, j >= K ? base_ + j + 1 - K : 0}});
  if (j >= K) {
    note('U', j, {{'C', j - K}});
  } else {
    note('U', j, {});
  }
}

void Stream::compute_step(size_t i) {
  constexpr size_t K = kSlots;
  Chunk& c = chunks_[i % kChunks];
  Slot& s = slots_[i % K];
  if (i >= K) wait(kComp, base_ + i + 1 - K);
  begin(s.comp);
  const uint32_t q = uint32_t(i) * kQueriesPerChunk + 2;
  stamp(s.comp, q, false);
  compute_barrier(s.comp);  // after the previous chunk's dispatches (accumulators)
  if (c.compute) c.compute(s.comp, SlotBuffers{s.dev_in.buffer, s.dev_out.buffer});
  stamp(s.comp, q + 1, true);
  LLMCPU_VK(vkEndCommandBuffer(s.comp));
  submit(dev_.compute_queue(), s.comp, kComp, base_ + i + 1,
         {{kUp, base_ + i + 1}, {kDown, i >= K ? base_ + i + 1 - K : 0}});
  if (i >= K) {
    note('C', i, {{'U', i}, {'D', i - K}});
  } else {
    note('C', i, {{'U', i}});
  }
}

void Stream::download_step(size_t i) {
  constexpr size_t K = kSlots;
  Slot& s = slots_[i % K];
  if (i >= K) read_out(i - K, chunks_[(i - K) % kChunks], s);
  record_download(i, chunks_[i % kChunks], s);
  submit(dev_.transfer_queue(), s.down, kDown, base_ + i + 1, {{kComp, base_ + i + 1}});
  note('D', i, {{'C', i}});
}

void Stream::collect_times(size_t n) {
  if (!dev_.timestamps()) return;
  const uint32_t count = uint32_t(n) * kQueriesPerChunk;
  std::vector<uint64_t> t(count, 0);
  // Results of unwritten queries stay unavailable: ask without WAIT, with availability ignored,
  // and use only the queries this run wrote (all of them complete: the run has finished).
  std::vector<uint64_t> raw(size_t(count) * 2, 0);
  vkGetQueryPoolResults(dev_.device(), queries_, 0, count, raw.size() * sizeof(uint64_t),
                        raw.data(), 2 * sizeof(uint64_t),
                        VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WITH_AVAILABILITY_BIT);
  const double ns = dev_.timestamp_period_ns();
  struct Span {
    double a, b;
  };
  std::vector<Span> copies, computes;
  double lo = 1e300, hi = -1e300;
  std::string spans;  // verbose: the spans used below, so that a test can redo the arithmetic
  for (uint32_t q = 0; q + 1 < count; q += 2) {
    if (!stamped_[q] || !stamped_[q + 1] || !raw[2 * q + 1] || !raw[2 * q + 3]) continue;
    const Span s{double(raw[2 * q]) * ns, double(raw[2 * q + 2]) * ns};
    if (s.b < s.a) continue;
    lo = std::min(lo, s.a), hi = std::max(hi, s.b);
    ((q % kQueriesPerChunk) == 2 ? computes : copies).push_back(s);
    if (dev_.verbose()) {
      char buf[96];
      std::snprintf(buf, sizeof buf, " %c%u %.17g %.17g", "UCD"[(q % kQueriesPerChunk) / 2],
                    q / kQueriesPerChunk, s.a, s.b);
      spans += buf;
    }
  }
  if (dev_.verbose()) std::fprintf(stderr, "vulkan: spans (ns):%s\n", spans.c_str());
  if (lo > hi) return;
  // Union of compute spans, then the part of every copy span inside it.
  std::sort(computes.begin(), computes.end(), [](Span x, Span y) { return x.a < y.a; });
  std::vector<Span> merged;
  for (const Span& s : computes) {
    totals_.compute_ns += s.b - s.a;
    if (!merged.empty() && s.a <= merged.back().b) {
      merged.back().b = std::max(merged.back().b, s.b);
    } else {
      merged.push_back(s);
    }
  }
  for (const Span& c : copies) {
    totals_.copy_ns += c.b - c.a;
    for (const Span& m : merged) {
      const double o = std::min(c.b, m.b) - std::max(c.a, m.a);
      if (o > 0) totals_.hidden_ns += o;
    }
  }
  totals_.wall_ns += hi - lo;
}

Totals Stream::take_totals() {
  Totals t = totals_;
  totals_ = Totals{};
  return t;
}

}  // namespace llmcpu::vk
