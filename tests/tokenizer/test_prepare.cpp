// `llmcpu prepare` and `llmcpu tokenize`, and the Brown corpus converter: shards read back must
// hold [eot, doc 1, eot, doc 2, ...] as the tokenizer encodes each document, split into val and
// train shards of the asked sizes and names; errors name the file. The tiny hand-made tokenizer
// (test_util.h) is used, so these tests need no fetched data (the Brown converter test needs node).
#include <gtest/gtest.h>

#include "core/data/prepare.h"
#include "core/io/token_shard.h"
#include "simd/error.h"
#include "tests/tokenizer/test_util.h"

namespace llmcpu {
namespace {

using namespace llmcpu::testing;
using Tiny = TinyTokenizer;

class Prepare : public TinyPrepareTest {
 protected:
  // The i-th train shard of `llmcpu prepare --name n`.
  static std::string shard(const std::string& out, int i) {
    char name[32];
    std::snprintf(name, sizeof name, "/n_train_%06d.bin", i);
    return out + name;
  }
  static std::vector<uint16_t> read_shard(const std::string& path) {
    const TokenShard s(path);
    EXPECT_EQ(s.token_bytes(), 2) << path;  // GPT-2-sized vocabularies: uint16 ids
    std::vector<uint16_t> ids(s.size());
    for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<uint16_t>(s.at(i));
    return ids;
  }
};

TEST_F(Prepare, ShardsHoldTheDocumentsWithSeparatorsSplitAsAsked) {
  const std::vector<std::string> docs = {"the the then\n", "   x\n\nthe end", "the"};
  PrepareOptions o;
  o.inputs = {input("a.txt", docs[0]), input("b.txt", docs[1]), input("c.txt", docs[2])};
  o.out_dir = folder_ + "/out";
  o.name = "tiny";
  o.val_tokens = 3;
  o.shard_tokens = 4;
  const PrepareResult r = prepare_shards(*tok_, o);
  const std::vector<uint16_t> all = expected(docs);
  ASSERT_GT(all.size(), 10u);
  EXPECT_EQ(all[0], Tiny::kEot);

  ASSERT_EQ(r.val_files, std::vector<std::string>{o.out_dir + "/tiny_val_000000.bin"});
  EXPECT_EQ(r.val_tokens, 3u);
  EXPECT_EQ(r.train_tokens, all.size() - 3);
  const size_t train_shards = (all.size() - 3 + 3) / 4;
  ASSERT_EQ(r.train_files.size(), train_shards);
  std::vector<uint16_t> back = read_shard(r.val_files[0]);
  EXPECT_EQ(back.size(), 3u);
  for (size_t i = 0; i < train_shards; ++i) {
    char name[64];
    std::snprintf(name, sizeof name, "/tiny_train_%06zu.bin", i);
    EXPECT_EQ(r.train_files[i], o.out_dir + name);
    const std::vector<uint16_t> shard = read_shard(r.train_files[i]);
    EXPECT_EQ(shard.size(), i + 1 < train_shards ? 4u : (all.size() - 3) - 4 * i);
    back.insert(back.end(), shard.begin(), shard.end());
  }
  EXPECT_EQ(back, all);
  EXPECT_TRUE(r.stale_files.empty());
}

TEST_F(Prepare, DefaultValIsATenthCappedAtOneShard) {
  std::string text;
  for (int i = 0; i < 40; ++i) text += "the then the\n";
  PrepareOptions o;
  o.inputs = {input("a.txt", text)};
  o.out_dir = folder_ + "/out";
  const size_t total = expected({text}).size();
  // A tenth, when that is less than a shard.
  PrepareResult r = prepare_shards(*tok_, o);
  EXPECT_EQ(r.val_tokens, total / 10);
  EXPECT_EQ(r.train_tokens, total - total / 10);
  ASSERT_EQ(r.val_files.size(), 1u);
  EXPECT_EQ(r.val_files[0], o.out_dir + "/data_val_000000.bin");
  // At most one shard.
  o.shard_tokens = static_cast<int64_t>(total / 20);
  o.out_dir = folder_ + "/out2";
  r = prepare_shards(*tok_, o);
  EXPECT_EQ(r.val_tokens, total / 20);
  EXPECT_EQ(r.val_files.size(), 1u);
  std::vector<uint16_t> back;
  for (const auto& f : r.val_files) back = read_shard(f);
  for (const auto& f : r.train_files) {
    const auto s = read_shard(f);
    back.insert(back.end(), s.begin(), s.end());
  }
  EXPECT_EQ(back, expected({text}));
}

TEST_F(Prepare, ValLargerThanAShardAndNoVal) {
  PrepareOptions o;
  o.inputs = {input("a.txt", "the then the the then\n")};
  o.out_dir = folder_ + "/out";
  o.val_tokens = 7;
  o.shard_tokens = 3;
  PrepareResult r = prepare_shards(*tok_, o);
  ASSERT_EQ(r.val_files.size(), 3u);
  EXPECT_EQ(read_shard(r.val_files[0]).size(), 3u);
  EXPECT_EQ(read_shard(r.val_files[2]).size(), 1u);
  EXPECT_EQ(r.val_tokens, 7u);

  o.val_tokens = 0;
  o.out_dir = folder_ + "/out2";
  r = prepare_shards(*tok_, o);
  EXPECT_TRUE(r.val_files.empty());
  EXPECT_EQ(r.train_tokens, expected({"the then the the then\n"}).size());
}

// Large documents are encoded in pieces; the ids must be those of the whole document, also around
// blank lines and spaces before newlines, where a careless cut would change the pieces.
TEST_F(Prepare, LargeDocumentEncodesAsAWhole) {
  std::string text;
  const char* lines[] = {"the the\n",      "a\n\nb\n", "x  \n  y\n", "end.\n\n\n",  "  \n",
                         "\xe3\x80\x80\n", "then\r\n", "'s\n",       "\t\n\n the\n"};
  for (int i = 0; text.size() < (size_t{5} << 19); ++i) text += lines[(i * 7 + i / 9) % 9];
  PrepareOptions o;
  o.inputs = {input("big.txt", text)};
  o.out_dir = folder_ + "/out";
  o.val_tokens = 0;
  std::vector<PrepareProgress> seen;
  const PrepareResult r =
      prepare_shards(*tok_, o, [&](const PrepareProgress& p) { seen.push_back(p); });
  ASSERT_EQ(r.train_files.size(), 1u);
  EXPECT_EQ(read_shard(r.train_files[0]), expected({text}));
  ASSERT_GE(seen.size(), 2u);  // more than one piece
  EXPECT_EQ(seen.back().bytes_done, text.size());
  EXPECT_EQ(seen.back().bytes_total, text.size());
  EXPECT_EQ(seen.back().files_done, 1u);
}

TEST_F(Prepare, Errors) {
  PrepareOptions o;
  o.out_dir = folder_ + "/out";
  o.inputs = {input("a.txt", "the"), folder_ + "/missing.txt"};
  try {
    prepare_shards(*tok_, o);
    ADD_FAILURE() << "no error for a missing input";
  } catch (const FileError& e) {
    EXPECT_EQ(e.path(), folder_ + "/missing.txt");
    EXPECT_NE(std::string(e.what()).find("does not exist"), std::string::npos) << e.what();
  }
  o.inputs = {input("a.txt", "the"), input("empty.txt", "")};
  try {
    prepare_shards(*tok_, o);
    ADD_FAILURE() << "no error for an empty input";
  } catch (const FileError& e) {
    EXPECT_EQ(e.path(), folder_ + "/empty.txt");
    EXPECT_NE(std::string(e.what()).find("empty"), std::string::npos) << e.what();
  }
  o.inputs = {input("a.txt", "the")};
  o.out_dir = folder_ + "/a.txt/out";  // below a regular file
  try {
    prepare_shards(*tok_, o);
    ADD_FAILURE() << "no error for an output folder that cannot be made";
  } catch (const FileError& e) {
    EXPECT_EQ(e.path(), o.out_dir);
  }
  EXPECT_FALSE(fs::exists(folder_ + "/a.txt/out"));
  o.out_dir = folder_ + "/out";
  o.val_tokens = 2;  // the whole stream is eot, the = 2 tokens
  EXPECT_THROW(prepare_shards(*tok_, o), Error);
  o.val_tokens = -1;
  o.shard_tokens = 0;
  EXPECT_THROW(prepare_shards(*tok_, o), UsageError);
}

TEST_F(Prepare, CommandLine) {
  const std::string a = input("a.txt", "the the then\n"), b = input("b.txt", "   x");
  const std::string out = folder_ + "/out", tok = folder_ + "/tok";
  const std::string bin = shell_quote(LLMCPU_BINARY);
  Outcome r =
      run_shell(bin + " prepare --input " + shell_quote(a) + " " + shell_quote(b) + " --out-dir " + shell_quote(out) +
                " --name n --val-tokens 2 --shard-tokens 3 --tokenizer " + shell_quote(tok) + " 2>&1");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("n_val_000000.bin"), std::string::npos) << r.output;
  std::vector<uint16_t> back = read_shard(out + "/n_val_000000.bin");
  for (int i = 0; fs::exists(Prepare::shard(out, i)); ++i) {
    const auto s = read_shard(Prepare::shard(out, i));
    back.insert(back.end(), s.begin(), s.end());
  }
  EXPECT_EQ(back, expected({"the the then\n", "   x"}));

