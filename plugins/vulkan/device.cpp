// Instance, device and queue selection, buffer creation. See device.h.
#include "plugins/vulkan/device.h"

#include <cstdio>
#include <vector>

namespace llmcpu::vk {

const char* result_name(VkResult r) {
  switch (r) {
    case VK_SUCCESS:
      return "VK_SUCCESS";
    case VK_NOT_READY:
      return "VK_NOT_READY";
    case VK_TIMEOUT:
      return "VK_TIMEOUT";
    case VK_ERROR_OUT_OF_HOST_MEMORY:
      return "VK_ERROR_OUT_OF_HOST_MEMORY";
    case VK_ERROR_OUT_OF_DEVICE_MEMORY:
      return "VK_ERROR_OUT_OF_DEVICE_MEMORY";
    case VK_ERROR_INITIALIZATION_FAILED:
      return "VK_ERROR_INITIALIZATION_FAILED";
    case VK_ERROR_DEVICE_LOST:
      return "VK_ERROR_DEVICE_LOST";
    case VK_ERROR_MEMORY_MAP_FAILED:
      return "VK_ERROR_MEMORY_MAP_FAILED";
    case VK_ERROR_EXTENSION_NOT_PRESENT:
      return "VK_ERROR_EXTENSION_NOT_PRESENT";
    case VK_ERROR_FEATURE_NOT_PRESENT:
      return "VK_ERROR_FEATURE_NOT_PRESENT";
    case VK_ERROR_INCOMPATIBLE_DRIVER:
      return "VK_ERROR_INCOMPATIBLE_DRIVER";
    case VK_ERROR_TOO_MANY_OBJECTS:
      return "VK_ERROR_TOO_MANY_OBJECTS";
    case VK_ERROR_OUT_OF_POOL_MEMORY:
      return "VK_ERROR_OUT_OF_POOL_MEMORY";
    default:
      return "VkResult (other)";
  }
}

void check(VkResult r, const char* call, const char* file, int line) {
  if (r == VK_SUCCESS) return;
  char msg[512];
  std::snprintf(msg, sizeof msg, "%s:%d: %s failed with %s (%d)", file, line, call, result_name(r),
                int(r));
  throw VulkanError(msg);
}

namespace {

int device_rank(VkPhysicalDeviceType type) {
  switch (type) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU:
      return 0;
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU:
      return 1;
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU:
      return 2;
    case VK_PHYSICAL_DEVICE_TYPE_CPU:
      return 3;
    default:
      return 4;
  }
}

}  // namespace

