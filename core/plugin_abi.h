/* The offload plugin ABI: the only thing the engine and a plugin share. Plain C, so that a plugin can
 * be built by any compiler and loaded with dlopen; no C++ type, exception or allocation crosses it.
 *
 * A plugin is a shared object that exports one symbol, LLMCPU_PLUGIN_ENTRY_NAME, of type
 * llmcpu_plugin_query_fn. The engine calls it with its own LLMCPU_PLUGIN_ABI_VERSION; the plugin
 * returns its function table (static storage, never freed), or NULL when it cannot serve that
 * version. The engine then checks abi_version and struct_size before it touches anything else, so a
 * plugin built against another version of this header is refused with a clear message, not called.
 *
 * Version 2 works at the level of layers (llama.cpp's -ngl, for training). The device owns a span
 * of transformer blocks, [first_layer, L): their weights, gradients, AdamW moments and activations
 * live on it. With LLMCPU_OFFLOAD_EMBEDDING it also owns the embedding (wte, wpe) and with
 * LLMCPU_OFFLOAD_HEAD the final layernorm, the lm_head (the tied wte) and the loss; "all layers"
 * is first_layer 0 with both flags. Per micro-batch only the residual stream at the boundaries
 * crosses (the tokens, when the device owns the embedding; the per-token losses, when it owns the
 * head), once up and once down per direction, and the plugin overlaps those copies with its compute.
 *
 * The math is the engine's (simd/scalar/ for each op; core/model/transformer.h for a block; AdamW as
 * simd/scalar/adamw.h): fp32 accumulation, the same "=" and "+=" outputs. Pointers are host
 * pointers, valid only during the call; every call is synchronous (its outputs are in host memory
 * when it returns LLMCPU_PLUGIN_OK). A call that fails returns LLMCPU_PLUGIN_ERROR and last_error()
 * says why; the engine then stops. Every call carries the plugin's context: a plugin keeps no
 * globals, so two models may each open one.
 *
 * Flat parameter arrays (params, grads, m, v) are laid out as llm.c's checkpoints: the 16 tensors
 * in order (wte, wpe, ln1w, ln1b, qkvw, qkvb, attprojw, attprojb, ln2w, ln2b, fcw, fcb, fcprojw,
 * fcprojb, lnfw, lnfb), the per-layer ones (L, ...); tensor_offset[] says where each starts. The
 * plugin reads and writes only the parts it owns.
 *
 * Not here: how a plugin is found or loaded (core/plugin/), anything device-specific. */
#ifndef LLMCPU_PLUGIN_ABI_H_
#define LLMCPU_PLUGIN_ABI_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Raised on any incompatible change: a field added, removed, moved or retyped, a changed meaning.
 * Version 1 was op level (matmul and attention calls through host memory). */
#define LLMCPU_PLUGIN_ABI_VERSION 2u
#define LLMCPU_PLUGIN_ENTRY_NAME "llmcpu_plugin_query"

/* Status of every call. */
#define LLMCPU_PLUGIN_OK 0
#define LLMCPU_PLUGIN_ERROR 1     /* see last_error() */
#define LLMCPU_PLUGIN_NO_DEVICE 2 /* open(): no usable device; the engine falls back to the CPU */

/* llmcpu_model_desc.flags */
#define LLMCPU_OFFLOAD_EMBEDDING 0x1u /* the device runs the embedding (needs first_layer 0) */
#define LLMCPU_OFFLOAD_HEAD 0x2u      /* the device runs lnf, the lm_head and the loss */

/* llmcpu_forward_args.logits_position besides a position t >= 0 */
#define LLMCPU_LOGITS_NONE (-1)
#define LLMCPU_LOGITS_ALL (-2) /* every position's: logits is (B,T,Vp) */

/* llmcpu_model_desc.precision */
#define LLMCPU_PRECISION_FP32 0u
#define LLMCPU_PRECISION_BF16 1u /* bf16 weights' copy and activations, fp32 accumulation */

typedef struct llmcpu_plugin llmcpu_plugin; /* one opened device; opaque to the engine */

typedef struct llmcpu_plugin_open_args {
  uint32_t struct_size;  /* sizeof(llmcpu_plugin_open_args) as the engine was built */
  int32_t device_index;  /* which device; -1: the plugin's choice (a discrete GPU first) */
  uint32_t verbose;      /* nonzero: the plugin may print diagnostics to stderr */
  uint32_t reserved;
  char* error;           /* out: why open() failed, NUL-terminated, at most error_size bytes */
  size_t error_size;
} llmcpu_plugin_open_args;

/* The model, the micro-batch shape and the part the device owns. */
typedef struct llmcpu_model_desc {
  uint32_t struct_size; /* sizeof(llmcpu_model_desc) as the engine was built */
  uint32_t precision;   /* LLMCPU_PRECISION_* */
  int32_t max_seq_len, vocab_size, padded_vocab_size, num_layers, num_heads, channels;
  int32_t batch, seq_len; /* B, T of every micro-batch */
  int32_t first_layer;    /* the device owns blocks [first_layer, num_layers); num_layers: none */
  uint32_t flags;         /* LLMCPU_OFFLOAD_* */
  uint64_t memory_limit;  /* bytes the device may use; 0: what the device has */
  uint64_t tensor_offset[16]; /* floats: where each of the 16 tensors starts in a flat array */
} llmcpu_model_desc;

