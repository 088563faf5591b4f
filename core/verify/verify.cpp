#include "core/verify/verify.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace llmcpu {

TensorComparison compare_tensors(const std::string& name, const float* ours, const float* ref,
                                 size_t n, double tolerance, double norm_floor) {
  TensorComparison c;
  c.name = name;
  c.count = n;
  c.tolerance = tolerance;
  double diff2 = 0, ref2 = 0;
  for (size_t i = 0; i < n; ++i) {
    const double d = double(ours[i]) - double(ref[i]);
    diff2 += d * d;
    ref2 += double(ref[i]) * double(ref[i]);
    // NaN must not be lost by std::max.
    c.max_abs_diff = std::isnan(d) ? d : std::max(c.max_abs_diff, std::fabs(d));
  }
  if (diff2 == 0) {
    c.rel_error = 0;
  } else if (ref2 == 0 && norm_floor == 0) {
    c.rel_error = std::numeric_limits<double>::infinity();
  } else {
    c.rel_error = std::sqrt(diff2) / std::max(std::sqrt(ref2), norm_floor);
  }
  c.ok = c.rel_error <= tolerance;  // false for NaN
  return c;
}

VerifyReport verify_against_state(Model& model, const DebugState& ref, const VerifyTolerances& tol,
                                  DebugState* ours, Recompute recompute) {
  const ModelConfig& cfg = model.config();
  const size_t BT = (size_t)ref.B * ref.T;
  const int V = cfg.vocab_size, Vp = cfg.padded_vocab_size;
  VerifyReport report;

  // The logits are kept for the comparison only: training never holds them all.
  model.plan_batch(ref.B, ref.T, {.recompute = recompute, .keep_logits = true});
  model.zero_grad();
  const float loss =
      model.forward_backward(ref.inputs.data(), ref.targets.data(), ref.B, ref.T, 1.0f, nullptr,
                             ref.starts.empty() ? nullptr : ref.starts.data());
  model.fetch_device_state(false, true);  // a device's gradients, for the comparison
  std::vector<float> logits(BT * V);
  for (size_t r = 0; r < BT; ++r) {
    std::copy_n(model.logits() + r * Vp, V, logits.begin() + r * V);
  }
  report.rows.push_back(
      compare_tensors("logits", logits.data(), ref.logits.data(), BT * V, tol.logits));
  report.rows.push_back(compare_tensors("loss", &loss, &ref.loss, 1, tol.logits));

  double all2 = 0;
  for (float g : ref.grads) all2 += double(g) * double(g);
  const double floor = std::numeric_limits<float>::epsilon() * std::sqrt(all2);
  const ParameterLayout& layout = model.layout();
  for (int i = 0; i < kNumTensorRoles; ++i) {
    if (layout.size(i) == 0) continue;  // a tensor the architecture does not have
    report.rows.push_back(compare_tensors(layout.name(i), model.grads_flat() + layout.offset(i),
                                          ref.grads.data() + layout.offset(i), layout.size(i),
                                          tol.grads, floor));
  }
  report.ok = std::all_of(report.rows.begin(), report.rows.end(),
                          [](const TensorComparison& c) { return c.ok; });
  if (ours) {
    ours->B = ref.B;
    ours->T = ref.T;
    ours->inputs = ref.inputs;
    ours->targets = ref.targets;
    ours->starts = ref.starts;
    ours->logits = std::move(logits);
    ours->loss = loss;
    ours->grads.assign(model.grads_flat(), model.grads_flat() + model.num_parameters());
  }
  return report;
}

}  // namespace llmcpu
