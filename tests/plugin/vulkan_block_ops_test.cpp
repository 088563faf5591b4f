// The Vulkan plugin's block ops (plugins/vulkan/block_ops.h), recorded directly into a command
// buffer on the device the plugin would pick, against the scalar reference kernels of simd/scalar/
// run in double, on ragged shapes, with every operand at a nonzero element offset inside a larger
// device buffer (the elements around each operand are checked untouched). Bounds are derived from
// fp32 rounding (tests/simd/error_bounds.h) and the precision Vulkan guarantees for shader
// built-ins (below); AdamW with shaderFloat64 is compared bit for bit with the CPU's float path.
// Not here: the plugin's C ABI, streaming and memory plan (other tests); skipped, with a message,
// only where no Vulkan device exists at all.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "plugins/vulkan/block_ops.h"
#include "plugins/vulkan/device.h"
#include "plugins/vulkan/kernels.h"
#include "plugins/vulkan/stream.h"
#include "simd/bf16.h"
#include "simd/scalar/adamw.h"
#include "simd/scalar/attention.h"
#include "simd/scalar/encoder.h"
#include "simd/scalar/gelu.h"
#include "simd/scalar/layernorm.h"
#include "simd/scalar/matmul.h"
#include "simd/scalar/residual.h"
#include "simd/scalar/softmax_xent.h"
#include "tests/simd/attention_bounds.h"
#include "tests/simd/error_bounds.h"
#include "tests/simd/flash_attention_bounds.h"

