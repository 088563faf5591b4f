#include "core/train/interrupt.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>

namespace llmcpu {

namespace {

std::atomic<int> g_signals{0};

void on_signal(int) {
  if (g_signals.fetch_add(1) > 0) {
    constexpr char kMessage[] = "\nsecond interrupt: exiting now\n";
    [[maybe_unused]] auto n = ::write(STDERR_FILENO, kMessage, sizeof(kMessage) - 1);
    ::_exit(130);
  }
}

}  // namespace

void install_interrupt_handler() {
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);
}

bool interrupt_requested() { return g_signals.load() > 0; }
void request_interrupt() { g_signals.store(1); }
void clear_interrupt() { g_signals.store(0); }

}  // namespace llmcpu
