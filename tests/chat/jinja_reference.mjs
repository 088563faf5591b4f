#!/usr/bin/env node
// The reference for the chat-template tests: @huggingface/jinja (the npm package, version 0.5.11,
// which tools/fetch-data.sh --tests installs) renders every template of a job with every set of
// variables.
//   node jinja_reference.mjs PACKAGE_DIR JOB_JSON
// PACKAGE_DIR: .../node_modules/@huggingface/jinja. JOB_JSON: {"templates": [template text, ...],
// "contexts": [{variables}, ...]}. Prints one JSON line per template and context, templates
// outer: {"ok": true, "text": the rendered text as base64 of its UTF-8} or {"ok": false,
// "stage": "parse" or "render", "error": the message}. Templates are rendered as transformers.js
// renders them: new Template(text).render(variables).
import fs from 'fs';
import path from 'path';
import {pathToFileURL} from 'url';

const VERSION = '0.5.11';
const [packageDir, jobFile] = process.argv.slice(2);
if (!packageDir || !jobFile) {
  process.stderr.write('usage: jinja_reference.mjs PACKAGE_DIR JOB_JSON\n');
  process.exit(2);
}
const fail = (message) => {
  process.stderr.write(`jinja_reference.mjs: ${message}\n`);
  process.exit(1);
};
const packageJson = path.join(packageDir, 'package.json');
if (!fs.existsSync(packageJson)) fail(`${packageJson} is missing (run tools/fetch-data.sh --tests)`);
const pkg = JSON.parse(fs.readFileSync(packageJson, 'utf8'));
if (pkg.name !== '@huggingface/jinja' || pkg.version !== VERSION) {
  fail(`${packageDir} holds ${pkg.name}@${pkg.version}, expected @huggingface/jinja@${VERSION}`);
}
const entry = pkg.exports?.['.']?.import ?? pkg.module ?? pkg.main;
const {Template} = await import(pathToFileURL(path.join(packageDir, entry)).href);

const job = JSON.parse(fs.readFileSync(jobFile, 'utf8'));
const lines = [];
for (const text of job.templates) {
  let template = null;
  let parseError = null;
  try {
    template = new Template(text);
  } catch (e) {
    parseError = String(e?.message ?? e);
  }
  for (const context of job.contexts) {
    if (parseError !== null) {
      lines.push(JSON.stringify({ok: false, stage: 'parse', error: parseError}));
      continue;
    }
    try {
      const out = template.render(context);
      lines.push(JSON.stringify({ok: true, text: Buffer.from(out, 'utf8').toString('base64')}));
    } catch (e) {
      lines.push(JSON.stringify({ok: false, stage: 'render', error: String(e?.message ?? e)}));
    }
  }
}
process.stdout.write(lines.join('\n') + (lines.length ? '\n' : ''));
