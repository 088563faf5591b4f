#include "core/io/train_state.h"

#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>

#include "core/io/hf_llama_config.h"
#include "core/model/parameters.h"
#include "core/util/file.h"
#include "simd/error.h"

namespace llmcpu {

namespace {

// A 64-bit checksum over bytes, 8 at a time (multiply-xorshift); catches torn or corrupted files.
class Checksum {
 public:
  void add(const void* data, size_t n) {
    const auto* p = static_cast<const uint8_t*>(data);
    for (; n > 0 && filled_ != 0; --n) {
      word_ |= uint64_t(*p++) << (8 * filled_);
      if (++filled_ == 8) flush();
    }
    for (; n >= 8; n -= 8, p += 8) {  // whole words: the same result as byte by byte, faster
      std::memcpy(&word_, p, 8);
      flush();
    }
    for (; n > 0; --n) {
      word_ |= uint64_t(*p++) << (8 * filled_);
      if (++filled_ == 8) flush();
    }
  }
  uint64_t value() {
    if (filled_) flush();
    return h_ ^ (h_ >> 29);
  }

 private:
  void flush() {
    h_ = (h_ ^ word_) * 0x9E3779B97F4A7C15ull;
    h_ ^= h_ >> 32;
    word_ = 0;
    filled_ = 0;
  }
  uint64_t h_ = 0xCBF29CE484222325ull;
  uint64_t word_ = 0;
  int filled_ = 0;
};

class Writer {
 public:
  static constexpr size_t kPiece = size_t(1) << 20;

  explicit Writer(AtomicFileWriter& out) : out_(out) {}
  template <typename T>
  void put(const T& v) { bytes(&v, sizeof(T)); }
  template <typename T>
  void array(std::span<const T> v) { bytes(v.data(), v.size_bytes()); }
  // In pieces that stay in cache between the checksum and the write; no copy is made.
  void bytes(const void* data, size_t n) {
    const auto* p = static_cast<const uint8_t*>(data);
    for (size_t done = 0; done < n;) {
      const size_t piece = std::min(kPiece, n - done);
      sum_.add(p + done, piece);
      out_.write(p + done, piece);
      done += piece;
    }
  }
  uint64_t checksum() { return sum_.value(); }

 private:
  AtomicFileWriter& out_;
  Checksum sum_;
};

class Reader {
 public:
  explicit Reader(const MappedFile& f) : f_(f), end_(f.size()) {}
  // Where the fields end (before the trailing checksum), once the file is known to have one.
  void set_end(size_t end) { end_ = end; }
  template <typename T>
  T get(const char* what) {
    T v;
    need(sizeof(T), what);
    std::memcpy(&v, f_.data() + off_, sizeof(T));
    off_ += sizeof(T);
    return v;
  }
  template <typename T>
  void array(std::vector<T>& v, uint64_t n, const char* what) {
    if (n > (end_ - off_) / sizeof(T)) need(SIZE_MAX, what);
    v.resize(n);
    if (n > 0) std::memcpy(v.data(), f_.data() + off_, n * sizeof(T));  // data() may be null
    off_ += n * sizeof(T);
  }
  // Steps over n values of T (checked to be there) and returns the offset of the first.
  template <typename T>
  size_t skip(uint64_t n, const char* what) {
    if (n > (end_ - off_) / sizeof(T)) need(SIZE_MAX, what);
    const size_t at = off_;
    off_ += n * sizeof(T);
    return at;
  }
  size_t offset() const { return off_; }

