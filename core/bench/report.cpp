// The three forms of `llmcpu bench`'s report (report.h). Times are printed in ms, rates in GFLOP/s
// and GB/s of the median time; the table's header lines name the CPU, the threads and the roofs.
#include "core/bench/report.h"

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "simd/error.h"

namespace llmcpu::bench {
namespace {

std::string fixed(double v, int digits) {
  char s[64];
  std::snprintf(s, sizeof s, "%.*f", digits, v);
  return s;
}

// Three significant figures for times from microseconds to seconds.
std::string ms(double seconds) {
  const double v = seconds * 1e3;
  return fixed(v, v >= 100 ? 1 : v >= 1 ? 3 : 4);
}

std::vector<std::string> cells(const BenchRow& r) {
  return {r.model,
          r.op,
          r.pass,
          r.target,
          r.shape,
          std::to_string(r.per_step),
          ms(r.time.median),
          ms(r.time.min),
          ms(r.time.max),
          fixed(r.gflops, 1),
          fixed(r.gbs, 1),
          r.compute_bound ? "compute" : "memory",
          fixed(r.roof_pct, 1),
          r.tokens_per_s > 0 ? fixed(r.tokens_per_s, 0) : ""};
}

const std::vector<std::string> kTableHeader = {
    "model", "op",     "pass",    "target", "shape",  "calls/step", "ms (med)",
    "min",   "max",    "GFLOP/s", "GB/s",   "bound",  "% roof",     "tok/s"};
const std::vector<std::string> kCsvHeader = {
    "model",  "op",     "pass",   "target",  "shape", "calls_per_step", "ms_median",
    "ms_min", "ms_max", "gflops", "gbs",     "bound", "roof_pct",       "tokens_per_s"};

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

std::string gf(double flops) { return flops > 0 ? fixed(flops / 1e9, 0) + " GFLOP/s" : "absent"; }

std::string table(const BenchReport& rep) {
  const BenchOptions& o = rep.options;
  std::string s = "cpu: " + cpu_model_name() + ", " + std::to_string(rep.threads) + " threads\n";
  s += "model: " + o.model + " (" + describe(o.config) + "), B=" + std::to_string(o.batch) +
       " T=" + std::to_string(o.seq_len) + ", " + precision_name(o.precision) + ", " +
       std::to_string(o.reps) + " reps\n";
  s += roofs::describe(rep.machine) + "\n";
  for (const TargetRoofs& t : rep.roofs) {
    s += "roof of " + t.target + ": fp32 FMA " + gf(t.fp32);
    if (!t.bf16_table.empty()) s += ", bf16 table " + t.bf16_table + " GEMM " + gf(t.gemm);
    s += "\n";
  }
  s += "\n";
  std::vector<std::vector<std::string>> rows{kTableHeader};
  for (const BenchRow& r : rep.rows) rows.push_back(cells(r));
  std::vector<size_t> width(kTableHeader.size(), 0);
  for (const auto& row : rows) {
    for (size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
  }
  // Text columns left-aligned, numbers right-aligned (as llama-bench's markdown).
  auto numeric = [](size_t c) { return c >= 5 && c != 11; };
  auto line = [&](const std::vector<std::string>& row) {
    std::string l = "|";
    for (size_t c = 0; c < row.size(); ++c) {
      const std::string pad(width[c] - row[c].size(), ' ');
      l += ' ';
      l += numeric(c) ? pad + row[c] : row[c] + pad;
      l += " |";
    }
    return l + "\n";
  };
  s += line(rows[0]);
  s += "|";
  for (size_t c = 0; c < width.size(); ++c) {
    s += ' ';
    s.append(numeric(c) ? width[c] - 1 : width[c], '-');
    s += numeric(c) ? ": |" : " |";
  }
  s += "\n";
  for (size_t i = 1; i < rows.size(); ++i) s += line(rows[i]);
  return s;
}

std::string csv(const BenchReport& rep) {
  std::string s;
  for (size_t c = 0; c < kCsvHeader.size(); ++c) {
    if (c) s += ',';
    s += kCsvHeader[c];
  }
  s += "\n";
  for (const BenchRow& r : rep.rows) {
    const std::vector<std::string> row = cells(r);
    for (size_t c = 0; c < row.size(); ++c) {
      if (c) s += ',';
      s += csv_field(row[c]);
    }
    s += "\n";
  }
  return s;
}

std::string json(const BenchReport& rep) {
  const BenchOptions& o = rep.options;
  nlohmann::json j;
  j["cpu"] = cpu_model_name();
  j["threads"] = rep.threads;
  j["model"] = {{"name", o.model},
                {"layers", o.config.num_layers},
                {"heads", o.config.num_heads},
                {"channels", o.config.channels},
                {"vocab_size", o.config.vocab_size},
                {"padded_vocab_size", o.config.padded_vocab_size},
                {"max_seq_len", o.config.max_seq_len}};
  j["batch"] = o.batch;
  j["seq_len"] = o.seq_len;
  j["precision"] = precision_name(o.precision);
  j["reps"] = o.reps;
  j["roofs"] = {{"fp32_flops", rep.machine.fp32},
                {"avx512bf16_flops", rep.machine.dpbf16},
                {"amx_flops", rep.machine.amx},
                {"stream_triad_bytes_per_s", rep.machine.stream_triad},
                {"bandwidth_bytes_per_s", rep.machine.bandwidth}};
  j["targets"] = nlohmann::json::array();
  for (const TargetRoofs& t : rep.roofs) {
    j["targets"].push_back({{"target", t.target},
                            {"bf16_table", t.bf16_table},
                            {"fp32_flops", t.fp32},
                            {"gemm_flops", t.gemm}});
  }
  j["rows"] = nlohmann::json::array();
  for (const BenchRow& r : rep.rows) {
    nlohmann::json row = {{"model", r.model},
                          {"op", r.op},
                          {"pass", r.pass},
                          {"target", r.target},
                          {"shape", r.shape},
                          {"calls_per_step", r.per_step},
                          {"flops", r.flops},
                          {"bytes", r.bytes},
                          {"ms_median", r.time.median * 1e3},
                          {"ms_min", r.time.min * 1e3},
                          {"ms_max", r.time.max * 1e3},
                          {"gflops", r.gflops},
                          {"gbs", r.gbs},
                          {"bound", r.compute_bound ? "compute" : "memory"},
                          {"roof_pct", r.roof_pct}};
    if (r.tokens_per_s > 0) row["tokens_per_s"] = r.tokens_per_s;
    j["rows"].push_back(row);
  }
  return j.dump(2) + "\n";
}

}  // namespace

Format parse_format(const std::string& word) {
  if (word == "table") return Format::kTable;
  if (word == "csv") return Format::kCsv;
  if (word == "json") return Format::kJson;
  throw UsageError("--format: expected table, csv or json, got '" + word + "'");
}

std::string format_report(const BenchReport& report, Format format) {
  switch (format) {
    case Format::kCsv:
      return csv(report);
    case Format::kJson:
      return json(report);
    case Format::kTable:
    default:
      return table(report);
  }
}

std::string cpu_model_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      const size_t colon = line.find(':');
      if (colon != std::string::npos) {
        const size_t start = line.find_first_not_of(' ', colon + 1);
        return start == std::string::npos ? "unknown" : line.substr(start);
      }
    }
  }
  return "unknown";
}

}  // namespace llmcpu::bench
