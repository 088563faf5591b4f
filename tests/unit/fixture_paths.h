// Where the tests find the committed PyTorch fixtures and the llmcpu program.
#pragma once

#include <string>

namespace llmcpu::testing {

inline std::string fixture(const std::string& name, const std::string& suffix) {
  return std::string(LLMCPU_FIXTURE_DIR) + "/" + name + "_" + suffix;
}

struct FixtureShape {
  const char* name;
  int B, T;
};

// The committed fixtures (tests/fixtures/make_fixtures.sh) and the batch shape each was made with.
inline constexpr FixtureShape kFixtures[] = {{"tiny", 2, 13}, {"small", 3, 32}, {"edge", 1, 7}};

}  // namespace llmcpu::testing