bool device_usable(VkPhysicalDevice d) {
  VkPhysicalDeviceProperties p;
  vkGetPhysicalDeviceProperties(d, &p);
  if (p.apiVersion < VK_API_VERSION_1_2) return false;
  VkPhysicalDeviceVulkan12Features f12{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
  VkPhysicalDeviceFeatures2 f2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
  f2.pNext = &f12;
  vkGetPhysicalDeviceFeatures2(d, &f2);
  return f12.timelineSemaphore == VK_TRUE;
}

size_t choose_device(const std::vector<VkPhysicalDevice>& devices, int device_index) {
  std::vector<size_t> usable;  // positions in `devices`
  for (size_t i = 0; i < devices.size(); ++i) {
    if (device_usable(devices[i])) usable.push_back(i);
  }
  if (usable.empty()) {
    throw NoDeviceError(devices.empty()
                            ? "no Vulkan device found (vkEnumeratePhysicalDevices returned 0)"
                            : "no Vulkan device supports Vulkan 1.2 with timeline semaphores");
  }
  if (device_index >= 0) {
    if (size_t(device_index) >= usable.size()) {
      throw NoDeviceError("device index " + std::to_string(device_index) + " out of range: " +
                          std::to_string(usable.size()) + " usable Vulkan device(s)");
    }
    return usable[size_t(device_index)];
  }
  // The first device of the best type, in the loader's order.
  size_t best = usable[0];
  for (size_t i : usable) {
    VkPhysicalDeviceProperties p, b;
    vkGetPhysicalDeviceProperties(devices[i], &p);
    vkGetPhysicalDeviceProperties(devices[best], &b);
    if (device_rank(p.deviceType) < device_rank(b.deviceType)) best = i;
  }
  return best;
}

Device::Device(int device_index, bool verbose) : verbose_(verbose) {
  VkApplicationInfo app{VK_STRUCTURE_TYPE_APPLICATION_INFO};
  app.pApplicationName = "llmcpu";
  app.apiVersion = VK_API_VERSION_1_2;
  VkInstanceCreateInfo ici{VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
  ici.pApplicationInfo = &app;
  VkResult r = vkCreateInstance(&ici, nullptr, &instance_);
  if (r != VK_SUCCESS) {
    instance_ = VK_NULL_HANDLE;
    throw NoDeviceError(
        std::string("vkCreateInstance failed with ") + result_name(r) +
        " (no Vulkan driver installed? Debian: apt-get install mesa-vulkan-drivers)");
  }
  try {
    pick_physical(device_index);
    const std::vector<VkQueueFamilyProperties> fams = pick_queue_families();
    create_device(fams);
    if (verbose_) {
      std::fprintf(stderr,
                   "vulkan: using %s; compute queue family %u, %s; maxStorageBufferRange %u; "
                   "timestamps %s; shaderFloat64 %s; storageBuffer16BitAccess %s\n",
                   props_.deviceName, compute_family_,
                   dedicated_transfer() ? "dedicated transfer queue family" : "one queue for all",
                   props_.limits.maxStorageBufferRange, timestamps_ ? "on" : "off",
                   float64_ ? "on" : "off", bf16_storage_ ? "on" : "off");
    }
  } catch (...) {
    if (device_) vkDestroyDevice(device_, nullptr);
    vkDestroyInstance(instance_, nullptr);
    throw;
  }
}

void Device::pick_physical(int device_index) {
  uint32_t count = 0;
  LLMCPU_VK(vkEnumeratePhysicalDevices(instance_, &count, nullptr));
  std::vector<VkPhysicalDevice> devices(count);
  if (count) LLMCPU_VK(vkEnumeratePhysicalDevices(instance_, &count, devices.data()));
  if (verbose_) {
    for (size_t i = 0; i < devices.size(); ++i) {
      VkPhysicalDeviceProperties p;
      vkGetPhysicalDeviceProperties(devices[i], &p);
      std::fprintf(
          stderr, "vulkan: device %zu: %s%s\n", i, p.deviceName,
          device_usable(devices[i]) ? "" : " (skipped: needs Vulkan 1.2 with timeline semaphores)");
    }
  }
  physical_ = devices[choose_device(devices, device_index)];
  vkGetPhysicalDeviceProperties(physical_, &props_);
  vkGetPhysicalDeviceMemoryProperties(physical_, &mem_props_);
}

std::vector<VkQueueFamilyProperties> Device::pick_queue_families() {
  uint32_t nfam = 0;
  vkGetPhysicalDeviceQueueFamilyProperties(physical_, &nfam, nullptr);
  std::vector<VkQueueFamilyProperties> fams(nfam);
  vkGetPhysicalDeviceQueueFamilyProperties(physical_, &nfam, fams.data());
  constexpr uint32_t kNone = ~0u;
  compute_family_ = transfer_family_ = kNone;
  for (uint32_t i = 0; i < nfam; ++i) {
    if ((fams[i].queueFlags & VK_QUEUE_COMPUTE_BIT) && compute_family_ == kNone)
      compute_family_ = i;
    const bool copy_only = (fams[i].queueFlags & VK_QUEUE_TRANSFER_BIT) &&
                           !(fams[i].queueFlags & (VK_QUEUE_COMPUTE_BIT | VK_QUEUE_GRAPHICS_BIT));
    if (copy_only && fams[i].timestampValidBits > 0 && transfer_family_ == kNone) {
      transfer_family_ = i;
    }
  }
  if (compute_family_ == kNone)
    throw NoDeviceError(std::string(props_.deviceName) + " has no compute queue");
  if (transfer_family_ == kNone) transfer_family_ = compute_family_;
  return fams;
}

void Device::create_device(const std::vector<VkQueueFamilyProperties>& fams) {
  VkPhysicalDeviceVulkan11Features f11{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES};
  VkPhysicalDeviceVulkan12Features f12{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
  VkPhysicalDeviceFeatures2 f2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
  f2.pNext = &f11;
  f11.pNext = &f12;
  vkGetPhysicalDeviceFeatures2(physical_, &f2);
  const bool host_reset = f12.hostQueryReset;
  VkPhysicalDeviceVulkan12Features enable12{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
  enable12.timelineSemaphore = VK_TRUE;
  enable12.hostQueryReset = host_reset ? VK_TRUE : VK_FALSE;
  // Double precision in shaders where offered (AdamW's correctly rounded sqrt and division).
  float64_ = f2.features.shaderFloat64 == VK_TRUE;
  // 16-bit loads and stores in storage buffers where offered (bf16 storage).
  bf16_storage_ = f11.storageBuffer16BitAccess == VK_TRUE;
  VkPhysicalDeviceVulkan11Features enable11{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES};
  enable11.storageBuffer16BitAccess = bf16_storage_ ? VK_TRUE : VK_FALSE;
  enable11.pNext = &enable12;
  VkPhysicalDeviceFeatures2 enable2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
  enable2.pNext = &enable11;
  enable2.features.shaderFloat64 = float64_ ? VK_TRUE : VK_FALSE;

  const float priority = 1.0f;
  VkDeviceQueueCreateInfo qci[2]{};
  uint32_t nq = 0;
  for (uint32_t fam : {compute_family_, transfer_family_}) {
    if (nq == 1 && fam == compute_family_) break;
    qci[nq] = {VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
    qci[nq].queueFamilyIndex = fam;
    qci[nq].queueCount = 1;
    qci[nq].pQueuePriorities = &priority;
    ++nq;
  }
  VkDeviceCreateInfo dci{VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO};
  dci.pNext = &enable2;
  dci.queueCreateInfoCount = nq;
  dci.pQueueCreateInfos = qci;
  LLMCPU_VK(vkCreateDevice(physical_, &dci, nullptr, &device_));
  vkGetDeviceQueue(device_, compute_family_, 0, &compute_queue_);
  vkGetDeviceQueue(device_, transfer_family_, 0, &transfer_queue_);
  timestamps_ = host_reset && fams[compute_family_].timestampValidBits > 0 &&
                fams[transfer_family_].timestampValidBits > 0;
}

Device::~Device() {
  if (device_) {
    vkDeviceWaitIdle(device_);
    vkDestroyDevice(device_, nullptr);
  }
  if (instance_) vkDestroyInstance(instance_, nullptr);
}

uint64_t Device::device_local_bytes() const {
  uint64_t best = 0;
  for (uint32_t i = 0; i < mem_props_.memoryHeapCount; ++i) {
    const VkMemoryHeap& h = mem_props_.memoryHeaps[i];
    if ((h.flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) && h.size > best) best = h.size;
  }
  return best;
}

uint32_t Device::find_memory(uint32_t type_bits, MemoryKind kind) const {
  const VkMemoryPropertyFlags host =
      VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
  // Preferred flags first, then the least that works.
  VkMemoryPropertyFlags wants[2];
  switch (kind) {
    case MemoryKind::kDevice:
      wants[0] = wants[1] = VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT;
      break;
    case MemoryKind::kUpload:
      wants[0] = wants[1] = host;
      break;
    case MemoryKind::kDownload:
      wants[0] = host | VK_MEMORY_PROPERTY_HOST_CACHED_BIT;
      wants[1] = host;
      break;
  }
  for (VkMemoryPropertyFlags want : wants) {
    for (uint32_t i = 0; i < mem_props_.memoryTypeCount; ++i) {
      if ((type_bits & (1u << i)) && (mem_props_.memoryTypes[i].propertyFlags & want) == want) {
        return i;
      }
    }
  }
  // Device-local memory is a preference: any type the buffer accepts will do.
  for (uint32_t i = 0; kind == MemoryKind::kDevice && i < mem_props_.memoryTypeCount; ++i) {
    if (type_bits & (1u << i)) return i;
  }
  throw VulkanError(std::string(props_.deviceName) + ": no memory type for a " +
                    (kind == MemoryKind::kDevice ? "device" : "staging") + " buffer");
}

Buffer Device::create_buffer(size_t bytes, MemoryKind kind) {
  Buffer b;
  b.size = bytes;
  VkBufferCreateInfo bci{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
  bci.size = bytes ? bytes : 16;
  bci.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
              VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  // Used by both queues when the transfer queue is a family of its own: concurrent sharing spares
  // ownership transfers (the semaphores already order the accesses).
  const uint32_t fams[2] = {compute_family_, transfer_family_};
  if (dedicated_transfer()) {
    bci.sharingMode = VK_SHARING_MODE_CONCURRENT;
    bci.queueFamilyIndexCount = 2;
    bci.pQueueFamilyIndices = fams;
  }
  LLMCPU_VK(vkCreateBuffer(device_, &bci, nullptr, &b.buffer));
  try {
    VkMemoryRequirements req;
    vkGetBufferMemoryRequirements(device_, b.buffer, &req);
    VkMemoryAllocateInfo mai{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
    mai.allocationSize = req.size;
    mai.memoryTypeIndex = find_memory(req.memoryTypeBits, kind);
    LLMCPU_VK(vkAllocateMemory(device_, &mai, nullptr, &b.memory));
    LLMCPU_VK(vkBindBufferMemory(device_, b.buffer, b.memory, 0));
    if (kind != MemoryKind::kDevice) {
      LLMCPU_VK(vkMapMemory(device_, b.memory, 0, VK_WHOLE_SIZE, 0, &b.mapped));
    }
  } catch (...) {
    destroy(b);
    throw;
  }
  return b;
}

void Device::destroy(Buffer& b) {
  if (b.mapped) vkUnmapMemory(device_, b.memory);
  if (b.buffer) vkDestroyBuffer(device_, b.buffer, nullptr);
  if (b.memory) vkFreeMemory(device_, b.memory, nullptr);
  b = Buffer{};
}

}  // namespace llmcpu::vk
