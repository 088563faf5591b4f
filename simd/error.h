// Typed errors, for every layer: they live here, in the lowest one (simd/), so that the kernel
// dispatch and core throw the same types without simd/ reaching up into core/. Every message says
// what was wrong, where (file, flag or key) and what was expected; the command-line program prints
// it and exits non-zero. Library code never aborts on bad input.
#pragma once

#include <stdexcept>
#include <string>

namespace llmcpu {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A file that cannot be opened, read or written, or whose contents are not what was expected.
class FileError : public Error {
 public:
  FileError(const std::string& path, const std::string& problem)
      : Error(path + ": " + problem), path_(path) {}
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// A bad command-line flag, config key or value.
class UsageError : public Error {
 public:
  using Error::Error;
};

// Shapes that do not fit together (a batch longer than the model's context, a token beyond V, ...).
class ShapeError : public Error {
 public:
  using Error::Error;
};

// A device that failed at run time (an offload plugin's call returned an error): says which call and
// the device's own message.
class DeviceError : public Error {
 public:
  using Error::Error;
};

}  // namespace llmcpu