/* What a model_desc needs on the device (plan), in bytes. */
typedef struct llmcpu_memory_plan {
  uint32_t struct_size;      /* in: sizeof(llmcpu_memory_plan) as the engine was built */
  uint32_t fits;             /* total_bytes <= available_bytes */
  uint64_t weight_bytes;     /* owned parameters, gradients and AdamW moments */
  uint64_t activation_bytes; /* kept from forward to backward, and the backward's scratch */
  uint64_t other_bytes;      /* staging and workspace */
  uint64_t total_bytes;
  uint64_t available_bytes;  /* memory_limit, or the device's memory */
  int32_t max_layers;        /* the most blocks that fit with this shape, without embedding/head */
  uint32_t all_fits;         /* every block with the embedding and the head fits */
} llmcpu_memory_plan;

/* One micro-batch's forward pass over the owned part. */
typedef struct llmcpu_forward_args {
  uint32_t struct_size;       /* sizeof(llmcpu_forward_args) as the engine was built */
  int32_t logits_position;    /* with the head: LLMCPU_LOGITS_*, or a position t to return */
  const int32_t* inputs;      /* (B,T) tokens; read with LLMCPU_OFFLOAD_EMBEDDING */
  const int32_t* targets;     /* (B,T) or NULL (no loss); read with LLMCPU_OFFLOAD_HEAD. A
                                 negative target masks its token: loss 0, no gradient */
  const float* residual_in;   /* (B,T,C) the input of block first_layer, without the embedding */
  float* residual_out;        /* (B,T,C) out: the last block's output, without the head */
  float* losses;              /* (B,T) out: per-token losses, with the head and targets */
  float* logits;              /* (B,Vp) out: the logits at logits_position ((B,T,Vp): all) */
  float dloss;                /* with the head and targets: d(total loss)/d(each token's loss),
                                 for the head's backward fused into this pass; NaN: none */
  float reserved;
} llmcpu_forward_args;

/* One AdamW update of the owned parameters (simd/scalar/adamw.h), t counted from 1. */
typedef struct llmcpu_adamw_args {
  uint32_t struct_size; /* sizeof(llmcpu_adamw_args) as the engine was built */
  float grad_scale;     /* each gradient is multiplied by this first (clipping); 1: none */
  double lr, beta1, beta2, eps, weight_decay;
  int64_t t;
} llmcpu_adamw_args;

/* What the device did since the last call of report(), from timestamp queries. */
typedef struct llmcpu_offload_report {
  uint32_t struct_size;    /* in: sizeof(llmcpu_offload_report) as the engine was built */
  uint32_t calls;          /* forward and backward calls */
  double copy_ms;          /* device time spent in uploads and downloads */
  double compute_ms;       /* device time spent in compute */
  double wall_ms;          /* device time from the first command to the last one, per call */
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
  const char* (*last_error)(llmcpu_plugin* p);  /* the message of the last failed call */

  /* What `desc` would take on this device; allocates nothing. Fills *out and returns OK whether
   * or not it fits; ERROR only for a desc the plugin cannot run at all (last_error says why). */
  int (*plan)(llmcpu_plugin* p, const llmcpu_model_desc* desc, llmcpu_memory_plan* out);
  /* Frees what an earlier configure made, checks the plan (refused with the numbers and the most
   * layers that fit when it does not), allocates, and uploads the owned parameters from `params`
   * (a whole flat array); gradients and moments start at zero. */
  int (*configure)(llmcpu_plugin* p, const llmcpu_model_desc* desc, const float* params);
  /* The owned parameters changed on the host (a load): uploaded again. */
  int (*set_parameters)(llmcpu_plugin* p, const float* params);
  /* The owned AdamW moments from flat arrays (a resume); either may be NULL (left as they are). */
  int (*set_moments)(llmcpu_plugin* p, const float* m, const float* v);
  /* Copies the device's owned parameters, gradients and moments into flat host arrays (any NULL:
   * skipped), bit for bit; the rest of each array is left as it is. */
  int (*read_state)(llmcpu_plugin* p, float* params, float* grads, float* m, float* v);

  /* The forward pass of one micro-batch; keeps what its backward pass needs on the device. */
  int (*forward)(llmcpu_plugin* p, const llmcpu_forward_args* args);
  /* The backward pass of the last forward (which had targets and dloss with the head): adds the
   * owned parameters' gradients. dresidual_top (B,T,C): d(the last block's output), read without
   * the head; dresidual_bottom (B,T,C): out, d(block first_layer's input), without the embedding. */
  int (*backward)(llmcpu_plugin* p, const float* dresidual_top, float* dresidual_bottom);
  int (*zero_grad)(llmcpu_plugin* p);
  /* The sum of squares of the owned gradients (the device's part of the global norm). */
  int (*grad_sum_squares)(llmcpu_plugin* p, double* out);
  /* AdamW on the owned parameters with their gradients; nothing crosses. */
  int (*adamw_step)(llmcpu_plugin* p, const llmcpu_adamw_args* args);

  /* Fills *out (its struct_size set by the engine) with the figures since the last call and starts
   * counting anew. */
  int (*report)(llmcpu_plugin* p, llmcpu_offload_report* out);
  /* The submissions of the last forward and backward calls, in order, with the semaphore values
   * each waited for: "forward: U0 U1 C0<U0 ..." (tests, verbose reports). Valid until the next
   * call. */
  const char* (*schedule)(llmcpu_plugin* p);
} llmcpu_plugin_api;

typedef const llmcpu_plugin_api* (*llmcpu_plugin_query_fn)(uint32_t engine_abi_version);

#ifdef __cplusplus
}
#endif

#endif /* LLMCPU_PLUGIN_ABI_H_ */
