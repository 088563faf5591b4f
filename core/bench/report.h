// `llmcpu bench`'s output: a markdown table like llama-bench's, CSV with the same rows, or JSON
// with the rows, the roofs and the options.
// Not here: the measuring (core/bench/run.h).
#pragma once

#include <string>

#include "core/bench/run.h"

namespace llmcpu::bench {

// "table", "csv" or "json"; anything else is a UsageError naming --format and the choices.
enum class Format { kTable, kCsv, kJson };
Format parse_format(const std::string& word);

std::string format_report(const BenchReport& report, Format format);

// The CPU's model name as /proc/cpuinfo gives it ("unknown" where it does not).
std::string cpu_model_name();

}  // namespace llmcpu::bench
