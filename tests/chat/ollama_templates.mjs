#!/usr/bin/env node
// Published chat templates from the npm package @huggingface/ollama-utils (version 0.0.18, which
// tools/fetch-data.sh --tests installs): its table of models holds each model's GGUF
// tokenizer.chat_template, the chat_template of the model's tokenizer_config.json.
//   node ollama_templates.mjs PACKAGE_DIR MODEL...
// MODEL: a key of the table, e.g. library/smollm2:135m. Prints {"MODEL": template text, ...}; fails
// naming a model the table does not have.
import fs from 'fs';
import path from 'path';
import vm from 'vm';

const VERSION = '0.0.18';
const [packageDir, ...models] = process.argv.slice(2);
const fail = (message) => {
  process.stderr.write(`ollama_templates.mjs: ${message}\n`);
  process.exit(1);
};
if (!packageDir || models.length === 0) fail('usage: ollama_templates.mjs PACKAGE_DIR MODEL...');
const packageJson = path.join(packageDir, 'package.json');
if (!fs.existsSync(packageJson)) fail(`${packageJson} is missing (run tools/fetch-data.sh --tests)`);
const pkg = JSON.parse(fs.readFileSync(packageJson, 'utf8'));
if (pkg.name !== '@huggingface/ollama-utils' || pkg.version !== VERSION) {
  fail(`${packageDir} holds ${pkg.name}@${pkg.version}, expected @huggingface/ollama-utils@${VERSION}`);
}
// The table is a module-private array literal of plain data in dist/index.mjs; it is read as such.
const source = fs.readFileSync(path.join(packageDir, 'dist', 'index.mjs'), 'utf8');
const start = source.indexOf('var OLLAMA_CHAT_TEMPLATE_MAPPING = [');
const end = source.indexOf('\n];\n', start);
if (start < 0 || end < 0) fail('dist/index.mjs has no OLLAMA_CHAT_TEMPLATE_MAPPING table');
const table = vm.runInNewContext('(' + source.slice(source.indexOf('[', start), end + 2) + ')');
const out = {};
for (const model of models) {
  const entry = table.find((e) => e.model === model);
  if (!entry || typeof entry.gguf !== 'string') fail(`the table has no template for ${model}`);
  out[model] = entry.gguf;
}
process.stdout.write(JSON.stringify(out) + '\n');
