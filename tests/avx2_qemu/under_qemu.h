// Running the llmcpu program as an AVX2-only CPU: user-mode QEMU (LLMCPU_QEMU_X86_64, found at
// configure time) with its Haswell-v4 model (AVX2, FMA, F16C, BMI2; no AVX-512), whatever the host
// is; and reading what `llmcpu version` says it chose there. Which tables an AVX2-only CPU may run
// is decided here from Haswell's instruction sets, not read from the dispatcher under test.
// Not here: the checks themselves (test_kernel_choice.cpp, test_model_under_qemu.cpp).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <regex>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "tests/common/process.h"

namespace llmcpu::testing {

// QEMU warns once for each CPUID bit of the model that its TCG does not emulate (pcid, x2apic,
// spec-ctrl, ...); configure refuses a QEMU whose list names AVX, AVX2 or FMA (tests/avx2_qemu/
// CMakeLists.txt), so these lines are harmless and dropped. Every other line of standard error
// stays in the output, QEMU's own reports (an illegal instruction, say) included.
inline std::string without_tcg_warnings(const std::string& out) {
  std::istringstream in(out);
  std::string kept;
  for (std::string line; std::getline(in, line);) {
    const bool tcg =
        line.rfind("qemu", 0) == 0 &&
        line.find(": warning: TCG doesn't support requested feature: ") != std::string::npos;
    if (!tcg) kept += line + "\n";
  }
  return kept;
}

// Runs `llmcpu ARGS` on the emulated Haswell, standard error merged into the output; `env` is an
// optional list of VAR=value assignments (QEMU passes the environment on to the program). A table
// forced or an instruction-set cap set in the caller's environment (LLMCPU_TARGET,
// LLMCPU_BF16_TARGET, LLMCPU_MAX_ISA) is not passed on: the choice under test is the program's own
// on the emulated CPU. OpenMP's idle threads wait passively: emulated threads
// spinning at barriers took several times as long as the work when ctest ran two suites side by
// side on two cores. How threads wait changes no result.
inline Outcome run_avx2(const std::string& args, const std::string& env = "") {
  Outcome r = run_shell(
      "env -u LLMCPU_TARGET -u LLMCPU_BF16_TARGET -u LLMCPU_MAX_ISA OMP_WAIT_POLICY=passive " +
      env + " " + LLMCPU_QEMU_X86_64 " -cpu Haswell-v4 " + LLMCPU_BINARY + " " + args + " 2>&1");
  r.output = without_tcg_warnings(r.output);
  return r;
}

// A kernel table of an x86 instruction set Haswell has (SSE2 to AVX2), or a portable one (the
// scalar reference, Highway's fallback); "+xsmm" and the like name a GEMM on the same ISA.
inline bool runs_on_haswell(std::string_view table) {
  const std::string_view isa = table.substr(0, table.find('+'));
  for (std::string_view ok : {"scalar", "hwy_scalar", "emu128", "sse2", "ssse3", "sse4", "avx2"}) {
    if (isa == ok) return true;
  }
  return false;
}

// Vectorized for AVX2 ("avx2", "avx2+xsmm"): what an AVX2-only CPU should pick by default.
inline bool is_avx2(std::string_view table) { return table.substr(0, table.find('+')) == "avx2"; }

// "a, b, c" -> {a, b, c}; `sep` is ", " in version's lines, "," in bench's help.
inline std::vector<std::string> split_list(const std::string& s, const std::string& sep = ", ") {
  std::vector<std::string> r;
  for (size_t at = 0; at <= s.size();) {
    const size_t end = std::min(s.find(sep, at), s.size());
    if (end > at) r.push_back(s.substr(at, end - at));
    at = end + sep.size();
  }
  return r;
}

inline std::string join_list(const std::vector<std::string>& v, const std::string& sep = ", ") {
  std::string s;
  for (const std::string& x : v) s += (s.empty() ? "" : sep) + x;
  return s;
}

// What `llmcpu version` reports on the emulated CPU.
struct Offered {
  std::vector<std::string> built;  // "kernels built:" (every fp32 table compiled in)
  std::vector<std::string> fp32;   // "runs:", best first
  std::string fp32_default;        // "fp32 kernels:"
  std::vector<std::string> bf16;   // the bf16 tables offered, best first
  std::string bf16_default;        // "bf16 kernels:"
  bool libxsmm = false, onednn = false;
};

inline std::string line_value(const std::string& out, const std::string& label) {
  std::smatch m;
  if (!std::regex_search(out, m, std::regex("(^|\n) *" + label + " +([^\n]*)"))) {
    ADD_FAILURE() << "no '" << label << "' line in\n" << out;
    return "";
  }
  return m[2].str();
}

inline Offered offered_under_qemu() {
  const Outcome r = run_avx2("version");
  EXPECT_EQ(r.status, 0) << r.output;
  Offered o;
  o.built = split_list(line_value(r.output, "kernels built:"));
  o.fp32 = split_list(line_value(r.output, "runs:"));
  std::smatch m;
  const std::string fp32 = line_value(r.output, "fp32 kernels:");
  o.fp32_default = fp32.substr(0, fp32.find(' '));
  const std::string bf16 = line_value(r.output, "bf16 kernels:");
  if (std::regex_match(bf16, m, std::regex("([^ ]+) \\(of (.*)\\)"))) {
    o.bf16_default = m[1].str();
    o.bf16 = split_list(m[2].str());
  } else {
    ADD_FAILURE() << "bf16 kernels: '" << bf16 << "', expected 'TABLE (of LIST)'";
  }
  o.libxsmm = line_value(r.output, "libxsmm:") == "built in";
  o.onednn = line_value(r.output, "oneDNN:") == "built in";
  return o;
}

}  // namespace llmcpu::testing
