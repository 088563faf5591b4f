#include "core/train/data_parallel.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <utility>

#include "core/io/train_state.h"
#include "core/optim/adamw.h"
#include "core/train/interrupt.h"
#include "core/train/training_error.h"
#include "simd/error.h"

namespace llmcpu {

DataParallel::DataParallel(Communicator& world, Model& model, ZeroMode zero,
                           std::vector<std::string>* notes, LoraAdapter* lora)
    : world_(world), lora_(lora) {
  const int ranks = world_.size();
  if (ranks > 1 && lora) {
    sync_ = std::make_unique<GradientSync>(world_, lora->grads(), lora->spans(),
                                           model.config().num_layers, zero != ZeroMode::kOff);
  } else if (ranks > 1) {
    sync_ = std::make_unique<GradientSync>(world_, model, zero != ZeroMode::kOff);
  }
  if (ranks == 1 && zero == ZeroMode::kOn) {
    notes->push_back("--zero 1 has no effect in a single process (it shards over mpirun's ranks)");
  }
  const char* check = std::getenv("LLMCPU_CHECK_REPLICAS");
  check_replicas_ = ranks > 1 && check != nullptr && std::string(check) == "1";
}

DataParallel::~DataParallel() = default;

namespace {

// What every rank must share, one "name: value" line each; rank 0's lines are the reference.
std::string rank_fields(const TrainOptions& o, const Model& m, const DataLoader* train,
                        const DataLoader* val) {
  auto num = [](double v) {
    char buf[40];
    std::snprintf(buf, sizeof buf, "%.17g", v);
    return std::string(buf);
  };
  auto data = [](const DataLoader* d) {
    return d ? d->pattern() + " (" + std::to_string(d->num_shards()) + " shards, " +
                   std::to_string(d->total_samples()) + " samples)"
             : std::string("none");
  };
  const std::pair<const char*, std::string> fields[] = {
      {"--model", describe(m.config())},
      {"the model's weights (norm)",
       num(global_norm(m.params_flat(), m.num_parameters(), m.kernels()))},
      {"--resume", o.resume},
      {"--lora", std::to_string(o.lora_r)},
      {"--lora-alpha", num(o.lora_alpha)},
      {"--lora-targets", o.lora_targets},
      {"--lora-train", o.lora_train},
      {"--lora-rslora", o.lora_rslora ? "on" : "off"},
      {"--adapter", o.adapter},
      {"--base-quant", quant_format_name(o.base_quant)},
      {"--train-data", data(train)},
      {"--val-data", data(val)},
      {"--batch", std::to_string(o.batch)},
      {"--seq-len", std::to_string(o.seq_len)},
      {"--total-batch", std::to_string(o.total_batch)},
      {"--steps", std::to_string(o.steps)},
      {"--lr", num(o.lr)},
      {"--lr-schedule", lr_schedule_name(o.lr_schedule)},
      {"--warmup", std::to_string(o.warmup)},
      {"--lr-floor", num(o.lr_floor)},
      {"--weight-decay", num(o.weight_decay)},
      {"--grad-clip", num(o.grad_clip)},
      {"--seed", std::to_string(o.seed)},
      {"--no-shuffle", o.shuffle ? "no" : "yes"},
      {"--precision", precision_name(o.precision)},
      {"--val-every", std::to_string(o.val_every)},
      {"--val-batches", std::to_string(o.val_batches)},
      {"--max-bad-steps", std::to_string(o.max_bad_steps)},
      {"--checkpoint-dir", o.checkpoint_dir},
      {"--checkpoint-every", std::to_string(o.checkpoint_every)},
      {"--zero", std::to_string(zero_flag_value(o.zero))},
  };
  std::string lines;
  for (const auto& [name, value] : fields) lines += std::string(name) + ": " + value + "\n";
  return lines;
}

// The first line where `mine` and rank 0's `root` differ, as the UsageError this rank raises.
UsageError first_difference(const std::string& mine, const std::string& root) {
  size_t a = 0, b = 0;
  for (;;) {
    const size_t ea = mine.find('\n', a), eb = root.find('\n', b);
    if (ea == std::string::npos || eb == std::string::npos) break;
    const std::string ours = mine.substr(a, ea - a), theirs = root.substr(b, eb - b);
    if (ours != theirs) {
      return UsageError("this rank has " + ours + ", rank 0 has " +
                        theirs.substr(theirs.find(": ") + 2) + "; every rank needs the same");
    }
    a = ea + 1, b = eb + 1;
  }
  return UsageError("this rank's flags differ from rank 0's; every rank needs the same");
}

}  // namespace

void DataParallel::check_ranks_agree(const TrainOptions& o, const Model& model,
                                     const DataLoader* train, const DataLoader* val) const {
  if (world_.size() == 1) return;
  const std::string mine = rank_fields(o, model, train, val);
  uint64_t length = mine.size();
  world_.broadcast(&length, sizeof length, 0);
  std::string root(length, '\0');
  if (world_.rank() == 0) root = mine;
  world_.broadcast(root.data(), length, 0);
  double disagree = root == mine ? 0 : 1;
  world_.all_reduce_sum(&disagree, 1);
  if (disagree == 0) return;
  if (root == mine) {
    throw UsageError(std::to_string(int(disagree)) + " of " + std::to_string(world_.size()) +
                     " ranks were started with flags or data other than rank 0's (their errors "
                     "say which); every rank needs the same");
  }
  throw first_difference(mine, root);
}

bool DataParallel::share_weights(Model& model, std::vector<std::string>* notes) {
  if (lora_) return false;  // the frozen base: each rank's own, nothing of it updated
  std::string why_not_shared;
  if (zero()) shared_weights_ = sync_->share_memory(model, &why_not_shared);
  if (!why_not_shared.empty()) {
    notes->push_back("the ranks' weights are not shared (" + why_not_shared +
                     "): each rank keeps its own, updated by all-gather");
  }
  if (zero() && !shared_weights_ && model.precision() == Precision::kBf16) {
    // Without shared weights the bf16 model computes with the copy of the layers' matmul weights:
    // of their fp32 master this rank keeps its own parts only.
    std::vector<ParameterSpan> others;
    for (const ParameterSpan& r : sync_->others()) {
      if (ParameterLayout::matmul_weight(r.tensor)) others.push_back(r);
    }
    model.release_master(others);
  }
  return shared_weights_;
}

bool DataParallel::stop_requested() {
  double asked = interrupt_requested() ? 1 : 0;
  world_.all_reduce_sum(&asked, 1);  // every rank stops at the same step, or none does
  return asked > 0;
}

double DataParallel::finish_gradients(double loss) {
  comm_busy_ms_ = comm_waited_ms_ = 0;
  if (!sync_) return loss;
  const auto [busy, waited] = sync_->wait();
  add_comm(busy, waited);
  world_.all_reduce_sum(&loss, 1);
  return loss;
}

double DataParallel::comm_hidden() const {
  if (!sync_) return 0.0;
  return comm_busy_ms_ > 0 ? std::max(0.0, 1.0 - comm_waited_ms_ / comm_busy_ms_) : 1.0;
}

std::vector<double> DataParallel::per_rank(double mine) const {
  std::vector<double> all(world_.size(), 0.0);
  all[world_.rank()] = mine;
  world_.all_reduce_sum(all.data(), all.size());
  return all;
}

void DataParallel::check_replicas(const Model& m, int step) const {
  if (!check_replicas_) return;
  // The weights the model computes with: fp32, and in bf16 the copy of the matmul weights (whose
  // fp32 master each rank keeps only in part).
  uint64_t mine = 0;
  for (const ParameterSpan& s : m.layout().spans()) {
    const bool copy = m.params_bf16_flat() && ParameterLayout::matmul_weight(s.tensor);
    const uint64_t h =
        copy ? train_state_checksum(m.params_bf16_flat() + s.offset, s.count * sizeof(bf16))
             : train_state_checksum(m.params_flat() + s.offset, s.count * sizeof(float));
    mine = (mine ^ h) * 0x9E3779B97F4A7C15ull;
  }
  if (lora_) {  // and the adapter, which is what changes
    mine = (mine ^ train_state_checksum(lora_->params(), lora_->size() * sizeof(float))) *
           0x9E3779B97F4A7C15ull;
  }
  uint64_t root = mine;
  world_.broadcast(&root, sizeof root, 0);
  double differ = mine == root ? 0 : 1;
  world_.all_reduce_sum(&differ, 1);
  if (differ == 0) return;
  throw TrainingError("after step " + std::to_string(step + 1) + ", " +
                      (mine != root ? std::string("this rank's") : std::string("some rank's")) +
                      " weights differ from rank 0's (LLMCPU_CHECK_REPLICAS)");
}

}  // namespace llmcpu
