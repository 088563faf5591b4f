// Ctrl-C handling for long runs: the first SIGINT (or SIGTERM) only raises a flag that the training
// loop checks between steps, so it can write a checkpoint and stop cleanly; a second one exits at
// once (atomic writes keep the previous checkpoint intact).
#pragma once

namespace llmcpu {

void install_interrupt_handler();
bool interrupt_requested();
void request_interrupt();  // what the first SIGINT does; also for observers and tests
void clear_interrupt();  // for tests

}  // namespace llmcpu
