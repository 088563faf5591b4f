/* The offload plugin ABI: the only thing the engine and a plugin share. Plain C, so that a plugin can
 * be built by any compiler and loaded with dlopen; no C++ type, exception or allocation crosses it.
 *
 * A plugin is a shared object that exports one symbol, LLMCPU_PLUGIN_ENTRY_NAME, of type
 * llmcpu_plugin_query_fn. The engine calls it with its own LLMCPU_PLUGIN_ABI_VERSION; the plugin
 * returns its function table (static storage, never freed), or NULL when it cannot serve that
 * version. The engine then checks abi_version and struct_size before it touches anything else, so a
 * plugin built against another version of this header is refused with a clear message, not called.
 *
 * Ops follow the engine's fp32 kernels exactly (simd/kernels.h, simd/scalar/ for the math): the same
 * row-major shapes, the same "=" and "+=" outputs, fp32 accumulation. Every op is synchronous from the
 * engine's point of view: when it returns LLMCPU_PLUGIN_OK its outputs are in host memory. Pointers
 * are host pointers; a plugin copies what it needs. A call that returns an error has not written its
 * outputs partially in a way the engine can see as valid: the engine reports last_error() and stops.
 *
 * Weights: the engine hands the plugin its flat parameter array once (set_weights) and tells it after
 * every optimizer step (weights_changed). A weight pointer passed to an op that lies inside that array
 * may be served from the device-resident copy; any other pointer is read from host memory.
 *
 * Not here: how a plugin is found or loaded (core/plugin/), anything device-specific. */
#ifndef LLMCPU_PLUGIN_ABI_H_
#define LLMCPU_PLUGIN_ABI_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Raised on any incompatible change: a field added, removed, moved or retyped, a changed meaning. */
#define LLMCPU_PLUGIN_ABI_VERSION 1u
#define LLMCPU_PLUGIN_ENTRY_NAME "llmcpu_plugin_query"

/* Status of every call. */
#define LLMCPU_PLUGIN_OK 0
#define LLMCPU_PLUGIN_ERROR 1     /* see last_error() */
#define LLMCPU_PLUGIN_NO_DEVICE 2 /* open(): no usable device; the engine falls back to the CPU */

/* Bits of ops(): which kernel families the plugin offloads. */
#define LLMCPU_PLUGIN_OP_MATMUL 0x1u    /* matmul_forward, matmul_backward */
#define LLMCPU_PLUGIN_OP_ATTENTION 0x2u /* attention_forward, attention_backward */

typedef struct llmcpu_plugin llmcpu_plugin; /* one opened device; opaque to the engine */

typedef struct llmcpu_plugin_open_args {
  uint32_t struct_size;  /* sizeof(llmcpu_plugin_open_args) as the engine was built */
  int32_t device_index;  /* which device; -1: the plugin's choice (a discrete GPU first) */
  uint32_t verbose;      /* nonzero: the plugin may print diagnostics to stderr */
  uint32_t reserved;
  char* error;           /* out: why open() failed, NUL-terminated, at most error_size bytes */
  size_t error_size;
} llmcpu_plugin_open_args;

/* What one step cost on the device, from timestamp queries, since the last call of report(). */
typedef struct llmcpu_offload_report {
  uint32_t struct_size;    /* in: sizeof(llmcpu_offload_report) as the engine was built */
  uint32_t calls;          /* ops run */
  double copy_ms;          /* device time spent in uploads and downloads */
  double compute_ms;       /* device time spent in compute dispatches */
  double wall_ms;          /* device time from the first command to the last one */
  double hidden_fraction;  /* share of copy_ms that overlapped compute, 0..1 */
  uint64_t bytes_up;       /* host to device */
  uint64_t bytes_down;     /* device to host */
} llmcpu_offload_report;

typedef struct llmcpu_plugin_api {
  uint32_t abi_version;  /* LLMCPU_PLUGIN_ABI_VERSION the plugin was built with */
  uint32_t struct_size;  /* sizeof(llmcpu_plugin_api) as the plugin was built */
  const char* name;      /* short, e.g. "vulkan" */

  /* Opens a device. On LLMCPU_PLUGIN_OK *out is set; otherwise args->error says why. */
  int (*open)(const llmcpu_plugin_open_args* args, llmcpu_plugin** out);
  void (*close)(llmcpu_plugin* p);
  const char* (*device_name)(llmcpu_plugin* p); /* e.g. "llvmpipe (LLVM 15.0.6, 256 bits)" */
  uint32_t (*ops)(llmcpu_plugin* p);            /* LLMCPU_PLUGIN_OP_* bits */
  const char* (*last_error)(llmcpu_plugin* p);  /* the message of the last failed call */

  /* The engine's flat parameters (count floats); kept resident on the device. The array stays
   * valid and at the same address until close(). */
  int (*set_weights)(llmcpu_plugin* p, const float* params, size_t count);
  /* The parameters changed on the host (after an optimizer step or a load): refresh the copy. */
  int (*weights_changed)(llmcpu_plugin* p);

  /* out (N,OC) = inp (N,C) weight^T + bias; weight (OC,C); bias (OC) or NULL. */
  int (*matmul_forward)(llmcpu_plugin* p, float* out, const float* inp, const float* weight,
                        const float* bias, size_t N, int C, int OC);
  /* dinp (N,C) = dout weight (overwritten; NULL: skipped); dweight (OC,C) += dout^T inp;
   * dbias (OC) += column sums of dout (NULL: skipped). */
  int (*matmul_backward)(llmcpu_plugin* p, float* dinp, float* dweight, float* dbias,
                         const float* dout, const float* inp, const float* weight, size_t N, int C,
                         int OC);
  /* Causal attention as simd/scalar/attention.h: out (B,T,C), att (B,NH,T,T), qkv (B,T,3C). */
  int (*attention_forward)(llmcpu_plugin* p, float* out, float* att, const float* qkv, int B, int T,
                           int C, int NH);
  /* dqkv (B,T,3C) = the gradient through attention (overwritten); dout (B,T,C); qkv, att of the
   * forward pass. */
  int (*attention_backward)(llmcpu_plugin* p, float* dqkv, const float* dout, const float* qkv,
                            const float* att, int B, int T, int C, int NH);

  /* Fills *out (its struct_size set by the engine) with the figures since the last call and starts
   * counting anew. */
  int (*report)(llmcpu_plugin* p, llmcpu_offload_report* out);
} llmcpu_plugin_api;

typedef const llmcpu_plugin_api* (*llmcpu_plugin_query_fn)(uint32_t engine_abi_version);

#ifdef __cplusplus
}
#endif

#endif /* LLMCPU_PLUGIN_ABI_H_ */
