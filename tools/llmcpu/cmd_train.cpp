// `llmcpu train`: the training loop with a progress line per step.
#include <cstdio>
#include <string>
#include <vector>

#include "core/train/trainer.h"
#include "core/util/error.h"
#include "tools/llmcpu/args.h"
#include "tools/llmcpu/commands.h"

namespace llmcpu {

int run_train(const std::vector<std::string>& args) {
  TrainOptions o;
  bool no_shuffle = false;
  int threads = 0;
  ArgParser p("train", "Trains a GPT-2 model (from a checkpoint or a preset) on an llm.c token shard.");
  p.option("model", 'e', &o.model, "M", "checkpoint file, preset file (.toml) or preset name (gpt2-d2 ...)");
  p.option("train-data", 'i', &o.train_data, "SHARD", "llm.c token shard to train on");
  p.option("batch", 'b', &o.batch, "B", "sequences per step (default 4)");
  p.option("seq-len", 't', &o.seq_len, "T", "tokens per sequence (default 64)");
  p.option("steps", 'x', &o.steps, "N", "optimizer steps (default 10)");
  p.option("lr", 'l', &o.lr, "LR", "peak learning rate (default 3e-4)");
  p.option("weight-decay", 'c', &o.weight_decay, "WD", "AdamW decoupled weight decay (default 0)");
  p.option("lr-schedule", 'k', &o.lr_schedule, "S", "constant (default) or cosine");
  p.option("warmup", 'u', &o.warmup, "N", "linear warmup steps (default 0)");
  p.option("lr-floor", 'q', &o.lr_floor, "F", "cosine decays to F * lr (default 0)");
  p.option("grad-clip", 0, &o.grad_clip, "X", "clip the global gradient norm to X (default 0: off)");
  p.option("seed", 0, &o.seed, "S", "initialisation and shuffling seed (default 1337)");
  p.flag("no-shuffle", 0, &no_shuffle, "read batches in order: batch k starts at token k*B*T");
  p.option("log", 0, &o.log_path, "FILE", "write llm.c log lines (s:STEP trl:LOSS)");
  p.option("save", 0, &o.save_path, "M.bin", "write the trained model here at the end (atomically)");
  p.option("threads", 0, &threads, "N", "OpenMP threads (default: all)");
  if (!p.parse(args)) return 0;
  o.shuffle = !no_shuffle;
  const int nthreads = apply_thread_count(threads, "train");

  Trainer trainer(o);
  const Gpt2& m = trainer.model();
  std::printf("train: %s\n", trainer.model_origin().c_str());
  std::printf("train: %s, %zu parameters, B=%d T=%d, %s kernels, %d threads\n",
              describe(m.config()).c_str(), m.num_parameters(), o.batch, o.seq_len,
              std::string(m.kernels().target).c_str(), nthreads);
  trainer.run([](const StepReport& r) {
    std::printf("step %5d/%d | loss %.6f | lr %.3e | norm %.4f | %8.1f ms | %9.0f tok/s\n",
                r.step + 1, r.steps, r.loss, r.lr, r.grad_norm, r.ms, r.tokens_per_second);
    std::fflush(stdout);
  });
  if (!o.save_path.empty()) std::printf("train: saved %s\n", o.save_path.c_str());
  return 0;
}

}  // namespace llmcpu
