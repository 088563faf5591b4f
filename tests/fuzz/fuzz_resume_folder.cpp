// Fuzz target: how --resume finds the checkpoints in a folder (list_checkpoints and
// latest_checkpoint, core/train/trainer.h), from the files' names. The input is up to kMaxNames
// file names separated by newlines (names with '/' or NUL, empty ones, "." and ".." are skipped);
// each becomes an empty file in a fresh folder. Every step listed must have both of its files, the
// steps must be ascending and unique, and the latest must be the last.
#include <filesystem>
#include <string_view>
#include <vector>

#include "core/train/trainer.h"
#include "tests/fuzz/fuzz_util.h"

namespace {
constexpr const char* kTarget = "resume_folder";
constexpr size_t kMaxNames = 16;
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace llmcpu;
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(fuzz::scratch_dir()) / "ckpt";
  std::error_code ec;
  fs::remove_all(dir, ec);
  fs::create_directory(dir);
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  size_t count = 0;
  for (size_t pos = 0; pos <= text.size() && count < kMaxNames;) {
    const size_t end = std::min(text.find('\n', pos), text.size());
    const std::string_view name = text.substr(pos, end - pos);
    pos = end + 1;
    if (name.empty() || name.size() > 255 || name == "." || name == ".." ||
        name.find_first_of(std::string_view("/\0", 2)) != std::string_view::npos) {
      continue;
    }
    fuzz::write_file("ckpt/" + std::string(name), "", 0);
    ++count;
  }
  std::vector<int64_t> steps;
  if (!fuzz::accepts([&] { steps = list_checkpoints(dir.string()); })) return 0;
  for (size_t i = 0; i < steps.size(); ++i) {
    LLMCPU_FUZZ_CHECK(kTarget, steps[i] >= 0 && (i == 0 || steps[i - 1] < steps[i]),
                      "the steps are not ascending, unique and non-negative");
    LLMCPU_FUZZ_CHECK(kTarget,
                      fs::is_regular_file(checkpoint_model_path(dir.string(), steps[i])) &&
                          fs::is_regular_file(checkpoint_state_path(dir.string(), steps[i])),
                      "step " + std::to_string(steps[i]) + " is listed without both of its files");
  }
  const int64_t latest = latest_checkpoint(dir.string());
  LLMCPU_FUZZ_CHECK(kTarget, latest == (steps.empty() ? -1 : steps.back()),
                    "latest_checkpoint is not the last listed step");
  return 0;
}
