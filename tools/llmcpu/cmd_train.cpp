// `llmcpu train`: flags (and a TOML config of the same keys) onto TrainOptions, a progress line per
// step, validation and sample lines, checkpoints, and Ctrl-C handling.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "core/comm/communicator.h"
#include "core/model/activations.h"
#include "core/model/precision.h"
#include "core/model/preset.h"
#include "core/runtime/plan.h"
#include "core/runtime/topology.h"
#include "core/train/interrupt.h"
#include "core/train/trainer.h"
#include "simd/error.h"
#include "tools/llmcpu/args.h"
#include "tools/llmcpu/commands.h"
#include "tools/llmcpu/placement_flags.h"
#include "tools/llmcpu/plugin_flags.h"
#include "tools/llmcpu/train_flags.h"

namespace llmcpu {

namespace {

std::string format_duration(double seconds) {
  char buf[32];
  const long s = static_cast<long>(seconds + 0.5);
  if (s >= 3600)
    std::snprintf(buf, sizeof buf, "%ldh%02ldm", s / 3600, (s / 60) % 60);
  else if (s >= 60)
    std::snprintf(buf, sizeof buf, "%ldm%02lds", s / 60, s % 60);
  else
    std::snprintf(buf, sizeof buf, "%lds", s);
  return buf;
}

// "rank 0 237.3 MiB, rank 1 237.3 MiB" (the first 8 ranks, then the range of the others).
std::string per_rank_mib(const std::vector<double>& bytes) {
  const double MiB = 1024.0 * 1024.0;
  std::string out;
  char buf[96];
  for (size_t r = 0; r < bytes.size(); ++r) {
    if (r == 8 && bytes.size() > 9) {
      const auto [lo, hi] = std::minmax_element(bytes.begin() + 8, bytes.end());
      std::snprintf(buf, sizeof buf, ", ranks 8-%zu %.1f-%.1f MiB", bytes.size() - 1, *lo / MiB,
                    *hi / MiB);
      return out + buf;
    }
    std::snprintf(buf, sizeof buf, "%srank %zu %.1f MiB", r ? ", " : "", r, bytes[r] / MiB);
    out += buf;
  }
  return out;
}

// What each rank holds of the optimizer's state: the AdamW moments and, in bf16, the fp32 master
// weights. "optimizer: AdamW moments per rank: rank 0 474.9 MiB, rank 1 474.9 MiB (ZeRO-1 over 2
// ranks; whole 949.7 MiB)".
void print_optimizer_memory(const Trainer& trainer, const Model& m) {
  const double MiB = 1024.0 * 1024.0;
  const double whole = double(m.num_parameters()) * sizeof(float) / MiB;
  const std::vector<double>& moments = trainer.optimizer_bytes();
  const size_t ranks = moments.size();
  if (ranks == 1) {
    std::printf("optimizer: AdamW moments %.1f MiB\n", moments[0] / MiB);
    return;
  }
  if (!trainer.zero()) {
    std::printf("optimizer: AdamW moments per rank: %s (--zero 0: whole on every rank)\n",
                per_rank_mib(moments).c_str());
    return;
  }
  std::printf("optimizer: AdamW moments per rank: %s (ZeRO-1 over %zu ranks; whole %.1f MiB)\n",
              per_rank_mib(moments).c_str(), ranks, 2 * whole);
  if (trainer.shared_weights()) {
    char copy[48] = "";
    if (m.precision() == Precision::kBf16) {
      std::snprintf(copy, sizeof copy, ", bf16 copy %.1f MiB", whole / 2);
    }
    std::printf(
        "weights: one copy in memory shared by the %zu ranks of this machine (fp32 %.1f "
        "MiB%s), each rank updating its own parts; gradients summed where the ranks "
        "wrote them\n",
        ranks, whole, copy);
  } else if (m.precision() == Precision::kBf16) {
    std::printf(
        "optimizer: fp32 master weights per rank: %s (the layers' matmul weights sharded, "
        "the model computes with their bf16 copy; whole %.1f MiB)\n",
        per_rank_mib(trainer.master_bytes()).c_str(), whole);
  }
}

// What the run is, once the model and the data have loaded: where its threads are, what the trainer
// noted, the model, its batch over the ranks, the optimizer's and the plan's memory.
void print_run(const Trainer& trainer, const Placement& placed, const Communicator& world) {
  const TrainOptions& o = trainer.options();
  std::printf("%s\n", placed.summary.c_str());
  for (const std::string& note : trainer.notes()) std::printf("train: %s\n", note.c_str());
  print_offload_outcome(trainer.offload());
  const Model& m = trainer.model();
  std::printf("train: %s\n", trainer.model_origin().c_str());
  const int ranks = world.size();
  const long long micro = (long long)trainer.grad_accum() * ranks;
  std::printf(
      "train: %s, %zu parameters, B=%d T=%d, %lld micro-batches per step (%lld tokens), "
      "%s, %d threads\n",
      describe(m.config()).c_str(), m.num_parameters(), o.batch, o.seq_len, micro,
      micro * o.batch * o.seq_len, m.kernels_summary().c_str(), placed.plan.num_threads());
  if (const LoraAdapter* a = trainer.adapter()) {
    const LoraOptions& lo = a->options();
    char dropout[32] = "";
    if (lo.dropout > 0) std::snprintf(dropout, sizeof dropout, ", dropout %g", lo.dropout);
    std::printf(
        "train: LoRA r=%d alpha=%g (scale %g%s%s) on %zu modules: %zu trainable parameters "
        "(%.2f%% of the model's), the base frozen\n",
        lo.r, lo.lora_alpha(), double(lo.scale()), lo.rslora ? ", rsLoRA" : "", dropout,
        a->modules().size(), a->size(), 100.0 * double(a->size()) / double(m.num_parameters()));
  }
  if (ranks > 1) {
    std::printf("train: %s; %d micro-batches per rank per step\n", world.describe().c_str(),
                trainer.grad_accum());
  }
  print_optimizer_memory(trainer, m);
  std::printf("memory: %s; recompute %s; this process may use %.0f MiB (%s)\n",
              describe(trainer.memory_plan()).c_str(), recompute_name(o.recompute),
              trainer.memory_limit().bytes / (1024.0 * 1024.0),
              trainer.memory_limit().source.c_str());
  std::fflush(stdout);
}

int train_in(Communicator& world, const TrainOptions& o, TrainCliExtras extra) {
  // Several ranks on one machine: each one's threads on cores of its own, unless --cpus or mpirun's
  // binding says where.
  if (world.size() > 1 && extra.placement.cpus.empty()) {
    extra.placement.cpus =
        rank_cpu_share(this_machine_topology(), world.local_rank(), world.local_size());
  }
  // Applied now (threads are pinned before anything is allocated), printed once the model and the
  // data have loaded: a mistyped command shows its error first.
  const Placement placed = apply_placement_flags(extra.placement);
  std::shared_ptr<const Tokenizer> sample_tok = load_sample_tokenizer(extra, o, o.sample_every > 0);
  TrainOptions run = o;
  if (sample_tok) {
    run.sample_start = sample_tok->document_token();
    run.sample_candidates = sample_tok->vocab_size();
  }
  Trainer trainer(run, &world);
  print_run(trainer, placed, world);
  SampleDecoder decode = make_sample_decoder(sample_tok);

  TrainObserver obs;
  obs.on_step = [](const StepReport& r) {
    std::printf("step %5d/%d | loss %.6f | lr %.2e | norm %7.4f | %7.1f ms | %8.0f tok/s | eta %s",
                r.step + 1, r.steps, r.loss, r.lr, r.grad_norm, r.ms, r.tokens_per_second,
                format_duration(r.eta_seconds).c_str());
    // Several ranks: the communication thread's time (the gradients' sum, and under ZeRO-1 the
    // updated weights' gather), and how much of it the backward pass and the update hid.
    if (r.comm_ms > 0)
      std::printf(" | comm %.1f ms, %.0f%% hidden", r.comm_ms, 100 * r.comm_hidden);
    std::printf("\n");
    std::fflush(stdout);
  };
  obs.on_val = [](int step, float loss) {
    std::printf("val loss %.6f at step %d\n", loss, step);
    std::fflush(stdout);
  };
  obs.on_sample = [&decode](int step, const std::vector<int>& tokens) {
    std::printf("sample at step %d:\n---\n%s\n---\n", step, decode(tokens).c_str());
    std::fflush(stdout);
  };
  obs.on_warning = [](const std::string& message) {
    std::fflush(stdout);
    std::fprintf(stderr, "train: warning: %s\n", message.c_str());
  };
  obs.on_checkpoint = [](int step, const std::string& path) {
    std::printf("checkpoint: %s (step %d)\n", path.c_str(), step);
    std::fflush(stdout);
  };
  report_after_each_step(extra.plugin, trainer.model(), &obs);
  if (world.rank() != 0) {  // identical on every rank: rank 0 says it, and samples
    obs.on_warning = {};
    obs.on_sample = {};
  }
  install_interrupt_handler();
  const bool finished = trainer.run(obs);
  if (!finished) {
    const std::string dir = trainer.options().checkpoint_dir;
    std::printf("train: interrupted after step %d; %s\n", trainer.steps_done(),
                dir.empty() ? "nothing saved (no --checkpoint-dir)"
                            : ("resume with --resume " + dir).c_str());
    return 0;
  }
  if (!o.save_path.empty()) std::printf("train: saved %s\n", o.save_path.c_str());
  if (!o.save_merged.empty()) {
    std::printf("train: saved the model with the adapter merged to %s\n", o.save_merged.c_str());
  }
  return 0;
}

class TrainCommand : public Command {
 public:
  void add_flags(ArgParser& p) override { add_train_flags(p, &o_, &extra_); }
  void check(const ArgParser& p) override {
    check_placement_flags(extra_.placement);
    check_plugin_flags(p, extra_.plugin);
    check_train_options(o_);
    apply_train_flags(extra_, &o_);
  }
  const PlacementOptions* placement() const override { return &extra_.placement; }
  int run(const ArgParser& p) override;

 private:
  TrainOptions o_;
  TrainCliExtras extra_;
};

// Under mpirun every rank runs this with the same flags; rank 0 prints, the others are quiet. A
// rank that fails prints its error naming itself and ends the whole job.
int TrainCommand::run(const ArgParser&) {
  std::unique_ptr<Communicator> world = world_communicator();
  if (world->size() == 1) return train_in(*world, o_, extra_);
  if (world->rank() != 0 && !std::freopen("/dev/null", "w", stdout)) {
    throw FileError("/dev/null",
                    "cannot quiet the output of rank " + std::to_string(world->rank()));
  }
  try {
    return train_in(*world, o_, extra_);
  } catch (const std::exception& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "llmcpu train: error on rank %d of %d: %s\n", world->rank(), world->size(),
                 e.what());
    std::fflush(stderr);
    world->abort(2);
    return 2;
  }
}

}  // namespace

std::unique_ptr<Command> make_train_command() { return std::make_unique<TrainCommand>(); }

}  // namespace llmcpu
