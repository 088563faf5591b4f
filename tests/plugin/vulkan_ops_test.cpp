// Every op of the Vulkan plugin (loaded with dlopen, as the engine does) against the scalar
// reference kernels of simd/scalar/ run in double, on random inputs of ragged sizes, with error
// bounds derived from fp32 rounding (tests/simd/error_bounds.h): matmul forward and backward
// through uploaded and through resident weights (bit-identical), sums over 50000 terms, a weight
// larger than maxStorageBufferRange (GPT-2's wte, 50257x768), attention forward and backward, the
// offload report (bytes from the shapes; times recomputed from the timestamp spans the plugin
// prints in verbose mode) and the order of the copy-compute pipeline. Skipped, with a message, only
// where no Vulkan device exists at all.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "core/plugin_abi.h"
#include "simd/scalar/attention.h"
#include "simd/scalar/matmul.h"
#include "tests/simd/attention_bounds.h"
#include "tests/simd/error_bounds.h"

namespace llmcpu::simd_test {
namespace {

// Vulkan's precision rules for shaders: exp(x) within 3 + 2|x| ulp, 1/x within 2.5 ulp.
double exp_ulps(double x) { return 3 + 2 * std::fabs(x); }
constexpr double kRecipUlps = 2.5;

llmcpu_offload_report fresh_report() {
  llmcpu_offload_report r{};
  r.struct_size = sizeof r;
  return r;
}

// One stage of one chunk as the device's timestamps placed it: the verbose log's
// "vulkan: spans (ns): U0 a b C0 a b D0 a b ..." line, one per run, in nanoseconds.
struct Span {
  char stage;  // 'U'pload, 'C'ompute, 'D'ownload
  size_t chunk;
  double a, b;
};
std::vector<std::vector<Span>> parse_spans(const std::string& log) {
  const std::string tag = "vulkan: spans (ns):";
  std::vector<std::vector<Span>> runs;
  std::istringstream lines(log);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind(tag, 0) != 0) continue;
    std::istringstream in(line.substr(tag.size()));
    runs.emplace_back();
    for (std::string name; in >> name;) {
      Span s{name[0], std::stoul(name.substr(1)), 0, 0};
      in >> s.a >> s.b;
      runs.back().push_back(s);
    }
  }
  return runs;
}

// The report's times redone from the spans, by definition and not by the plugin's algorithm:
// copy and compute are the summed lengths of the upload/download and the compute spans, wall the
// summed extent of each run, hidden the copy time that lies inside some compute span of its run,
// measured on the elementary segments between all the run's span ends (a segment counts once per
// copy span covering it). The plugin prints its doubles with 17 digits, so both sides subtract the
// same values; they differ only in how the at most k = 4 * spans + 4 roundings of double
// arithmetic (sums of at most 2 * spans terms, one subtraction per term, the ns -> ms scaling and
// the division) fall, each relative 2^-53 of the figure: the bound is gamma_53(k) times it.
void expect_report_matches_spans(const std::string& log, const llmcpu_offload_report& r) {
  double copy = 0, compute = 0, wall = 0, hidden = 0;
  size_t count = 0;
  for (const std::vector<Span>& run : parse_spans(log)) {
    std::vector<double> ends;
    for (const Span& s : run) {
      EXPECT_LE(s.a, s.b) << s.stage << s.chunk;
      (s.stage == 'C' ? compute : copy) += s.b - s.a;
      ends.push_back(s.a), ends.push_back(s.b);
    }
    count += run.size();
    if (run.empty()) continue;
    std::sort(ends.begin(), ends.end());
    wall += ends.back() - ends.front();
    for (size_t k = 0; k + 1 < ends.size(); ++k) {
      const double x0 = ends[k], x1 = ends[k + 1];
      int copies = 0;
      bool computing = false;
      for (const Span& s : run) {
        if (!(s.a <= x0 && x1 <= s.b)) continue;
        if (s.stage == 'C') {
          computing = true;
        } else {
          ++copies;
        }
      }
      if (computing) hidden += copies * (x1 - x0);
    }
  }
  const double u = 0x1p-53, k = 4.0 * double(count) + 4;
  const double gamma53 = k * u / (1 - k * u);
  EXPECT_NEAR(r.copy_ms, copy * 1e-6, gamma53 * copy * 1e-6) << log;
  EXPECT_NEAR(r.compute_ms, compute * 1e-6, gamma53 * compute * 1e-6) << log;
  EXPECT_NEAR(r.wall_ms, wall * 1e-6, gamma53 * wall * 1e-6) << log;
  const double fraction = copy > 0 ? hidden / copy : 0.0;
  EXPECT_NEAR(r.hidden_fraction, fraction, 2 * gamma53) << "hidden " << hidden << " ns of " << copy;
}

