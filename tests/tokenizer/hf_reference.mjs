#!/usr/bin/env node
// The reference for the tokenizer.json tests: tokenizers.js (the npm package
// @huggingface/tokenizers 0.2.0, which tools/fetch-data.sh installs) run on a tokenizer folder and a
// list of texts.
//   node hf_reference.mjs PACKAGE_DIR TOKENIZER_DIR TEXTS_JSON [IDS_JSON]
// PACKAGE_DIR: the package's folder (.../node_modules/@huggingface/tokenizers). TOKENIZER_DIR:
// tokenizer.json and, if there, tokenizer_config.json ({} when not). TEXTS_JSON: a JSON array of
// base64 strings, each text's bytes, which are read as UTF-8 with invalid sequences replaced by
// U+FFFD (Buffer.toString). Prints JSON lines: first
//   {"vocab_size": largest id + 1, "eos_token_id": the id of tokenizer_config.json's eos_token or
//    null, "document_token_id": the BOS where encode(text, {add_special_tokens: true}) starts with
//    it, else the EOS}
// then one line per text:
//   {"ids": encode(text, {add_special_tokens: false}).ids, "ids_special": ... true,
//    "ids_document": the ids without special tokens from a tokenizer whose special added tokens are
//    left out (Hugging Face's split_special_tokens: their text is encoded as text),
//    "decoded": decode(ids) as base64 of its UTF-8 (null for no ids), "decoded_special": the same}
// then, with IDS_JSON (a JSON array of arrays of ids), one line per array:
//   {"decoded": decode(ids) as base64 of its UTF-8 (null for no ids)}
// Runs on node 18.
import fs from 'fs';
import path from 'path';
import {pathToFileURL} from 'url';

const VERSION = '0.2.0';
const [packageDir, tokenizerDir, textsJson, idsJson] = process.argv.slice(2);
if (!packageDir || !tokenizerDir || !textsJson) {
  process.stderr.write('usage: hf_reference.mjs PACKAGE_DIR TOKENIZER_DIR TEXTS_JSON\n');
  process.exit(2);
}
const fail = (message) => {
  process.stderr.write(`hf_reference.mjs: ${message}\n`);
  process.exit(1);
};

const packageJson = path.join(packageDir, 'package.json');
if (!fs.existsSync(packageJson)) fail(`${packageJson} is missing (run tools/fetch-data.sh)`);
const pkg = JSON.parse(fs.readFileSync(packageJson, 'utf8'));
if (pkg.name !== '@huggingface/tokenizers' || pkg.version !== VERSION) {
  fail(`${packageDir} holds ${pkg.name}@${pkg.version}, expected @huggingface/tokenizers@${VERSION}`);
}
const {Tokenizer} = await import(pathToFileURL(path.join(packageDir, pkg.module ?? pkg.main)).href);

const readJson = (file) => JSON.parse(fs.readFileSync(file, 'utf8'));
const configFile = path.join(tokenizerDir, 'tokenizer_config.json');
const config = fs.existsSync(configFile) ? readJson(configFile) : {};
const tokenizerJson = readJson(path.join(tokenizerDir, 'tokenizer.json'));
const tokenizer = new Tokenizer(tokenizerJson, config);
const plain = new Tokenizer(
    {...tokenizerJson, added_tokens: tokenizerJson.added_tokens.filter((t) => !t.special)}, config);

const vocab = tokenizer.get_vocab();
let largest = -1;
for (const id of vocab.values()) largest = Math.max(largest, id);
// The id of a token that tokenizer_config.json names (a string or an AddedToken object), or null.
const idOf = (field) => {
  const v = config[field];
  const content = typeof v === 'string' ? v : v?.content;
  return content == null ? null : tokenizer.token_to_id(content) ?? null;
};
const eosId = idOf('eos_token');
const bosId = idOf('bos_token');
// The token that starts each document in token shards: the BOS where the tokenizer puts one in
// front of a text, else the EOS.
const first = tokenizer.encode('', {add_special_tokens: true}).ids[0];
const documentId = bosId !== null && first === bosId ? bosId : eosId;
process.stdout.write(JSON.stringify({
  vocab_size: largest + 1, eos_token_id: eosId, document_token_id: documentId,
}) + '\n');

const decoded = (ids) =>
  ids.length === 0 ? null : Buffer.from(tokenizer.decode(ids), 'utf8').toString('base64');
const texts = readJson(textsJson);
texts.forEach((b64, i) => {
  const text = Buffer.from(b64, 'base64').toString('utf8');
  try {
    const ids = tokenizer.encode(text, {add_special_tokens: false}).ids;
    const idsSpecial = tokenizer.encode(text, {add_special_tokens: true}).ids;
    const idsDocument = plain.encode(text, {add_special_tokens: false}).ids;
    process.stdout.write(JSON.stringify({
      ids, ids_special: idsSpecial, ids_document: idsDocument, decoded: decoded(ids),
      decoded_special: decoded(idsSpecial),
    }) + '\n');
  } catch (e) {
    fail(`text ${i} of ${textsJson}: ${e.stack}`);
  }
});
if (idsJson) {
  readJson(idsJson).forEach((ids) => process.stdout.write(JSON.stringify({decoded: decoded(ids)}) + '\n'));
}
