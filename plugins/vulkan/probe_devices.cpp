// `llmcpu_vulkan_probe devices`: every physical device the loader lists, what the plugin needs of
// it (device.h's device_usable, the same test Device applies) and what a faster GEMM could use
// (subgroups, 16-bit storage, cooperative matrices), and the device the plugin would pick
// (device.h's choose_device, the rule Device's constructor follows). See probe.h.
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "plugins/vulkan/device.h"
#include "plugins/vulkan/probe.h"

namespace llmcpu::vk {
namespace {

// VK_KHR_cooperative_matrix postdates Debian 12's headers (1.3.239; it came with 1.3.255): there,
// its properties struct and structure type as the specification defines them.
#ifdef VK_KHR_cooperative_matrix
using CoopMatrixKhr = VkCooperativeMatrixPropertiesKHR;
constexpr VkStructureType kCoopMatrixKhrType = VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_KHR;
#else
struct CoopMatrixKhr {
  VkStructureType sType;
  void* pNext;
  uint32_t MSize, NSize, KSize;
  uint32_t AType, BType, CType, ResultType;  // VkComponentTypeKHR
  VkBool32 saturatingAccumulation;
  uint32_t scope;  // VkScopeKHR
};
constexpr VkStructureType kCoopMatrixKhrType = VkStructureType(1000506001);
#endif
using GetCoopMatrixKhr = VkResult(VKAPI_PTR*)(VkPhysicalDevice, uint32_t*, CoopMatrixKhr*);

const char* type_name(VkPhysicalDeviceType t) {
  switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU:
      return "discrete";
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU:
      return "integrated";
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU:
      return "virtual";
    case VK_PHYSICAL_DEVICE_TYPE_CPU:
      return "cpu";
    default:
      return "other";
  }
}

// VkComponentTypeKHR (the NV values are the same for the first eleven).
std::string component_name(uint32_t t) {
  static const char* const kCore[] = {"float16", "float32", "float64", "sint8",  "sint16", "sint32",
                                      "sint64",  "uint8",   "uint16",  "uint32", "uint64"};
  if (t < std::size(kCore)) return kCore[t];
  switch (t) {
    case 1000141000:
      return "bfloat16";
    case 1000491000:
      return "sint8_packed";
    case 1000491001:
      return "uint8_packed";
    case 1000491002:
      return "float8_e4m3";
    case 1000491003:
      return "float8_e5m2";
    default:
      return "unknown(" + std::to_string(t) + ")";
  }
}

// VkScopeKHR (and VkScopeNV).
std::string scope_name(uint32_t s) {
  switch (s) {
    case 1:
      return "device";
    case 2:
      return "workgroup";
    case 3:
      return "subgroup";
    case 5:
      return "queue_family";
    default:
      return "unknown(" + std::to_string(s) + ")";
  }
}

void queue_flags(JsonWriter& out, VkQueueFlags f) {
  static const std::pair<VkQueueFlags, const char*> kNames[] = {
      {VK_QUEUE_GRAPHICS_BIT, "graphics"},
      {VK_QUEUE_COMPUTE_BIT, "compute"},
      {VK_QUEUE_TRANSFER_BIT, "transfer"},
      {VK_QUEUE_SPARSE_BINDING_BIT, "sparse_binding"},
      {VK_QUEUE_PROTECTED_BIT, "protected"},
      {0x20, "video_decode"},
      {0x40, "video_encode"},
      {0x100, "optical_flow"},
  };
  out.begin_array();
  for (const auto& [bit, name] : kNames) {
    if (f & bit) out.value(name), f &= ~bit;
  }
  for (uint32_t b = 0; b < 32; ++b) {  // bits newer than this list
    if (f & (1u << b)) out.value("bit" + std::to_string(b));
  }
  out.end_array();
}

std::vector<std::string> extensions_of(VkPhysicalDevice d) {
  uint32_t n = 0;
  if (vkEnumerateDeviceExtensionProperties(d, nullptr, &n, nullptr) != VK_SUCCESS) return {};
  std::vector<VkExtensionProperties> props(n);
  if (vkEnumerateDeviceExtensionProperties(d, nullptr, &n, props.data()) != VK_SUCCESS) return {};
  std::vector<std::string> names;
  for (uint32_t i = 0; i < n; ++i) names.emplace_back(props[i].extensionName);
  return names;
}

bool has(const std::vector<std::string>& names, const char* name) {
  for (const std::string& n : names) {
    if (n == name) return true;
  }
  return false;
}

// The (M, N, K, types, scope) combinations a cooperative matrix extension offers; null where the
// function is missing or fails.
void coop_matrix_khr(JsonWriter& out, VkInstance instance, VkPhysicalDevice d) {
  const auto get = reinterpret_cast<GetCoopMatrixKhr>(
      vkGetInstanceProcAddr(instance, "vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR"));
  uint32_t n = 0;
  if (!get || get(d, &n, nullptr) != VK_SUCCESS) {
    out.value(nullptr);
    return;
  }
  std::vector<CoopMatrixKhr> props(n);
  for (CoopMatrixKhr& p : props) p.sType = kCoopMatrixKhrType, p.pNext = nullptr;
  if (get(d, &n, props.data()) != VK_SUCCESS) {
    out.value(nullptr);
    return;
  }
  out.begin_array();
  for (uint32_t i = 0; i < n; ++i) {
    const CoopMatrixKhr& p = props[i];
    out.begin_object().field("M", p.MSize).field("N", p.NSize).field("K", p.KSize);
    out.field("A", component_name(uint32_t(p.AType))).field("B", component_name(uint32_t(p.BType)));
    out.field("C", component_name(uint32_t(p.CType)));
    out.field("result", component_name(uint32_t(p.ResultType)));
    out.field("saturating", p.saturatingAccumulation == VK_TRUE);
    out.field("scope", scope_name(uint32_t(p.scope))).end_object();
  }
  out.end_array();
}

void coop_matrix_nv(JsonWriter& out, VkInstance instance, VkPhysicalDevice d) {
  const auto get = reinterpret_cast<PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesNV>(
      vkGetInstanceProcAddr(instance, "vkGetPhysicalDeviceCooperativeMatrixPropertiesNV"));
  uint32_t n = 0;
  if (!get || get(d, &n, nullptr) != VK_SUCCESS) {
    out.value(nullptr);
    return;
  }
  std::vector<VkCooperativeMatrixPropertiesNV> props(
      n, VkCooperativeMatrixPropertiesNV{VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_NV});
  if (get(d, &n, props.data()) != VK_SUCCESS) {
    out.value(nullptr);
    return;
  }
  out.begin_array();
  for (uint32_t i = 0; i < n; ++i) {
    const VkCooperativeMatrixPropertiesNV& p = props[i];
    out.begin_object().field("M", p.MSize).field("N", p.NSize).field("K", p.KSize);
    out.field("A", component_name(uint32_t(p.AType))).field("B", component_name(uint32_t(p.BType)));
    out.field("C", component_name(uint32_t(p.CType)));
    out.field("result", component_name(uint32_t(p.DType)));
    out.field("scope", scope_name(uint32_t(p.scope))).end_object();
  }
  out.end_array();
}

// The size of the largest device-local memory heap (0 if none).
uint64_t largest_local_heap(VkPhysicalDevice d) {
  VkPhysicalDeviceMemoryProperties mem;
  vkGetPhysicalDeviceMemoryProperties(d, &mem);
  uint64_t local = 0;
  for (uint32_t i = 0; i < mem.memoryHeapCount; ++i) {
    const VkMemoryHeap& h = mem.memoryHeaps[i];
    if ((h.flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) && h.size > local) local = h.size;
  }
  return local;
}

// "queue_families": each family's flags, count and timestamp bits. Returns whether one of them is
// a transfer family without compute or graphics (a dedicated transfer queue).
bool queue_families(JsonWriter& out, VkPhysicalDevice d) {
  uint32_t nfam = 0;
  vkGetPhysicalDeviceQueueFamilyProperties(d, &nfam, nullptr);
  std::vector<VkQueueFamilyProperties> fams(nfam);
  vkGetPhysicalDeviceQueueFamilyProperties(d, &nfam, fams.data());
  bool dedicated_transfer = false;
  out.key("queue_families").begin_array();
  for (const VkQueueFamilyProperties& f : fams) {
    out.begin_object().key("flags");
    queue_flags(out, f.queueFlags);
    out.field("count", f.queueCount).field("timestampValidBits", f.timestampValidBits);
    out.end_object();
    const VkQueueFlags work = VK_QUEUE_COMPUTE_BIT | VK_QUEUE_GRAPHICS_BIT;
    if ((f.queueFlags & VK_QUEUE_TRANSFER_BIT) && !(f.queueFlags & work)) dedicated_transfer = true;
  }
  out.end_array();
  return dedicated_transfer;
}

// "cooperative_matrix": the extensions that name it, and the KHR and NV shapes where offered.
void cooperative_matrix(JsonWriter& out, VkInstance instance, VkPhysicalDevice d,
                        const std::vector<std::string>& exts) {
  out.key("cooperative_matrix").begin_object();
  out.key("extensions").begin_array();
  for (const std::string& e : exts) {
    if (e.find("cooperative_matrix") != std::string::npos) out.value(e);
  }
  out.end_array();
  const bool khr = has(exts, "VK_KHR_cooperative_matrix"),
             nv = has(exts, "VK_NV_cooperative_matrix");
  out.field("khr", khr).field("nv", nv).key("khr_properties");
  if (khr) {
    coop_matrix_khr(out, instance, d);
  } else {
    out.value(nullptr);
  }
  out.key("nv_properties");
  if (nv) {
    coop_matrix_nv(out, instance, d);
  } else {
    out.value(nullptr);
  }
  out.end_object();
}

void describe(JsonWriter& out, VkInstance instance, VkPhysicalDevice d, size_t index,
              int plugin_index) {
  VkPhysicalDeviceProperties p;
  vkGetPhysicalDeviceProperties(d, &p);
  const std::vector<std::string> exts = extensions_of(d);
  // Vulkan 1.1 structs only where the device has 1.1; driver properties with 1.2 or the extension.
  VkPhysicalDeviceProperties2 p2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
  VkPhysicalDeviceSubgroupProperties subgroup{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES};
  VkPhysicalDeviceDriverProperties driver{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES};
  const bool v11 = p.apiVersion >= VK_API_VERSION_1_1;
  const bool has_driver =
      p.apiVersion >= VK_API_VERSION_1_2 || has(exts, "VK_KHR_driver_properties");
  if (v11) {
    p2.pNext = &subgroup;
    if (has_driver) subgroup.pNext = &driver;
    vkGetPhysicalDeviceProperties2(d, &p2);
  }
  VkPhysicalDeviceFeatures2 f2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
  VkPhysicalDevice16BitStorageFeatures f16{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES};
  if (v11) {
    f2.pNext = &f16;
    vkGetPhysicalDeviceFeatures2(d, &f2);
  } else {
    vkGetPhysicalDeviceFeatures(d, &f2.features);
  }

  // A value where known, null where not.
  auto known = [](bool ok, auto v) { return ok ? std::optional(v) : std::nullopt; };
  out.begin_object().field("index", index);
  out.field("plugin_index", known(plugin_index >= 0, plugin_index));
  out.field("name", p.deviceName).field("type", type_name(p.deviceType));
  out.field("vendorID", p.vendorID).field("deviceID", p.deviceID);
  out.field("apiVersion", version_string(p.apiVersion)).field("driverVersion", p.driverVersion);
  const bool driver_known = has_driver && v11;
  out.field("driverName", known(driver_known, std::string(driver.driverName)));
  out.field("driverInfo", known(driver_known, std::string(driver.driverInfo)));
  out.field("device_local_heap_bytes", largest_local_heap(d));
  out.field("subgroupSize", known(v11, subgroup.subgroupSize));
  out.field("maxStorageBufferRange", p.limits.maxStorageBufferRange);
  out.field("maxComputeSharedMemorySize", p.limits.maxComputeSharedMemorySize);
  out.field("timestampPeriod", double(p.limits.timestampPeriod));
  out.field("timestampComputeAndGraphics", p.limits.timestampComputeAndGraphics == VK_TRUE);
  const bool dedicated_transfer = queue_families(out, d);
  out.field("dedicated_transfer", dedicated_transfer);
  out.field("shaderFloat64", f2.features.shaderFloat64 == VK_TRUE);
  out.field("storageBuffer16BitAccess", v11 && f16.storageBuffer16BitAccess == VK_TRUE);
  out.field("usable", device_usable(d));
  cooperative_matrix(out, instance, d, exts);
  out.end_object();
}

}  // namespace