class VulkanOps : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // Three chunks for every op, whatever its size (unless set): the pipeline has chunks in flight.
    setenv("LLMCPU_VK_CHUNKS", "3", 0);
    handle_ = dlopen(LLMCPU_VULKAN_PLUGIN, RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(handle_, nullptr) << dlerror();
    auto entry = reinterpret_cast<llmcpu_plugin_query_fn>(dlsym(handle_, LLMCPU_PLUGIN_ENTRY_NAME));
    ASSERT_NE(entry, nullptr) << LLMCPU_PLUGIN_ENTRY_NAME << " not exported";
    api_ = entry(LLMCPU_PLUGIN_ABI_VERSION);
    ASSERT_NE(api_, nullptr);
    EXPECT_EQ(entry(LLMCPU_PLUGIN_ABI_VERSION + 1), nullptr) << "another ABI version is refused";
    ASSERT_EQ(api_->abi_version, LLMCPU_PLUGIN_ABI_VERSION);
    ASSERT_EQ(api_->struct_size, sizeof(llmcpu_plugin_api));
    char err[512] = "";
    llmcpu_plugin_open_args args{sizeof(llmcpu_plugin_open_args), -1, 1, 0, err, sizeof err};
    testing::internal::CaptureStderr();
    status_ = api_->open(&args, &p_);
    open_log_ = testing::internal::GetCapturedStderr();
    open_error_ = err;
  }
  static void TearDownTestSuite() {
    if (p_) api_->close(p_);
    p_ = nullptr;
  }
  void SetUp() override {
    if (status_ == LLMCPU_PLUGIN_NO_DEVICE) GTEST_SKIP() << "no Vulkan device: " << open_error_;
    ASSERT_EQ(status_, LLMCPU_PLUGIN_OK) << open_error_;
    llmcpu_offload_report r = fresh_report();
    ASSERT_EQ(api_->report(p_, &r), LLMCPU_PLUGIN_OK);  // start counting anew
  }
  static void ok(int status) { ASSERT_EQ(status, LLMCPU_PLUGIN_OK) << api_->last_error(p_); }
  // From open()'s verbose line: whether the device gives timestamps on both queues, and whether
  // copies and compute share one queue (timestamps are comparable only within a queue).
  static bool timestamps() { return open_log_.find("; timestamps on") != std::string::npos; }
  static bool one_queue() { return open_log_.find(", one queue for all;") != std::string::npos; }

  static inline void* handle_ = nullptr;
  static inline const llmcpu_plugin_api* api_ = nullptr;
  static inline llmcpu_plugin* p_ = nullptr;
  static inline int status_ = -1;
  static inline std::string open_error_, open_log_;
};

struct Shape {
  size_t N;
  int C, OC;
};
// Ragged in every dimension against the 64x64 output tiles and 16-wide k slices; C = 1; a reduction
// over C longer than a tile; N not a multiple of the three chunks.
constexpr Shape kShapes[] = {{1, 1, 1},     {3, 5, 7},      {17, 33, 29}, {70, 96, 131},
                             {33, 769, 13}, {65, 130, 389}, {7, 1, 65},   {130, 64, 64}};

struct MatmulData {
  std::vector<float> inp, weight, bias, dout, dweight0, dbias0;
};
MatmulData make_data(const Shape& s, unsigned seed) {
  Random rnd(seed);
  const size_t N = s.N, C = size_t(s.C), OC = size_t(s.OC);
  return {rnd.normal(N * C),  rnd.normal(OC * C, 0, 0.5), rnd.normal(OC),
          rnd.normal(N * OC), rnd.normal(OC * C),         rnd.normal(OC)};
}

