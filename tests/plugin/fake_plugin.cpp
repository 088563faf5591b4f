// Fake offload plugins for the tests, one source built as several MODULE libraries, chosen by
// FAKE_VARIANT:
//   cpu          a working plugin that computes matmul and attention with plain loops (double
//                accumulation) and keeps its own "resident" copy of the weights, refreshed only by
//                set_weights / weights_changed, as a device would: a missed refresh shows in the
//                results. With LLMCPU_FAKE_PLUGIN_LOG=FILE it writes its call counts there.
//   other_abi    exports the entry but reports ABI version LLMCPU_PLUGIN_ABI_VERSION + 1
//   null_entry   its entry returns NULL (it cannot serve the engine's version)
//   small_struct reports a function table smaller than this ABI's
//   no_entry     exports no entry symbol at all
//   no_device    open() returns LLMCPU_PLUGIN_NO_DEVICE
//   fail_ops     opens fine, then every op fails with a message
// Not a model of any real device: no timing, the report's figures are derived from byte counts.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "core/plugin_abi.h"

#define FAKE_CPU 0
#define FAKE_OTHER_ABI 1
#define FAKE_NULL_ENTRY 2
#define FAKE_SMALL_STRUCT 3
#define FAKE_NO_ENTRY 4
#define FAKE_NO_DEVICE 5
#define FAKE_FAIL_OPS 6

#ifndef FAKE_VARIANT
#error "define FAKE_VARIANT"
#endif

struct llmcpu_plugin {
  const float* params = nullptr;  // the engine's array
  size_t count = 0;
  std::vector<float> resident;  // our "device" copy
  unsigned set_weights = 0, weights_changed = 0;
  unsigned matmul_forward = 0, matmul_backward = 0, attention_forward = 0, attention_backward = 0;
  unsigned calls_since_report = 0;
  unsigned long long up = 0, down = 0;
  char error[256] = {};
};

