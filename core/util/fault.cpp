#include "core/util/fault.h"

#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "simd/error.h"

namespace llmcpu {

namespace {

struct Fault {
  FaultAction action;
  std::string point;
  long visit;  // 1-based
};

struct FaultPlan {
  std::vector<Fault> faults;
  std::map<std::string, long, std::less<>> visits;
  std::mutex mutex;
};

FaultAction parse_action(const std::string& word, const std::string& spec) {
  if (word == "kill") return FaultAction::kKill;
  if (word == "enospc") return FaultAction::kEnospc;
  if (word == "eio") return FaultAction::kEio;
  if (word == "nan") return FaultAction::kNan;
  throw UsageError("LLMCPU_FAULT: '" + spec + "': unknown action '" + word +
                   "' (expected kill, enospc, eio or nan)");
}

FaultPlan* load_plan() {
  const char* env = std::getenv("LLMCPU_FAULT");
  if (!env || !*env) return nullptr;
  auto* plan = new FaultPlan;  // lives as long as the process
  const std::string text = env;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = std::min(text.find(',', start), text.size());
    const std::string spec = text.substr(start, comma - start);
    start = comma + 1;
    if (spec.empty()) continue;
    const size_t at = spec.find('@');
    if (at == std::string::npos) {
      throw UsageError("LLMCPU_FAULT: '" + spec + "': expected ACTION@POINT[#N]");
    }
    Fault f{parse_action(spec.substr(0, at), spec), spec.substr(at + 1), 1};
    if (const size_t hash = f.point.find('#'); hash != std::string::npos) {
      const std::string n = f.point.substr(hash + 1);
      char* end = nullptr;
      f.visit = std::strtol(n.c_str(), &end, 10);
      if (n.empty() || *end != '\0' || f.visit < 1) {
        throw UsageError("LLMCPU_FAULT: '" + spec + "': #N must be a positive number");
      }
      f.point.resize(hash);
    }
    plan->faults.push_back(f);
  }
  return plan;
}

FaultPlan* plan() {
  static FaultPlan* const p = load_plan();
  return p;
}

}  // namespace

bool faults_enabled() { return plan() != nullptr; }

FaultAction fault_at(std::string_view point) {
  FaultPlan* p = plan();
  if (!p) return FaultAction::kNone;
  std::lock_guard lock(p->mutex);
  auto it = p->visits.find(point);
  if (it == p->visits.end()) it = p->visits.emplace(std::string(point), 0).first;
  const long visit = ++it->second;
  for (const Fault& f : p->faults) {
    if (f.point == point && f.visit == visit) return f.action;
  }
  return FaultAction::kNone;
}

void fault_kill_now() {
  ::kill(::getpid(), SIGKILL);
  ::_exit(137);  // not reached
}

}  // namespace llmcpu