// The bounds of tests/simd/test_simd_matmul.cpp: a sum of n terms errs by gamma(n) sum |terms|.
void check_matmul_results(const std::string& where, const Shape& s, const MatmulData& d,
                          const float* weight, bool with_bias, bool with_dinp,
                          const std::vector<float>& out, const std::vector<float>& dinp,
                          const std::vector<float>& dweight, const std::vector<float>& dbias) {
  const size_t N = s.N, C = size_t(s.C), OC = size_t(s.OC);
  const std::vector<double> x = widen(d.inp), b = widen(d.bias), dy = widen(d.dout);
  const std::vector<double> w(weight, weight + OC * C);
  std::vector<double> ref(N * OC), bound(N * OC);
  scalar::matmul_forward<double>(ref.data(), x.data(), w.data(), with_bias ? b.data() : nullptr, N,
                                 s.C, s.OC);
  for (size_t n = 0; n < N; ++n) {
    for (size_t o = 0; o < OC; ++o) {
      double mag = with_bias ? std::fabs(b[o]) : 0.0;
      for (size_t i = 0; i < C; ++i) mag += std::fabs(x[n * C + i] * w[o * C + i]);
      bound[n * OC + o] = gamma(double(C) + 1) * mag;
    }
  }
  expect_within("forward " + where, out, ref, bound);

  std::vector<double> dinp_r(N * C), dw_r = widen(d.dweight0), db_r = widen(d.dbias0);
  scalar::matmul_backward<double>(dinp_r.data(), dw_r.data(), db_r.data(), dy.data(), x.data(),
                                  w.data(), N, s.C, s.OC);
  if (with_dinp) {
    std::vector<double> bnd(N * C);
    for (size_t n = 0; n < N; ++n) {
      for (size_t i = 0; i < C; ++i) {
        double mag = 0;
        for (size_t o = 0; o < OC; ++o) mag += std::fabs(dy[n * OC + o] * w[o * C + i]);
        bnd[n * C + i] = gamma(double(OC)) * mag;
      }
    }
    expect_within("dinp " + where, dinp, dinp_r, bnd);
  }
  std::vector<double> dw_b(OC * C), db_b(OC);
  for (size_t o = 0; o < OC; ++o) {
    double mb = std::fabs(double(d.dbias0[o]));
    for (size_t n = 0; n < N; ++n) mb += std::fabs(dy[n * OC + o]);
    db_b[o] = gamma(double(N) + 1) * mb;
    for (size_t i = 0; i < C; ++i) {
      double mag = std::fabs(double(d.dweight0[o * C + i]));
      for (size_t n = 0; n < N; ++n) mag += std::fabs(dy[n * OC + o] * x[n * C + i]);
      dw_b[o * C + i] = gamma(double(N) + 1) * mag;
    }
  }
  expect_within("dweight " + where, dweight, dw_r, dw_b);
  if (with_bias) {
    expect_within("dbias " + where, dbias, db_r, db_b);
  } else {
    expect_identical("dbias untouched " + where, dbias, d.dbias0);
  }
}

struct MatmulOut {
  std::vector<float> out, dinp, dweight, dbias;
};
MatmulOut run_matmul(const llmcpu_plugin_api* api, llmcpu_plugin* p, const Shape& s,
                     const MatmulData& d, const float* weight, const float* bias, bool with_dinp) {
  const size_t N = s.N, C = size_t(s.C), OC = size_t(s.OC);
  MatmulOut r{std::vector<float>(N * OC, NAN), std::vector<float>(N * C, NAN), d.dweight0,
              d.dbias0};
  EXPECT_EQ(api->matmul_forward(p, r.out.data(), d.inp.data(), weight, bias, N, s.C, s.OC),
            LLMCPU_PLUGIN_OK)
      << api->last_error(p);
  EXPECT_EQ(api->matmul_backward(p, with_dinp ? r.dinp.data() : nullptr, r.dweight.data(),
                                 bias ? r.dbias.data() : nullptr, d.dout.data(), d.inp.data(),
                                 weight, N, s.C, s.OC),
            LLMCPU_PLUGIN_OK)
      << api->last_error(p);
  return r;
}

std::string name(const Shape& s) {
  return "N=" + std::to_string(s.N) + " C=" + std::to_string(s.C) + " OC=" + std::to_string(s.OC);
}

