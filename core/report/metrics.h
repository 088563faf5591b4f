// `train --metrics FILE.jsonl`: one JSON object per line, flushed line by line so that a notebook
// can read the file while the run goes (pandas.read_json(path, lines=True)):
//   {"step": 12, "loss": 5.61, "lr": 0.0003, "grad_norm": 1.9, "ms": 80.2, "tokens_per_s": 3191.5}
// and "val_loss" on the steps where the validation loss was measured. Steps are numbered as in the
// llm.c log (from 0): the line of step s has the loss of step s's update and the validation loss
// measured before it, after s steps (llm.c's `s:s tel:` and `s:s trl:`). JSON has no NaN: a
// non-finite number is null.
// The rule, across stops and resumes: exactly one line per step number, 0, 1, ..., N-1 without gaps
// or repeats for a run that has taken N steps, and at most one more, of step N:
// - a step whose loss or gradient norm is not finite (its update skipped) has its line like any
//   other, with "skipped": true (a key only such lines have), the one --max-bad-steps stops at too;
// - a validation measured after the last step taken (the end of --steps, or a Ctrl-C/SIGTERM stop
//   at a --val-every step) has a line of its own without the training keys, of step N;
// - a run resumed at step k continues the file: it is cut before its first line of a step >= k
//   (that validation-only line of step k; lines of steps the resumed run takes again, when it
//   resumes from an older checkpoint after a kill or a --max-bad-steps stop; a last line cut
//   short), and a val_loss that line held for step k goes into the resumed run's own line of step k
//   (which does not measure it again: the weights are the same). Lines of steps before k stay as
//   they are.
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
  bool skipped = false;  // the update was skipped: the loss or the gradient norm is not finite
};

// The JSON text of one line (without the newline).
std::string metrics_line(const StepMetrics& m);

class MetricsWriter {
 public:
  // Creates the file; or, for a run resumed after `resumed_steps` steps (>= 0), continues it as the
  // rule above says (a file that does not exist is created). FileError if it cannot, or if a line
  // of the file is not a metrics line (the file is then left as it was).
  MetricsWriter(const std::string& path, int64_t resumed_steps);
  MetricsWriter(const MetricsWriter&) = delete;
  MetricsWriter& operator=(const MetricsWriter&) = delete;
  ~MetricsWriter();

  // Writes one line and flushes it. FileError naming the file if the write fails.
  void write(const StepMetrics& m);
  const std::string& path() const { return path_; }
  // A resumed run's: the val_loss of the resumed step, from the line that was cut (null: NaN).
  const std::optional<double>& carried_val_loss() const { return carried_val_loss_; }

 private:
  std::string path_;
  std::FILE* file_ = nullptr;
  std::optional<double> carried_val_loss_;
};

}  // namespace llmcpu
