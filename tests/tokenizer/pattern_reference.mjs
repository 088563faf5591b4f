// The reference for tests/tokenizer/test_hf_pattern.cpp: tokenizers.js (@huggingface/tokenizers)
// applied to tokenizer.json patterns.
//   node pattern_reference.mjs <package folder> <cases.json>
// cases.json: [{"pattern": {"Regex": "..."} or {"String": "..."}, "content": "...", "text": "..."}].
// For each case one line: "ok", then tab-separated
//   - Split {behavior: "Isolated", invert: false}: the pieces (gaps and matches),
//   - Split {invert: true}: the matches,
//   - Split {behavior: "Removed", invert: false}: the gaps (with the captured groups),
//   - Replace normalizer {content}: the text with the matches replaced,
// each piece as "x" + its UTF-8 bytes in hex, pieces separated by commas; or "error", a tab and
// the message when tokenizers.js cannot build the pattern.
import { readFileSync } from "node:fs";
import { pathToFileURL } from "node:url";

const [folder, cases_path] = process.argv.slice(2);
const { SplitPreTokenizer, ReplaceNormalizer, ReplaceDecoder } = await import(
  pathToFileURL(`${folder}/dist/tokenizers.mjs`).href
);

const hex = (s) => "x" + Buffer.from(s, "utf8").toString("hex");
const pieces = (list) => list.map(hex).join(",");

const lines = [];
for (const { pattern, content, text } of JSON.parse(readFileSync(cases_path, "utf8"))) {
  try {
    const isolated = new SplitPreTokenizer({ pattern, behavior: "Isolated", invert: false });
    const matches = new SplitPreTokenizer({ pattern, invert: true });
    const removed = new SplitPreTokenizer({ pattern, behavior: "Removed", invert: false });
    const replaced = new ReplaceNormalizer({ pattern, content }).normalize(text);
    // The Replace decoder builds the same pattern and must agree with the normalizer.
    const decoded = new ReplaceDecoder({ pattern, content }).decode_chain([text])[0];
    if (decoded !== replaced) throw new Error("the Replace decoder and normalizer disagree");
    lines.push(
      [
        "ok",
        pieces(isolated.pre_tokenize_text(text)),
        pieces(matches.pre_tokenize_text(text)),
        pieces(removed.pre_tokenize_text(text)),
        hex(replaced),
      ].join("\t"),
    );
  } catch (e) {
    lines.push(`error\t${String(e.message).replace(/\s+/g, " ")}`);
  }
}
process.stdout.write(lines.join("\n") + "\n");