TEST_F(VulkanOps, MatmulUploadedWeightsRaggedShapes) {
  unsigned seed = 1;
  for (const Shape& s : kShapes) {
    for (int variant = 0; variant < 2; ++variant) {  // with bias and dinp; without either
      const bool with_bias = variant == 0, with_dinp = variant == 0;
      const MatmulData d = make_data(s, seed++);
      const MatmulOut r = run_matmul(api_, p_, s, d, d.weight.data(),
                                     with_bias ? d.bias.data() : nullptr, with_dinp);
      check_matmul_results(name(s) + (with_bias ? " bias" : ""), s, d, d.weight.data(), with_bias,
                           with_dinp, r.out, r.dinp, r.dweight, r.dbias);
    }
  }
}

// Weights inside the registered parameter array (at an odd float offset) are served from the
// resident copy: the same dispatches, so the same bits as through an upload; after the host changes
// them and calls weights_changed, the results follow the new values.
TEST_F(VulkanOps, MatmulResidentWeightsMatchUploadedAndFollowUpdates) {
  const Shape s{45, 70, 150};
  const size_t C = size_t(s.C), OC = size_t(s.OC);
  const MatmulData d = make_data(s, 77);
  std::vector<float> params(3 + OC * C + 5 + OC + 11, 0.25f);
  float* w = params.data() + 3;
  float* b = w + OC * C + 5;
  std::copy(d.weight.begin(), d.weight.end(), w);
  std::copy(d.bias.begin(), d.bias.end(), b);
  ok(api_->set_weights(p_, params.data(), params.size()));
  llmcpu_offload_report r0 = fresh_report();
  ok(api_->report(p_, &r0));
  EXPECT_EQ(r0.bytes_up, params.size() * sizeof(float)) << "set_weights uploads the array";
  const MatmulOut uploaded = run_matmul(api_, p_, s, d, d.weight.data(), d.bias.data(), true);
  llmcpu_offload_report r = fresh_report();
  ok(api_->report(p_, &r));
  const MatmulOut resident = run_matmul(api_, p_, s, d, w, b, true);
  llmcpu_offload_report r2 = fresh_report();
  ok(api_->report(p_, &r2));
  // Uploaded: weight and bias for the forward pass, the weight again for dinp.
  EXPECT_EQ(r.bytes_up - r2.bytes_up, (2 * OC * C + OC) * sizeof(float))
      << "the resident path uploads neither weight nor bias";
  expect_identical("resident out", resident.out, uploaded.out);
  expect_identical("resident dinp", resident.dinp, uploaded.dinp);
  expect_identical("resident dweight", resident.dweight, uploaded.dweight);
  expect_identical("resident dbias", resident.dbias, uploaded.dbias);
  check_matmul_results("resident " + name(s), s, d, w, true, true, resident.out, resident.dinp,
                       resident.dweight, resident.dbias);

  for (size_t i = 0; i < OC * C; ++i) w[i] = -0.5f * w[i] + 0.125f;  // an "optimizer step"
  for (size_t i = 0; i < OC; ++i) b[i] += 1.0f;
  ok(api_->weights_changed(p_));
  MatmulData d2 = d;
  d2.bias.assign(b, b + OC);
  const MatmulOut after = run_matmul(api_, p_, s, d2, w, b, true);
  check_matmul_results("after weights_changed " + name(s), s, d2, w, true, true, after.out,
                       after.dinp, after.dweight, after.dbias);
}

// Sums over 50000 terms, more than llvmpipe (lavapipe) lets one invocation of the GEMM loop over:
// it ends every loop of an invocation, silently, after 65535 iterations in total (Mesa's
// LP_MAX_TGSI_LOOP_ITERATIONS), which this shader reaches at k = 45587. GPT-2's lm_head dinp sums
// over V = 50257 weight rows, in one binding window when C < 736 (gpt2-d2, -d4, -d6); a forward
// over C = 50000 inputs is the same in k.
TEST_F(VulkanOps, MatmulReductionsOverFiftyThousandTerms) {
  unsigned seed = 100;
  for (const Shape& s : {Shape{4, 128, 50257}, Shape{3, 50000, 5}}) {
    const MatmulData d = make_data(s, seed++);
    const MatmulOut r = run_matmul(api_, p_, s, d, d.weight.data(), d.bias.data(), true);
    check_matmul_results(name(s), s, d, d.weight.data(), true, true, r.out, r.dinp, r.dweight,
                         r.dbias);
  }
}