int probe_devices(JsonWriter& out) {
  out.begin_object();
  uint32_t loader = VK_API_VERSION_1_0;
  if (vkEnumerateInstanceVersion(&loader) == VK_SUCCESS) {
    out.field("loader_api_version", version_string(loader));
  } else {
    out.field("loader_api_version", nullptr);
  }
  out.field("header_version", version_string(VK_HEADER_VERSION_COMPLETE));
  std::unique_ptr<ProbeInstance> inst;
  try {
    inst = std::make_unique<ProbeInstance>();
  } catch (const NoDeviceError& e) {
    out.key("devices").begin_array().end_array().field("chosen", nullptr);
    out.field("error", e.what()).end_object();
    return kExitNoDevice;
  }
  const std::vector<VkPhysicalDevice>& devices = inst->devices();
  out.key("devices").begin_array();
  int usable = 0;
  for (size_t i = 0; i < devices.size(); ++i) {
    const bool ok = device_usable(devices[i]);
    describe(out, inst->instance(), devices[i], i, ok ? usable++ : -1);
  }
  out.end_array();
  try {
    out.field("chosen", choose_device(devices, -1)).end_object();
  } catch (const NoDeviceError& e) {
    out.field("chosen", nullptr).field("error", e.what()).end_object();
    return kExitNoDevice;
  }
  return kExitOk;
}

}  // namespace llmcpu::vk
