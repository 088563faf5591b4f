#!/usr/bin/env node
// Writes a deterministic text of about BYTES bytes (default 300000) that mixes everything the tokenizer
// tests care about: English sentences with contractions in both cases, words and lines from the
// committed texts (non-Latin scripts, emoji with ZWJ, flags, skin tones), numbers, punctuation runs and
// odd whitespace (runs of spaces, tabs, CR LF, blank lines, trailing and leading spaces).
//   node make_large_text.js TEXTS_DIR OUT_FILE [BYTES]
'use strict';
const fs = require('fs');
const path = require('path');

const [textsDir, outFile, bytesArg] = process.argv.slice(2);
if (!textsDir || !outFile) {
  process.stderr.write('usage: make_large_text.js TEXTS_DIR OUT_FILE [BYTES]\n');
  process.exit(2);
}
const target = bytesArg ? parseInt(bytesArg, 10) : 300000;

// mulberry32: a small seeded generator, so the text is the same on every machine.
let state = 20240328;
function random() {
  state = (state + 0x6d2b79f5) | 0;
  let t = Math.imul(state ^ (state >>> 15), 1 | state);
  t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
}
const pick = (a) => a[Math.floor(random() * a.length)];
const int = (lo, hi) => lo + Math.floor(random() * (hi - lo + 1));

const english = ('the of and to in is was that for on with as by at from it his her they we you he ' +
    'she this have had not but are were be been which or one all would there their what so up out ' +
    'if about who get make can like time no just him know take people into year your good some could ' +
    'them see other than then now look only come its over think also back after use two how our work ' +
    'first well way even new want because any these give day most us tokenizer merge byte encoder ' +
    'language model training gradient Fulton County jury election Atlanta Georgia Monday report')
    .split(' ');
const contractions = ["I'm", "I'M", "they'll", "THEY'LL", "it's", "IT'S", "don't", "DON'T", "we've",
  "WE'VE", "you'd", "YOU'D", "they're", "THEY'RE", "'s", "'S", "'ll", "'LL", "can't", "won't",
  "O'Neil's", "rock'n'roll", "y'all", "'90s", "I’m", "it’s"];
const emoji = ['👨‍👩‍👧‍👦', '👩‍❤️‍💋‍👨', '👩🏽‍💻', '🇺🇸', '🇯🇵🇫🇷', '🏳️‍🌈', '👍🏿', '👋🏽', '1️⃣', '❤️',
  '😂😂😂', '🚀', '🍕', '🏴󠁧󠁢󠁳󠁣󠁴󠁿', '🧑‍🤝‍🧑'];
const punctuation = ['.', ',', '!', '?', '...', '!!!', '?!', ';', ':', '--', '—', '(', ')', '"', "'",
  '","', '"],"', '},{"', ',,,,', '***', '###', '->', '=>', '!=', '<|endoftext|>', '``', "''", '…'];
const spaces = [' ', ' ', ' ', ' ', '  ', '   ', '\t', ' \t ', '\n', '\r\n', '\n\n', '\n\n\n',
  '        ', '\u00a0', '\u3000', ' \n', '   \n  '];

// Words and whole lines of the committed texts.
const lines = [];
for (const name of fs.readdirSync(textsDir).sort()) {
  if (!name.endsWith('.txt')) continue;
  for (const line of fs.readFileSync(path.join(textsDir, name), 'utf8').split('\n')) {
    if (line.trim() !== '') lines.push(line);
  }
}
const foreign = lines.flatMap((l) => l.split(/\s+/)).filter((w) => /[^\x00-\x7f]/.test(w));

function number() {
  switch (int(0, 4)) {
    case 0: return String(int(0, 9999));
    case 1: return `${int(0, 999)}.${int(0, 99999)}`;
    case 2: return Array.from({length: int(10, 60)}, () => int(0, 9)).join('');
    case 3: return `${int(1, 999)},${String(int(0, 999)).padStart(3, '0')},${String(int(0, 999)).padStart(3, '0')}`;
    default: return `-${int(1, 99)}.${int(0, 9)}e${int(-20, 20)}`;
  }
}

function word() {
  const r = random();
  if (r < 0.55) {
    const w = pick(english);
    return random() < 0.1 ? w.toUpperCase() : random() < 0.15 ? w[0].toUpperCase() + w.slice(1) : w;
  }
  if (r < 0.65) return pick(contractions);
  if (r < 0.75) return pick(foreign);
  if (r < 0.82) return number();
  if (r < 0.90) return pick(punctuation);
  if (r < 0.95) return pick(emoji);
  return pick(english) + pick(punctuation) + pick(english);
}

const parts = [];
let size = 0;
while (size < target) {
  let piece;
  if (random() < 0.08) {
    piece = pick(lines) + '\n';
  } else {
    const n = int(3, 25);
    const words = [];
    for (let i = 0; i < n; ++i) words.push(word());
    piece = words.map((w, i) => (i === 0 ? '' : random() < 0.85 ? ' ' : pick(spaces)) + w).join('');
    piece += pick(['.', '!', '?', '', '.']) + pick(['\n', '\n\n', ' ', '  \n', '\r\n', '\t\n', '\n   ']);
  }
  parts.push(piece);
  size += Buffer.byteLength(piece, 'utf8');
}
fs.writeFileSync(outFile, parts.join(''));