// GPT-2's wte (50257x768 fp32, 147 MiB) is larger than one binding on lavapipe (128 MiB): the
// lm_head forward and backward run in windows of rows, each bound within range, through the
// resident pieces. The reference is computed element by element in double.
TEST_F(VulkanOps, LmHeadWeightLargerThanOneBinding) {
  const size_t N = 5, C = 768, OC = 50257;
  Random rnd(5);
  const std::vector<float> inp = rnd.normal(N * C), dout = rnd.normal(N * OC);
  std::vector<float> wte = rnd.normal(OC * C, 0, 0.5);
  ok(api_->set_weights(p_, wte.data(), wte.size()));
  std::vector<float> out(N * OC, NAN), dinp(N * C, NAN), dweight(OC * C, 0.5f);
  ok(api_->matmul_forward(p_, out.data(), inp.data(), wte.data(), nullptr, N, int(C), int(OC)));
  ok(api_->matmul_backward(p_, dinp.data(), dweight.data(), nullptr, dout.data(), inp.data(),
                           wte.data(), N, int(C), int(OC)));
  size_t bad_out = 0, bad_dinp = 0, bad_dw = 0;
  std::vector<double> dinp_r(N * C, 0.0), dinp_m(N * C, 0.0);
  for (size_t o = 0; o < OC; ++o) {
    const float* w = wte.data() + o * C;
    for (size_t n = 0; n < N; ++n) {
      const float* x = inp.data() + n * C;
      double ref = 0, mag = 0;
      for (size_t i = 0; i < C; ++i)
        ref += double(x[i]) * w[i], mag += std::fabs(double(x[i]) * w[i]);
      if (!(std::fabs(out[n * OC + o] - ref) <= gamma(double(C) + 1) * mag)) ++bad_out;
      const double g = dout[n * OC + o];
      for (size_t i = 0; i < C; ++i)
        dinp_r[n * C + i] += g * w[i], dinp_m[n * C + i] += std::fabs(g * w[i]);
    }
    for (size_t i = 0; i < C; ++i) {
      double ref = 0.5, mag = 0.5;
      for (size_t n = 0; n < N; ++n) {
        ref += double(dout[n * OC + o]) * inp[n * C + i];
        mag += std::fabs(double(dout[n * OC + o]) * inp[n * C + i]);
      }
      if (!(std::fabs(dweight[o * C + i] - ref) <= gamma(double(N) + 1) * mag)) ++bad_dw;
    }
  }
  for (size_t k = 0; k < N * C; ++k) {
    if (!(std::fabs(dinp[k] - dinp_r[k]) <= gamma(double(OC)) * dinp_m[k])) ++bad_dinp;
  }
  EXPECT_EQ(bad_out, 0u) << "lm_head forward elements outside the bound";
  EXPECT_EQ(bad_dinp, 0u) << "lm_head dinp elements outside the bound";
  EXPECT_EQ(bad_dw, 0u) << "lm_head dweight elements outside the bound";
}

struct AttnShape {
  int B, T, C, NH;
};
// Head sizes 1, 3, 12, 64; T = 1; T above the 64 invocations of a row and not a multiple of them.
constexpr AttnShape kAttnShapes[] = {{2, 5, 3, 3},    {1, 17, 15, 5},  {2, 13, 36, 3},
                                     {1, 33, 128, 2}, {3, 1, 24, 2},   {1, 40, 64, 1},
                                     {4, 70, 48, 4},  {2, 131, 128, 2}};

