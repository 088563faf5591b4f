// See bf16_matmul.h. The three products of a linear layer as oneDNN matmuls over the tensors in
// place (plain strided layouts, no reorders):
//   forward  out (N,OC)  = inp (N,C) x W^T (C,OC: W's rows read as columns) + bias
//   dinp     (N,C)       = bf16(dout) (N,OC) x W (OC,C)
//   dW       (OC,C)     += bf16(dout)^T (OC,N: dout's rows read as columns) x inp (N,C)   (sum
//   post-op)
// dout is rounded to bf16 once per call into per-thread scratch; dbias is summed in fp32 here.
#include "simd/onednn/bf16_matmul.h"

#include <omp.h>

#include <algorithm>
#include <map>
#include <string>
#include <tuple>

#include "dnnl.hpp"
#include "simd/column_sums.h"
#include "simd/error.h"
#include "simd/isa_cap.h"
#include "simd/workspace.h"

namespace llmcpu::onednn {
namespace {

using dt = dnnl::memory::data_type;
using dims = dnnl::memory::dims;

enum class Product { kForward, kForwardBias, kInput, kWeight };

struct Context {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  std::map<std::tuple<Product, size_t, int, int>,
           std::pair<dnnl::matmul, dnnl::matmul::primitive_desc>>
      cache;
};

Context& context() {
  static Context c;
  return c;
}

dnnl::memory::desc md(dims shape, dt type, dims strides) {
  return dnnl::memory::desc(shape, type, strides);
}

// The descriptor of one product (the layouts of the file's comment); throws dnnl::error where
// this CPU has no implementation.
dnnl::matmul::primitive_desc make_descriptor(Product p, dnnl::memory::dim N, dnnl::memory::dim C,
                                             dnnl::memory::dim OC, dnnl::primitive_attr& attr) {
  const dnnl::engine& engine = context().engine;
  dnnl::matmul::primitive_desc pd;
  switch (p) {
    case Product::kForward:
    case Product::kForwardBias: {
      const auto src = md({N, C}, dt::bf16, {C, 1}), wei = md({C, OC}, dt::bf16, {1, C});
      const auto dst = md({N, OC}, dt::f32, {OC, 1});
      if (p == Product::kForwardBias) {
        pd = dnnl::matmul::primitive_desc(
            dnnl::matmul::desc(src, wei, md({1, OC}, dt::f32, {OC, 1}), dst), engine);
      } else {
        pd = dnnl::matmul::primitive_desc(dnnl::matmul::desc(src, wei, dst), engine);
      }
      break;
    }
    case Product::kInput:
      pd = dnnl::matmul::primitive_desc(
          dnnl::matmul::desc(md({N, OC}, dt::bf16, {OC, 1}), md({OC, C}, dt::bf16, {C, 1}),
                             md({N, C}, dt::f32, {C, 1})),
          engine);
      break;
    case Product::kWeight: {
      dnnl::post_ops ops;
      ops.append_sum(1.0f);
      attr.set_post_ops(ops);
      pd = dnnl::matmul::primitive_desc(
          dnnl::matmul::desc(md({OC, N}, dt::bf16, {1, OC}), md({N, C}, dt::bf16, {C, 1}),
                             md({OC, C}, dt::f32, {C, 1})),
          attr, engine);
      break;
    }
  }
  return pd;
}

const std::pair<dnnl::matmul, dnnl::matmul::primitive_desc>& primitive(Product p, size_t N_, int C_,
                                                                       int OC_) {
  Context& ctx = context();
  const auto key = std::make_tuple(p, N_, C_, OC_);
  auto it = ctx.cache.find(key);
  if (it != ctx.cache.end()) return it->second;
  const dnnl::memory::dim N = dnnl::memory::dim(N_), C = C_, OC = OC_;
  try {
    dnnl::primitive_attr attr;
    const dnnl::matmul::primitive_desc pd = make_descriptor(p, N, C, OC, attr);
    return ctx.cache.emplace(key, std::make_pair(dnnl::matmul(pd), pd)).first->second;
  } catch (const dnnl::error& e) {
    throw Error("oneDNN cannot make a bf16 matmul of N=" + std::to_string(N) +
                " C=" + std::to_string(C) + " OC=" + std::to_string(OC) + " on this CPU (" +
                e.what() + "); pick another bf16 kernel table with LLMCPU_BF16_TARGET");
  }
}

// The scratchpad oneDNN allocates for a primitive itself (the library's, one per process, kept at
// its largest while primitives live: they do, in the cache above).
size_t scratchpad_bytes(const dnnl::matmul::primitive_desc& pd) {
  return size_t(pd.query_s64(dnnl::query::memory_consumption_s64));
}

// dout rounded to bf16, in the calling thread's scratch (floats: two values each).
size_t RoundedDoutFloats(size_t N, int OC) { return (N * size_t(OC) + 1) / 2; }

dnnl::memory wrap(const dnnl::memory::desc& d, const void* p) {
  return dnnl::memory(d, context().engine, const_cast<void*>(p));
}

}  // namespace

bool bf16_available() {
  static const bool available = [] {
    // oneDNN's own code within LLMCPU_MAX_ISA; set before it makes its first primitive.
    const IsaCap cap = isa_cap();
    if (cap != IsaCap::kNone) {
      try {
        dnnl::set_max_cpu_isa(cap == IsaCap::kAvx2     ? dnnl::cpu_isa::avx2
                              : cap == IsaCap::kAvx512 ? dnnl::cpu_isa::avx512_core
                                                       : dnnl::cpu_isa::avx512_core_bf16);
      } catch (const dnnl::error&) {
        return false;  // too late to cap it: do not offer what may run above the cap
      }
    }
    try {
      for (const Product p :
           {Product::kForward, Product::kForwardBias, Product::kInput, Product::kWeight}) {
        primitive(p, 16, 32, 48);
      }
      return true;
    } catch (const Error&) {
      return false;  // no implementation of a bf16 matmul for this CPU
    }
  }();
  return available;
}

void bf16_matmul_forward(float* out, const bf16* inp, const bf16* weight, const float* bias,
                         size_t N, int C, int OC) {
  const Product p = bias ? Product::kForwardBias : Product::kForward;
  const auto& [mm, pd] = primitive(p, N, C, OC);
  std::unordered_map<int, dnnl::memory> args = {{DNNL_ARG_SRC, wrap(pd.src_desc(), inp)},
                                                {DNNL_ARG_WEIGHTS, wrap(pd.weights_desc(), weight)},
                                                {DNNL_ARG_DST, wrap(pd.dst_desc(), out)}};
  if (bias) args.emplace(DNNL_ARG_BIAS, wrap(pd.bias_desc(), bias));
  mm.execute(context().stream, args);
  context().stream.wait();
}

void bf16_matmul_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                          const bf16* inp, const bf16* weight, size_t N, int C, int OC) {
  const size_t nd = N * size_t(OC);
  bf16* d = reinterpret_cast<bf16*>(thread_scratch(ScratchSlot::kBf16B, RoundedDoutFloats(N, OC)));
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < nd; ++i) d[i] = float_to_bf16(dout[i]);
  Context& ctx = context();
  if (dinp) {
    const auto& [mm, pd] = primitive(Product::kInput, N, C, OC);
    mm.execute(ctx.stream, {{DNNL_ARG_SRC, wrap(pd.src_desc(), d)},
                            {DNNL_ARG_WEIGHTS, wrap(pd.weights_desc(), weight)},
                            {DNNL_ARG_DST, wrap(pd.dst_desc(), dinp)}});
  }
  if (dweight) {
    const auto& [mm, pd] = primitive(Product::kWeight, N, C, OC);
    mm.execute(ctx.stream, {{DNNL_ARG_SRC, wrap(pd.src_desc(), d)},
                            {DNNL_ARG_WEIGHTS, wrap(pd.weights_desc(), inp)},
                            {DNNL_ARG_DST, wrap(pd.dst_desc(), dweight)}});
  }
  ctx.stream.wait();
  if (dbias) add_column_sums(dbias, dout, N, size_t(OC));
}

ScratchUse bf16_matmul_forward_scratch(size_t N, int C, int OC, bool bias, int /*threads*/) {
  ScratchUse use;
  const Product p = bias ? Product::kForwardBias : Product::kForward;
  use.library = scratchpad_bytes(primitive(p, N, C, OC).second);
  return use;
}

ScratchUse bf16_matmul_backward_scratch(size_t N, int C, int OC, bool dinp, bool dbias,
                                        int threads) {
  ScratchUse use;
  use.ask(ScratchSlot::kBf16B, RoundedDoutFloats(N, OC));
  use.library = scratchpad_bytes(primitive(Product::kWeight, N, C, OC).second);
  if (dinp) {
    use.library =
        std::max(use.library, scratchpad_bytes(primitive(Product::kInput, N, C, OC).second));
  }
  if (dbias) use.merge(column_sums_scratch(size_t(OC), threads));
  return use;
}

}  // namespace llmcpu::onednn
