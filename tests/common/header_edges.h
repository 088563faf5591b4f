// Every field of a file header at its edges: the machinery of the tables in
// tests/unit/test_header_edges.cpp and tests/tokenizer/test_header_edges.cpp. A format is a valid
// file (a committed fixture or one the project's own writer makes), its real loader and one table
// of its header's fields {name, byte offset, type}. Each field is set in turn to 0, -1, INT32_MAX,
// INT32_MIN, for a 64-bit field also INT64_MAX and INT64_MIN (INT64_MAX cut to 32 bits is -1,
// INT64_MIN is 0: already there), for a one-byte field to 0 and 0xFF, and for a size, count,
// index or offset to the value just past what the file holds, in the field's units. The loader
// must then refuse the file with a FileError naming it and saying what the table expects (the
// field, what was expected), or, where the table says why the value is legitimate, load it. A
// value equal to the field's own leaves the file as it was: it must load. The loads run under a
// cap on the address space, so a header that makes a loader size a buffer from it fails as
// std::bad_alloc rather than taking the machine's memory. Not here: the tables themselves.
#pragma once

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cctype>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "simd/error.h"
#include "tests/common/temp_files.h"

namespace llmcpu::testing {

// How a field is stored (little-endian), and so how a loader prints its value.
enum class FieldType { kU8, kI32, kU32, kI64, kU64 };

inline size_t field_bytes(FieldType t) {
  switch (t) {
    case FieldType::kU8:
      return 1;
    case FieldType::kI32:
    case FieldType::kU32:
      return 4;
    default:
      return 8;
  }
}

// The field's value as its loader prints it (signed or not, of its width).
inline std::string field_text(FieldType t, int64_t bits) {
  switch (t) {
    case FieldType::kU8:
      return std::to_string(uint8_t(bits));
    case FieldType::kI32:
      return std::to_string(int32_t(bits));
    case FieldType::kU32:
      return std::to_string(uint32_t(bits));
    case FieldType::kI64:
      return std::to_string(bits);
    case FieldType::kU64:
      return std::to_string(uint64_t(bits));
  }
  return "?";
}

// What loading the edited file must do.
struct EdgeOutcome {
  // Refused: the FileError's message holds each of these besides the path; "{}" stands for the
  // edge value as the field's type prints it.
  std::vector<std::string> words;
  std::string valid_because;  // not empty: the value is legitimate, for this reason; the file loads
};
inline EdgeOutcome refused(std::vector<std::string> words) { return {std::move(words), ""}; }
inline EdgeOutcome legitimate(std::string why) { return {{}, std::move(why)}; }

inline constexpr const char* kZero = "Zero";
inline constexpr const char* kMinusOne = "MinusOne";
inline constexpr const char* kInt32Max = "Int32Max";
inline constexpr const char* kInt32Min = "Int32Min";
inline constexpr const char* kInt64Max = "Int64Max";
inline constexpr const char* kInt64Min = "Int64Min";
inline constexpr const char* kPastTheFile = "PastTheFile";

struct HeaderField {
  HeaderField(std::string name, int64_t offset, FieldType type, EdgeOutcome outcome)
      : name(std::move(name)), offset(offset), type(type), outcome(std::move(outcome)) {}

  std::string name;  // as the format names it
  // Byte offset; negative: from the end of the file (a trailing checksum).
  int64_t offset;
  FieldType type;
  EdgeOutcome outcome;                        // for every edge that `except` does not name
  std::map<std::string, EdgeOutcome> except;  // by edge (kZero, ...)
  // A size, count, index or offset: the value just past what the valid file holds, in the
  // field's units. Empty for the others.
  std::function<int64_t(const Bytes& file)> past = {};
  bool is_checksum = false;  // edited as it is: the format's seal is not applied after the edit
};

struct Format {
  std::string name;
  std::function<Bytes(const std::string& dir)> make;  // the valid file, made in `dir`
  std::function<void(const std::string& path)> load;  // the real loader
  std::function<void(Bytes& file)> seal = {};  // after an edit (a trailing checksum); may be empty
  std::vector<HeaderField> fields;
};

struct EdgeValue {
  const char* label;
  int64_t bits;  // its lowest field_bytes() bytes are written
};

inline std::vector<EdgeValue> edge_values(const HeaderField& f) {
  std::vector<EdgeValue> v;
  if (f.type == FieldType::kU8) {
    v = {{kZero, 0}, {kMinusOne, -1}};
  } else {
    v = {{kZero, 0},
         {kMinusOne, -1},
         {kInt32Max, std::numeric_limits<int32_t>::max()},
         {kInt32Min, std::numeric_limits<int32_t>::min()}};
    if (field_bytes(f.type) == 8) {
      v.push_back({kInt64Max, std::numeric_limits<int64_t>::max()});
      v.push_back({kInt64Min, std::numeric_limits<int64_t>::min()});
    }
  }
  if (f.past) v.push_back({kPastTheFile, 0});  // computed from the valid file
  return v;
}

template <typename T>
T read_field(const Bytes& file, size_t offset) {
  T v;
  std::memcpy(&v, file.data() + offset, sizeof v);
  return v;
}

// One test per field of a format: every edge of the field in turn.
struct FieldCase {
  const Format* format;
  const HeaderField* field;
};

inline std::vector<FieldCase> field_cases(const std::vector<Format>& formats) {
  std::vector<FieldCase> cases;
  for (const Format& format : formats) {
    for (const HeaderField& field : format.fields) cases.push_back({&format, &field});
  }
  return cases;
}

// "TrainStateZeroMarker_checksum_0_": letters, digits and '_' only, as GoogleTest wants.
inline std::string test_name_part(const std::string& s) {
  std::string out;
  for (char c : s) out += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return out;
}

inline std::string field_case_name(const ::testing::TestParamInfo<FieldCase>& info) {
  return test_name_part(info.param.format->name + "_" + info.param.field->name);
}

inline void PrintTo(const FieldCase& c, std::ostream* os) {
  *os << c.format->name << " " << c.field->name;
}

inline std::string with_value(const std::string& word, const std::string& value) {
  std::string out = word;
  const size_t at = out.find("{}");
  if (at != std::string::npos) out.replace(at, 2, value);
  return out;
}

// Caps the address space at what is mapped now plus `headroom` while it lives: a loader that sizes
// a buffer from a hostile header then meets std::bad_alloc instead of taking the machine's memory.
// Off under AddressSanitizer, whose own mappings are sized on their own terms.
class AddressSpaceCap {
 public:
  explicit AddressSpaceCap(size_t headroom = size_t(1) << 30) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    (void)headroom;
#else
    std::ifstream statm("/proc/self/statm");
    size_t pages = 0;
    if (!(statm >> pages) || ::getrlimit(RLIMIT_AS, &old_) != 0) return;
    rlimit cap = old_;
    const rlim_t want = rlim_t(pages) * rlim_t(::sysconf(_SC_PAGESIZE)) + headroom;
    if (cap.rlim_max != RLIM_INFINITY && cap.rlim_max < want) return;
    cap.rlim_cur = want;
    active_ = ::setrlimit(RLIMIT_AS, &cap) == 0;
#endif
  }
  AddressSpaceCap(const AddressSpaceCap&) = delete;
  AddressSpaceCap& operator=(const AddressSpaceCap&) = delete;
  ~AddressSpaceCap() {
    if (active_) ::setrlimit(RLIMIT_AS, &old_);
  }

