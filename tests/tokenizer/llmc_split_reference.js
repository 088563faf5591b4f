#!/usr/bin/env node
// The reference for `prepare --split-on blank-lines`: the token ids llm.c's tinyshakespeare
// preparation (dev/data/tinyshakespeare.py) makes of a file, printed as one JSON array. That script
// does, with tiktoken:
//   text = "<|endoftext|>" + text
//   text = text.replace('\n\n', '\n\n<|endoftext|>')
//   tokens = enc.encode(text, allowed_special={'<|endoftext|>'})
// tiktoken encodes the ordinary text between special tokens piece by piece, so here the text is cut
// at "<|endoftext|>" and each piece encoded with the npm package gpt-3-encoder, with 50256 between.
//   node llmc_split_reference.js GPT3_ENCODER_DIR FILE
'use strict';
const fs = require('fs');
const path = require('path');

const [moduleDir, file] = process.argv.slice(2);
if (!moduleDir || !file) {
  process.stderr.write('usage: llmc_split_reference.js GPT3_ENCODER_DIR FILE\n');
  process.exit(2);
}
const {encode} = require(path.resolve(moduleDir));
const EOT = '<|endoftext|>';
let text = EOT + fs.readFileSync(file, 'utf8');
text = text.split('\n\n').join('\n\n' + EOT);  // Python's str.replace: left to right, no overlap
const ids = [];
text.split(EOT).forEach((piece, i) => {
  if (i > 0) ids.push(50256);
  for (const id of encode(piece)) ids.push(id);
});
process.stdout.write(JSON.stringify(ids) + '\n');