namespace {

void write_log(const llmcpu_plugin* p) {
  const char* path = std::getenv("LLMCPU_FAKE_PLUGIN_LOG");
  if (!path) return;
  std::FILE* f = std::fopen(path, "w");
  if (!f) return;
  std::fprintf(f,
               "set_weights %u\nweights_changed %u\nmatmul_forward %u\nmatmul_backward %u\n"
               "attention_forward %u\nattention_backward %u\n",
               p->set_weights, p->weights_changed, p->matmul_forward, p->matmul_backward,
               p->attention_forward, p->attention_backward);
  std::fclose(f);
}

// A weight inside the engine's parameter array is read from our resident copy.
const float* resident(llmcpu_plugin* p, const float* w, size_t n) {
  if (p->params && w >= p->params && w < p->params + p->count) {
    return p->resident.data() + (w - p->params);
  }
  p->up += n * sizeof(float);
  return w;
}

int fail(llmcpu_plugin* p, const char* what) {
  std::snprintf(p->error, sizeof p->error, "fake device lost during %s", what);
  return LLMCPU_PLUGIN_ERROR;
}

int open_device(const llmcpu_plugin_open_args* args, llmcpu_plugin** out) {
  if (FAKE_VARIANT == FAKE_NO_DEVICE) {
    std::snprintf(args->error, args->error_size, "no fake device here (test plugin)");
    return LLMCPU_PLUGIN_NO_DEVICE;
  }
  *out = new llmcpu_plugin();
  return LLMCPU_PLUGIN_OK;
}

void close_device(llmcpu_plugin* p) {
  write_log(p);
  delete p;
}

const char* device_name(llmcpu_plugin*) { return "plain loops on the CPU"; }
uint32_t ops(llmcpu_plugin*) { return LLMCPU_PLUGIN_OP_MATMUL | LLMCPU_PLUGIN_OP_ATTENTION; }
const char* last_error(llmcpu_plugin* p) { return p->error; }

int set_weights(llmcpu_plugin* p, const float* params, size_t count) {
  p->params = params;
  p->count = count;
  p->resident.assign(params, params + count);
  p->up += count * sizeof(float);
  ++p->set_weights;
  write_log(p);
  return LLMCPU_PLUGIN_OK;
}

int weights_changed(llmcpu_plugin* p) {
  if (!p->params) return fail(p, "weights_changed (no set_weights before)");
  p->resident.assign(p->params, p->params + p->count);
  p->up += p->count * sizeof(float);
  ++p->weights_changed;
  write_log(p);
  return LLMCPU_PLUGIN_OK;
}

int matmul_forward(llmcpu_plugin* p, float* out, const float* inp, const float* weight,
                   const float* bias, size_t N, int C, int OC) {
  if (FAKE_VARIANT == FAKE_FAIL_OPS) return fail(p, "matmul_forward");
  const float* w = resident(p, weight, (size_t)OC * C);
  const float* b = bias ? resident(p, bias, OC) : nullptr;
  p->up += N * C * sizeof(float);
  for (size_t n = 0; n < N; ++n) {
    for (int o = 0; o < OC; ++o) {
      double acc = b ? b[o] : 0.0;
      for (int c = 0; c < C; ++c) acc += double(inp[n * C + c]) * w[(size_t)o * C + c];
      out[n * OC + o] = float(acc);
    }
  }
  p->down += N * OC * sizeof(float);
  ++p->matmul_forward;
  ++p->calls_since_report;
  return LLMCPU_PLUGIN_OK;
}

int matmul_backward(llmcpu_plugin* p, float* dinp, float* dweight, float* dbias, const float* dout,
                    const float* inp, const float* weight, size_t N, int C, int OC) {
  if (FAKE_VARIANT == FAKE_FAIL_OPS) return fail(p, "matmul_backward");
  const float* w = resident(p, weight, (size_t)OC * C);
  if (dinp) {
    for (size_t n = 0; n < N; ++n) {
      for (int c = 0; c < C; ++c) {
        double acc = 0;
        for (int o = 0; o < OC; ++o) acc += double(dout[n * OC + o]) * w[(size_t)o * C + c];
        dinp[n * C + c] = float(acc);
      }
    }
  }
  for (int o = 0; o < OC; ++o) {
    for (int c = 0; c < C; ++c) {
      double acc = 0;
      for (size_t n = 0; n < N; ++n) acc += double(dout[n * OC + o]) * inp[n * C + c];
      dweight[(size_t)o * C + c] += float(acc);
    }
    if (dbias) {
      double acc = 0;
      for (size_t n = 0; n < N; ++n) acc += dout[n * OC + o];
      dbias[o] += float(acc);
    }
  }
  p->up += (N * OC + N * C + (size_t)OC * C) * sizeof(float);
  p->down += ((dinp ? N * C : 0) + (size_t)OC * C) * sizeof(float);
  ++p->matmul_backward;
  ++p->calls_since_report;
  return LLMCPU_PLUGIN_OK;
}

int attention_forward(llmcpu_plugin* p, float* out, float* att, const float* qkv, int B, int T,
                      int C, int NH) {
  if (FAKE_VARIANT == FAKE_FAIL_OPS) return fail(p, "attention_forward");
  const int hs = C / NH;
  const double scale = 1.0 / std::sqrt(double(hs));
  const size_t C3 = 3 * (size_t)C;
  std::vector<double> s(T);
  for (int b = 0; b < B; ++b) {
    for (int h = 0; h < NH; ++h) {
      for (int t = 0; t < T; ++t) {
        const float* q = qkv + ((size_t)b * T + t) * C3 + h * hs;
        double mx = -INFINITY, sum = 0;
        for (int u = 0; u <= t; ++u) {
          const float* k = qkv + ((size_t)b * T + u) * C3 + C + h * hs;
          double d = 0;
          for (int i = 0; i < hs; ++i) d += double(q[i]) * k[i];
          s[u] = scale * d;
          mx = std::fmax(mx, s[u]);
        }
        for (int u = 0; u <= t; ++u) sum += (s[u] = std::exp(s[u] - mx));
        float* a = att + (((size_t)b * NH + h) * T + t) * T;
        for (int u = 0; u < T; ++u) a[u] = u <= t ? float(s[u] / sum) : 0.0f;
        float* y = out + ((size_t)b * T + t) * C + h * hs;
        for (int i = 0; i < hs; ++i) {
          double acc = 0;
          for (int u = 0; u <= t; ++u)
            acc += s[u] / sum * qkv[((size_t)b * T + u) * C3 + 2 * C + h * hs + i];
          y[i] = float(acc);
        }
      }
    }
  }
  p->up += (size_t)B * T * C3 * sizeof(float);
  p->down += ((size_t)B * T * C + (size_t)B * NH * T * T) * sizeof(float);
  ++p->attention_forward;
  ++p->calls_since_report;
  return LLMCPU_PLUGIN_OK;
}

int attention_backward(llmcpu_plugin* p, float* dqkv, const float* dout, const float* qkv,
                       const float* att, int B, int T, int C, int NH) {
  if (FAKE_VARIANT == FAKE_FAIL_OPS) return fail(p, "attention_backward");
  const int hs = C / NH;
  const double scale = 1.0 / std::sqrt(double(hs));
  const size_t C3 = 3 * (size_t)C;
  std::vector<double> d(B * T * C3, 0.0), da(T);
  for (int b = 0; b < B; ++b) {
    for (int h = 0; h < NH; ++h) {
      for (int t = 0; t < T; ++t) {
        const float* a = att + (((size_t)b * NH + h) * T + t) * T;
        const float* dy = dout + ((size_t)b * T + t) * C + h * hs;
        const size_t qt = ((size_t)b * T + t) * C3 + h * hs;
        double a_da = 0;
        for (int u = 0; u <= t; ++u) {
          const size_t vu = ((size_t)b * T + u) * C3 + 2 * C + h * hs;
          double dot = 0;
          for (int i = 0; i < hs; ++i) {
            dot += double(dy[i]) * qkv[vu + i];
            d[vu + i] += double(a[u]) * dy[i];
          }
          da[u] = dot;
          a_da += a[u] * dot;
        }
        for (int u = 0; u <= t; ++u) {
          const double g = scale * a[u] * (da[u] - a_da);
          const size_t ku = ((size_t)b * T + u) * C3 + C + h * hs;
          for (int i = 0; i < hs; ++i) {
            d[qt + i] += g * qkv[ku + i];
            d[ku + i] += g * qkv[qt + i];
          }
        }
      }
    }
  }
  for (size_t i = 0; i < d.size(); ++i) dqkv[i] = float(d[i]);
  p->up += ((size_t)B * T * C + (size_t)B * T * C3 + (size_t)B * NH * T * T) * sizeof(float);
  p->down += (size_t)B * T * C3 * sizeof(float);
  ++p->attention_backward;
  ++p->calls_since_report;
  return LLMCPU_PLUGIN_OK;
}

// Figures derived from the bytes moved and the ops run: 1 GB/s copies, 0.01 ms per op, half hidden.
int report(llmcpu_plugin* p, llmcpu_offload_report* out) {
  if (out->struct_size < sizeof(llmcpu_offload_report)) return fail(p, "report (struct too small)");
  out->calls = p->calls_since_report;
  out->bytes_up = p->up;
  out->bytes_down = p->down;
  out->copy_ms = double(p->up + p->down) / 1e6;
  out->compute_ms = 0.01 * p->calls_since_report;
  out->hidden_fraction = 0.5;
  out->wall_ms = out->compute_ms + 0.5 * out->copy_ms;
  p->calls_since_report = 0;
  p->up = p->down = 0;
  return LLMCPU_PLUGIN_OK;
}

llmcpu_plugin_api make_api() {
  llmcpu_plugin_api api{};
  api.abi_version = LLMCPU_PLUGIN_ABI_VERSION;
  api.struct_size = sizeof(llmcpu_plugin_api);
  api.name = "fake";
  api.open = open_device;
  api.close = close_device;
  api.device_name = device_name;
  api.ops = ops;
  api.last_error = last_error;
  api.set_weights = set_weights;
  api.weights_changed = weights_changed;
  api.matmul_forward = matmul_forward;
  api.matmul_backward = matmul_backward;
  api.attention_forward = attention_forward;
  api.attention_backward = attention_backward;
  api.report = report;
  if (FAKE_VARIANT == FAKE_OTHER_ABI) api.abi_version = LLMCPU_PLUGIN_ABI_VERSION + 1;
  if (FAKE_VARIANT == FAKE_SMALL_STRUCT)
    api.struct_size = offsetof(llmcpu_plugin_api, matmul_forward);
  return api;
}

const llmcpu_plugin_api kApi = make_api();

}  // namespace

#if FAKE_VARIANT != FAKE_NO_ENTRY
extern "C" __attribute__((visibility("default"))) const llmcpu_plugin_api* llmcpu_plugin_query(
    uint32_t engine_abi_version) {
  if (FAKE_VARIANT == FAKE_NULL_ENTRY) return nullptr;
  (void)engine_abi_version;  // the other_abi variant answers regardless, as an old plugin might
  return &kApi;
}
#else
extern "C" __attribute__((visibility("default"))) int llmcpu_plugin_query_misspelled() { return 0; }
#endif