 private:
  rlimit old_{};
  bool active_ = false;
};

// Loads `path` under the cap and checks the outcome: `value` is the edge as the field prints it.
inline void expect_outcome(const std::function<void(const std::string&)>& load,
                           const std::string& path, const EdgeOutcome& outcome,
                           const std::string& value) {
  if (!outcome.valid_because.empty()) {
    try {
      const AddressSpaceCap cap;
      load(path);
    } catch (const std::exception& e) {
      ADD_FAILURE() << "refused a legitimate value (" << outcome.valid_because << "): " << e.what();
    }
    return;
  }
  std::vector<std::string> words;
  for (const std::string& w : outcome.words) words.push_back(with_value(w, value));
  std::string what;
  try {
    const AddressSpaceCap cap;
    load(path);
  } catch (const FileError& e) {
    EXPECT_EQ(e.path(), path);
    what = e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected a FileError, got: " << e.what();
    return;
  }
  if (what.empty()) {
    ADD_FAILURE() << path << ": loaded without an error";
    return;
  }
  EXPECT_NE(what.find(path), std::string::npos) << "the message does not name the file: " << what;
  for (const std::string& w : words) {
    EXPECT_NE(what.find(w), std::string::npos) << "'" << w << "' missing in: " << what;
  }
}

// A fresh folder per parameterised test, removed afterwards.
class EdgeTest : public ::testing::TestWithParam<FieldCase> {
 protected:
  void SetUp() override {
    static int serial = 0;
    dir_ = std::filesystem::path(::testing::TempDir()) /
           ("llmcpu_header_edges_" + std::to_string(::getpid()) + "_" + std::to_string(serial++));
    std::filesystem::remove_all(dir_);
    ASSERT_TRUE(std::filesystem::create_directories(dir_)) << dir_;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // The valid file of `format`, made once per process.
  static const Bytes& valid_file(const Format& format, const std::string& dir) {
    static std::map<std::string, Bytes> made;
    auto it = made.find(format.name);
    if (it == made.end()) {
      std::filesystem::create_directories(dir);
      it = made.emplace(format.name, format.make(dir)).first;
    }
    return it->second;
  }

  // Sets the case's field to each of its edge values in turn in the valid file, seals it, writes
  // it into the folder and loads it.
  void run_case() {
    const Format& format = *GetParam().format;
    const HeaderField& field = *GetParam().field;
    const Bytes& valid = valid_file(format, (dir_ / "made").string());
    const size_t width = field_bytes(field.type);
    const size_t at =
        field.offset < 0 ? valid.size() - size_t(-field.offset) : size_t(field.offset);
    ASSERT_LE(at + width, valid.size()) << field.name << " lies outside the valid file";
    const std::string path = (dir_ / ("edited_" + format.name + ".bin")).string();
    for (const EdgeValue& edge : edge_values(field)) {
      const int64_t bits = std::string(edge.label) == kPastTheFile ? field.past(valid) : edge.bits;
      Bytes file = valid;
      std::memcpy(file.data() + at, &bits, width);  // little-endian: the lowest bytes
      if (format.seal && !field.is_checksum) format.seal(file);
      write_bytes(path, file);
      const auto special = field.except.find(edge.label);
      EdgeOutcome outcome = special != field.except.end() ? special->second : field.outcome;
      if (file == valid) outcome = legitimate("the field's own value: the file is unchanged");
      const std::string value = field_text(field.type, bits);
      SCOPED_TRACE(format.name + ": " + field.name + " = " + edge.label + " (" + value + ")");
      expect_outcome(format.load, path, outcome, value);
    }
  }

  std::filesystem::path dir_;
};

}  // namespace llmcpu::testing