  // A second run with bigger shards leaves fewer files and warns about the old ones.
  r = run_shell(bin + " prepare -i " + shell_quote(a) + " " + shell_quote(b) + " -o " + shell_quote(out) +
                " --name n --val-tokens 2 --tokenizer " + shell_quote(tok) + " 2>&1");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("n_train_000001.bin is left over"), std::string::npos) << r.output;

  for (const auto& [args, message] : std::vector<std::pair<std::string, std::string>>{
           {"--input " + shell_quote(folder_ + "/nope.txt") + " --out-dir " + shell_quote(out),
            "nope.txt: input file does not exist"},
           {"--input " + shell_quote(input("e.txt", "")) + " --out-dir " + shell_quote(out),
            "e.txt: input file is empty"},
           {"--input " + shell_quote(a) + " --out-dir " + shell_quote(a + "/x"),
            "cannot create the output folder"},
           {"--out-dir " + shell_quote(out), "--input FILE... is required"},
           {"--input --out-dir " + shell_quote(out), "--input needs at least one FILE"},
           {"--input " + shell_quote(a), "--out-dir DIR is required"},
           {"--input " + shell_quote(a) + " --out-dir " + shell_quote(out) + " --shard-tokens 0",
            "--shard-tokens 0"},
           {"--input " + shell_quote(a) + " --out-dir " + shell_quote(out) + " --val-tokens -4",
            "--val-tokens"},
           {"--input " + shell_quote(a) + " --out-dir " + shell_quote(out) + " --bogus",
            "unknown flag '--bogus'"},
       }) {
    SCOPED_TRACE(args);
    r = run_shell(bin + " prepare " + args + " --tokenizer " + shell_quote(tok) + " 2>&1");
    EXPECT_EQ(r.status, 2) << r.output;
    EXPECT_NE(r.output.find(message), std::string::npos) << r.output;
  }
}

