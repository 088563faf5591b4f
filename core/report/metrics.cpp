#include "core/report/metrics.h"

#include <cerrno>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>

#include "core/util/file.h"
#include "simd/error.h"

namespace llmcpu {

namespace {

nlohmann::ordered_json number(double v) {
  if (!std::isfinite(v)) return nullptr;
  return v;
}

// Where a run resumed after `steps` steps continues the metrics file at `path`: the offset of its
// first line of a step >= `steps` (or of a last line cut short), and that line's val_loss if it is
// of step `steps`.
struct Continuation {
  uint64_t offset = 0;
  std::optional<double> val_loss;
};

Continuation continuation(const std::string& path, int64_t steps) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw FileError(path, "cannot read the metrics file: " + errno_message(errno));
  Continuation c;
  std::string line;
  for (int line_number = 1; std::getline(f, line); ++line_number) {
    if (f.eof()) break;  // no newline: a line cut short by a kill
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    if (!j.is_object() || !j.contains("step") || !j["step"].is_number_integer() ||
        j["step"].get<int64_t>() < 0) {
      throw FileError(path, "line " + std::to_string(line_number) +
                                " is not a metrics line (expected a JSON object with a \"step\" "
                                "number); a resumed run continues only its own metrics file");
    }
    const int64_t step = j["step"].get<int64_t>();
    if (step >= steps) {
      if (step == steps && j.contains("val_loss")) {
        const nlohmann::json& v = j["val_loss"];
        if (v.is_number()) c.val_loss = v.get<double>();
        if (v.is_null()) c.val_loss = std::numeric_limits<double>::quiet_NaN();
      }
      return c;
    }
    c.offset += line.size() + 1;
  }
  return c;
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
  if (m.skipped) j["skipped"] = true;
  return j.dump();
}

MetricsWriter::MetricsWriter(const std::string& path, int64_t resumed_steps) : path_(path) {
  std::error_code ec;
  if (resumed_steps >= 0 && std::filesystem::is_regular_file(path, ec)) {
    const Continuation c = continuation(path, resumed_steps);
    carried_val_loss_ = c.val_loss;
    if (c.offset < std::filesystem::file_size(path, ec)) {
      std::filesystem::resize_file(path, c.offset, ec);
      if (ec) {
        throw FileError(path, "cannot cut the metrics file back to the resumed step " +
                                  std::to_string(resumed_steps) + ": " + ec.message());
      }
    }
  }
  file_ = std::fopen(path.c_str(), resumed_steps >= 0 ? "a" : "w");
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
