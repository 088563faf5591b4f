#include "core/report/metrics.h"

#include <cerrno>
#include <cmath>
#include <nlohmann/json.hpp>

#include "core/util/file.h"
#include "simd/error.h"

namespace llmcpu {

namespace {

nlohmann::ordered_json number(double v) {
  if (!std::isfinite(v)) return nullptr;
  return v;
}

}  // namespace

std::string metrics_line(const StepMetrics& m) {
  nlohmann::ordered_json j;
  j["step"] = m.step;
  if (m.loss) {
    j["loss"] = number(*m.loss);
    j["lr"] = number(m.lr);
    j["grad_norm"] = number(m.grad_norm);
    j["ms"] = number(m.ms);
    j["tokens_per_s"] = number(m.tokens_per_s);
  }
  if (m.val_loss) j["val_loss"] = number(*m.val_loss);
  return j.dump();
}

MetricsWriter::MetricsWriter(const std::string& path, bool append) : path_(path) {
  file_ = std::fopen(path.c_str(), append ? "a" : "w");
  if (!file_) throw FileError(path, "cannot open the metrics file: " + errno_message(errno));
}

MetricsWriter::~MetricsWriter() {
  if (file_) std::fclose(file_);
}

void MetricsWriter::write(const StepMetrics& m) {
  const std::string line = metrics_line(m) + "\n";
  if (std::fwrite(line.data(), 1, line.size(), file_) != line.size() || std::fflush(file_) != 0) {
    throw FileError(path_, "cannot write the metrics line of step " + std::to_string(m.step) +
                               ": " + errno_message(errno));
  }
}

}  // namespace llmcpu
