// Fake offload plugins (ABI version 2) for the loader tests: one source built as several MODULE
// libraries, chosen by FAKE_VARIANT (the names are tests/plugin/CMakeLists.txt's):
//   other_abi       its table reports ABI version LLMCPU_PLUGIN_ABI_VERSION + 1
//   null_entry      its entry returns NULL for every version (it serves none the engine asks for)
//   v1              built for version 1: NULL unless asked for version 1, then a version-1 table
//   v1_table        whatever version is asked for, a table whose abi_version is 1
//   small_struct    reports a function table smaller than this ABI's
//   no_entry        exports no entry symbol at all
//   no_device       open() returns LLMCPU_PLUGIN_NO_DEVICE
//   missing_fn      a full-size table with read_state and schedule left NULL
//   fail_configure  opens, plan() says it fits (a 1 TiB device), configure() fails with a message
//   fp32_only       as fail_configure, but plan() refuses a bf16 model (a plugin that cannot
//                   run that precision: the engine keeps such a model on the CPU)
//   tiny_device     a 1 MiB device: plan() computes the memory plan below from the model_desc,
//                   configure() refuses a plan that does not fit, naming the numbers
// The memory plan, in bytes (P: the owned parameters: 12C^2 + 13C per block, wte Vp*C with the
// embedding or the head (the lm_head is the tied wte), wpe maxT*C with the embedding, lnf 2C with
// the head; N = B*T tokens; s: 4 fp32, 2 bf16):
//   weight_bytes     = P * (16 + (bf16 ? 2 : 0))    params, grads, m, v in fp32, plus a bf16 copy
//   activation_bytes = s * N * (blocks * (18C + 2*NH*T + 4) + (head ? Vp + C + 2 : 0)
//                               + (embedding ? C : 0))   llm.c's activations per token
//   other_bytes      = 4 * (4*N*C + (embedding ? N : 0) + (head ? 2N : 0))   staging
//   available_bytes  = the device's size, or memory_limit where that is smaller
//   max_layers       = the most blocks that fit with this shape, without embedding or head
// Deliberately no compute: forward, backward, the optimizer and the state copies all fail with
// "not implemented" (the Vulkan plugin on lavapipe covers the real path). No globals besides the
// function table: all state lives in the llmcpu_plugin struct.
#include <algorithm>
#include <cstdarg>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <new>

#include "core/plugin_abi.h"

#define FAKE_OTHER_ABI 0
#define FAKE_NULL_ENTRY 1
#define FAKE_V1 2
#define FAKE_V1_TABLE 3
#define FAKE_SMALL_STRUCT 4
#define FAKE_NO_ENTRY 5
#define FAKE_NO_DEVICE 6
#define FAKE_MISSING_FN 7
#define FAKE_FAIL_CONFIGURE 8
#define FAKE_TINY_DEVICE 9
#define FAKE_FP32_ONLY 10

#ifndef FAKE_VARIANT
#error "define FAKE_VARIANT"
#endif

struct llmcpu_plugin {
  bool configured = false;
  llmcpu_model_desc desc{};  // of the last configure that succeeded
  char error[512] = {};
};