// The bounds of tests/simd/attention_bounds.h, with Vulkan's exp and reciprocal precision.
TEST_F(VulkanOps, AttentionRaggedShapes) {
  for (const AttnShape sh : kAttnShapes) {
    const size_t B = size_t(sh.B), T = size_t(sh.T), C = size_t(sh.C), NH = size_t(sh.NH);
    const size_t C3 = 3 * C;
    Random rnd(sh.C * 7 + sh.T);
    const std::vector<float> qkv = rnd.normal(B * T * C3), dout = rnd.normal(B * T * C);
    std::vector<float> out(B * T * C, NAN), att(B * NH * T * T, NAN);
    ok(api_->attention_forward(p_, out.data(), att.data(), qkv.data(), sh.B, sh.T, sh.C, sh.NH));
    const std::vector<double> qd = widen(qkv), dd = widen(dout);
    std::vector<double> out_r(out.size()), att_r(att.size());
    scalar::attention_forward<double>(out_r.data(), att_r.data(), qd.data(), sh.B, sh.T, sh.C,
                                      sh.NH);
    const AttentionForwardBounds fb = attention_forward_bounds(
        qd, att_r, sh.B, sh.T, sh.C, sh.NH, exp_ulps, kRecipUlps * kUlp);
    const std::string where = " B=" + std::to_string(B) + " T=" + std::to_string(T) +
                              " C=" + std::to_string(C) + " NH=" + std::to_string(NH);
    expect_within("attention out" + where, out, out_r, fb.out);
    expect_within("attention att" + where, att, att_r, fb.att);  // above the diagonal: exactly 0

    // Backward from the reference's att rounded to fp32, on both sides.
    const std::vector<float> att_in(att_r.begin(), att_r.end());
    const std::vector<double> ad = widen(att_in);
    std::vector<float> dqkv(qkv.size(), NAN);
    ok(api_->attention_backward(p_, dqkv.data(), dout.data(), qkv.data(), att_in.data(), sh.B, sh.T,
                                sh.C, sh.NH));
    std::vector<double> dqkv_r(qkv.size()), scratch(B * NH * T);
    scalar::attention_backward<double>(dqkv_r.data(), scratch.data(), dd.data(), qd.data(),
                                       ad.data(), sh.B, sh.T, sh.C, sh.NH);
    const std::vector<double> dqkv_b =
        attention_backward_bounds(qd, dd, ad, sh.B, sh.T, sh.C, sh.NH);
    expect_within("attention dqkv" + where, dqkv, dqkv_r, dqkv_b);
  }
}

// report(): the figures since the last call, bytes exactly those the op had to move, times those
// of the timestamp spans (expect_report_matches_spans).
TEST_F(VulkanOps, ReportCountsBytesAndTime) {
  ASSERT_NE(open_log_.find("vulkan: using "), std::string::npos) << open_log_;
  const Shape s{96, 256, 320};
  const MatmulData d = make_data(s, 3);
  std::vector<float> out(s.N * size_t(s.OC));
  testing::internal::CaptureStderr();
  ok(api_->matmul_forward(p_, out.data(), d.inp.data(), d.weight.data(), d.bias.data(), s.N, s.C,
                          s.OC));
  llmcpu_offload_report r = fresh_report();
  ok(api_->report(p_, &r));
  const std::string log = testing::internal::GetCapturedStderr();
  const size_t C = size_t(s.C), OC = size_t(s.OC);
  EXPECT_EQ(r.bytes_up, (s.N * C + OC * C + OC) * sizeof(float));
  EXPECT_EQ(r.bytes_down, s.N * OC * sizeof(float));
  EXPECT_EQ(r.calls, 1u) << "one op ran (the weight upload is not an op)";
  if (timestamps()) {
    // Work was done on both kinds of stage, so both took time.
    EXPECT_GT(r.copy_ms, 0.0);
    EXPECT_GT(r.compute_ms, 0.0);
    EXPECT_FALSE(parse_spans(log).empty()) << log;
    expect_report_matches_spans(log, r);
  } else {
    EXPECT_EQ(r.copy_ms + r.compute_ms + r.wall_ms + r.hidden_fraction, 0.0)
        << "no timestamps, yet times reported";
  }
  llmcpu_offload_report again = fresh_report();
  ok(api_->report(p_, &again));
  EXPECT_EQ(again.calls, 0u) << "report() starts counting anew";
  EXPECT_EQ(again.bytes_up, 0u);
  EXPECT_EQ(again.bytes_down, 0u);
  EXPECT_EQ(again.copy_ms + again.compute_ms + again.wall_ms, 0.0);
  // A backward streams twice (the products, then the dweight sums): still one op.
  std::vector<float> dinp(s.N * C), dw(OC * C, 0.0f), db(OC, 0.0f);
  testing::internal::CaptureStderr();
  ok(api_->matmul_backward(p_, dinp.data(), dw.data(), db.data(), d.dout.data(), d.inp.data(),
                           d.weight.data(), s.N, s.C, s.OC));
  llmcpu_offload_report b = fresh_report();
  ok(api_->report(p_, &b));
  const std::string blog = testing::internal::GetCapturedStderr();
  EXPECT_EQ(b.calls, 1u);
  // Up: dout, inp and the weight (for dinp); down: dinp, dweight and dbias.
  EXPECT_EQ(b.bytes_up, (s.N * OC + s.N * C + OC * C) * sizeof(float));
  EXPECT_EQ(b.bytes_down, (s.N * C + OC * C + OC) * sizeof(float));
  if (timestamps()) expect_report_matches_spans(blog, b);
  llmcpu_offload_report small = fresh_report();
  small.struct_size = 8;
  EXPECT_EQ(api_->report(p_, &small), LLMCPU_PLUGIN_ERROR)
      << "a report struct too small is refused";
  EXPECT_NE(std::string(api_->last_error(p_)).find("struct_size"), std::string::npos);
}

