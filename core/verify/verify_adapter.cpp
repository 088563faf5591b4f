#include "core/verify/verify_adapter.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/io/safetensors.h"
#include "simd/error.h"

namespace llmcpu {

namespace {

const SafeTensor& need(const SafetensorsFile& f, const std::string& name,
                       const std::vector<size_t>& shape) {
  const SafeTensor* t = f.find(name);
  if (!t) throw FileError(f.path(), "no tensor " + name + " (an adapter reference holds it)");
  if (!shape.empty() && t->shape != shape) {
    std::string want;
    for (size_t d : shape) want += (want.empty() ? "" : ", ") + std::to_string(d);
    throw FileError(f.path(), name + " is " + t->shape_string() + ", expected (" + want + ")");
  }
  return *t;
}

std::vector<float> floats(const SafeTensor& t) {
  std::vector<float> out(t.count);
  tensor_to_f32(t, out.data());
  return out;
}

}  // namespace

AdapterReferenceShape adapter_reference_shape(const std::string& reference) {
  const SafetensorsFile f(reference);
  const SafeTensor& inputs = need(f, "inputs", {});
  if (inputs.shape.size() != 2 || inputs.dtype != TensorDtype::kI32) {
    throw FileError(reference, "inputs is " + inputs.shape_string() + " " +
                                   dtype_name(inputs.dtype) + ", expected I32 (B, T)");
  }
  return {int(inputs.shape[0]), int(inputs.shape[1])};
}

VerifyReport verify_adapter_against(Model& model, LoraAdapter& adapter,
                                    const std::string& reference, const VerifyTolerances& tol,
                                    Recompute recompute) {
  const AdapterReferenceShape shape = adapter_reference_shape(reference);
  const int B = shape.B, T = shape.T;
  const size_t BT = size_t(B) * T;
  const int V = model.config().vocab_size, Vp = model.config().padded_vocab_size;
  const SafetensorsFile f(reference);
  std::vector<int32_t> inputs(BT), targets(BT);
  tensor_to_i32(need(f, "inputs", {size_t(B), size_t(T)}), inputs.data());
  tensor_to_i32(need(f, "targets", {size_t(B), size_t(T)}), targets.data());
  const std::vector<float> ref_logits = floats(need(f, "logits", {size_t(B), size_t(T), size_t(V)}));
  const float ref_loss = floats(need(f, "loss", {}))[0];

  model.attach_lora(adapter.params_for_model(true));
  std::fill_n(adapter.grads(), adapter.size(), 0.0f);
  model.plan_batch(B, T, {.recompute = recompute, .keep_logits = true});
  model.zero_grad();
  const float loss = model.forward_backward(inputs.data(), targets.data(), B, T);
  std::vector<float> logits(BT * V);
  for (size_t r = 0; r < BT; ++r) std::copy_n(model.logits() + r * Vp, V, logits.begin() + r * V);

  VerifyReport report;
  report.rows.push_back(
      compare_tensors("logits", logits.data(), ref_logits.data(), BT * V, tol.logits));
  report.rows.push_back(compare_tensors("loss", &loss, &ref_loss, 1, tol.logits));
  // The reference's gradients, each module's A then B, in the adapter's order.
  std::vector<std::vector<float>> ref_grads;
  double all2 = 0;
  const size_t r = size_t(adapter.options().r);
  for (size_t i = 0; i < adapter.modules().size(); ++i) {
    const LoraModule& m = adapter.modules()[i];
    ref_grads.push_back(floats(need(f, "grad." + peft_tensor_name(m, 'A'), {r, m.in})));
    ref_grads.push_back(floats(need(f, "grad." + peft_tensor_name(m, 'B'), {m.rows, r})));
    for (size_t k : {ref_grads.size() - 2, ref_grads.size() - 1}) {
      for (float g : ref_grads[k]) all2 += double(g) * double(g);
    }
  }
  // Then each trained copy's tensors (--lora-train, PEFT's modules_to_save), by PEFT's names.
  for (const TrainedPiece& p : adapter.pieces()) {
    ref_grads.push_back(floats(need(f, "grad.base_model.model." + p.name, p.shape)));
    for (float g : ref_grads.back()) all2 += double(g) * double(g);
  }
  const double floor = std::numeric_limits<float>::epsilon() * std::sqrt(all2);
  for (size_t i = 0; i < adapter.modules().size(); ++i) {
    const LoraModule& m = adapter.modules()[i];
    const std::string name = m.name.substr(m.name.find("layers.") == std::string::npos
                                               ? m.name.find("h.")
                                               : m.name.find("layers."));
    report.rows.push_back(compare_tensors(name + ".lora_A", adapter.grads() + adapter.a_offset(i),
                                          ref_grads[2 * i].data(), adapter.a_size(i), tol.grads,
                                          floor));
    report.rows.push_back(compare_tensors(name + ".lora_B", adapter.grads() + adapter.b_offset(i),
                                          ref_grads[2 * i + 1].data(), adapter.b_size(i),
                                          tol.grads, floor));
  }
  for (size_t i = 0; i < adapter.pieces().size(); ++i) {
    const TrainedPiece& p = adapter.pieces()[i];
    report.rows.push_back(compare_tensors(
        p.name, adapter.grads() + adapter.copy_offset(p.role) + p.offset,
        ref_grads[2 * adapter.modules().size() + i].data(), p.count(), tol.grads, floor));
  }
  report.ok = std::all_of(report.rows.begin(), report.rows.end(),
                          [](const TensorComparison& c) { return c.ok; });
  return report;
}

}  // namespace llmcpu