namespace {

constexpr uint64_t kDeviceBytes =
    FAKE_VARIANT == FAKE_TINY_DEVICE ? uint64_t(1) << 20 : uint64_t(1) << 40;
constexpr const char* kDeviceName =
    FAKE_VARIANT == FAKE_TINY_DEVICE ? "fake device (1 MiB)" : "fake device (1 TiB)";

int fail(llmcpu_plugin* p, const char* format, ...) __attribute__((format(printf, 2, 3)));
int fail(llmcpu_plugin* p, const char* format, ...) {
  va_list args;
  va_start(args, format);
  std::vsnprintf(p->error, sizeof p->error, format, args);
  va_end(args);
  return LLMCPU_PLUGIN_ERROR;
}

int open_device(const llmcpu_plugin_open_args* args, llmcpu_plugin** out) {
  if (FAKE_VARIANT == FAKE_NO_DEVICE) {
    std::snprintf(args->error, args->error_size, "no fake device here (test plugin)");
    return LLMCPU_PLUGIN_NO_DEVICE;
  }
  if (args->struct_size < sizeof(llmcpu_plugin_open_args)) {
    std::snprintf(args->error, args->error_size, "open args are %u bytes, expected %zu",
                  args->struct_size, sizeof(llmcpu_plugin_open_args));
    return LLMCPU_PLUGIN_ERROR;
  }
  if (args->device_index > 0) {
    std::snprintf(args->error, args->error_size,
                  "the fake plugin has one device (index 0), asked for %d", args->device_index);
    return LLMCPU_PLUGIN_NO_DEVICE;
  }
  llmcpu_plugin* p = new (std::nothrow) llmcpu_plugin();
  if (!p) {
    std::snprintf(args->error, args->error_size, "out of host memory");
    return LLMCPU_PLUGIN_ERROR;
  }
  *out = p;
  return LLMCPU_PLUGIN_OK;
}

void close_device(llmcpu_plugin* p) { delete p; }
const char* device_name(llmcpu_plugin*) { return kDeviceName; }
const char* last_error(llmcpu_plugin* p) { return p->error; }

// The plan of the header comment, for `blocks` blocks and the flags. Elements, then bytes.
void fill_plan(const llmcpu_model_desc& d, int blocks, uint32_t flags, llmcpu_memory_plan* out) {
  const uint64_t C = uint64_t(d.channels), N = uint64_t(d.batch) * uint64_t(d.seq_len);
  const bool embedding = flags & LLMCPU_OFFLOAD_EMBEDDING, head = flags & LLMCPU_OFFLOAD_HEAD;
  const uint64_t act_size = d.precision == LLMCPU_PRECISION_BF16 ? 2 : 4;
  const uint64_t per_param = 16 + (d.precision == LLMCPU_PRECISION_BF16 ? 2 : 0);
  const uint64_t params = uint64_t(blocks) * (12 * C * C + 13 * C) +
                          (embedding || head ? uint64_t(d.padded_vocab_size) * C : 0) +
                          (embedding ? uint64_t(d.max_seq_len) * C : 0) + (head ? 2 * C : 0);
  const uint64_t per_token =
      uint64_t(blocks) * (18 * C + 2 * uint64_t(d.num_heads) * uint64_t(d.seq_len) + 4) +
      (head ? uint64_t(d.padded_vocab_size) + C + 2 : 0) + (embedding ? C : 0);
  out->weight_bytes = params * per_param;
  out->activation_bytes = act_size * N * per_token;
  out->other_bytes = 4 * (4 * N * C + (embedding ? N : 0) + (head ? 2 * N : 0));
  out->total_bytes = out->weight_bytes + out->activation_bytes + out->other_bytes;
  out->available_bytes =
      d.memory_limit ? std::min<uint64_t>(d.memory_limit, kDeviceBytes) : kDeviceBytes;
  out->fits = out->total_bytes <= out->available_bytes;
}

int plan(llmcpu_plugin* p, const llmcpu_model_desc* d, llmcpu_memory_plan* out) {
  if (FAKE_VARIANT == FAKE_FP32_ONLY && d->precision == LLMCPU_PRECISION_BF16) {
    return fail(p, "fake device computes in fp32 only (test plugin)");
  }
  if (out->struct_size < sizeof(llmcpu_memory_plan)) {
    return fail(p, "llmcpu_memory_plan is %u bytes, expected %zu", out->struct_size,
                sizeof(llmcpu_memory_plan));
  }
  if (d->struct_size < sizeof(llmcpu_model_desc)) {
    return fail(p, "llmcpu_model_desc is %u bytes, expected %zu", d->struct_size,
                sizeof(llmcpu_model_desc));
  }
  if (d->channels <= 0 || d->num_heads <= 0 || d->channels % d->num_heads != 0) {
    return fail(p, "channels %d is not a multiple of num_heads %d", d->channels, d->num_heads);
  }
  if (d->num_layers <= 0 || d->batch <= 0 || d->seq_len <= 0 || d->seq_len > d->max_seq_len ||
      d->padded_vocab_size < d->vocab_size) {
    return fail(p, "bad shape (L %d, B %d, T %d, maxT %d, V %d, Vp %d)", d->num_layers, d->batch,
                d->seq_len, d->max_seq_len, d->vocab_size, d->padded_vocab_size);
  }
  if (d->first_layer < 0 || d->first_layer > d->num_layers) {
    return fail(p, "first_layer %d is outside 0..%d", d->first_layer, d->num_layers);
  }
  if ((d->flags & LLMCPU_OFFLOAD_EMBEDDING) && d->first_layer != 0) {
    return fail(p, "the embedding needs first_layer 0, got %d", d->first_layer);
  }
  const uint32_t struct_size = out->struct_size;
  *out = llmcpu_memory_plan{};
  out->struct_size = struct_size;
  fill_plan(*d, d->num_layers - d->first_layer, d->flags, out);

  llmcpu_memory_plan probe{};
  fill_plan(*d, 1, 0, &probe);
  const uint64_t per_block = probe.weight_bytes + probe.activation_bytes;
  const uint64_t room =
      probe.available_bytes > probe.other_bytes ? probe.available_bytes - probe.other_bytes : 0;
  out->max_layers = int32_t(std::min<uint64_t>(room / per_block, uint64_t(d->num_layers)));
  fill_plan(*d, d->num_layers, LLMCPU_OFFLOAD_EMBEDDING | LLMCPU_OFFLOAD_HEAD, &probe);
  out->all_fits = probe.fits;
  return LLMCPU_PLUGIN_OK;
}

int configure(llmcpu_plugin* p, const llmcpu_model_desc* d, const float* params) {
  p->configured = false;
  llmcpu_memory_plan m{};
  m.struct_size = sizeof m;
  if (plan(p, d, &m) != LLMCPU_PLUGIN_OK) return LLMCPU_PLUGIN_ERROR;
  if (!m.fits) {
    return fail(p,
                "the plan needs %llu bytes on the fake device (weights and AdamW %llu, "
                "activations %llu, other %llu) but it has %llu; at most %d blocks fit",
                (unsigned long long)m.total_bytes, (unsigned long long)m.weight_bytes,
                (unsigned long long)m.activation_bytes, (unsigned long long)m.other_bytes,
                (unsigned long long)m.available_bytes, m.max_layers);
  }
  if (FAKE_VARIANT == FAKE_FAIL_CONFIGURE || FAKE_VARIANT == FAKE_FP32_ONLY) {
    return fail(p, "fake device lost while allocating %llu bytes (test plugin)",
                (unsigned long long)m.total_bytes);
  }
  if (!params) return fail(p, "params is NULL");
  p->desc = *d;
  p->configured = true;
  return LLMCPU_PLUGIN_OK;
}

// Every call past configure: the fake computes nothing. (PluginLibrary::check names the call.)
int not_implemented(llmcpu_plugin* p) {
  if (!p->configured) return fail(p, "not configured");
  return fail(p, "not implemented (the fake plugin plans and configures only)");
}

int set_parameters(llmcpu_plugin* p, const float*) { return not_implemented(p); }
int set_moments(llmcpu_plugin* p, const float*, const float*) { return not_implemented(p); }
int read_state(llmcpu_plugin* p, float*, float*, float*, float*) { return not_implemented(p); }
int forward(llmcpu_plugin* p, const llmcpu_forward_args*) { return not_implemented(p); }
int backward(llmcpu_plugin* p, const float*, float*) { return not_implemented(p); }
int zero_grad(llmcpu_plugin* p) { return not_implemented(p); }
int grad_sum_squares(llmcpu_plugin* p, double*) { return not_implemented(p); }
int adamw_step(llmcpu_plugin* p, const llmcpu_adamw_args*) { return not_implemented(p); }

// Nothing ran, so nothing to report: zero figures.
int report(llmcpu_plugin* p, llmcpu_offload_report* out) {
  if (out->struct_size < sizeof(llmcpu_offload_report)) {
    return fail(p, "llmcpu_offload_report is %u bytes, expected %zu", out->struct_size,
                sizeof(llmcpu_offload_report));
  }
  const uint32_t struct_size = out->struct_size;
  *out = llmcpu_offload_report{};
  out->struct_size = struct_size;
  return LLMCPU_PLUGIN_OK;
}

const char* schedule(llmcpu_plugin*) { return ""; }

constexpr llmcpu_plugin_api make_api() {
  llmcpu_plugin_api api{};
  api.abi_version = LLMCPU_PLUGIN_ABI_VERSION;
  api.struct_size = sizeof(llmcpu_plugin_api);
  api.name = "fake";
  api.open = open_device;
  api.close = close_device;
  api.device_name = device_name;
  api.last_error = last_error;
  api.plan = plan;
  api.configure = configure;
  api.set_parameters = set_parameters;
  api.set_moments = set_moments;
  api.read_state = read_state;
  api.forward = forward;
  api.backward = backward;
  api.zero_grad = zero_grad;
  api.grad_sum_squares = grad_sum_squares;
  api.adamw_step = adamw_step;
  api.report = report;
  api.schedule = schedule;
  if (FAKE_VARIANT == FAKE_OTHER_ABI) api.abi_version = LLMCPU_PLUGIN_ABI_VERSION + 1;
  if (FAKE_VARIANT == FAKE_V1 || FAKE_VARIANT == FAKE_V1_TABLE) api.abi_version = 1;
  if (FAKE_VARIANT == FAKE_SMALL_STRUCT) api.struct_size = offsetof(llmcpu_plugin_api, forward);
  if (FAKE_VARIANT == FAKE_MISSING_FN) {
    api.read_state = nullptr;
    api.schedule = nullptr;
  }
  return api;
}

constexpr llmcpu_plugin_api kApi = make_api();

}  // namespace

#if FAKE_VARIANT != FAKE_NO_ENTRY
extern "C" __attribute__((visibility("default"))) const llmcpu_plugin_api* llmcpu_plugin_query(
    uint32_t engine_abi_version) {
  if (FAKE_VARIANT == FAKE_NULL_ENTRY) return nullptr;
  // A plugin built for version 1 serves only that version.
  if (FAKE_VARIANT == FAKE_V1 && engine_abi_version != 1) return nullptr;
  // The others answer whatever is asked, as a plugin that does not check might.
  return &kApi;
}
#else
extern "C" __attribute__((visibility("default"))) int llmcpu_plugin_query_misspelled() { return 0; }
#endif
