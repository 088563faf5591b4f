// The scratch folder and file helpers of the fuzz targets (fuzz_util.h).
#include "tests/fuzz/fuzz_util.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace llmcpu::fuzz {

namespace {

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "fuzz: %s\n", what.c_str());
  std::abort();
}

std::string make_scratch_dir() {
  std::string base;
  if (const char* t = std::getenv("TMPDIR"); t && *t) {
    base = t;
  } else {
    base = ::access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
  }
  std::string pattern = base + "/llmcpu-fuzz-XXXXXX";
  if (!::mkdtemp(pattern.data())) die("cannot create a scratch folder in " + base + ": " + std::strerror(errno));
  return pattern;
}

}  // namespace

const std::string& scratch_dir() {
  // Never destroyed, so that the exit handler can still read it.
  static const std::string* const dir = [] {
    const auto* d = new std::string(make_scratch_dir());
    std::atexit([] {
      std::error_code ec;
      std::filesystem::remove_all(scratch_dir(), ec);
    });
    return d;
  }();
  return *dir;
}

std::string write_file(const std::string& name, const void* data, size_t size) {
  const std::string path = scratch_dir() + "/" + name;
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) die("cannot create " + path + ": " + std::strerror(errno));
  const auto* p = static_cast<const char*>(data);
  for (size_t done = 0; done < size;) {
    const ssize_t n = ::write(fd, p + done, size - done);
    if (n <= 0) die("cannot write " + path + ": " + std::strerror(errno));
    done += size_t(n);
  }
  ::close(fd);
  return path;
}

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) die("cannot read " + path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

void invariant_failed(const char* target, const std::string& what) {
  std::fprintf(stderr, "fuzz %s: invariant broken: %s\n", target, what.c_str());
  std::abort();
}

}  // namespace llmcpu::fuzz