namespace llmcpu::simd_test {
namespace {

using vk::BlockOps;
using vk::Ref;

// Vulkan's precision of shader built-ins (spec, "Precision and Operation of SPIR-V
// Instructions"), one ulp of y being at most kUlp |y|: +, -, * correctly rounded; x / y and 1 / x
// 2.5 ulp; exp(x) 3 + 2|x| ulp; log(x) 3 ulp outside [0.5, 2], absolute 2^-21 inside; inversesqrt
// 2 ulp; sqrt inherited from 1 / inversesqrt; tanh inherited from sinh / cosh, themselves from
// (exp(x) -+ exp(-x)) / 2. fma and contracted multiply-adds round at most as often as the
// separate operations, so the gamma(n) bounds hold whether or not a driver fuses.
double exp_ulps(double x) { return 3 + 2 * std::fabs(x); }
constexpr double kDivRel = 2.5 * kUlp;
constexpr double kRsqrtRel = 2 * kUlp;
constexpr double kLogAbsNearOne = 0x1p-21;
constexpr double kLogRel = 3 * kUlp;
// sqrt = 1 / inversesqrt: (1 + 2.5 ulp) / (1 - 2 ulp) - 1, relative.
const double kSqrtRel = (1 + kDivRel) / (1 - kRsqrtRel) - 1;

// |tanh computed at a - tanh(a)| for Vulkan's tanh = sinh / cosh: with e = exp(|a|) and
// exp(-|a|) each within eps = exp_ulps(|a|) ulp, the ratio (e+ - e-)/(e+ + e-) errs by at most
// eps (1 + |t|) / (1 - eps) (the same relative error on all four terms), and the subtraction,
// the addition and the 2.5-ulp division add gamma(7) of the result.
double tanh_error(double a, double t) {
  const double eps = exp_ulps(std::fabs(a)) * kUlp;
  const double ratio = eps * (1 + std::fabs(t)) / (1 - eps);
  return ratio + gamma(7) * (std::fabs(t) + ratio);
}

// |log computed at S - log S| from Vulkan's log precision, S > 0.
double log_error(double S) { return std::max(kLogAbsNearOne, kLogRel * std::fabs(std::log(S))); }

// --- The device, a command buffer per run, and tensors at offsets inside guarded buffers. ---

constexpr float kGuard = -1234.5f;  // the elements around a tensor, which no op may change
constexpr uint32_t kTail = 5;       // guard elements after a tensor

constexpr bf16 kGuardBf16 = 0xc49a;  // the same for a bf16 tensor (-1232)

struct Tensor {
  vk::Buffer dev, host;  // device-local storage; host-visible staging of the same size
  uint32_t off = 0;      // elements before the tensor (guards)
  size_t n = 0;          // elements of the tensor
  bool bf16 = false;     // 16-bit elements (bf16 storage), else 32-bit (float or int)
  Ref ref() const { return {dev.buffer, dev.size, off}; }
};

class VulkanBlockOps : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    try {
      dev_ = new vk::Device(-1, false);
    } catch (const vk::NoDeviceError& e) {
      no_device_ = e.what();
      return;
    }
    kernels_ = new vk::Kernels(*dev_);
    VkCommandPoolCreateInfo pci{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
    pci.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
    pci.queueFamilyIndex = dev_->compute_family();
    LLMCPU_VK(vkCreateCommandPool(dev_->device(), &pci, nullptr, &pool_));
    VkCommandBufferAllocateInfo ai{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
    ai.commandPool = pool_;
    ai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
    ai.commandBufferCount = 1;
    LLMCPU_VK(vkAllocateCommandBuffers(dev_->device(), &ai, &cb_));
  }
  static void TearDownTestSuite() {
    if (pool_) vkDestroyCommandPool(dev_->device(), pool_, nullptr);
    pool_ = VK_NULL_HANDLE;
    delete kernels_;
    delete dev_;
    kernels_ = nullptr, dev_ = nullptr;
  }
  void SetUp() override {
    if (!dev_) GTEST_SKIP() << "no Vulkan device: " << no_device_;
    ops_ = std::make_unique<BlockOps>(*kernels_);
  }
  void TearDown() override { free_tensors(); }
  // Frees every tensor (between the shapes of one test).
  void free_tensors() {
    for (Tensor& t : tensors_) dev_->destroy(t.dev), dev_->destroy(t.host);
    tensors_.clear();
  }

  // A tensor of v's elements at element offset `off` in a buffer of its own, guards around it.
  Tensor& tensor(const void* data, size_t n, uint32_t off) {
    Tensor& t = tensors_.emplace_back();
    t.off = off, t.n = n;
    const size_t bytes = (off + n + kTail) * sizeof(float);
    t.dev = dev_->create_buffer(bytes, vk::MemoryKind::kDevice);
    t.host = dev_->create_buffer(bytes, vk::MemoryKind::kDownload);
    float* h = static_cast<float*>(t.host.mapped);
    std::fill(h, h + off + n + kTail, kGuard);
    if (n) std::memcpy(h + off, data, n * sizeof(float));
    return t;
  }
  Tensor& tensor(const std::vector<float>& v, uint32_t off) {
    return tensor(v.data(), v.size(), off);
  }
  Tensor& tensor_int(const std::vector<int>& v, uint32_t off) {
    return tensor(v.data(), v.size(), off);
  }
  // A bf16 tensor: 16-bit elements (its offset and size counted in them), bf16 guards around it;
  // an odd offset or length puts elements in the halves of 32-bit words shared with a guard.
  Tensor& tensor_bf16(const std::vector<bf16>& v, uint32_t off) {
    Tensor& t = tensors_.emplace_back();
    t.off = off, t.n = v.size(), t.bf16 = true;
    const size_t bytes = (off + v.size() + kTail) * sizeof(bf16);
    t.dev = dev_->create_buffer(bytes, vk::MemoryKind::kDevice);
    t.host = dev_->create_buffer(bytes, vk::MemoryKind::kDownload);
    bf16* h = static_cast<bf16*>(t.host.mapped);
    std::fill(h, h + off + v.size() + kTail, kGuardBf16);
    std::copy(v.begin(), v.end(), h + off);
    return t;
  }

  // One submission: every tensor host -> device, the op(s), every tensor device -> host.
  void run(const std::function<void(VkCommandBuffer)>& record) {
    LLMCPU_VK(vkResetCommandBuffer(cb_, 0));
    VkCommandBufferBeginInfo bi{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
    bi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
    LLMCPU_VK(vkBeginCommandBuffer(cb_, &bi));
    for (Tensor& t : tensors_) {
      const VkBufferCopy r{0, 0, t.dev.size};
      vkCmdCopyBuffer(cb_, t.host.buffer, t.dev.buffer, 1, &r);
    }
    barrier(VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_WRITE_BIT,
            VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
            VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT);
    record(cb_);
    barrier(VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT,
            VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_READ_BIT);
    for (Tensor& t : tensors_) {
      const VkBufferCopy r{0, 0, t.dev.size};
      vkCmdCopyBuffer(cb_, t.dev.buffer, t.host.buffer, 1, &r);
    }
    barrier(VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_WRITE_BIT,
            VK_PIPELINE_STAGE_HOST_BIT, VK_ACCESS_HOST_READ_BIT);
    LLMCPU_VK(vkEndCommandBuffer(cb_));
    VkSubmitInfo si{VK_STRUCTURE_TYPE_SUBMIT_INFO};
    si.commandBufferCount = 1;
    si.pCommandBuffers = &cb_;
    LLMCPU_VK(vkQueueSubmit(dev_->compute_queue(), 1, &si, VK_NULL_HANDLE));
    LLMCPU_VK(vkQueueWaitIdle(dev_->compute_queue()));
    kernels_->reset_sets();
  }

  static std::vector<float> get(const Tensor& t) {
    EXPECT_FALSE(t.bf16);
    const float* h = static_cast<const float*>(t.host.mapped) + t.off;
    return {h, h + t.n};
  }
  static std::vector<bf16> get_bf16(const Tensor& t) {
    EXPECT_TRUE(t.bf16);
    const bf16* h = static_cast<const bf16*>(t.host.mapped) + t.off;
    return {h, h + t.n};
  }
  // Every guard element is still kGuard (kGuardBf16): the op wrote only inside its operands.
  static void expect_guards(const std::string& what, const Tensor& t) {
    size_t bad = 0;
    const size_t end = t.off + t.n + kTail;
    for (size_t i = 0; i < end; ++i) {
      if (i >= t.off && i < t.off + t.n) continue;
      bad += t.bf16 ? static_cast<const bf16*>(t.host.mapped)[i] != kGuardBf16
                    : static_cast<const float*>(t.host.mapped)[i] != kGuard;
    }
    EXPECT_EQ(bad, 0u) << what << ": elements outside the tensor changed";
  }

  static void barrier(VkPipelineStageFlags src, VkAccessFlags src_access, VkPipelineStageFlags dst,
                      VkAccessFlags dst_access) {
    VkMemoryBarrier mb{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
    mb.srcAccessMask = src_access;
    mb.dstAccessMask = dst_access;
    vkCmdPipelineBarrier(cb_, src, dst, 0, 1, &mb, 0, nullptr, 0, nullptr);
  }

  static inline vk::Device* dev_ = nullptr;
  static inline vk::Kernels* kernels_ = nullptr;
  static inline VkCommandPool pool_ = VK_NULL_HANDLE;
  static inline VkCommandBuffer cb_ = VK_NULL_HANDLE;
  static inline std::string no_device_;
  std::unique_ptr<BlockOps> ops_;
  std::deque<Tensor> tensors_;
};

std::string dims(std::initializer_list<std::pair<const char*, size_t>> d) {
  std::string s;
  for (const auto& [name, v] : d) s += std::string(" ") + name + "=" + std::to_string(v);
  return s;
}

TEST_F(VulkanBlockOps, DeviceReportsMemoryAndFloat64) {
  EXPECT_GT(dev_->device_local_bytes(), 0u) << dev_->name() << " has no device-local heap";
  EXPECT_EQ(kernels_->available(vk::Kernel::kAdamW), dev_->float64());
  EXPECT_EQ(ops_->adamw_exact(), dev_->float64());
  std::printf("device %s: largest device-local heap %.1f GiB, shaderFloat64 %s\n", dev_->name(),
              double(dev_->device_local_bytes()) / (1 << 30), dev_->float64() ? "on" : "off");
}

// --- matmul: the bounds of tests/plugin/vulkan_ops_test.cpp, gamma(terms) sum |terms|. ---

struct MatShape {
  uint32_t N, C, OC;
};
// Ragged against the 64x64 tiles and 16-wide k slices; C = 1; OC = 40000 > kMaxGemmK, so dinp's
// sum over OC runs as two dispatches with a barrier between them.
constexpr MatShape kMatShapes[] = {{1, 1, 1},     {3, 5, 7},     {17, 33, 29}, {70, 96, 131},
                                   {33, 200, 13}, {130, 64, 64}, {7, 1, 65},   {3, 5, 40000}};

// The three products of a linear layer in double and their bounds, from the operands as the
// device reads them: x (N,C), w (OC,C), b (OC), dy (N,OC) in the products, dy_bias (N,OC) in the
// bias sums (the same as dy in fp32; bf16 rounds dy for the products only), the fp32 starts of
// dinp (when accumulating), dweight and dbias.
struct MatmulReference {
  std::vector<double> out, out_b, dinp, dinp_b, dw, dw_b, db, db_b;
};
MatmulReference matmul_reference(const std::vector<double>& x, const std::vector<double>& wd,
                                 const std::vector<double>& bd, const std::vector<double>& dy,
                                 const std::vector<double>& dy_bias,
                                 const std::vector<float>& dinp0, const std::vector<float>& dw0,
                                 const std::vector<float>& db0, bool has_bias, bool accumulate,
                                 const MatShape& s) {
  const size_t N = s.N, C = s.C, OC = s.OC;
  MatmulReference r;
  r.out.resize(N * OC), r.out_b.resize(N * OC);
  scalar::matmul_forward<double>(r.out.data(), x.data(), wd.data(), has_bias ? bd.data() : nullptr,
                                 N, s.C, s.OC);
  for (size_t n = 0; n < N; ++n) {
    for (size_t o = 0; o < OC; ++o) {
      double mag = has_bias ? std::fabs(bd[o]) : 0.0;
      for (size_t i = 0; i < C; ++i) mag += std::fabs(x[n * C + i] * wd[o * C + i]);
      r.out_b[n * OC + o] = gamma(double(C) + 1) * mag;
    }
  }
  r.dinp.resize(N * C), r.dw = widen(dw0), r.db = widen(db0);
  scalar::matmul_backward<double>(r.dinp.data(), r.dw.data(), nullptr, dy.data(), x.data(),
                                  wd.data(), N, s.C, s.OC);
  r.dinp_b.resize(N * C);
  for (size_t n = 0; n < N; ++n) {
    for (size_t i = 0; i < C; ++i) {
      double mag = accumulate ? std::fabs(double(dinp0[n * C + i])) : 0.0;
      for (size_t o = 0; o < OC; ++o) mag += std::fabs(dy[n * OC + o] * wd[o * C + i]);
      if (accumulate) r.dinp[n * C + i] += dinp0[n * C + i];
      r.dinp_b[n * C + i] = gamma(double(OC) + 1) * mag;
    }
  }
  r.dw_b.resize(OC * C), r.db_b.resize(OC);
  for (size_t o = 0; o < OC; ++o) {
    double mb = std::fabs(double(db0[o]));
    for (size_t n = 0; n < N; ++n)
      r.db[o] += dy_bias[n * OC + o], mb += std::fabs(dy_bias[n * OC + o]);
    r.db_b[o] = gamma(double(N) + 1) * mb;
    for (size_t i = 0; i < C; ++i) {
      double mag = std::fabs(double(dw0[o * C + i]));
      for (size_t n = 0; n < N; ++n) mag += std::fabs(dy[n * OC + o] * x[n * C + i]);
      r.dw_b[o * C + i] = gamma(double(N) + 1) * mag;
    }
  }
  return r;
}

TEST_F(VulkanBlockOps, MatmulForwardAndBackwardRaggedShapes) {
  unsigned seed = 1;
  for (const MatShape& s : kMatShapes) {
    for (int variant = 0; variant < 2; ++variant) {  // bias and dinp "+="; neither
      const bool has_bias = variant == 0, accumulate = variant == 0;
      const size_t N = s.N, C = s.C, OC = s.OC;
      Random rnd(seed++);
      const std::vector<float> inp = rnd.normal(N * C), w = rnd.normal(OC * C, 0, 0.5),
                               b = rnd.normal(OC), dout = rnd.normal(N * OC),
                               dinp0 = rnd.normal(N * C), dw0 = rnd.normal(OC * C),
                               db0 = rnd.normal(OC);
      Tensor& t_inp = tensor(inp, 3);
      Tensor& t_w = tensor(w, 5);
      Tensor& t_b = tensor(b, 7);
      Tensor& t_out = tensor(std::vector<float>(N * OC, NAN), 11);
      Tensor& t_dout = tensor(dout, 13);
      Tensor& t_dinp = tensor(accumulate ? dinp0 : std::vector<float>(N * C, NAN), 17);
      Tensor& t_dw = tensor(dw0, 19);
      Tensor& t_db = tensor(db0, 23);
      run([&](VkCommandBuffer cb) {
        ops_->matmul_forward(cb, t_out.ref(), t_inp.ref(), t_w.ref(), t_b.ref(), has_bias, s.N, s.C,
                             s.OC);
        ops_->matmul_backward_input(cb, t_dinp.ref(), t_dout.ref(), t_w.ref(), s.N, s.C, s.OC,
                                    accumulate);
        ops_->matmul_backward_weight(cb, t_dw.ref(), t_db.ref(), has_bias, t_dout.ref(),
                                     t_inp.ref(), s.N, s.C, s.OC);
      });
      const std::string where =
          dims({{"N", N}, {"C", C}, {"OC", OC}}) + (has_bias ? " bias, +=" : " no bias, =");
      const std::vector<double> dy = widen(dout);
      const MatmulReference r = matmul_reference(widen(inp), widen(w), widen(b), dy, dy, dinp0, dw0,
                                                 db0, has_bias, accumulate, s);
      expect_within("matmul out" + where, get(t_out), r.out, r.out_b);
      expect_within("matmul dinp" + where, get(t_dinp), r.dinp, r.dinp_b);
      expect_within("matmul dweight" + where, get(t_dw), r.dw, r.dw_b);
      if (has_bias) {
        expect_within("matmul dbias" + where, get(t_db), r.db, r.db_b);
      } else {
        expect_identical("matmul dbias untouched" + where, get(t_db), db0);
      }
      for (const Tensor* t : {&t_inp, &t_w, &t_b, &t_out, &t_dout, &t_dinp, &t_dw, &t_db})
        expect_guards("matmul" + where, *t);
      free_tensors();
    }
  }
}

// --- attention: the bounds of tests/simd/attention_bounds.h with Vulkan's exp and 1/x. ---

struct AttnShape {
  uint32_t B, T, C, NH;
};
// Head sizes 1, 3, 12, 64; T = 1; T above the 64 invocations of a row and not a multiple of them.
constexpr AttnShape kAttnShapes[] = {{2, 5, 3, 3},   {1, 17, 15, 5}, {2, 13, 36, 3}, {3, 1, 24, 2},
                                     {1, 40, 64, 1}, {3, 70, 48, 4}, {1, 67, 128, 2}};

TEST_F(VulkanBlockOps, AttentionForwardAndBackwardAtOffsets) {
  for (const AttnShape sh : kAttnShapes) {
    const size_t B = sh.B, T = sh.T, C = sh.C, NH = sh.NH, C3 = 3 * C;
    Random rnd(sh.C * 7 + sh.T);
    const std::vector<float> qkv = rnd.normal(B * T * C3), dout = rnd.normal(B * T * C);
    Tensor& t_qkv = tensor(qkv, 9);
    Tensor& t_out = tensor(std::vector<float>(B * T * C, NAN), 4);
    Tensor& t_att = tensor(std::vector<float>(B * NH * T * T, NAN), 21);
    run([&](VkCommandBuffer cb) {
      ops_->attention_forward(cb, t_out.ref(), t_att.ref(), t_qkv.ref(), sh.B, sh.T, sh.C, sh.NH);
    });
    const std::vector<double> qd = widen(qkv), dd = widen(dout);
    std::vector<double> out_r(B * T * C), att_r(B * NH * T * T);
    scalar::attention_forward<double>(out_r.data(), att_r.data(), qd.data(), int(B), int(T), int(C),
                                      int(NH));
    const AttentionForwardBounds fb =
        attention_forward_bounds(qd, att_r, int(B), int(T), int(C), int(NH), exp_ulps, kDivRel);
    const std::string where = dims({{"B", B}, {"T", T}, {"C", C}, {"NH", NH}});
    expect_within("attention out" + where, get(t_out), out_r, fb.out);
    expect_within("attention att" + where, get(t_att), att_r, fb.att);  // 0 above the diagonal

    // Backward from the reference's att rounded to fp32, on both sides; dqkv overwritten.
    const std::vector<float> att_in(att_r.begin(), att_r.end());
    Tensor& t_att_in = tensor(att_in, 2);
    Tensor& t_dout = tensor(dout, 6);
    Tensor& t_dqkv = tensor(std::vector<float>(B * T * C3, NAN), 15);
    Tensor& t_ds = tensor(std::vector<float>(B * NH * T * T, NAN), 1);
    run([&](VkCommandBuffer cb) {
      ops_->attention_backward(cb, t_dqkv.ref(), t_ds.ref(), t_dout.ref(), t_qkv.ref(),
                               t_att_in.ref(), sh.B, sh.T, sh.C, sh.NH);
    });
    const std::vector<double> ad = widen(att_in);
    std::vector<double> dqkv_r(B * T * C3), scratch(B * NH * T);
    scalar::attention_backward<double>(dqkv_r.data(), scratch.data(), dd.data(), qd.data(),
                                       ad.data(), int(B), int(T), int(C), int(NH));
    const std::vector<double> dqkv_b =
        attention_backward_bounds(qd, dd, ad, int(B), int(T), int(C), int(NH));
    expect_within("attention dqkv" + where, get(t_dqkv), dqkv_r, dqkv_b);
    for (const Tensor* t : {&t_qkv, &t_out, &t_att, &t_att_in, &t_dout, &t_dqkv, &t_ds})
      expect_guards("attention" + where, *t);
    free_tensors();
  }
}

// --- flash attention: the bounds of tests/simd/flash_attention_bounds.h, which take exp and log
// within one ulp and 1/l correctly rounded, plus what Vulkan's precision adds (the ops follow that
// header's online softmax forward and three-sum backward):
//   forward, per row t: every exp argument (p_u's x_u - m_j, a rescale's m_old - m_new) lies within
//     m - s_min + 2 Emax of 0, so each of p_u's 1 + R exps errs by (exp_ulps(that) - 1) ulp more:
//     rel+ = (1 + R) (exp_ulps(m - s_min + 2 Emax) - 1) kUlp on every u; out gains
//     (2 rel+ + kDivRel) sum_u a_u |v_u| (the header's sum_u (rel_u + max rel) a_u |v_u|, and 1/l
//     within 2.5 ulp), lse gains rel+ + log_error(l) with l <= t + 1 (up to its rounding).
//   backward, per (t, u <= t): p's exp errs by rp+ = (exp_ulps(|s - lse| + E) - 1) kUlp more, so ds
//     by scale p (F + dD + |dp - D|) rp+ more, dv's terms by rp+ p |dy|.
// R and E as in the header (records of the scores; the dot product's bound).
struct FlashRow {
  double m, s_min, E_max, R;
};
FlashRow flash_row(const std::vector<double>& qkv, size_t b, size_t h, size_t t, size_t T, size_t C,
                   size_t hs) {
  const double scale = 1 / std::sqrt(double(hs));
  const double* q = qkv.data() + (b * T + t) * 3 * C + h * hs;
  std::vector<double> s(t + 1);
  double E_max = 0;
  for (size_t u = 0; u <= t; ++u) {
    const double* k = qkv.data() + (b * T + u) * 3 * C + C + h * hs;
    double dot = 0, mag = 0;
    for (size_t i = 0; i < hs; ++i) dot += q[i] * k[i], mag += std::fabs(q[i] * k[i]);
    s[u] = scale * dot;
    E_max = std::max(E_max, scale * gamma(double(hs)) * mag + gamma(3) * std::fabs(s[u]));
  }
  FlashRow r{*std::max_element(s.begin(), s.end()), *std::min_element(s.begin(), s.end()), E_max,
             0};
  double record = s[0];
  for (size_t u = 1; u <= t; ++u) {
    if (s[u] > record - 2 * E_max) ++r.R;
    record = std::max(record, s[u]);
  }
  return r;
}

FlashForwardBounds flash_forward_bounds_vk(const std::vector<double>& qkv,
                                           const std::vector<double>& lse, size_t B, size_t T,
                                           size_t C, size_t NH) {
  FlashForwardBounds r =
      flash_forward_bounds(qkv, lse, {int(B), int(T), int(NH), int(NH), int(C / NH)});
  const size_t hs = C / NH;
  for (size_t b = 0; b < B; ++b) {
    for (size_t h = 0; h < NH; ++h) {
      for (size_t t = 0; t < T; ++t) {
        const FlashRow row = flash_row(qkv, b, h, t, T, C, hs);
        const double rel = (1 + row.R) * (exp_ulps(row.m - row.s_min + 2 * row.E_max) - 1) * kUlp;
        const double l = lse[(b * NH + h) * T + t];
        r.lse[(b * NH + h) * T + t] += rel + log_error((double(t) + 1) * (1 + 1e-3));
        for (size_t u = 0; u <= t; ++u) {
          const double* k = qkv.data() + (b * T + u) * 3 * C + C + h * hs;
          const double* q = qkv.data() + (b * T + t) * 3 * C + h * hs;
          double dot = 0;
          for (size_t i = 0; i < hs; ++i) dot += q[i] * k[i];
          const double a = std::exp(dot / std::sqrt(double(hs)) - l);
          for (size_t i = 0; i < hs; ++i)
            r.out[(b * T + t) * C + h * hs + i] += (2 * rel + kDivRel) * a * std::fabs(k[C + i]);
        }
      }
    }
  }
  return r;
}

std::vector<double> flash_backward_bounds_vk(const std::vector<double>& qkv,
                                             const std::vector<double>& dout,
                                             const std::vector<double>& out,
                                             const std::vector<double>& lse, size_t B, size_t T,
                                             size_t C, size_t NH) {
  std::vector<double> r =
      flash_backward_bounds(qkv, dout, out, lse, {int(B), int(T), int(NH), int(NH), int(C / NH)});
  const size_t hs = C / NH, C3 = 3 * C;
  const double scale = 1 / std::sqrt(double(hs));
  for (size_t b = 0; b < B; ++b) {
    for (size_t h = 0; h < NH; ++h) {
      for (size_t t = 0; t < T; ++t) {
        const double* q = qkv.data() + (b * T + t) * C3 + h * hs;
        const double* dy = dout.data() + (b * T + t) * C + h * hs;
        const double* y = out.data() + (b * T + t) * C + h * hs;
        const double l = lse[(b * NH + h) * T + t];
        double D = 0, dD = 0;
        for (size_t i = 0; i < hs; ++i) D += dy[i] * y[i], dD += std::fabs(dy[i] * y[i]);
        dD *= gamma(double(hs));
        for (size_t u = 0; u <= t; ++u) {
          const double* k = qkv.data() + (b * T + u) * C3 + C + h * hs;
          const double* v = k + C;
          double qk = 0, qk_mag = 0, dp = 0, dp_mag = 0;
          for (size_t i = 0; i < hs; ++i) {
            qk += q[i] * k[i], qk_mag += std::fabs(q[i] * k[i]);
            dp += dy[i] * v[i], dp_mag += std::fabs(dy[i] * v[i]);
          }
          const double s = scale * qk;
          const double E = scale * gamma(double(hs)) * qk_mag + gamma(3) * std::fabs(s);
          const double p = std::exp(s - l);
          const double rp = (exp_ulps(std::fabs(s - l) + E) - 1) * kUlp;
          const double dds = scale * p * (gamma(double(hs)) * dp_mag + dD + std::fabs(dp - D)) * rp;
          for (size_t i = 0; i < hs; ++i) {
            r[(b * T + t) * C3 + h * hs + i] += dds * std::fabs(k[i]);
            r[(b * T + u) * C3 + C + h * hs + i] += dds * std::fabs(q[i]);
            r[(b * T + u) * C3 + 2 * C + h * hs + i] += rp * p * std::fabs(dy[i]);
          }
        }
      }
    }
  }
  return r;
}

// Head sizes 1 to 128 (ragged), T = 1, T across the 16-row and 32-key blocks, T = 300, and
// T = 1024 at head sizes 64 and 128 (the longest loops: lavapipe's 65535 iterations).
constexpr AttnShape kFlashShapes[] = {
    {2, 5, 3, 3},    {1, 17, 15, 5},  {2, 13, 36, 3},   {3, 1, 24, 2},    {1, 40, 64, 1},
    {3, 70, 48, 4},  {1, 67, 128, 2}, {2, 33, 127, 1},  {1, 49, 384, 3},  {2, 129, 100, 4},
    {1, 300, 90, 2}, {1, 16, 32, 2},  {1, 1024, 64, 1}, {1, 1024, 128, 1}};

// flash_attention_*: the forward against scalar::flash_attention_forward<double> (out and lse),
// then the backward from the reference's out and lse rounded to fp32 (the same values on both
// sides) against scalar::flash_attention_backward<double>; odd offsets, guards untouched, dqkv
// overwritten (NaN before).
TEST_F(VulkanBlockOps, FlashAttentionForwardAndBackwardAtOffsets) {
  for (const AttnShape sh : kFlashShapes) {
    const size_t B = sh.B, T = sh.T, C = sh.C, NH = sh.NH, C3 = 3 * C;
    Random rnd(sh.C * 13 + sh.T);
    const std::vector<float> qkv = rnd.normal(B * T * C3), dout = rnd.normal(B * T * C);
    Tensor& t_qkv = tensor(qkv, 9);
    Tensor& t_out = tensor(std::vector<float>(B * T * C, NAN), 4);
    Tensor& t_lse = tensor(std::vector<float>(B * NH * T, NAN), 7);
    run([&](VkCommandBuffer cb) {
      ops_->flash_attention_forward(cb, t_out.ref(), t_lse.ref(), t_qkv.ref(), sh.B, sh.T, sh.C,
                                    sh.NH);
    });
    const std::vector<double> qd = widen(qkv), dd = widen(dout);
    std::vector<double> out_r(B * T * C), lse_r(B * NH * T);
    scalar::flash_attention_forward<double>(out_r.data(), lse_r.data(), qd.data(), int(B), int(T),
                                            int(NH), int(NH), int(C / NH),
                                            AttentionOptions{});  // multi-head
    const FlashForwardBounds fb = flash_forward_bounds_vk(qd, lse_r, B, T, C, NH);
    const std::string where = dims({{"B", B}, {"T", T}, {"C", C}, {"NH", NH}});
    expect_within("flash out" + where, get(t_out), out_r, fb.out);
    expect_within("flash lse" + where, get(t_lse), lse_r, fb.lse);

    const std::vector<float> out_in(out_r.begin(), out_r.end()), lse_in(lse_r.begin(), lse_r.end());
    Tensor& t_out_in = tensor(out_in, 3);
    Tensor& t_lse_in = tensor(lse_in, 5);
    Tensor& t_dout = tensor(dout, 6);
    Tensor& t_dqkv = tensor(std::vector<float>(B * T * C3, NAN), 15);
    run([&](VkCommandBuffer cb) {
      ops_->flash_attention_backward(cb, t_dqkv.ref(), t_dout.ref(), t_out_in.ref(), t_qkv.ref(),
                                     t_lse_in.ref(), sh.B, sh.T, sh.C, sh.NH);
    });
    const std::vector<double> yd = widen(out_in), ld = widen(lse_in);
    std::vector<double> dqkv_r(B * T * C3);
    scalar::flash_attention_backward<double>(dqkv_r.data(), dd.data(), yd.data(), qd.data(),
                                             ld.data(), int(B), int(T), int(NH), int(NH),
                                             int(C / NH), AttentionOptions{});
    expect_within("flash dqkv" + where, get(t_dqkv), dqkv_r,
                  flash_backward_bounds_vk(qd, dd, yd, ld, B, T, C, NH));
    for (const Tensor* t : {&t_qkv, &t_out, &t_lse, &t_out_in, &t_lse_in, &t_dout, &t_dqkv})
      expect_guards("flash attention" + where, *t);
    free_tensors();
  }
}

// The same twice: bit for bit the same results (one owner per element, fixed order).
TEST_F(VulkanBlockOps, FlashAttentionIsDeterministic) {
  const uint32_t B = 2, T = 77, C = 96, NH = 2;
  Random rnd(3);
  const std::vector<float> qkv = rnd.normal(size_t(B) * T * 3 * C), dout = rnd.normal(B * T * C);
  Tensor& t_qkv = tensor(qkv, 1);
  Tensor& t_dout = tensor(dout, 2);
  std::vector<float> first[3];
  for (int rep = 0; rep < 2; ++rep) {
    Tensor& t_out = tensor(std::vector<float>(B * T * C, NAN), 3);
    Tensor& t_lse = tensor(std::vector<float>(B * NH * T, NAN), 4);
    Tensor& t_dqkv = tensor(std::vector<float>(size_t(B) * T * 3 * C, NAN), 5);
    run([&](VkCommandBuffer cb) {
      ops_->flash_attention_forward(cb, t_out.ref(), t_lse.ref(), t_qkv.ref(), B, T, C, NH);
      vk::Stream::compute_barrier(cb);
      ops_->flash_attention_backward(cb, t_dqkv.ref(), t_dout.ref(), t_out.ref(), t_qkv.ref(),
                                     t_lse.ref(), B, T, C, NH);
    });
    const std::vector<float> got[3] = {get(t_out), get(t_lse), get(t_dqkv)};
    for (int i = 0; i < 3; ++i) {
      if (rep == 0) {
        first[i] = got[i];
      } else {
        expect_identical("flash attention rerun " + std::to_string(i), got[i], first[i]);
      }
    }
  }
}

// --- encoder: one fp32 addition per element (forward); rows in order (backward). ---

struct EncShape {
  uint32_t N, T, C, Vp;
};
// N a multiple of T, N < T (a short chunk), N not a multiple of T; C = 1, 200, not multiples of 64.
constexpr EncShape kEncShapes[] = {
    {6, 3, 1, 5}, {2, 8, 70, 11}, {130, 13, 200, 37}, {7, 3, 65, 64}, {64, 64, 33, 3}};

TEST_F(VulkanBlockOps, EncoderForwardByVocabPieces) {
  for (const EncShape s : kEncShapes) {
    const size_t N = s.N, T = s.T, C = s.C, Vp = s.Vp, pos0 = 2, maxT = T + pos0;
    Random rnd(s.C + s.N);
    const std::vector<int> tokens = rnd.tokens(N, int(Vp));
    const std::vector<float> wte = rnd.normal(Vp * C), wpe = rnd.normal(maxT * C);
    const uint32_t lo = s.Vp / 3;  // two pieces of the table: [0, lo), [lo, Vp)
    Tensor& t_tok = tensor_int(tokens, 3);
    Tensor& t_wte = tensor(wte, 5);
    Tensor& t_wpe = tensor(wpe, 7);
    Tensor& t_out = tensor(std::vector<float>(N * C, NAN), 9);
    Tensor& t_one = tensor(std::vector<float>(N * C, 0.5f), 2);  // the second piece only
    run([&](VkCommandBuffer cb) {
      const Ref wpe_at = t_wpe.ref().at(pos0 * C);  // positions from pos0
      ops_->encoder_forward(cb, t_out.ref(), t_tok.ref(), t_wte.ref(), wpe_at, s.N, s.T, s.C, 0,
                            lo);
      ops_->encoder_forward(cb, t_out.ref(), t_tok.ref(), t_wte.ref().at(size_t(lo) * C), wpe_at,
                            s.N, s.T, s.C, lo, s.Vp);
      ops_->encoder_forward(cb, t_one.ref(), t_tok.ref(), t_wte.ref().at(size_t(lo) * C), wpe_at,
                            s.N, s.T, s.C, lo, s.Vp);
    });
    std::vector<double> ref(N * C), bound(N * C), one(N * C), one_bound(N * C);
    for (size_t i = 0; i < N; ++i) {
      const bool in_piece = tokens[i] >= int(lo);
      for (size_t c = 0; c < C; ++c) {
        const double v = double(wte[size_t(tokens[i]) * C + c]) + wpe[(pos0 + i % T) * C + c];
        ref[i * C + c] = v, bound[i * C + c] = kU * std::fabs(v);  // one rounding
        one[i * C + c] = in_piece ? v : 0.5;  // rows of the other piece: untouched
        one_bound[i * C + c] = in_piece ? bound[i * C + c] : 0.0;
      }
    }
    const std::string where = dims({{"N", N}, {"T", T}, {"C", C}, {"Vp", Vp}});
    expect_within("encoder out" + where, get(t_out), ref, bound);
    expect_within("encoder one piece" + where, get(t_one), one, one_bound);
    for (const Tensor* t : {&t_tok, &t_wte, &t_wpe, &t_out, &t_one})
      expect_guards("encoder" + where, *t);
    free_tensors();
  }
}

// Backward: every element of dwte and dwpe is its start plus the rows' dout added one at a time in
// the CPU's order, so gamma(rows) (|start| + sum |dout|) from the exact sum, and bit for bit
// scalar::encoder_backward<float>.
TEST_F(VulkanBlockOps, EncoderBackwardDeterministicInRowOrder) {
  for (const EncShape s : kEncShapes) {
    for (const bool with_wpe : {true, false}) {
      const size_t N = s.N, T = s.T, C = s.C, Vp = s.Vp;
      Random rnd(s.C + s.N + 1);
      std::vector<int> tokens = rnd.tokens(N, int(Vp));
      if (N > 2) tokens[N - 1] = tokens[0];  // a repeated token
      const std::vector<float> dout = rnd.normal(N * C), dwte0 = rnd.normal(Vp * C),
                               dwpe0 = rnd.normal(T * C);
      const uint32_t lo = s.Vp / 2;  // the piece [lo, Vp) of the table
      Tensor& t_tok = tensor_int(tokens, 1);
      Tensor& t_dout = tensor(dout, 4);
      Tensor& t_dwte = tensor(dwte0, 8);
      Tensor& t_dwpe = tensor(dwpe0, 3);
      run([&](VkCommandBuffer cb) {
        ops_->encoder_backward(cb, t_dwte.ref().at(size_t(lo) * C), t_dwpe.ref(), with_wpe,
                               t_dout.ref(), t_tok.ref(), s.N, s.T, s.C, lo, s.Vp);
      });
      // The float reference on the whole table; rows below lo must keep their start.
      std::vector<float> dwte_f = dwte0, dwpe_f = dwpe0;
      std::vector<double> dwte_r = widen(dwte0), dwpe_r = widen(dwpe0);
      std::vector<double> dwte_b(Vp * C), dwpe_b(T * C);
      for (size_t k = 0; k < Vp * C; ++k) dwte_b[k] = std::fabs(double(dwte0[k]));
      for (size_t k = 0; k < T * C; ++k) dwpe_b[k] = std::fabs(double(dwpe0[k]));
      std::vector<size_t> rows_wte(Vp, 0), rows_wpe(T, 0);
      for (size_t i = 0; i < N; ++i) {
        const size_t tok = size_t(tokens[i]), t = i % T;
        for (size_t c = 0; c < C; ++c) {
          const float d = dout[i * C + c];
          if (tok >= lo) {
            dwte_f[tok * C + c] += d;
            dwte_r[tok * C + c] += d, dwte_b[tok * C + c] += std::fabs(d);
          }
          if (with_wpe) {
            dwpe_f[t * C + c] += d;
            dwpe_r[t * C + c] += d, dwpe_b[t * C + c] += std::fabs(d);
          }
        }
        if (tok >= lo) ++rows_wte[tok];
        ++rows_wpe[t];
      }
      for (size_t k = 0; k < Vp * C; ++k) dwte_b[k] *= gamma(double(rows_wte[k / C]));
      for (size_t k = 0; k < T * C; ++k) dwpe_b[k] *= with_wpe ? gamma(double(rows_wpe[k / C])) : 0;
      const std::string where =
          dims({{"N", N}, {"T", T}, {"C", C}, {"Vp", Vp}}) + (with_wpe ? " with wpe" : "");
      expect_within("encoder dwte" + where, get(t_dwte), dwte_r, dwte_b);
      expect_within("encoder dwpe" + where, get(t_dwpe), dwpe_r, dwpe_b);
      expect_identical("encoder dwte vs CPU float" + where, get(t_dwte), dwte_f);
      expect_identical("encoder dwpe vs CPU float" + where, get(t_dwpe), dwpe_f);
      for (const Tensor* t : {&t_tok, &t_dout, &t_dwte, &t_dwpe})
        expect_guards("encoder backward" + where, *t);
      free_tensors();
    }
  }
}

// --- LayerNorm ---
// Forward, per row with m*, v*, s* the exact mean, variance and rstd (eps = 1e-5):
//   m = fl(sum x)/C:          dm = gamma(C) mean|x|
//   v = fl(sum (x - m)^2)/C:  sum (x - m)^2 = C v* + C (m - m*)^2 exactly (the deviations sum to
//                             0), so |v - v*| <= gamma(C + 3) v* + dm^2
//   s = inversesqrt(v + eps): the argument errs by r = (|v - v*| + u eps + u (v* + eps)) relative
//                             to v* + eps (eps's float rounding, the addition); inversesqrt
//                             passes on half of it and adds 2 ulp:
//                             rho = ((1 - r)^-1/2 (1 + 2 ulp) - 1)
//   y = (x - m) s w + b:      dy <= |w| s* (1 + rho) (dm + |x - m*| rho)
//                                   + gamma(3) (|x - m*| + dm) s* (1 + rho) |w| + u |b|
// Backward, from the fp32 mean and rstd on both sides, g = w dy, n = (x - m) s: dx = dx0 + s (g -
// fl(sum g)/C - n fl(sum g n)/C) is a polynomial in the inputs (the divisions by C each one
// correctly rounded product with 1/C) whose terms pass through at most C + 7 roundings:
// gamma(C + 7) times the expression in absolute values. dw = dw0 + sum_rows n dy: gamma(N + 3)
// (|dw0| + sum |n dy|); db = db0 + sum dy: gamma(N) (|db0| + sum |dy|).
struct LnShape {
  uint32_t N, C;
};
constexpr LnShape kLnShapes[] = {{1, 1}, {3, 7}, {5, 17}, {4, 64}, {9, 129}, {130, 200}, {2, 65}};

// The forward's reference in double and its bounds (above) for the fp32 results.
struct LayerNormReference {
  std::vector<double> y, mean, rstd, y_b, mean_b, rstd_b;
};
LayerNormReference layernorm_reference(const std::vector<double>& xd, const std::vector<double>& wd,
                                       const std::vector<double>& bd, size_t N, size_t C) {
  LayerNormReference r;
  r.y.resize(N * C), r.mean.resize(N), r.rstd.resize(N);
  r.y_b.resize(N * C), r.mean_b.resize(N), r.rstd_b.resize(N);
  scalar::layernorm_forward<double>(r.y.data(), r.mean.data(), r.rstd.data(), xd.data(), wd.data(),
                                    bd.data(), N, int(C));
  const double eps = scalar::kLayerNormEps;
  for (size_t row = 0; row < N; ++row) {
    double abs_mean = 0;
    for (size_t c = 0; c < C; ++c) abs_mean += std::fabs(xd[row * C + c]) / double(C);
    const double dm = gamma(double(C)) * abs_mean;
    const double s = r.rstd[row], v = std::max(0.0, 1 / (s * s) - eps);
    const double rel_arg =
        (gamma(double(C) + 3) * v + dm * dm + kU * eps + kU * (v + eps)) / (v + eps);
    const double rho = (1 + kRsqrtRel) / std::sqrt(1 - rel_arg) - 1;
    r.mean_b[row] = dm;
    r.rstd_b[row] = rho * s;
    for (size_t c = 0; c < C; ++c) {
      const double dev = std::fabs(xd[row * C + c] - r.mean[row]), aw = std::fabs(wd[c]);
      r.y_b[row * C + c] = aw * s * (1 + rho) * (dm + dev * rho) +
                           gamma(3) * (dev + dm) * s * (1 + rho) * aw + kU * std::fabs(bd[c]);
    }
  }
  return r;
}

TEST_F(VulkanBlockOps, LayerNormForwardAndBackward) {
  for (const LnShape sh : kLnShapes) {
    const size_t N = sh.N, C = sh.C;
    Random rnd(sh.C * 3 + sh.N);
    const std::vector<float> x = rnd.normal(N * C, 0.5, 2), w = rnd.normal(C, 1, 0.3),
                             b = rnd.normal(C, 0, 0.3), dy = rnd.normal(N * C),
                             dx0 = rnd.normal(N * C), dw0 = rnd.normal(C), db0 = rnd.normal(C);
    Tensor& t_x = tensor(x, 3);
    Tensor& t_w = tensor(w, 1);
    Tensor& t_b = tensor(b, 2);
    Tensor& t_y = tensor(std::vector<float>(N * C, NAN), 5);
    Tensor& t_mean = tensor(std::vector<float>(N, NAN), 7);
    Tensor& t_rstd = tensor(std::vector<float>(N, NAN), 11);
    run([&](VkCommandBuffer cb) {
      ops_->layernorm_forward(cb, t_y.ref(), t_mean.ref(), t_rstd.ref(), t_x.ref(), t_w.ref(),
                              t_b.ref(), sh.N, sh.C);
    });
    const std::vector<double> xd = widen(x), wd = widen(w), bd = widen(b);
    const LayerNormReference f = layernorm_reference(xd, wd, bd, N, C);
    const std::string where = dims({{"N", N}, {"C", C}});
    expect_within("layernorm out" + where, get(t_y), f.y, f.y_b);
    expect_within("layernorm mean" + where, get(t_mean), f.mean, f.mean_b);
    expect_within("layernorm rstd" + where, get(t_rstd), f.rstd, f.rstd_b);

    // Backward from the same fp32 statistics on both sides: the device's.
    const std::vector<float> mean = get(t_mean), rstd = get(t_rstd);
    Tensor& t_dy = tensor(dy, 13);
    Tensor& t_dx = tensor(dx0, 4);
    Tensor& t_dw = tensor(dw0, 6);
    Tensor& t_db = tensor(db0, 8);
    run([&](VkCommandBuffer cb) {
      ops_->layernorm_backward(cb, t_dx.ref(), t_dw.ref(), t_db.ref(), t_dy.ref(), t_x.ref(),
                               t_w.ref(), t_mean.ref(), t_rstd.ref(), sh.N, sh.C);
    });
    std::vector<double> dx_r = widen(dx0), dw_r = widen(dw0), db_r = widen(db0);
    const std::vector<double> dyd = widen(dy), md = widen(mean), sd = widen(rstd);
    scalar::layernorm_backward<double>(dx_r.data(), dw_r.data(), db_r.data(), dyd.data(), xd.data(),
                                       wd.data(), md.data(), sd.data(), N, sh.C);
    std::vector<double> dx_b(N * C), dw_b(C), db_b(C);
    for (size_t c = 0; c < C; ++c)
      dw_b[c] = std::fabs(double(dw0[c])), db_b[c] = std::fabs(double(db0[c]));
    for (size_t r = 0; r < N; ++r) {
      const double s = sd[r];
      double g_abs = 0, gn_abs = 0;
      for (size_t c = 0; c < C; ++c) {
        const double g = wd[c] * dyd[r * C + c], n = (xd[r * C + c] - md[r]) * s;
        g_abs += std::fabs(g), gn_abs += std::fabs(g * n);
        dw_b[c] += std::fabs(n * dyd[r * C + c]);
        db_b[c] += std::fabs(dyd[r * C + c]);
      }
      for (size_t c = 0; c < C; ++c) {
        const double g = wd[c] * dyd[r * C + c], n = (xd[r * C + c] - md[r]) * s;
        const double mag =
            std::fabs(double(dx0[r * C + c])) +
            s * (std::fabs(g) + g_abs / double(C) + std::fabs(n) * gn_abs / double(C));
        dx_b[r * C + c] = gamma(double(C) + 7) * mag;
      }
    }
    for (size_t c = 0; c < C; ++c) dw_b[c] *= gamma(double(N) + 3), db_b[c] *= gamma(double(N));
    expect_within("layernorm dinp" + where, get(t_dx), dx_r, dx_b);
    expect_within("layernorm dweight" + where, get(t_dw), dw_r, dw_b);
    expect_within("layernorm dbias" + where, get(t_db), db_r, db_b);
    for (const Tensor* t : {&t_x, &t_w, &t_b, &t_y, &t_mean, &t_rstd, &t_dy, &t_dx, &t_dw, &t_db})
      expect_guards("layernorm" + where, *t);
    free_tensors();
  }
}

// --- GELU, residual ---
// GELU with s = sqrt(2/pi), k = 0.044715 (the shader's are their float roundings, one u each),
// a = s (x + k x^3), th = tanh(a):
//   a takes <= 7 roundings (two constants, three products, a sum, the scaling):
//     |d a| <= gamma(7) s (|x| + k |x|^3);
//   th: tanh's slope is <= 1, so |d th| <= |d a| + tanh_error (Vulkan's tanh, above);
//   forward y = 0.5 x (1 + th): |d y| <= 0.5 |x| |d th| + gamma(2) 0.5 |x| (1 + |th| + |d th|);
//   backward local = 0.5 (1 + th) + 0.5 x (1 - th^2) s (1 + 3k x^2) and dinp = local dout:
//     th's error moves local by <= |d th| (0.5 + |x| s (1 + 3k x^2) (|th| + |d th| / 2)),
//     the evaluation (<= 9 roundings with 3k's, times dout) gamma(9) times the terms' magnitudes.
constexpr size_t kLengths[] = {1, 3, 255, 256, 257, 1000, 70001};

// The bounds above at one element: forward |d y|, backward |d dinp| (dout = 1).
struct GeluBounds {
  double forward, backward_per_dout;
};
GeluBounds gelu_bounds(double xi) {
  const double s = scalar::kGeluScale, kc = scalar::kGeluCube;
  const double ax = std::fabs(xi);
  const double a = s * (xi + kc * xi * xi * xi), th = std::tanh(a), ath = std::fabs(th);
  const double d_arg = gamma(7) * s * (ax + kc * ax * ax * ax);
  const double d_th = d_arg + tanh_error(std::fabs(a) + d_arg, ath + d_arg);
  const double y_b = 0.5 * ax * d_th + gamma(2) * 0.5 * ax * (1 + ath + d_th);
  const double slope = s * (1 + 3 * kc * xi * xi), th1 = ath + d_th;
  const double d_local = d_th * (0.5 + ax * slope * (ath + d_th / 2)) +
                         gamma(9) * (0.5 * (1 + th1) + 0.5 * ax * (1 + th1 * th1) * slope);
  return {y_b, d_local};
}

TEST_F(VulkanBlockOps, GeluForwardAndBackwardInPlace) {
  for (const size_t n : kLengths) {
    Random rnd(unsigned(n) + 7);
    std::vector<float> x = rnd.uniform(n, -6, 6);
    x[0] = 0.0f;
    if (n > 2) x[n - 1] = 15.0f, x[n / 2] = -15.0f;  // saturated tanh
    const std::vector<float> dout = rnd.normal(n);
    Tensor& t_x = tensor(x, 3);
    Tensor& t_y = tensor(std::vector<float>(n, NAN), 5);
    Tensor& t_dout = tensor(dout, 7);
    Tensor& t_dx = tensor(std::vector<float>(n, NAN), 1);
    Tensor& t_inplace = tensor(dout, 9);  // dout in, dinp out
    run([&](VkCommandBuffer cb) {
      ops_->gelu_forward(cb, t_y.ref(), t_x.ref(), uint32_t(n));
      ops_->gelu_backward(cb, t_dx.ref(), t_x.ref(), t_dout.ref(), uint32_t(n));
      ops_->gelu_backward(cb, t_inplace.ref(), t_x.ref(), t_inplace.ref(), uint32_t(n));
    });
    std::vector<double> y_r(n), dx_r(n), y_b(n), dx_b(n);
    const std::vector<double> xd = widen(x), dd = widen(dout);
    scalar::gelu_forward<double>(y_r.data(), xd.data(), n);
    scalar::gelu_backward<double>(dx_r.data(), xd.data(), dd.data(), n);
    for (size_t i = 0; i < n; ++i) {
      const GeluBounds g = gelu_bounds(xd[i]);
      y_b[i] = g.forward;
      dx_b[i] = std::fabs(dd[i]) * g.backward_per_dout;
    }
    const std::string where = dims({{"n", n}});
    expect_within("gelu forward" + where, get(t_y), y_r, y_b);
    expect_within("gelu backward" + where, get(t_dx), dx_r, dx_b);
    expect_identical("gelu backward in place" + where, get(t_inplace), get(t_dx));
    for (const Tensor* t : {&t_x, &t_y, &t_dout, &t_dx, &t_inplace})
      expect_guards("gelu" + where, *t);
    free_tensors();
  }
}

// One rounding: |out - (a + b)| <= u |a + b|; in place (out = a) the same.
TEST_F(VulkanBlockOps, ResidualForwardInPlace) {
  for (const size_t n : kLengths) {
    Random rnd(unsigned(n) + 11);
    const std::vector<float> a = rnd.normal(n), b = rnd.normal(n);
    Tensor& t_a = tensor(a, 3);
    Tensor& t_b = tensor(b, 5);
    Tensor& t_out = tensor(std::vector<float>(n, NAN), 2);
    Tensor& t_acc = tensor(a, 6);
    run([&](VkCommandBuffer cb) {
      ops_->residual_forward(cb, t_out.ref(), t_a.ref(), t_b.ref(), uint32_t(n));
      ops_->residual_forward(cb, t_acc.ref(), t_acc.ref(), t_b.ref(), uint32_t(n));
    });
    std::vector<double> r(n), bound(n);
    const std::vector<double> ad = widen(a), bd = widen(b);
    scalar::residual_forward<double>(r.data(), ad.data(), bd.data(), n);
    for (size_t i = 0; i < n; ++i) bound[i] = kU * std::fabs(r[i]);
    const std::string where = dims({{"n", n}});
    expect_within("residual" + where, get(t_out), r, bound);
    expect_within("residual in place" + where, get(t_acc), r, bound);
    for (const Tensor* t : {&t_a, &t_b, &t_out, &t_acc}) expect_guards("residual" + where, *t);
    free_tensors();
  }
}

// --- softmax + cross-entropy ---
// Forward, per row with m = max z (exact), e_v = exp(z_v - m), S = sum e_v:
//   each e_v: the rounded difference shifts exp's argument by <= u|z_v - m|, exp adds
//     exp_ulps(z_v - m) ulp: rel_v = e^(u|z_v - m|) (1 + exp_ulps ulp) - 1;
//   S: V positive terms, |dS| <= sum e_v ((1 + rel_v)(1 + gamma(V)) - 1);
//   log: -log(1 - |dS|/S) passed on, plus Vulkan's log error at S;
//   lse = m + log S and loss = lse - z_y: one rounding each.
// Backward dz_v = exp(z_v - lse) dloss (lse given as the same float on both sides): rel_v as
// above with z_v - lse, one u for the product; the target's - dloss one more rounding of the
// result; the padding exactly zero.
struct XentShape {
  uint32_t N, V, Vp;
};
constexpr XentShape kXentShapes[] = {
    {1, 1, 3}, {3, 7, 8}, {5, 33, 64}, {130, 1009, 1040}, {2, 50257, 50304}};

TEST_F(VulkanBlockOps, SoftmaxCrossEntropyForwardAndBackward) {
  for (const XentShape sh : kXentShapes) {
    const size_t N = sh.N, V = sh.V, Vp = sh.Vp;
    Random rnd(sh.V + sh.N);
    const std::vector<float> logits = rnd.normal(N * Vp, 0, 3);
    const std::vector<int> targets = rnd.tokens(N, int(V));
    Tensor& t_z = tensor(logits, 5);
    Tensor& t_y = tensor_int(targets, 3);
    Tensor& t_loss = tensor(std::vector<float>(N, NAN), 1);
    Tensor& t_lse = tensor(std::vector<float>(N, NAN), 2);
    run([&](VkCommandBuffer cb) {
      ops_->softmax_xent_forward(cb, t_loss.ref(), t_lse.ref(), t_z.ref(), t_y.ref(), sh.N, sh.V,
                                 sh.Vp);
    });
    const std::vector<double> zd = widen(logits);
    std::vector<double> loss_r(N), lse_r(N), loss_b(N), lse_b(N);
    scalar::softmax_xent_forward<double>(loss_r.data(), lse_r.data(), zd.data(), targets.data(), N,
                                         int(V), int(Vp));
    for (size_t n = 0; n < N; ++n) {
      const double* z = zd.data() + n * Vp;
      const double m = *std::max_element(z, z + V);
      double S = 0, dS = 0;
      for (size_t v = 0; v < V; ++v) {
        const double e = std::exp(z[v] - m), d = std::fabs(z[v] - m);
        const double rel = std::exp(kU * d) * (1 + exp_ulps(d * (1 + kU)) * kUlp) - 1;
        S += e;
        dS += e * ((1 + rel) * (1 + gamma(double(V))) - 1);
      }
      const double d_log = -std::log(1 - dS / S) + log_error(S);
      lse_b[n] = d_log + kU * (std::fabs(lse_r[n]) + d_log);
      loss_b[n] = lse_b[n] + kU * (std::fabs(loss_r[n]) + lse_b[n]);
    }
    const std::string where = dims({{"N", N}, {"V", V}, {"Vp", Vp}});
    expect_within("xent lse" + where, get(t_lse), lse_r, lse_b);
    expect_within("xent loss" + where, get(t_loss), loss_r, loss_b);

    const float dloss = 1.0f / float(N);
    const std::vector<float> lse = get(t_lse);  // both sides from the same lse
    std::vector<double> grad_r = zd, grad_b(N * Vp, 0.0);
    const std::vector<double> lse_in = widen(lse);
    scalar::softmax_xent_backward<double>(grad_r.data(), lse_in.data(), targets.data(), dloss, N,
                                          int(V), int(Vp));
    run([&](VkCommandBuffer cb) {
      ops_->softmax_xent_backward(cb, t_z.ref(), t_lse.ref(), t_y.ref(), dloss, sh.N, sh.V, sh.Vp);
    });
    for (size_t n = 0; n < N; ++n) {
      for (size_t v = 0; v < V; ++v) {
        const double z = zd[n * Vp + v], d = std::fabs(z - lse_in[n]), p = std::exp(z - lse_in[n]);
        const double rel = std::exp(kU * d) * (1 + exp_ulps(d * (1 + kU)) * kUlp) - 1;
        double b = dloss * p * ((1 + rel) * (1 + kU) - 1);
        if (int(v) == targets[n]) b += kU * (dloss * p * (1 + rel) * (1 + kU) + dloss);
        grad_b[n * Vp + v] = b;
      }
    }
    expect_within("xent dlogits" + where, get(t_z), grad_r, grad_b);  // padding: exactly 0
    for (const Tensor* t : {&t_z, &t_y, &t_loss, &t_lse}) expect_guards("xent" + where, *t);
    free_tensors();
  }
}

// --- AdamW ---
// The host constants as simd/scalar/adamw.h computes them.
vk::AdamWConstants constants(const scalar::AdamWStep& s, float grad_scale) {
  return {float(1.0 - s.lr * s.weight_decay),
          float(s.beta1),
          float(s.beta2),
          float(s.lr / (1.0 - std::pow(s.beta1, double(s.t)))),
          float(std::sqrt(1.0 - std::pow(s.beta2, double(s.t)))),
          float(s.eps),
          grad_scale};
}

// With shaderFloat64 every operation is the CPU's correctly rounded fp32 one in the CPU's order:
// m, v and param bit for bit those of scalar::adamw_update<float> (built without FMA contraction,
// -ffp-contract=off). The float-only variant shares m, v (bit for bit) and p = param * decay; only
// q = step m / (sqrt(v) / bc2 + eps) differs: relative to the exact q on those floats the CPU errs
// by rel_c = (1 + u)^2 / (1 - gamma(3)) - 1 (sqrt, /, + eps; the product, /), the device by rel_g
// = (1 + u)(1 + 2.5 ulp) / (1 - a) - 1 with a = (1 + sqrt's)(1 + 2.5 ulp)(1 + u) - 1; then
// param = fl(p - q) on both: |param_g - param_c| <= (1 + u)|q_g - q_c| + 2u |param_c| / (1 - u).
TEST_F(VulkanBlockOps, AdamWMatchesCpuFloatPath) {
  const scalar::AdamWStep steps[] = {{6e-4, 0.9, 0.95, 1e-8, 0.1, 1},
                                     {1e-3, 0.9, 0.999, 1e-8, 0.0, 7},
                                     {3e-4, 0.8, 0.95, 1e-6, 0.1, 1000}};
  for (const bool float_only : {false, true}) {
    if (!float_only && !dev_->float64()) {
      std::printf("%s has no shaderFloat64: the exact AdamW variant is not tested\n", dev_->name());
      continue;
    }
    ops_->set_adamw_float32_only(float_only);
    ASSERT_EQ(ops_->adamw_exact(), !float_only);
    for (const size_t n : kLengths) {
      for (const scalar::AdamWStep& step : steps) {
        for (const float grad_scale : {1.0f, 0.37f}) {
          Random rnd(unsigned(n) + unsigned(step.t));
          const std::vector<float> p0 = rnd.normal(n), m0 = rnd.normal(n, 0, 0.1);
          std::vector<float> v0 = rnd.uniform(n, 0, 0.01), g = rnd.normal(n);
          v0[0] = 0.0f, g[0] = 0.0f;  // a parameter that has never had a gradient
          Tensor& t_p = tensor(p0, 3);
          Tensor& t_m = tensor(m0, 5);
          Tensor& t_v = tensor(v0, 7);
          Tensor& t_g = tensor(g, 9);
          const vk::AdamWConstants k = constants(step, grad_scale);
          run([&](VkCommandBuffer cb) {
            ops_->adamw(cb, t_p.ref(), t_m.ref(), t_v.ref(), t_g.ref(), uint32_t(n), k);
          });
          // The CPU's float path, on gradients scaled the way the device scales them (one fp32
          // product, exact for grad_scale 1).
          std::vector<float> p_r = p0, m_r = m0, v_r = v0, g_r = g;
          for (float& x : g_r) x *= grad_scale;
          scalar::adamw_update<float>(p_r.data(), m_r.data(), v_r.data(), g_r.data(), n, step);
          const std::string where = dims({{"n", n}, {"t", size_t(step.t)}}) + " grad_scale " +
                                    std::to_string(grad_scale) +
                                    (float_only ? " float only" : " exact");
          const std::vector<float> p = get(t_p);
          expect_identical("adamw m" + where, get(t_m), m_r);
          expect_identical("adamw v" + where, get(t_v), v_r);
          if (!float_only) {
            expect_identical("adamw param" + where, p, p_r);
          } else {
            const double u = kU;
            const double rel_c = (1 + u) * (1 + u) / (1 - gamma(3)) - 1;
            const double a = (1 + kSqrtRel) * (1 + kDivRel) * (1 + u) - 1;
            const double rel_g = (1 + u) * (1 + kDivRel) / (1 - a) - 1;
            std::vector<double> bound(n);
            for (size_t i = 0; i < n; ++i) {
              const double vi = v_r[i], mi = m_r[i];
              const double q = double(k.step_size) * mi / (std::sqrt(vi) / k.bc2_sqrt + k.eps);
              const double dq = std::fabs(q) * (rel_c + rel_g);
              bound[i] = (1 + u) * dq + 2 * u * std::fabs(double(p_r[i])) / (1 - u);
            }
            expect_within("adamw param" + where, p, widen(p_r), bound);
          }
          for (const Tensor* t : {&t_p, &t_m, &t_v, &t_g}) expect_guards("adamw" + where, *t);
          free_tensors();
        }
      }
    }
  }
  ops_->set_adamw_float32_only(false);
}

// --- sum of squares: per block of sum_squares_block() elements, fp32: gamma(len) sum x^2. ---
TEST_F(VulkanBlockOps, SumSquaresPartialsPerBlock) {
  const uint32_t block = BlockOps::sum_squares_block();
  for (const uint32_t n : {1u, 3u, block - 1, block, block + 1, 70001u, 300000u}) {
    Random rnd(n);
    const std::vector<float> x = rnd.normal(n, 0.1, 2);
    const uint32_t blocks = BlockOps::sum_squares_blocks(n);
    ASSERT_EQ(blocks, (n + block - 1) / block);
    Tensor& t_x = tensor(x, 3);
    Tensor& t_part = tensor(std::vector<float>(blocks, NAN), 5);
    run([&](VkCommandBuffer cb) { ops_->sum_squares(cb, t_part.ref(), t_x.ref(), n); });
    std::vector<double> ref(blocks, 0.0), bound(blocks);
    for (uint32_t j = 0; j < blocks; ++j) {
      const size_t i0 = size_t(j) * block, i1 = std::min<size_t>(n, i0 + block);
      for (size_t i = i0; i < i1; ++i) ref[j] += double(x[i]) * x[i];
      bound[j] = gamma(double(i1 - i0)) * ref[j];
    }
    const std::string where = dims({{"n", n}});
    expect_within("sum_squares partials" + where, get(t_part), ref, bound);
    for (const Tensor* t : {&t_x, &t_part}) expect_guards("sum_squares" + where, *t);
    free_tensors();
  }
}

// --- bf16 storage (block_ops.h's bf16 section) against simd/scalar/bf16_table.cpp's semantics:
// bf16 operands widened exactly, the fp32 math, bf16 outputs rounded once at the end. The
// references run in double from the same bf16 inputs. The bf16 roundings sit at the same points
// on both sides, so:
//   * an fp32 output is held to the fp32 op's bound above, computed from the widened operands (a
//     product of two bf16 values is exact in fp32, which those bounds do not even use);
//   * a bf16 output y_bf = bf16(y_dev) with |y_dev - y| <= bound (y the exact value): rounding to
//     nearest is monotone, so bf16(y - bound) <= y_bf <= bf16(y + bound). Where the bound is below
//     half a bf16 ulp (2^-9 relative; everywhere but GELU's negative tail, x < -4, where 1 + tanh
//     cancels and the fp32 result itself keeps few correct bits) that interval is bf16(y) alone,
//     or bf16(y) and its neighbour when y_dev and y straddle a rounding midpoint: the device and
//     the reference's bf16(fl32(y)) then differ by at most one bf16 ulp.

// x rounded to the nearest bf16, ties to even, directly from the double (no fp32 step, which could
// round twice): 8 significand bits, spacing 2^(e-8) for x in [2^(e-1), 2^e), 2^-133 below 2^-126.
double round_bf16(double x) {
  if (x == 0 || !std::isfinite(x)) return x;
  int e;
  std::frexp(x, &e);
  const double q = std::ldexp(1.0, std::max(e - 1, -126) - 7);
  return std::nearbyint(x / q) * q;
}

std::vector<bf16> bf16_of(const std::vector<float>& v) {
  return to_bf16_vector(v.data(), v.size());
}
std::vector<double> widen_bf16(const std::vector<bf16>& v) {
  std::vector<double> r(v.size());
  for (size_t i = 0; i < v.size(); ++i) r[i] = bf16_to_float(v[i]);
  return r;
}
// fp32 values rounded to bf16 (the "rounded on load" operands), exactly, as doubles.
std::vector<double> widen_rounded(const std::vector<float>& v) { return widen_bf16(bf16_of(v)); }

// Expects every bf16 got[i] within [bf16(ref - bound), bf16(ref + bound)] (see above).
void expect_bf16_within(const std::string& what, const std::vector<bf16>& got,
                        const std::vector<double>& ref, const std::vector<double>& bound) {
  ASSERT_EQ(got.size(), ref.size()) << what;
  ASSERT_EQ(got.size(), bound.size()) << what;
  size_t failures = 0, first = 0, off_nearest = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double g = bf16_to_float(got[i]);
    const double lo = round_bf16(ref[i] - bound[i]), hi = round_bf16(ref[i] + bound[i]);
    if (!(lo <= g && g <= hi)) failures += failures == 0 ? (first = i, 1) : 1;  // NaN fails too
    off_nearest += g != round_bf16(ref[i]);
  }
  EXPECT_EQ(failures, 0u) << what << ": first failing element " << first << " got "
                          << bf16_to_float(got[first]) << ", reference " << ref[first] << " (bf16 "
                          << round_bf16(ref[first]) << "), bound " << bound[first];
  if (off_nearest) {
    std::printf("%s: %zu of %zu elements differ from bf16(reference), within the interval\n",
                what.c_str(), off_nearest, got.size());
  }
}

TEST_F(VulkanBlockOps, DeviceReportsBf16Storage) {
  EXPECT_EQ(kernels_->available(vk::Kernel::kGemmHH), dev_->bf16_storage());
  EXPECT_EQ(kernels_->available(vk::Kernel::kToBf16), dev_->bf16_storage());
  std::printf("device %s: storageBuffer16BitAccess %s\n", dev_->name(),
              dev_->bf16_storage() ? "on" : "off");
  if (dev_->bf16_storage()) return;
  Tensor& t = tensor(std::vector<float>(4, 0.0f), 1);
  try {
    ops_->to_bf16(cb_, t.ref(), t.ref(), 4);
    ADD_FAILURE() << "to_bf16 ran without 16-bit storage";
  } catch (const vk::VulkanError& e) {
    EXPECT_NE(std::string(e.what()).find("storageBuffer16BitAccess"), std::string::npos)
        << e.what();
  }
}

// Skips a bf16 test on a device without 16-bit storage (DeviceReportsBf16Storage checks the
// refusal there).
#define SKIP_WITHOUT_BF16()                                             \
  if (!dev_->bf16_storage()) {                                          \
    GTEST_SKIP() << dev_->name() << " has no storageBuffer16BitAccess"; \
  }

// Bit for bit float_to_bf16 on ties (both parities), the values either side of a tie, subnormals,
// the largest finite float (rounds to infinity), infinities, signed zeros, NaNs (signalling ones
// get their quiet bit, the sign kept), then random bit patterns (every exponent).
TEST_F(VulkanBlockOps, ToBf16BitExact) {
  SKIP_WITHOUT_BF16();
  std::vector<uint32_t> bits = {
      0x3f808000, 0x3f818000, 0x3f807fff, 0x3f808001, 0xbf808000, 0xbf818000,   // ties, neighbours
      0x00008000, 0x00018000, 0x00007fff, 0x0000ffff, 0x00000001, 0x807fffff,   // subnormals
      0x007fffff, 0x00800000, 0x7f7fffff, 0xff7fffff, 0x7f7f7fff, 0x7f7f8000,   // edges, overflow
      0x7f800000, 0xff800000, 0x00000000, 0x80000000,                           // inf, zero
      0x7f800001, 0xff800001, 0x7fc00000, 0xffffffff, 0x7fbfffff, 0x7f808000};  // NaNs
  std::mt19937 rng(5);
  while (bits.size() < 70001) bits.push_back(uint32_t(rng()));
  std::vector<float> x(bits.size());
  std::memcpy(x.data(), bits.data(), bits.size() * sizeof(float));
  for (const size_t n : {size_t(1), size_t(3), bits.size()}) {
    const std::vector<float> in(x.begin(), x.begin() + ptrdiff_t(n));
    Tensor& t_in = tensor(in, 3);
    Tensor& t_out = tensor_bf16(std::vector<bf16>(n, 0x7fc1), 5);
    run([&](VkCommandBuffer cb) { ops_->to_bf16(cb, t_out.ref(), t_in.ref(), uint32_t(n)); });
    const std::vector<bf16> got = get_bf16(t_out);
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < n; ++i) {
      if (got[i] != float_to_bf16(in[i])) bad += bad == 0 ? (first = i, 1) : 1;
      // The test's own double rounding agrees with float_to_bf16 on finite values that stay finite.
      if (std::isfinite(in[i]) && std::isfinite(bf16_to_float(float_to_bf16(in[i])))) {
        ASSERT_EQ(round_bf16(in[i]), bf16_to_float(float_to_bf16(in[i]))) << bits[i];
      }
    }
    EXPECT_EQ(bad, 0u) << "to_bf16 n=" << n << ": first mismatch at " << first << ", bits 0x"
                       << std::hex << bits[first] << " gave 0x" << got[first] << ", expected 0x"
                       << float_to_bf16(in[first]);
    expect_guards("to_bf16 in", t_in);
    expect_guards("to_bf16 out", t_out);
    free_tensors();
  }
}

// matmul_*_bf16: bf16 inp and weight; dout fp32 (values that bf16 does not hold), rounded to bf16
// for the products, fp32 for dbias. Shapes of kMatShapes (OC = 40000 splits dinp's sum in two);
// odd offsets put bf16 tensors in the middle of 32-bit words.
TEST_F(VulkanBlockOps, MatmulBf16ForwardAndBackward) {
  SKIP_WITHOUT_BF16();
  unsigned seed = 101;
  for (const MatShape& s : kMatShapes) {
    for (int variant = 0; variant < 2; ++variant) {
      const bool has_bias = variant == 0, accumulate = variant == 0;
      const size_t N = s.N, C = s.C, OC = s.OC;
      Random rnd(seed++);
      const std::vector<bf16> inp = bf16_of(rnd.normal(N * C)),
                              w = bf16_of(rnd.normal(OC * C, 0, 0.5));
      const std::vector<float> b = rnd.normal(OC), dout = rnd.normal(N * OC),
                               dinp0 = rnd.normal(N * C), dw0 = rnd.normal(OC * C),
                               db0 = rnd.normal(OC);
      Tensor& t_inp = tensor_bf16(inp, 3);
      Tensor& t_w = tensor_bf16(w, 5);
      Tensor& t_b = tensor(b, 7);
      Tensor& t_out = tensor(std::vector<float>(N * OC, NAN), 11);
      Tensor& t_dout = tensor(dout, 13);
      Tensor& t_dinp = tensor(accumulate ? dinp0 : std::vector<float>(N * C, NAN), 17);
      Tensor& t_dw = tensor(dw0, 19);
      Tensor& t_db = tensor(db0, 23);
      run([&](VkCommandBuffer cb) {
        ops_->matmul_forward_bf16(cb, t_out.ref(), t_inp.ref(), t_w.ref(), t_b.ref(), has_bias, s.N,
                                  s.C, s.OC);
        ops_->matmul_backward_input_bf16(cb, t_dinp.ref(), t_dout.ref(), t_w.ref(), s.N, s.C, s.OC,
                                         accumulate);
        ops_->matmul_backward_weight_bf16(cb, t_dw.ref(), t_db.ref(), has_bias, t_dout.ref(),
                                          t_inp.ref(), s.N, s.C, s.OC);
      });
      const std::string where = " bf16" + dims({{"N", N}, {"C", C}, {"OC", OC}}) +
                                (has_bias ? " bias, +=" : " no bias, =");
      const MatmulReference r =
          matmul_reference(widen_bf16(inp), widen_bf16(w), widen(b), widen_rounded(dout),
                           widen(dout), dinp0, dw0, db0, has_bias, accumulate, s);
      expect_within("matmul out" + where, get(t_out), r.out, r.out_b);
      expect_within("matmul dinp" + where, get(t_dinp), r.dinp, r.dinp_b);
      expect_within("matmul dweight" + where, get(t_dw), r.dw, r.dw_b);
      if (has_bias) {
        expect_within("matmul dbias" + where, get(t_db), r.db, r.db_b);
      } else {
        expect_identical("matmul dbias untouched" + where, get(t_db), db0);
      }
      for (const Tensor* t : {&t_inp, &t_w, &t_b, &t_out, &t_dout, &t_dinp, &t_dw, &t_db})
        expect_guards("matmul" + where, *t);
      free_tensors();
    }
  }
}

// gemm_bf16 in the head's form, for every (a_type, b_type): C = logits (M rows of Vp) at the
// window of columns [lo, lo + N), B(k,n) = table[lo + n, k] (rows of a vocabulary piece), "=" and
// "+="; the columns outside the window keep their values. Bound gamma(K + 1) (|c0| + sum |a b|)
// with a and b the values as read (fp32, fp32 rounded to bf16, bf16 widened).
TEST_F(VulkanBlockOps, GemmBf16EveryElemPairInTheHeadsLayout) {
  SKIP_WITHOUT_BF16();
  using Elem = BlockOps::Elem;
  const Elem elems[] = {Elem::kF32, Elem::kF32AsBf16, Elem::kBf16};
  const char* names[] = {"f32", "f32 as bf16", "bf16"};
  const uint32_t M = 37, K = 45, Vp = 70, lo = 13, N = 29;  // the window: columns [13, 42)
  for (int ai = 0; ai < 3; ++ai) {
    for (int bi = 0; bi < 3; ++bi) {
      for (const bool accumulate : {false, true}) {
        Random rnd(unsigned(ai * 7 + bi * 3 + accumulate));
        const std::vector<float> a = rnd.normal(size_t(M) * K), table = rnd.normal(size_t(Vp) * K),
                                 c0 = rnd.normal(size_t(M) * Vp);
        Tensor& t_a = elems[ai] == Elem::kBf16 ? tensor_bf16(bf16_of(a), 5) : tensor(a, 5);
        Tensor& t_b = elems[bi] == Elem::kBf16 ? tensor_bf16(bf16_of(table), 3) : tensor(table, 3);
        Tensor& t_c = tensor(c0, 9);
        run([&](VkCommandBuffer cb) {
          ops_->gemm_bf16(cb, t_c.ref().at(lo), t_a.ref(), elems[ai], t_b.ref().at(size_t(lo) * K),
                          elems[bi], M, N, K, K, 1, 1, K, Vp, accumulate ? vk::kGemmAccumulate : 0);
        });
        const std::vector<double> ad = elems[ai] == Elem::kF32 ? widen(a) : widen_rounded(a),
                                  bd =
                                      elems[bi] == Elem::kF32 ? widen(table) : widen_rounded(table);
        std::vector<double> ref = widen(c0), bound(ref.size(), 0.0);
        for (size_t m = 0; m < M; ++m) {
          for (size_t n = lo; n < lo + N; ++n) {
            double sum = accumulate ? double(c0[m * Vp + n]) : 0.0;
            double mag = std::fabs(sum);
            for (size_t k = 0; k < K; ++k) {
              sum += ad[m * K + k] * bd[n * K + k];
              mag += std::fabs(ad[m * K + k] * bd[n * K + k]);
            }
            ref[m * Vp + n] = sum, bound[m * Vp + n] = gamma(double(K) + 1) * mag;
          }
        }
        const std::string where = std::string(" gemm_bf16 A ") + names[ai] + ", B " + names[bi] +
                                  (accumulate ? ", +=" : ", =");
        expect_within("logits" + where, get(t_c), ref, bound);  // outside the window: exact
        for (const Tensor* t : {&t_a, &t_b, &t_c}) expect_guards(where, *t);
        free_tensors();
      }
    }
  }
  Tensor& t = tensor(std::vector<float>(8, 0.0f), 1);
  EXPECT_THROW(ops_->gemm_bf16(cb_, t.ref(), t.ref(), Elem::kBf16, t.ref(), Elem::kBf16, 1, 1, 1, 1,
                               1, 1, 1, 1, vk::kGemmBias),
               vk::VulkanError);
}

// layernorm_forward_bf16: fp32 statistics within the fp32 bounds, the output within the bf16
// interval of the fp32 output's bound.
TEST_F(VulkanBlockOps, LayerNormForwardBf16Output) {
  SKIP_WITHOUT_BF16();
  for (const LnShape sh : kLnShapes) {
    const size_t N = sh.N, C = sh.C;
    Random rnd(sh.C * 5 + sh.N);
    const std::vector<float> x = rnd.normal(N * C, 0.5, 2), w = rnd.normal(C, 1, 0.3),
                             b = rnd.normal(C, 0, 0.3);
    Tensor& t_x = tensor(x, 3);
    Tensor& t_w = tensor(w, 1);
    Tensor& t_b = tensor(b, 2);
    Tensor& t_y = tensor_bf16(std::vector<bf16>(N * C, 0x7fc1), 5);
    Tensor& t_mean = tensor(std::vector<float>(N, NAN), 7);
    Tensor& t_rstd = tensor(std::vector<float>(N, NAN), 11);
    run([&](VkCommandBuffer cb) {
      ops_->layernorm_forward_bf16(cb, t_y.ref(), t_mean.ref(), t_rstd.ref(), t_x.ref(), t_w.ref(),
                                   t_b.ref(), sh.N, sh.C);
    });
    const LayerNormReference f = layernorm_reference(widen(x), widen(w), widen(b), N, C);
    const std::string where = " bf16" + dims({{"N", N}, {"C", C}});
    expect_bf16_within("layernorm out" + where, get_bf16(t_y), f.y, f.y_b);
    expect_within("layernorm mean" + where, get(t_mean), f.mean, f.mean_b);
    expect_within("layernorm rstd" + where, get(t_rstd), f.rstd, f.rstd_b);
    for (const Tensor* t : {&t_x, &t_w, &t_b, &t_y, &t_mean, &t_rstd})
      expect_guards("layernorm" + where, *t);
    free_tensors();
  }
}

// attention_*_bf16: bf16 qkv; att fp32 within the fp32 bounds, out within the bf16 interval of
// the fp32 out's bound; dqkv from the fp32 att (the reference's, rounded to fp32) and fp32 dout
// within the fp32 backward bounds. The backward uses D = sum_u a_u da_u as the fp32 op does (the
// CPU's flash backward takes D = dout . out from the bf16 out instead).
TEST_F(VulkanBlockOps, AttentionBf16ForwardAndBackward) {
  SKIP_WITHOUT_BF16();
  for (const AttnShape sh : kAttnShapes) {
    const size_t B = sh.B, T = sh.T, C = sh.C, NH = sh.NH, C3 = 3 * C;
    Random rnd(sh.C * 11 + sh.T);
    const std::vector<bf16> qkv = bf16_of(rnd.normal(B * T * C3));
    const std::vector<float> dout = rnd.normal(B * T * C);
    Tensor& t_qkv = tensor_bf16(qkv, 9);
    Tensor& t_out = tensor_bf16(std::vector<bf16>(B * T * C, 0x7fc1), 3);
    Tensor& t_att = tensor(std::vector<float>(B * NH * T * T, NAN), 21);
    run([&](VkCommandBuffer cb) {
      ops_->attention_forward_bf16(cb, t_out.ref(), t_att.ref(), t_qkv.ref(), sh.B, sh.T, sh.C,
                                   sh.NH);
    });
    const std::vector<double> qd = widen_bf16(qkv), dd = widen(dout);
    std::vector<double> out_r(B * T * C), att_r(B * NH * T * T);
    scalar::attention_forward<double>(out_r.data(), att_r.data(), qd.data(), int(B), int(T), int(C),
                                      int(NH));
    const AttentionForwardBounds fb =
        attention_forward_bounds(qd, att_r, int(B), int(T), int(C), int(NH), exp_ulps, kDivRel);
    const std::string where = " bf16" + dims({{"B", B}, {"T", T}, {"C", C}, {"NH", NH}});
    expect_bf16_within("attention out" + where, get_bf16(t_out), out_r, fb.out);
    expect_within("attention att" + where, get(t_att), att_r, fb.att);

    const std::vector<float> att_in(att_r.begin(), att_r.end());
    Tensor& t_att_in = tensor(att_in, 2);
    Tensor& t_dout = tensor(dout, 6);
    Tensor& t_dqkv = tensor(std::vector<float>(B * T * C3, NAN), 15);
    Tensor& t_ds = tensor(std::vector<float>(B * NH * T * T, NAN), 1);
    run([&](VkCommandBuffer cb) {
      ops_->attention_backward_bf16(cb, t_dqkv.ref(), t_ds.ref(), t_dout.ref(), t_qkv.ref(),
                                    t_att_in.ref(), sh.B, sh.T, sh.C, sh.NH);
    });
    const std::vector<double> ad = widen(att_in);
    std::vector<double> dqkv_r(B * T * C3), scratch(B * NH * T);
    scalar::attention_backward<double>(dqkv_r.data(), scratch.data(), dd.data(), qd.data(),
                                       ad.data(), int(B), int(T), int(C), int(NH));
    expect_within("attention dqkv" + where, get(t_dqkv), dqkv_r,
                  attention_backward_bounds(qd, dd, ad, int(B), int(T), int(C), int(NH)));
    for (const Tensor* t : {&t_qkv, &t_out, &t_att, &t_att_in, &t_dout, &t_dqkv, &t_ds})
      expect_guards("attention" + where, *t);
    free_tensors();
  }
}

// flash_attention_*_bf16 (simd/scalar/bf16_table.cpp's semantics): bf16 qkv widened exactly; out
// within the bf16 interval of the fp32 out's bound, lse fp32 within its fp32 bound; the backward
// from the reference's out rounded to bf16 (D from it, widened exactly), its lse rounded to fp32
// and the fp32 dout, within the fp32 backward bounds of those operands.
TEST_F(VulkanBlockOps, FlashAttentionBf16ForwardAndBackward) {
  SKIP_WITHOUT_BF16();
  for (const AttnShape sh : kFlashShapes) {
    const size_t B = sh.B, T = sh.T, C = sh.C, NH = sh.NH, C3 = 3 * C;
    Random rnd(sh.C * 17 + sh.T);
    const std::vector<bf16> qkv = bf16_of(rnd.normal(B * T * C3));
    const std::vector<float> dout = rnd.normal(B * T * C);
    Tensor& t_qkv = tensor_bf16(qkv, 9);
    Tensor& t_out = tensor_bf16(std::vector<bf16>(B * T * C, 0x7fc1), 3);
    Tensor& t_lse = tensor(std::vector<float>(B * NH * T, NAN), 7);
    run([&](VkCommandBuffer cb) {
      ops_->flash_attention_forward_bf16(cb, t_out.ref(), t_lse.ref(), t_qkv.ref(), sh.B, sh.T,
                                         sh.C, sh.NH);
    });
    const std::vector<double> qd = widen_bf16(qkv), dd = widen(dout);
    std::vector<double> out_r(B * T * C), lse_r(B * NH * T);
    scalar::flash_attention_forward<double>(out_r.data(), lse_r.data(), qd.data(), int(B), int(T),
                                            int(NH), int(NH), int(C / NH),
                                            AttentionOptions{});  // multi-head
    const FlashForwardBounds fb = flash_forward_bounds_vk(qd, lse_r, B, T, C, NH);
    const std::string where = " bf16" + dims({{"B", B}, {"T", T}, {"C", C}, {"NH", NH}});
    expect_bf16_within("flash out" + where, get_bf16(t_out), out_r, fb.out);
    expect_within("flash lse" + where, get(t_lse), lse_r, fb.lse);

    const std::vector<bf16> out_in = bf16_of(std::vector<float>(out_r.begin(), out_r.end()));
    const std::vector<float> lse_in(lse_r.begin(), lse_r.end());
    Tensor& t_out_in = tensor_bf16(out_in, 1);
    Tensor& t_lse_in = tensor(lse_in, 5);
    Tensor& t_dout = tensor(dout, 6);
    Tensor& t_dqkv = tensor(std::vector<float>(B * T * C3, NAN), 15);
    run([&](VkCommandBuffer cb) {
      ops_->flash_attention_backward_bf16(cb, t_dqkv.ref(), t_dout.ref(), t_out_in.ref(),
                                          t_qkv.ref(), t_lse_in.ref(), sh.B, sh.T, sh.C, sh.NH);
    });
    const std::vector<double> yd = widen_bf16(out_in), ld = widen(lse_in);
    std::vector<double> dqkv_r(B * T * C3);
    scalar::flash_attention_backward<double>(dqkv_r.data(), dd.data(), yd.data(), qd.data(),
                                             ld.data(), int(B), int(T), int(NH), int(NH),
                                             int(C / NH), AttentionOptions{});
    expect_within("flash dqkv" + where, get(t_dqkv), dqkv_r,
                  flash_backward_bounds_vk(qd, dd, yd, ld, B, T, C, NH));
    for (const Tensor* t : {&t_qkv, &t_out, &t_lse, &t_out_in, &t_lse_in, &t_dout, &t_dqkv})
      expect_guards("flash attention" + where, *t);
    free_tensors();
  }
}

// gelu_forward_bf16 (bf16 in, bf16 out: the bf16 interval of the fp32 bound) and
// gelu_backward_bf16 (bf16 inp, fp32 dout and dinp: the fp32 bound), in place as well.
TEST_F(VulkanBlockOps, GeluBf16ForwardAndBackwardInPlace) {
  SKIP_WITHOUT_BF16();
  for (const size_t n : kLengths) {
    Random rnd(unsigned(n) + 17);
    std::vector<float> xf = rnd.uniform(n, -6, 6);
    xf[0] = 0.0f;
    if (n > 2) xf[n - 1] = 15.0f, xf[n / 2] = -15.0f;
    const std::vector<bf16> x = bf16_of(xf);
    const std::vector<float> dout = rnd.normal(n);
    Tensor& t_x = tensor_bf16(x, 3);
    Tensor& t_y = tensor_bf16(std::vector<bf16>(n, 0x7fc1), 1);
    Tensor& t_dout = tensor(dout, 7);
    Tensor& t_dx = tensor(std::vector<float>(n, NAN), 1);
    Tensor& t_inplace = tensor(dout, 9);
    run([&](VkCommandBuffer cb) {
      ops_->gelu_forward_bf16(cb, t_y.ref(), t_x.ref(), uint32_t(n));
      ops_->gelu_backward_bf16(cb, t_dx.ref(), t_x.ref(), t_dout.ref(), uint32_t(n));
      ops_->gelu_backward_bf16(cb, t_inplace.ref(), t_x.ref(), t_inplace.ref(), uint32_t(n));
    });
    std::vector<double> y_r(n), dx_r(n), y_b(n), dx_b(n);
    const std::vector<double> xd = widen_bf16(x), dd = widen(dout);
    scalar::gelu_forward<double>(y_r.data(), xd.data(), n);
    scalar::gelu_backward<double>(dx_r.data(), xd.data(), dd.data(), n);
    for (size_t i = 0; i < n; ++i) {
      const GeluBounds g = gelu_bounds(xd[i]);
      y_b[i] = g.forward;
      dx_b[i] = std::fabs(dd[i]) * g.backward_per_dout;
    }
    const std::string where = " bf16" + dims({{"n", n}});
    expect_bf16_within("gelu forward" + where, get_bf16(t_y), y_r, y_b);
    expect_within("gelu backward" + where, get(t_dx), dx_r, dx_b);
    expect_identical("gelu backward in place" + where, get(t_inplace), get(t_dx));
    for (const Tensor* t : {&t_x, &t_y, &t_dout, &t_dx, &t_inplace})
      expect_guards("gelu" + where, *t);
    free_tensors();
  }
}

// Refusals name the op and the shape.
TEST_F(VulkanBlockOps, BadShapesAreRefusedWithAMessage) {
  Tensor& t = tensor(std::vector<float>(64, 0.0f), 1);
  try {
    ops_->attention_forward(cb_, t.ref(), t.ref(), t.ref(), 1, 2, 10, 3);
    ADD_FAILURE() << "C not a multiple of NH was accepted";
  } catch (const vk::VulkanError& e) {
    EXPECT_NE(std::string(e.what()).find("attention_forward"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("multiple of NH"), std::string::npos) << e.what();
  }
  EXPECT_THROW(ops_->softmax_xent_forward(cb_, t.ref(), t.ref(), t.ref(), t.ref(), 1, 9, 8),
               vk::VulkanError);
  try {
    ops_->flash_attention_forward(cb_, t.ref(), t.ref(), t.ref(), 1, 2, 258, 2);
    ADD_FAILURE() << "a head size of 129 was accepted";
  } catch (const vk::VulkanError& e) {
    EXPECT_NE(std::string(e.what()).find("flash_attention_forward"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("head size"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace llmcpu::simd_test
