// `train --metrics FILE.jsonl`: one JSON object per line per step, flushed line by line so that a
// notebook can read the file while the run goes (pandas.read_json(path, lines=True)):
//   {"step": 12, "loss": 5.61, "lr": 0.0003, "grad_norm": 1.9, "ms": 80.2, "tokens_per_s": 3191.5}
// and "val_loss" on the steps where the validation loss was measured. Steps are numbered as in the
// llm.c log (from 0): the line of step s has the loss of step s's update and the validation loss
// measured before it, after s steps (llm.c's `s:s tel:` and `s:s trl:`). The validation after the
// last step (step = steps) has a line of its own without the training keys. JSON has no NaN: a
// non-finite number is null.
// Deliberately not here: which rank writes (the trainer: rank 0 alone).
#pragma once

#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>

namespace llmcpu {

struct StepMetrics {
  int64_t step;
  std::optional<double> loss{};  // the training keys; absent on a validation-only line
  double lr = 0;
  double grad_norm = 0;
  double ms = 0;
  double tokens_per_s = 0;
  std::optional<double> val_loss{};
};

// The JSON text of one line (without the newline).
std::string metrics_line(const StepMetrics& m);

class MetricsWriter {
 public:
  // Creates (or with `append`, for a resumed run, extends) the file. FileError if it cannot.
  MetricsWriter(const std::string& path, bool append);
  MetricsWriter(const MetricsWriter&) = delete;
  MetricsWriter& operator=(const MetricsWriter&) = delete;
  ~MetricsWriter();

  // Writes one line and flushes it. FileError naming the file if the write fails.
  void write(const StepMetrics& m);
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::FILE* file_ = nullptr;
};

}  // namespace llmcpu
