#!/usr/bin/env node
// The reference for `llmcpu prepare --format chat`: each conversation rendered by @huggingface/jinja
// (0.5.11) through a chat template as transformers.js's apply_chat_template renders it, encoded by
// tokenizers.js (@huggingface/tokenizers 0.2.0) with encode(text, {add_special_tokens: false}), and
// the trained token spans of its assistant turns derived from the published definition
// (docs/formats.md): for assistant message i, a = render(messages[:i], add_generation_prompt=true),
// b = render(messages[:i+1]); b must start the whole rendering and a must start b; the turn is the
// characters [len(a), len(b)). Characters become tokens by encoding the pieces between span
// boundaries: where the pieces' ids put together equal the whole's, a boundary falls between its
// pieces' tokens; otherwise at the number of leading ids that encoding the text before it shares
// with the whole's. Spans start at token 1 or later.
//   node chat_prepare_reference.mjs JINJA_DIR TOKENIZERS_DIR TOKENIZER_DIR JOB_JSON
// JOB_JSON: {"template": text, "special_tokens": {bos_token: ..., ...}, "conversations":
// [[messages], ...]}. Prints one JSON line per conversation: {"ok": true, "text": base64 of the
// rendering, "ids": [...], "spans": [[begin, end], ...], "exact": bool} or {"ok": false, "error"}.
import fs from 'fs';
import path from 'path';
import {pathToFileURL} from 'url';

const [jinjaDir, tokenizersDir, tokenizerDir, jobFile] = process.argv.slice(2);
const fail = (message) => {
  process.stderr.write(`chat_prepare_reference.mjs: ${message}\n`);
  process.exit(1);
};
if (!jobFile) fail('usage: chat_prepare_reference.mjs JINJA_DIR TOKENIZERS_DIR TOKENIZER_DIR JOB_JSON');
const load = async (dir, name, version) => {
  const pkg = JSON.parse(fs.readFileSync(path.join(dir, 'package.json'), 'utf8'));
  if (pkg.name !== name || pkg.version !== version) fail(`${dir} holds ${pkg.name}@${pkg.version}, expected ${name}@${version}`);
  const entry = pkg.exports?.['.']?.import ?? pkg.module ?? pkg.main;
  return import(pathToFileURL(path.join(dir, entry)).href);
};
const {Template} = await load(jinjaDir, '@huggingface/jinja', '0.5.11');
const {Tokenizer} = await load(tokenizersDir, '@huggingface/tokenizers', '0.2.0');

const readJson = (file) => JSON.parse(fs.readFileSync(file, 'utf8'));
const configFile = path.join(tokenizerDir, 'tokenizer_config.json');
const config = fs.existsSync(configFile) ? readJson(configFile) : {};
const tokenizer = new Tokenizer(readJson(path.join(tokenizerDir, 'tokenizer.json')), config);
const encode = (text) => tokenizer.encode(text, {add_special_tokens: false}).ids;

const job = readJson(jobFile);
const template = new Template(job.template);
const render = (messages, addGenerationPrompt) => template.render({
  messages, add_generation_prompt: addGenerationPrompt, tools: null, documents: null,
  ...job.special_tokens,
});

// JavaScript strings count UTF-16 units; the spans are kept in UTF-8 bytes, like the texts.
const bytes = (s) => Buffer.byteLength(s, 'utf8');

function spansOf(messages, full) {
  const spans = [];
  messages.forEach((m, i) => {
    if (m.role !== 'assistant') return;
    const a = render(messages.slice(0, i), true);
    const b = render(messages.slice(0, i + 1), false);
    if (!full.startsWith(b) || !b.startsWith(a)) throw new Error(`prefix test fails at messages[${i}]`);
    if (b.length > a.length) spans.push([bytes(a), bytes(b)]);
  });
  return spans;
}

function tokenSpans(full, charSpans, ids) {
  const buf = Buffer.from(full, 'utf8');
  const cuts = [...new Set(charSpans.flat().filter((c) => c > 0 && c < buf.length))].sort((x, y) => x - y);
  const piece = (from, to) => encode(buf.subarray(from, to).toString('utf8'));
  let joined = [], at = [], from = 0;
  for (const c of cuts) {
    joined = joined.concat(piece(from, c));
    at.push(joined.length);
    from = c;
  }
  joined = joined.concat(piece(from, buf.length));
  const exact = joined.length === ids.length && joined.every((x, k) => x === ids[k]);
  if (!exact) {
    at = cuts.map((c) => {
      const prefix = piece(0, c);
      let m = 0;
      while (m < prefix.length && m < ids.length && prefix[m] === ids[m]) ++m;
      return m;
    });
  }
  const tokenAt = (c) => (c === 0 ? 0 : c >= buf.length ? ids.length : at[cuts.indexOf(c)]);
  const out = [];
  for (const [b, e] of charSpans) {
    const begin = Math.max(tokenAt(b), out.length ? out[out.length - 1][1] : 0, 1);
    const end = tokenAt(e);
    if (end > begin) out.push([begin, end]);
  }
  return {spans: out, exact};
}

const lines = [];
for (const messages of job.conversations) {
  try {
    const full = render(messages, false);
    const ids = encode(full);
    const {spans, exact} = tokenSpans(full, spansOf(messages, full), ids);
    lines.push(JSON.stringify({ok: true, text: Buffer.from(full, 'utf8').toString('base64'), ids, spans, exact}));
  } catch (e) {
    lines.push(JSON.stringify({ok: false, error: String(e?.message ?? e)}));
  }
}
process.stdout.write(lines.join('\n') + (lines.length ? '\n' : ''));