TEST_F(Prepare, TokenizeCommand) {
  const std::string tok = folder_ + "/tok", bin = shell_quote(LLMCPU_BINARY);
  Outcome r = run_shell(bin + " tokenize --tokenizer " + shell_quote(tok) + " " +
                        shell_quote(input("a.txt", "the the   x")));
  EXPECT_EQ(r.status, 0);
  EXPECT_EQ(r.output, "257 258 259 32 120\n");
  // Decoding is binary-safe: every byte value, ids on several lines.
  std::string ids, bytes;
  for (int b = 255; b >= 0; --b) {
    ids += std::to_string(b) + (b % 16 ? " " : "\n");
    bytes += static_cast<char>(b);
  }
  write_file(folder_ + "/ids.txt", ids);
  r = run_shell(bin + " tokenize --decode --tokenizer " + shell_quote(tok) + " < " +
                shell_quote(folder_ + "/ids.txt"));
  EXPECT_EQ(r.status, 0);
  EXPECT_TRUE(r.output == bytes) << "decoded bytes differ";
  // Encode then decode through the program gives the file back.
  const std::string text = "the then\r\n\t the\n\n \xe2\x82\xac";
  r = run_shell(bin + " tokenize --tokenizer " + shell_quote(tok) + " " + shell_quote(input("t.txt", text)) +
                " | " + bin + " tokenize -d --tokenizer " + shell_quote(tok));
  EXPECT_EQ(r.status, 0);
  EXPECT_EQ(r.output, text);

  r = run_shell("echo 1 2 261 | " + bin + " tokenize --decode --tokenizer " + shell_quote(tok) + " 2>&1");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.output.find("token id 261"), std::string::npos) << r.output;
  r = run_shell("echo 1 x2 | " + bin + " tokenize --decode --tokenizer " + shell_quote(tok) + " 2>&1");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.output.find("'x2' is not a token id"), std::string::npos) << r.output;
  r = run_shell(bin + " tokenize --tokenizer " + shell_quote(tok) + " " +
                shell_quote(folder_ + "/none.txt") + " 2>&1");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.output.find("none.txt: cannot open"), std::string::npos) << r.output;
  r = run_shell(bin + " tokenize --tokenizer " + shell_quote(folder_ + "/notok") + " " +
                shell_quote(folder_ + "/a.txt") + " 2>&1");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.output.find("notok: does not exist"), std::string::npos) << r.output;
}

// tools/brown_to_text.js on a made-up file in the Brown corpus's format.
// A fresh folder per test (TempDirTest's), removed afterwards.
class PrepareBrown : public TempDirTest {};

TEST_F(PrepareBrown, TagsAreStrippedToPlainText) {
  const Outcome node = run_shell("command -v node");
  ASSERT_EQ(node.status, 0) << "node is not installed; " << kSetupHint;
  const std::string dir = dir_.string();
  write_file(dir + "/ca99",
             "\n\n\tThe/at Fulton/np-tl County/nn-tl said/vbd ``/`` no/at evidence/nn ''/'' ./.\n"
             "It/pps was/bedz Jr./np ./.\n\n\n"
             "Merger/nn-hl proposed/vbn-hl \n\n"
             "\t(/( a/at test/nn )/) ,/, isn't/bez* it/pps ?/. --/-- yes/rb ;/. and/or/cc 1/2/cd\n"
             "Hmm/uh :/: it's/pps+bez '/' fine/jj '/' !/.\n");
  const Outcome r =
      run_shell("node " + shell_quote(std::string(LLMCPU_SOURCE_DIR) + "/tools/brown_to_text.js") + " " +
                shell_quote(dir + "/ca99"));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(r.output,
            "The Fulton County said \"no evidence\". It was Jr.\n\n"
            "Merger proposed\n\n"
            "(a test), isn't it? -- yes; and/or 1/2 Hmm: it's' fine'!\n");
}

}  // namespace
}  // namespace llmcpu
