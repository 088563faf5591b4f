// The Vulkan device the plugin runs on: instance, physical device choice (a discrete GPU first),
// logical device with timeline semaphores, a compute queue and a dedicated transfer queue where the
// device has one, and buffers with their memory. Errors are thrown as VulkanError with the call and
// its VkResult; the C ABI layer (plugin.cpp) turns them into last_error().
// Not here: shaders, pipelines, the streaming of activations (kernels.h, stream.h).
#pragma once

#include <vulkan/vulkan.h>

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace llmcpu::vk {

struct VulkanError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Thrown by Device's constructor when there is no instance or no usable device: open() then answers
// LLMCPU_PLUGIN_NO_DEVICE and the engine falls back to the CPU.
struct NoDeviceError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

const char* result_name(VkResult r);
void check(VkResult r, const char* call, const char* file, int line);
#define LLMCPU_VK(call) ::llmcpu::vk::check((call), #call, __FILE__, __LINE__)

enum class MemoryKind {
  kDevice,    // device-local, not mapped: resident weights, activations, accumulators
  kUpload,    // host-visible and coherent, mapped: staging for host -> device
  kDownload,  // host-visible, coherent (cached where offered), mapped: staging for device -> host
};

struct Buffer {
  VkBuffer buffer = VK_NULL_HANDLE;
  VkDeviceMemory memory = VK_NULL_HANDLE;
  void* mapped = nullptr;  // host pointer for kUpload / kDownload
  size_t size = 0;
};

// Whether the plugin can run on a device: Vulkan 1.2 with timeline semaphores.
bool device_usable(VkPhysicalDevice d);
// The plugin's choice among `devices` (in vkEnumeratePhysicalDevices' order), as a position in it:
// device_index >= 0 the device_index-th usable device; -1 the first usable discrete GPU, else the
// first integrated GPU, else virtual, else CPU, else any. Throws NoDeviceError when none is usable
// or device_index is out of range. Device's constructor and llmcpu_vulkan_probe both ask this.
size_t choose_device(const std::vector<VkPhysicalDevice>& devices, int device_index);

class Device {
 public:
  // device_index: as choose_device's.
  Device(int device_index, bool verbose);
  ~Device();
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  Buffer create_buffer(size_t bytes, MemoryKind kind);
  void destroy(Buffer& b);

  VkDevice device() const { return device_; }
  VkPhysicalDevice physical() const { return physical_; }
  const VkPhysicalDeviceProperties& properties() const { return props_; }
  const char* name() const { return props_.deviceName; }
  size_t max_binding_bytes() const { return props_.limits.maxStorageBufferRange; }
  size_t binding_alignment() const { return props_.limits.minStorageBufferOffsetAlignment; }
  uint32_t compute_family() const { return compute_family_; }
  uint32_t transfer_family() const { return transfer_family_; }
  VkQueue compute_queue() const { return compute_queue_; }
  VkQueue transfer_queue() const { return transfer_queue_; }
  bool dedicated_transfer() const { return transfer_family_ != compute_family_; }
  // Nonzero valid timestamp bits on both queues and host query reset: timing is available.
  bool timestamps() const { return timestamps_; }
  double timestamp_period_ns() const { return props_.limits.timestampPeriod; }
  bool verbose() const { return verbose_; }
  // shaderFloat64 is supported and enabled: shaders may use double.
  bool float64() const { return float64_; }
  // storageBuffer16BitAccess (Vulkan 1.1 core) is supported and enabled: shaders may load and store
  // 16-bit elements of storage buffers, the bf16 storage of block_ops.h.
  bool bf16_storage() const { return bf16_storage_; }
  // The size of the largest memory heap with VK_MEMORY_HEAP_DEVICE_LOCAL_BIT (0 if none).
  uint64_t device_local_bytes() const;

 private:
  // The constructor's steps: the physical device (and its properties), the compute and transfer
  // queue families (their properties returned), the logical device with its features and queues.
  void pick_physical(int device_index);
  std::vector<VkQueueFamilyProperties> pick_queue_families();
  void create_device(const std::vector<VkQueueFamilyProperties>& fams);
  uint32_t find_memory(uint32_t type_bits, MemoryKind kind) const;

  VkInstance instance_ = VK_NULL_HANDLE;
  VkPhysicalDevice physical_ = VK_NULL_HANDLE;
  VkDevice device_ = VK_NULL_HANDLE;
  VkPhysicalDeviceProperties props_{};
  VkPhysicalDeviceMemoryProperties mem_props_{};
  uint32_t compute_family_ = 0, transfer_family_ = 0;
  VkQueue compute_queue_ = VK_NULL_HANDLE, transfer_queue_ = VK_NULL_HANDLE;
  bool timestamps_ = false;
  bool float64_ = false;
  bool bf16_storage_ = false;
  bool verbose_ = false;
};

}  // namespace llmcpu::vk
