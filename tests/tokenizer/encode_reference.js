#!/usr/bin/env node
// The reference for the tokenizer tests: prints, for each FILE, the GPT-2 token ids that the npm package
// gpt-3-encoder gives for the file's text (read as UTF-8), as one JSON array per line.
//   node encode_reference.js GPT3_ENCODER_DIR FILE...
'use strict';
const fs = require('fs');
const path = require('path');

const [moduleDir, ...files] = process.argv.slice(2);
if (!moduleDir || files.length === 0) {
  process.stderr.write('usage: encode_reference.js GPT3_ENCODER_DIR FILE...\n');
  process.exit(2);
}
const {encode} = require(path.resolve(moduleDir));
for (const file of files) {
  process.stdout.write(JSON.stringify(encode(fs.readFileSync(file, 'utf8'))) + '\n');
}
