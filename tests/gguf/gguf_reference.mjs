// The reference reader of the GGUF tests: @huggingface/gguf (npm) parses a GGUF file and this
// prints what it read as one JSON object: {"version", "alignment", "data_offset", "metadata":
// {key: {"type", "value"} or {"type": 9, "elem", "value": [...]}}, "tensors": [{"name", "shape",
// "dtype", "offset"}]}. 64-bit integers are printed as decimal strings, floats as JavaScript prints
// them (the shortest text that reads back to the same double). The library lists the header's
// version, tensor_count and kv_count among the metadata; they are left out there.
//   node gguf_reference.mjs MODULES_DIR FILE.gguf
import path from "node:path";
import { pathToFileURL } from "node:url";

const [modules, file] = process.argv.slice(2);
const entry = pathToFileURL(path.join(modules, "@huggingface/gguf/dist/index.mjs")).href;
const { gguf } = await import(entry);
const r = await gguf(file, { allowLocalFile: true, typedMetadata: true });
const metadata = {};
for (const [key, v] of Object.entries(r.typedMetadata)) {
  if (key === "version" || key === "tensor_count" || key === "kv_count") continue;  // the header's
  metadata[key] = v.type === 9 ? { type: v.type, elem: v.subType, value: v.value } :
                                 { type: v.type, value: v.value };
}
const out = {
  version: r.metadata.version,
  alignment: r.typedMetadata["general.alignment"]?.value ?? 32,
  data_offset: r.tensorDataOffset,
  metadata,
  tensors: r.tensorInfos.map((t) => ({ name: t.name, shape: t.shape, dtype: t.dtype, offset: t.offset })),
};
process.stdout.write(JSON.stringify(out, (k, v) => (typeof v === "bigint" ? v.toString() : v)));