 private:
  void need(size_t n, const char* what) {
    if (n > end_ - off_) {
      throw FileError(f_.path(), std::string("truncated: ends inside ") + what + " at byte " +
                                     std::to_string(f_.size()));
    }
  }
  const MappedFile& f_;
  size_t end_;
  size_t off_ = 0;
};

// What the file alone can tell of its data position (the shards it indexes are checked on resume,
// by DataLoader::restore).
void check_data_position(const std::string& path, const TrainState& s) {
  const DataPosition& d = s.data;
  if (d.rng_state == 0) {
    throw FileError(path,
                    "the data position's rng_state is 0, which the xorshift64* generator "
                    "never holds (it would stay 0)");
  }
  if (d.shard >= d.shard_order.size()) {
    throw FileError(path, "the data position's shard index " + std::to_string(d.shard) +
                              " is not below the shard order's " +
                              std::to_string(d.shard_order.size()) + " entries");
  }
  if (s.shuffle == d.sample_order.empty()) {
    throw FileError(path, s.shuffle ? "a shuffled run's data position has no sample order"
                                    : "a run without shuffling has a sample order (" +
                                          std::to_string(d.sample_order.size()) + " entries)");
  }
  if (s.shuffle && d.sample > d.sample_order.size()) {
    throw FileError(path, "the data position's sample index " + std::to_string(d.sample) +
                              " is past the sample order's " +
                              std::to_string(d.sample_order.size()) + " entries");
  }
}

// The magic and version, and the trailing checksum over the rest; the reader then stops before the
// checksum. Returns the version.
uint32_t read_envelope(Reader& r, const MappedFile& f, const std::string& path) {
  if (f.size() < 8 || r.get<uint32_t>("the magic") != kTrainStateMagic) {
    throw FileError(path, "not an llmcpu training state (bad magic; expected \"LCTS\")");
  }
  const uint32_t version = r.get<uint32_t>("the version");
  if (version < 1 || version > kTrainStateVersion) {
    throw FileError(path, "unsupported training state version " + std::to_string(version) +
                              ", expected 1 to " + std::to_string(kTrainStateVersion));
  }
  if (f.size() < 8 + sizeof(uint64_t)) throw FileError(path, "truncated");
  uint64_t stored;
  std::memcpy(&stored, f.data() + f.size() - 8, 8);
  if (train_state_checksum(f.data(), f.size() - 8) != stored) {
    throw FileError(path, "checksum mismatch: the file is corrupt or was not written completely");
  }
  r.set_end(f.size() - 8);
  return version;
}

// The model's shape and the batch: B, T (within the model's context) and grad_accum. From version
// 4 a Llama-family model's architecture follows as its config.json text.
void read_shape(Reader& r, const std::string& path, uint32_t version, TrainState& s) {
  ModelConfig& c = s.config;
  c.max_seq_len = r.get<int32_t>("the model shape");
  c.vocab_size = r.get<int32_t>("the model shape");
  c.num_layers = r.get<int32_t>("the model shape");
  c.num_heads = r.get<int32_t>("the model shape");
  c.channels = r.get<int32_t>("the model shape");
  c.padded_vocab_size = r.get<int32_t>("the model shape");
  if (version >= 4) {
    std::vector<char> text;
    r.array(text, r.get<uint32_t>("the architecture"), "the architecture");
    if (version >= 5) {
      std::vector<char> adapter;
      r.array(adapter, r.get<uint32_t>("the adapter"), "the adapter");
      if (adapter.empty()) {
        throw FileError(path, "a version " + std::to_string(version) + " state without its adapter");
      }
      s.adapter.assign(adapter.begin(), adapter.end());
    }
    if (!text.empty()) {
      const nlohmann::json cfg = nlohmann::json::parse(text.begin(), text.end(), nullptr, false);
      if (cfg.is_discarded()) throw FileError(path, "the architecture is not JSON");
      const ModelConfig arch = read_llama_config(cfg, path + " (its architecture)");
      if (arch.vocab_size != c.vocab_size || arch.num_layers != c.num_layers ||
          arch.num_heads != c.num_heads || arch.channels != c.channels) {
        throw FileError(path, "the architecture (" + describe(arch) +
                                  ") does not match the model shape");
      }
      const int maxT = c.max_seq_len;
      c = arch;
      c.max_seq_len = maxT;  // a Mistral's window may have capped it
    }
  }
  try {
    validate(c, path);
  } catch (const ShapeError& e) {
    throw FileError(path, std::string("invalid model shape: ") + e.what());
  }
  s.B = r.get<int32_t>("B");
  s.T = r.get<int32_t>("T");
  s.grad_accum = r.get<int32_t>("grad_accum");
  if (s.B <= 0) {
    throw FileError(path, "batch size B=" + std::to_string(s.B) + ", expected a positive number");
  }
  if (s.T <= 0 || s.T > c.max_seq_len) {
    throw FileError(path, "sequence length T=" + std::to_string(s.T) + " is not in 1..maxT=" +
                              std::to_string(c.max_seq_len) + " (the model's context)");
  }
  if (s.grad_accum <= 0) {
    throw FileError(path, "grad_accum=" + std::to_string(s.grad_accum) +
                              ", expected a positive number of micro-batches per step");
  }
}

// Shuffling, the seed, the precision (from version 2), and the completed steps and AdamW updates.
void read_run(Reader& r, const std::string& path, uint32_t version, TrainState& s) {
  const uint8_t shuffle = r.get<uint8_t>("shuffle");
  if (shuffle > 1) {
    throw FileError(path, "invalid shuffle flag " + std::to_string(shuffle) +
                              ", expected 0 (in order) or 1 (shuffled)");
  }
  s.shuffle = shuffle == 1;
  s.seed = r.get<uint64_t>("seed");
  if (version >= 2) {
    const uint8_t precision = r.get<uint8_t>("the precision");
    if (precision > 1) {
      throw FileError(path, "invalid precision code " + std::to_string(precision) +
                                ", expected 0 (fp32) or 1 (bf16)");
    }
    s.precision = precision == 1 ? Precision::kBf16 : Precision::kFp32;
  }
  if (version >= 6) {
    const uint8_t quant = r.get<uint8_t>("the base's format");
    if (quant > 2) {
      throw FileError(path, "invalid base format code " + std::to_string(quant) +
                                ", expected 0 (none), 1 (int8) or 2 (nf4)");
    }
    s.base_quant = quant == 1 ? QuantFormat::kInt8 : quant == 2 ? QuantFormat::kNf4
                                                                : QuantFormat::kNone;
  }
  s.step = r.get<int64_t>("step");
  s.adamw_t = r.get<int64_t>("adamw_t");
  if (s.step < 0) {
    throw FileError(path, "step " + std::to_string(s.step) +
                              ", expected a non-negative number of completed steps");
  }
  if (s.adamw_t < 0 || s.adamw_t > s.step) {
    throw FileError(path, "adamw_t " + std::to_string(s.adamw_t) + " is not in 0.." +
                              std::to_string(s.step) + " (step " + std::to_string(s.step) +
                              "): AdamW takes at most one update per completed step");
  }
}

// The data position: epoch, generator, shard and sample, and the orders they index.
void read_data_position(Reader& r, const std::string& path, TrainState& s) {
  s.data.epoch = r.get<uint64_t>("the data position");
  s.data.rng_state = r.get<uint64_t>("the data position");
  s.data.shard = r.get<uint32_t>("the data position");
  s.data.sample = r.get<uint64_t>("the data position");
  r.array(s.data.shard_order, r.get<uint32_t>("the shard order"), "the shard order");
  r.array(s.data.sample_order, r.get<uint64_t>("the sample order"), "the sample order");
  check_data_position(path, s);
}

}  // namespace

void save_train_state(const std::string& path, const TrainState& s, std::span<const float> params,
                      std::span<const float> m, std::span<const float> v) {
  AtomicFileWriter out(path);
  write_train_state(out, s, params, m, v);
  out.commit();
}

void write_train_state(AtomicFileWriter& out, const TrainState& s, std::span<const float> params,
                       std::span<const float> m, std::span<const float> v) {
  const bool lora = !s.adapter.empty();
  const size_t P = lora ? s.adapter_parameters : ParameterLayout(s.config).total();
  const size_t want = s.shards() > 0 ? 0 : P;
  if (params.size() != want || m.size() != want || v.size() != want) {
    throw Error("write_train_state(" + out.path() + "): tensor sizes do not match the model");
  }
  Writer w(out);
  w.put(kTrainStateMagic);
  // GPT-2's states stay version 3, the files every earlier reader takes; the Llama family's 4.
  w.put(lora ? uint32_t(6) : s.config.family().llmc_files ? uint32_t(3) : uint32_t(4));
  const ModelConfig& c = s.config;
  for (int v : {c.max_seq_len, c.vocab_size, c.num_layers, c.num_heads, c.channels,
                c.padded_vocab_size}) {
    w.put(int32_t(v));
  }
  if (!c.family().llmc_files || lora) {  // the architecture as config.json states it
    const std::string arch =
        c.family().llmc_files ? "" : llama_config_json(c, TensorDtype::kF32, {}).dump();
    w.put(uint32_t(arch.size()));
    w.array(std::span<const char>(arch));
  }
  if (lora) {
    w.put(uint32_t(s.adapter.size()));
    w.array(std::span<const char>(s.adapter));
  }
  for (int v : {s.B, s.T, s.grad_accum}) w.put(int32_t(v));
  w.put(uint8_t(s.shuffle));
  w.put(s.seed);
  w.put(uint8_t(s.precision == Precision::kBf16 ? 1 : 0));
  if (lora) {
    w.put(uint8_t(s.base_quant == QuantFormat::kInt8  ? 1
                  : s.base_quant == QuantFormat::kNf4 ? 2
                                                      : 0));
  }
  w.put(s.step);
  w.put(s.adamw_t);
  w.put(s.data.epoch);
  w.put(s.data.rng_state);
  w.put(s.data.shard);
  w.put(s.data.sample);
  w.put(uint32_t(s.data.shard_order.size()));
  w.array(std::span<const uint32_t>(s.data.shard_order));
  w.put(uint64_t(s.data.sample_order.size()));
  w.array(std::span<const uint32_t>(s.data.sample_order));
  w.put(uint64_t(P));
  w.put(s.shards());
  w.array(std::span<const uint64_t>(s.shard_checksums));
  w.array(params);
  w.array(m);
  w.array(v);
  const uint64_t sum = w.checksum();
  out.write(&sum, sizeof(sum));
}

std::string state_shard_path(const std::string& state_path, uint32_t rank, uint32_t ranks) {
  const std::string stem = state_path.substr(0, state_path.size() - 4);  // without ".bin"
  return stem + ".rank" + std::to_string(rank) + "-of-" + std::to_string(ranks) + ".bin";
}

uint64_t write_state_shard(AtomicFileWriter& out, const StateShardHeader& h, const float* params,
                           std::span<const ParameterSpan> parts, std::span<const float> m,
                           std::span<const float> v) {
  const uint64_t Q = packed_size(parts);
  if (Q != h.count || m.size() != Q || v.size() != Q) {
    throw Error("write_state_shard(" + out.path() + "): tensor sizes do not match the header");
  }
  Writer w(out);
  w.put(kStateShardMagic);
  w.put(kStateShardVersion);
  w.put(h.step);
  w.put(h.rank);
  w.put(h.ranks);
  w.put(h.num_parameters);
  w.put(h.count);
  for (const ParameterSpan& p : parts) w.array(std::span<const float>(params + p.offset, p.count));
  w.array(m);
  w.array(v);
  const uint64_t sum = w.checksum();
  out.write(&sum, sizeof(sum));
  return sum;
}

TrainStateFile::TrainStateFile(const std::string& path) : file_(path) {
  const MappedFile& f = file_;
  Reader r(f);
  const uint32_t version = read_envelope(r, f, path);
  TrainState& s = state_;
  read_shape(r, path, version, s);
  read_run(r, path, version, s);
  read_data_position(r, path, s);
  const ModelConfig& c = s.config;
  const uint64_t P = r.get<uint64_t>("the parameter count");
  if (!s.adapter.empty()) {
    s.adapter_parameters = P;  // the adapter's: its reader knows how many to expect
  } else if (P != ParameterLayout(c).total()) {
    throw FileError(path, "holds " + std::to_string(P) + " parameters, but the model " +
                              describe(c) + " has " + std::to_string(ParameterLayout(c).total()));
  }
  num_parameters_ = P;
  const uint32_t shards = version >= 3 ? r.get<uint32_t>("the shard count") : 0;
  r.array(s.shard_checksums, shards, "the shard checksums");
  const uint64_t own = shards > 0 ? 0 : P;  // the tensors this file holds itself
  tensors_offset_ = r.skip<float>(own, "the weights");
  r.skip<float>(own, "the AdamW moments");
  r.skip<float>(own, "the AdamW moments");
  if (r.offset() + 8 != f.size()) {
    throw FileError(path, "length mismatch: " + std::to_string(f.size() - 8 - r.offset()) +
                              " unexpected bytes before the checksum");
  }
}

void TrainStateFile::read_tensors(std::span<float> params, std::span<float> m,
                                  std::span<float> v) const {
  if (state_.shards() > 0) {
    throw Error("TrainStateFile::read_tensors(" + file_.path() + "): the tensors are in " +
                std::to_string(state_.shards()) + " shard files");
  }
  const size_t P = num_parameters_;
  if (params.size() != P || m.size() != P || v.size() != P) {
    throw Error("TrainStateFile::read_tensors(" + file_.path() + "): the file holds " +
                std::to_string(P) + " parameters, the destinations are " +
                std::to_string(params.size()) + ", " + std::to_string(m.size()) + " and " +
                std::to_string(v.size()));
  }
  const uint8_t* p = file_.data() + tensors_offset_;
  for (std::span<float> out : {params, m, v}) {
    std::memcpy(out.data(), p, out.size_bytes());
    p += out.size_bytes();
  }
}

const void* TrainStateFile::tensor_bytes(int i) const {
  if (state_.shards() > 0) {
    throw Error("TrainStateFile::tensor_bytes(" + file_.path() + "): the tensors are in shards");
  }
  return file_.data() + tensors_offset_ + size_t(i) * num_parameters_ * sizeof(float);
}

TrainState load_train_state(const std::string& path) { return TrainStateFile(path).state(); }

StateShardFile::StateShardFile(const std::string& path, const StateShardHeader& want)
    : file_(path) {
  const MappedFile& f = file_;
  Reader r(f);
  if (f.size() < 8 || r.get<uint32_t>("the magic") != kStateShardMagic) {
    throw FileError(path, "not an llmcpu training-state shard (bad magic; expected \"LCSH\")");
  }
  const uint32_t version = r.get<uint32_t>("the version");
  if (version != kStateShardVersion) {
    throw FileError(path, "unsupported training-state shard version " + std::to_string(version) +
                              ", expected " + std::to_string(kStateShardVersion));
  }
  if (f.size() < 16) throw FileError(path, "truncated");
  std::memcpy(&checksum_, f.data() + f.size() - 8, 8);
  if (train_state_checksum(f.data(), f.size() - 8) != checksum_) {
    throw FileError(path, "checksum mismatch: the file is corrupt or was not written completely");
  }
  r.set_end(f.size() - 8);
  StateShardHeader h;
  h.step = r.get<int64_t>("the step");
  h.rank = r.get<uint32_t>("the rank");
  h.ranks = r.get<uint32_t>("the rank count");
  h.num_parameters = r.get<uint64_t>("the parameter count");
  h.count = r.get<uint64_t>("the element count");
  auto expect = [&](const char* what, auto got, auto wanted) {
    if (got != wanted) {
      throw FileError(path, std::string("holds ") + what + " " + std::to_string(got) +
                                ", expected " + std::to_string(wanted));
    }
  };
  expect("the state of step", h.step, want.step);
  expect("the part of rank", h.rank, want.rank);
  expect("a part for a world of ranks", h.ranks, want.ranks);
  expect("a parameter count of", h.num_parameters, want.num_parameters);
  expect("an element count of", h.count, want.count);
  count_ = h.count;
  tensors_offset_ = r.skip<float>(count_, "the weights");
  r.skip<float>(count_, "the AdamW moments");
  r.skip<float>(count_, "the AdamW moments");
  if (r.offset() + 8 != f.size()) {
    throw FileError(path, "length mismatch: " + std::to_string(f.size() - 8 - r.offset()) +
                              " unexpected bytes before the checksum");
  }
}

const void* StateShardFile::tensor_bytes(int i) const {
  return file_.data() + tensors_offset_ + size_t(i) * count_ * sizeof(float);
}

uint64_t train_state_checksum(const void* data, size_t bytes) {
  Checksum sum;
  sum.add(data, bytes);
  return sum.value();
}

}  // namespace llmcpu