// The chunks go in software-pipelined order: upload(i+1) and compute(i) are submitted before
// download(i-1), so they can run at the same time where the device overlaps work (a dedicated
// transfer queue, or a GPU executing independent submissions of one queue concurrently). The
// verbose log of each run shows the order of the submissions, and the timestamps show that the
// semaphores held: no chunk computed before its upload ended, none downloaded before its compute
// ended (checked where one queue runs all stages; timestamps of two queues are not comparable).
// Whether anything overlapped is the device's business: on lavapipe one thread executes the single
// queue's submissions in order and hidden_fraction is 0, so overlap is not asserted; the report's
// figures are checked against the spans.
TEST_F(VulkanOps, PipelineOrdersUploadComputeDownload) {
  ASSERT_NE(open_log_.find("vulkan: using "), std::string::npos) << open_log_;
  const Shape s{60, 32, 48};  // three chunks of 20 rows
  const MatmulData d = make_data(s, 4);
  std::vector<float> out(s.N * size_t(s.OC));
  testing::internal::CaptureStderr();
  ok(api_->matmul_forward(p_, out.data(), d.inp.data(), d.weight.data(), nullptr, s.N, s.C, s.OC));
  const std::string log = testing::internal::GetCapturedStderr();
  EXPECT_NE(log.find("run of 3 chunks: U0 U1 C0 U2 C1 D0 C2 D1 D2\n"), std::string::npos) << log;
  llmcpu_offload_report r = fresh_report();
  ok(api_->report(p_, &r));
  std::printf("device %s: copy %.3f ms, compute %.3f ms, wall %.3f ms, hidden %.3f\n",
              api_->device_name(p_), r.copy_ms, r.compute_ms, r.wall_ms, r.hidden_fraction);
  if (!timestamps()) GTEST_SKIP() << "no timestamps on this device: " << open_log_;
  expect_report_matches_spans(log, r);
  std::vector<std::vector<Span>> runs = parse_spans(log);
  ASSERT_FALSE(runs.empty()) << log;
  const std::vector<Span>& run = runs.back();  // the run of 3 chunks
  auto find = [&](char stage, size_t chunk) -> const Span* {
    for (const Span& x : run) {
      if (x.stage == stage && x.chunk == chunk) return &x;
    }
    ADD_FAILURE() << "no " << stage << chunk << " span in " << log;
    return nullptr;
  };
  if (!one_queue()) return;
  for (size_t i = 0; i < 3; ++i) {
    const Span *u = find('U', i), *c = find('C', i), *dn = find('D', i);
    if (!u || !c || !dn) continue;
    EXPECT_LE(u->b, c->a) << "chunk " << i << " computed before its upload ended";
    EXPECT_LE(c->b, dn->a) << "chunk " << i << " downloaded before its compute ended";
  }
}

TEST_F(VulkanOps, BadShapesAreRefusedWithAMessage) {
  std::vector<float> buf(64);
  EXPECT_EQ(api_->attention_forward(p_, buf.data(), buf.data(), buf.data(), 1, 2, 10, 3),
            LLMCPU_PLUGIN_ERROR);
  EXPECT_NE(std::string(api_->last_error(p_)).find("multiple of NH"), std::string::npos)
      << api_->last_error(p_);
  EXPECT_EQ(api_->matmul_forward(p_, buf.data(), buf.data(), buf.data(), nullptr, 2, 0, 3),
            LLMCPU_PLUGIN_ERROR);
  EXPECT_STRNE(api_->device_name(p_), "");
  EXPECT_EQ(api_->ops(p_), LLMCPU_PLUGIN_OP_MATMUL | LLMCPU_PLUGIN_OP_ATTENTION);
}

}  // namespace
}  // namespace llmcpu::simd_test
