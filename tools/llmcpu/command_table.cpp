#include <cstdio>

#include "simd/error.h"
#include "tools/llmcpu/commands.h"

namespace llmcpu {

// The order is the usage's, and the fuzz target's byte 0 picks a command by its index here (the
// committed seeds in tests/fuzz/corpus/cli/ rely on it): add new commands at the end.
// size: table (the commands, one entry each)
const std::vector<CommandInfo>& command_table() {
  static const std::vector<CommandInfo> table = {
      {"train", "train or fine-tune a GPT-2 or Llama-family model on a token shard",
       "Trains a GPT-2 model (from a checkpoint or a preset) or a Llama-family model (from a\n"
       "Hugging Face folder or a preset) on llm.c token shards. A Llama-family model's\n"
       "checkpoints and --save are Hugging Face folders (model safetensors, config.json and the\n"
       "tokenizer's files).\n"
       "Every flag can also be a key of a --config TOML file; flags override the file.",
       make_train_command},
      {"verify", "compare forward and backward with an llm.c debug state (test_gpt2's check)",
       "Runs forward and backward on a debug state's batch and compares logits, loss and all\n"
       "16 gradient tensors with it. Exit status 0: OK, 1: FAIL, 2: error.",
       make_verify_command},
      {"sample", "generate text from a checkpoint (KV cache, temperature, top-k)",
       "Generates text from a checkpoint, starting after the tokenizer's document token\n"
       "(<|endoftext|>, or BOS where the tokenizer adds one) and the prompt; stops at EOS.",
       make_sample_command},
      {"prepare", "encode text files into llm.c token shards (val and train)",
       "Encodes text files with GPT-2's tokenizer into llm.c token shards. Each input file is\n"
       "one document, or several with --split-on; every document is preceded by <|endoftext|>.\n"
       "The first --val-tokens tokens go to DIR/NAME_val_000000.bin, the rest to\n"
       "DIR/NAME_train_000000.bin, NAME_train_000001.bin, ... of --shard-tokens each; a last\n"
       "train shard shorter than half of --shard-tokens goes into the one before it.\n"
       "llm.c's tinyshakespeare shards: --split-on blank-lines --val-tokens 32768.\n"
       "usage: llmcpu prepare --input FILE... --out-dir DIR [--name NAME] [--val-tokens N]\n"
       "                      [--shard-tokens N] [--split-on HOW] [--tokenizer PATH]",
       make_prepare_command},
      {"tokenize", "GPT-2 token ids of a text file, or (--decode) the text of token ids",
       "Prints the GPT-2 token ids of FILE ('-': standard input) on one line, separated by\n"
       "spaces. With --decode, reads ids (separated by spaces or newlines) from standard input\n"
       "or FILE and writes exactly the bytes they stand for.\n"
       "usage: llmcpu tokenize [--tokenizer PATH] FILE\n"
       "       llmcpu tokenize --decode [--tokenizer PATH] [FILE]",
       make_tokenize_command},
      {"topo", "show the machine (packages, NUMA nodes, cores, caches) and the thread plan",
       "Prints this machine's topology (or a synthetic or XML one) and the thread plan train and\n"
       "verify would apply. Binds nothing.",
       make_topo_command},
      {"convert", "GPT-2 between Hugging Face and llm.c files; Llama folders to another dtype",
       "Converts between a Hugging Face GPT-2 and an llm.c checkpoint; the direction follows\n"
       "from IN. A Hugging Face model is a folder with model.safetensors and config.json, or\n"
       "a .safetensors file (config.json beside it is read if there; else the shape comes\n"
       "from the tensors, with GPT-2's head size 64). Its tensors may be F32, F16 or BF16,\n"
       "named as transformers' GPT2Model or GPT2LMHeadModel saves them.\n"
       "  HF -> llm.c: OUT is the checkpoint (.bin); wte is padded to a multiple of 128 rows.\n"
       "  llm.c -> HF: OUT is a .safetensors file (config.json is written beside it) or a\n"
       "  folder (made if missing) that gets model.safetensors and config.json; lm_head is\n"
       "  tied to wte and not stored, as in OpenAI's files.\n"
       "  Llama family (config.json's model_type llama, qwen2 or mistral; sharded too) -> a\n"
       "  folder (made if missing) that gets model.safetensors in --dtype, config.json (IN's,\n"
       "  its other keys kept) and IN's tokenizer files (tokenizer.json, tokenizer_config.json,\n"
       "  special_tokens_map.json, tokenizer.model, chat_template.jinja,\n"
       "  generation_config.json). Not to an llm.c .bin: its layout is\n"
       "  GPT-2's, and llm.c's Llama 3 checkpoint layout is not adopted (the Hugging Face folder\n"
       "  is the Llama family's file).\n"
       "  --adapter DIR: a PEFT LoRA adapter folder for IN, merged into its weights (W +\n"
       "  scaling B A as PEFT's merge_and_unload, summed in double and rounded to fp32 once)\n"
       "  before OUT is written as above.\n"
       "usage: llmcpu convert IN OUT [--dtype D] [--config config.json] [--adapter DIR]",
       make_convert_command},
      {"bench", "time every layer's kernels and a training step per SIMD target, against the roofs",
       "Times every kernel of a training step at a model's shapes (forward, backward, AdamW)\n"
       "and a whole step, per SIMD target, against this machine's roofs measured at start.",
       make_bench_command},
      {"plot", "draw the losses of llm.c log files (train --log) into a PNG or SVG (gnuplot)",
       "Draws the training loss (s:STEP trl:LOSS lines) and validation loss (s:STEP tel:LOSS)\n"
       "of llm.c log files against the step, several runs on one chart, with gnuplot.\n"
       "usage: llmcpu plot LOG... -o loss.png|loss.svg [--log-scale] [--width W --height H]\n"
       "                  [--title TEXT]",
       make_plot_command},
      {"version", "this build (version, commit, compiler, kernel targets, optional parts) and CPU",
       "Prints this build (version, commit, compiler, kernel targets, optional parts) and the\n"
       "CPU it runs on; also `llmcpu --version`.",
       make_version_command},
      {"chat", "talk with a model through its chat template (KV cache kept across turns)",
       "A conversation with a model through its own chat template (the tokenizer folder's, or\n"
       "--chat-template; ChatML where it has none). On a terminal: type a message, the reply\n"
       "streams as it is generated; /reset forgets the conversation (not --system), /exit or\n"
       "Ctrl-D quits. Otherwise (or --jsonl) each input line is a JSON object\n"
       "{\"role\": \"user\", \"content\": TEXT} (role system or assistant: history, no reply),\n"
       "{\"content\": TEXT}, {\"messages\": [such objects]} (the whole conversation after\n"
       "--system's message) or {\"command\": \"reset\"|\"exit\"}; each user message (last)\n"
       "gets one line {\"role\": \"assistant\", \"content\": TEXT, \"tokens\": N,\n"
       "\"stop\": \"eos\"|\"length\"|\"context\"}; a malformed line stops the program with\n"
       "status 2 and a message naming the line. A reply ends at the model's end tokens\n"
       "(generation_config.json's eos_token_id, the tokenizer's eos_token, the template's end\n"
       "of turn), at --max-tokens, or when the context is full.\n"
       "Sampling flags and defaults are sample's (--temperature 0: greedy).\n"
       "usage: llmcpu chat --model DIR [--adapter DIR] [--system TEXT] [--chat-template FILE]\n"
       "                   [--temperature T] [--top-k K] [--seed S] [--max-tokens N] [--jsonl]",
       make_chat_command},
  };
  return table;
}

const CommandInfo* find_command(std::string_view name) {
  if (name == "--version" || name == "-V") name = "version";
  for (const CommandInfo& c : command_table()) {
    if (name == c.name) return &c;
  }
  return nullptr;
}

ArgParser command_parser(const CommandInfo& info, Command& command) {
  ArgParser p(info.name, info.description);
  command.add_flags(p);
  return p;
}

int run_command(const CommandInfo& info, const std::vector<std::string>& args) {
  const std::unique_ptr<Command> command = info.make();
  ArgParser p = command_parser(info, *command);
  if (!p.parse(args)) return 0;
  command->check(p);
  try {
    return command->run(p);
  } catch (const FileError& e) {
    // A file a flag named: the message says which flag, as for every other bad value.
    const std::string flag = p.flag_naming(e.path());
    if (flag.empty()) throw;
    throw FileError(e.path(),
                    std::string(e.what()).substr(e.path().size() + 2) + " (" + flag + ")");
  }
}

}  // namespace llmcpu
