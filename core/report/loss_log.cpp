#include "core/report/loss_log.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "core/util/file.h"
#include "simd/error.h"

namespace llmcpu {

void LossCurves::add(std::vector<LossPoint>& series, int64_t step, double loss) {
  while (!series.empty() && series.back().step >= step) series.pop_back();
  series.push_back({step, loss});
}

void LossCurves::resume_at(int64_t steps_done) {
  while (!train.empty() && train.back().step >= steps_done) train.pop_back();
  while (!val.empty() && val.back().step > steps_done) val.pop_back();
}

namespace {

// The value of "KEY:VALUE" as a number; false if it is not one (strtod takes llm.c's "nan", "-nan"
// and "inf" too).
bool parse_number(const std::string& text, double* value) {
  if (text.empty()) return false;
  char* end = nullptr;
  errno = 0;
  *value = std::strtod(text.c_str(), &end);
  return end == text.c_str() + text.size() && errno != ERANGE;
}

bool parse_step(const std::string& text, int64_t* step) {
  if (text.empty() || text.size() > 18) return false;
  if (!std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return false;
  }
  *step = std::strtoll(text.c_str(), nullptr, 10);
  return true;
}

struct LineValue {
  bool train;  // trl (else tel)
  int64_t step;
  double loss;
};

// One line's losses into `values`; an empty string, or what is wrong with the line.
std::string parse_line(const std::string& line, std::vector<LineValue>* values) {
  std::istringstream words(line);
  std::string word;
  if (!(words >> word)) return "";  // blank
  int64_t step = 0;
  if (word.rfind("s:", 0) != 0 || !parse_step(word.substr(2), &step)) {
    return "expected an llm.c log line (s:STEP trl:LOSS or s:STEP tel:LOSS)";
  }
  while (words >> word) {
    const size_t colon = word.find(':');
    if (colon == std::string::npos) return "'" + word + "' is not KEY:VALUE";
    const std::string key = word.substr(0, colon);
    if (key != "trl" && key != "tel") continue;
    double loss = 0;
    if (!parse_number(word.substr(colon + 1), &loss))
      return key + " '" + word + "' is not a number";
    values->push_back({key == "trl", step, loss});
  }
  return "";
}

}  // namespace

LossCurves read_loss_log(const std::string& path, const std::string& name) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw FileError(path, "cannot open the log: " + errno_message(errno));
  std::stringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) throw FileError(path, "cannot read the log: " + errno_message(errno));
  const std::string text = buffer.str();
  LossCurves curves;
  curves.name = name;
  size_t start = 0;
  for (int64_t number = 1; start < text.size(); ++number) {
    const size_t newline = text.find('\n', start);
    const bool complete = newline != std::string::npos;
    const std::string line = text.substr(start, complete ? newline - start : std::string::npos);
    start = complete ? newline + 1 : text.size();
    std::vector<LineValue> values;
    const std::string problem = parse_line(line, &values);
    if (problem.empty()) {
      for (const LineValue& v : values) {
        if (v.train)
          curves.add_train(v.step, v.loss);
        else
          curves.add_val(v.step, v.loss);
      }
    } else if (complete) {
      const std::string shown = line.size() > 60 ? line.substr(0, 60) + "..." : line;
      throw FileError(path,
                      "line " + std::to_string(number) + ": " + problem + ", got '" + shown + "'");
    }
  }
  if (curves.empty()) {
    throw FileError(path,
                    "no loss line in the log (expected llm.c lines s:STEP trl:LOSS or "
                    "s:STEP tel:LOSS, as train --log writes them)");
  }
  return curves;
}

}  // namespace llmcpu
