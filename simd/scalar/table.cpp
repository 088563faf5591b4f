// Instantiates the scalar reference kernels in fp32 and gathers them into a KernelTable.
#include "simd/kernels.h"
#include "simd/scalar/attention.h"
#include "simd/scalar/encoder.h"
#include "simd/scalar/geglu.h"
#include "simd/scalar/gelu.h"
#include "simd/scalar/head_rmsnorm.h"
#include "simd/scalar/layernorm.h"
#include "simd/scalar/lora.h"
#include "simd/scalar/matmul.h"
#include "simd/scalar/reduce.h"
#include "simd/scalar/residual.h"
#include "simd/scalar/rmsnorm.h"
#include "simd/scalar/rope.h"
#include "simd/scalar/softcap.h"
#include "simd/scalar/softmax_xent.h"
#include "simd/scalar/swiglu.h"

namespace llmcpu {

const KernelTable& scalar_kernels() {
  static const KernelTable table = {
      .target = "scalar",
      .encoder_forward = scalar::encoder_forward<float>,
      .encoder_backward = scalar::encoder_backward<float>,
      .layernorm_forward = scalar::layernorm_forward<float>,
      .layernorm_apply = scalar::layernorm_apply<float>,
      .layernorm_backward = scalar::layernorm_backward<float>,
      .rmsnorm_forward = scalar::rmsnorm_forward<float>,
      .rmsnorm_apply = scalar::rmsnorm_apply<float>,
      .rmsnorm_backward = scalar::rmsnorm_backward<float>,
      .head_rmsnorm_forward = scalar::head_rmsnorm_forward<float>,
      .head_rmsnorm_backward = scalar::head_rmsnorm_backward<float>,
      .matmul_forward = scalar::matmul_forward<float>,
      .matmul_backward = scalar::matmul_backward<float>,
      .lora_rank_update = scalar::lora_rank_update<float>,
      .lora_project = scalar::lora_project<float>,
      .lora_outer_accumulate = scalar::lora_outer_accumulate<float>,
      .attention_forward = scalar::attention_forward<float>,
      .attention_backward = scalar::attention_backward<float>,
      .flash_attention_forward = scalar::flash_attention_forward<float>,
      .flash_attention_backward = scalar::flash_attention_backward<float>,
      .attention_decode = scalar::attention_decode<float>,
      .rope_forward = scalar::rope_forward<float>,
      .rope_backward = scalar::rope_backward<float>,
      .gelu_forward = scalar::gelu_forward<float>,
      .gelu_backward = scalar::gelu_backward<float>,
      .swiglu_forward = scalar::swiglu_forward<float>,
      .swiglu_backward = scalar::swiglu_backward<float>,
      .geglu_forward = scalar::geglu_forward<float>,
      .geglu_backward = scalar::geglu_backward<float>,
      .residual_forward = scalar::residual_forward<float>,
      .softcap_forward = scalar::softcap_forward<float>,
      .softcap_backward = scalar::softcap_backward<float>,
      .softmax_xent_forward = scalar::softmax_xent_forward<float>,
      .softmax_xent_backward = scalar::softmax_xent_backward<float>,
      .adamw_update = scalar::adamw_update<float>,
      .sum_squares = scalar::sum_squares<float>,
      .scale = scalar::scale<float>,
      .matmul_forward_scratch = no_scratch::matmul_forward,
      .matmul_backward_scratch = no_scratch::matmul_backward,
      .flash_attention_forward_scratch = no_scratch::attention,
      .flash_attention_backward_scratch = no_scratch::attention,
      .sum_squares_scratch = no_scratch::reduction,
  };
  return table;
}

}  // namespace llmcpu
