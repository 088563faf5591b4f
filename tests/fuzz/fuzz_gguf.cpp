// Fuzz target: the GGUF container (core/io/gguf.h). The input is the whole file. An accepted file
// must keep every tensor inside the mapping at an aligned offset, the tensors apart, each's bytes
// whole blocks of its type; and written again by GgufWriter (the same alignment, metadata and
// tensors) and read back, it must give the same metadata (as a map: the writer puts
// general.alignment first) and the same tensors, their bytes included.
#include <algorithm>
#include <map>
#include <memory>
#include <vector>

#include "core/io/gguf.h"
#include "tests/fuzz/fuzz_util.h"

namespace {
constexpr const char* kTarget = "gguf";

bool same_value(const llmcpu::GgufValue& a, const llmcpu::GgufValue& b) {
  return a.type == b.type && (!a.is_array() || a.elem == b.elem) && a.bits == b.bits &&
         a.str == b.str && a.numbers == b.numbers && a.strings == b.strings;
}

std::map<std::string, const llmcpu::GgufValue*> by_key(const llmcpu::GgufFile& f) {
  std::map<std::string, const llmcpu::GgufValue*> m;
  for (const auto& [k, v] : f.metadata()) m[k] = &v;
  return m;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace llmcpu;
  const std::string path = fuzz::write_file("model.gguf", data, size);
  std::unique_ptr<GgufFile> f;
  if (!fuzz::accepts([&] { f = std::make_unique<GgufFile>(path); })) return 0;
  std::vector<const GgufTensor*> sorted;
  for (const GgufTensor& t : f->tensors()) {
    LLMCPU_FUZZ_CHECK(kTarget, f->data_offset() + t.offset + t.bytes <= size,
                      "tensor " + t.name + " was accepted past the end of the file");
    LLMCPU_FUZZ_CHECK(kTarget,
                      t.offset % f->alignment() == 0 && f->data_offset() % f->alignment() == 0,
                      "tensor " + t.name + " was accepted at an unaligned offset");
    const uint64_t block = ggml_block_elements(t.type);
    LLMCPU_FUZZ_CHECK(kTarget,
                      t.ne[0] % block == 0 && t.bytes == t.count / block * ggml_block_bytes(t.type),
                      "tensor " + t.name + "'s byte count is not whole blocks of its type");
    sorted.push_back(&t);
  }
  std::sort(sorted.begin(), sorted.end(),
            [](const GgufTensor* a, const GgufTensor* b) { return a->offset < b->offset; });
  for (size_t i = 1; i < sorted.size(); ++i) {
    LLMCPU_FUZZ_CHECK(kTarget, sorted[i - 1]->offset + sorted[i - 1]->bytes <= sorted[i]->offset,
                      "accepted tensors overlap: " + sorted[i - 1]->name + ", " + sorted[i]->name);
  }

  GgufWriter w(f->alignment());
  for (const auto& [k, v] : f->metadata()) w.set(k, v);
  for (const GgufTensor& t : f->tensors()) w.add_tensor(t.name, t.ne, t.type);
  const std::string copy = fuzz::scratch_dir() + "/copy.gguf";
  w.write(copy, [&](size_t i, uint8_t* out) {
    const GgufTensor& t = f->tensors()[i];
    std::copy(t.data, t.data + t.bytes, out);
  });
  const GgufFile back(copy);
  const auto want = by_key(*f), got = by_key(back);
  LLMCPU_FUZZ_CHECK(kTarget, want.size() == got.size(), "metadata keys lost in a rewrite");
  for (const auto& [k, v] : want) {
    LLMCPU_FUZZ_CHECK(kTarget, got.count(k) && same_value(*v, *got.at(k)),
                      "metadata '" + k + "' changed in a rewrite");
  }
  LLMCPU_FUZZ_CHECK(kTarget, back.tensors().size() == f->tensors().size(), "tensors lost");
  for (size_t i = 0; i < back.tensors().size(); ++i) {
    const GgufTensor& a = f->tensors()[i];
    const GgufTensor& b = back.tensors()[i];
    LLMCPU_FUZZ_CHECK(kTarget,
                      a.name == b.name && a.ne == b.ne && a.type == b.type && a.bytes == b.bytes &&
                          std::equal(a.data, a.data + a.bytes, b.data),
                      "tensor " + a.name + " changed in a rewrite");
  }
  return 0;
}
