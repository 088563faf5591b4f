#!/usr/bin/env python3
"""Writes a chat JSONL file of about SIZE megabytes for timing `llmcpu prepare --format chat`.

  make_chat_jsonl.py OUT.jsonl [--mb 100] [--seed 1] [--words DIR]

Each line is {"messages": [{"role": "system"?, ...}, {"role": "user", ...}, {"role": "assistant",
...}, ...]}. The shape follows the published statistics of UltraChat 200k (HuggingFaceH4/
ultrachat_200k, the SFT set of Zephyr): about 3 to 4 user/assistant rounds per conversation and
assistant answers several times longer than the questions. Drawn here:
  rounds         1 + a geometric number with mean 2.2 (so 3.2 rounds on average), at most 12
  user turn      log-normal characters, median 250, sigma 0.8
  assistant turn log-normal characters, median 1100, sigma 0.7
  system prompt  on 20% of the conversations, median 120 characters
Texts are English words in their running order from the Brown corpus (DIR, default the cache's
brown/text that tools/fetch-data.sh makes), cut into sentences and paragraphs, so the tokenizer sees
natural text; without the corpus a fixed word list is cycled. Python's standard library only.
"""
import argparse
import json
import math
import os
import random


def corpus_words(folder):
    words = []
    if os.path.isdir(folder):
        for name in sorted(os.listdir(folder)):
            with open(os.path.join(folder, name), encoding="utf-8", errors="replace") as f:
                words.extend(f.read().split())
    if not words:
        words = ("the model answers the question with a short list of steps and then explains "
                 "each of them in plain words so that the reader can follow").split()
    return words


class Text:
    def __init__(self, words, rng):
        self.words, self.rng, self.at = words, rng, rng.randrange(len(words))

    def make(self, chars):
        out, size = [], 0
        while size < chars:
            w = self.words[self.at % len(self.words)]
            self.at += 1
            out.append(w)
            size += len(w) + 1
            if self.rng.random() < 0.01:
                out.append("\n\n")
        return " ".join(out).replace(" \n\n ", "\n\n").strip()


def lognormal_chars(rng, median, sigma):
    return max(8, int(median * math.exp(rng.gauss(0.0, sigma))))


def conversation(rng, text):
    messages = []
    if rng.random() < 0.2:
        messages.append({"role": "system", "content": text.make(lognormal_chars(rng, 120, 0.5))})
    rounds = 1
    while rounds < 12 and rng.random() < 2.2 / 3.2:
        rounds += 1
    for _ in range(rounds):
        messages.append({"role": "user", "content": text.make(lognormal_chars(rng, 250, 0.8))})
        messages.append({"role": "assistant",
                         "content": text.make(lognormal_chars(rng, 1100, 0.7))})
    return {"messages": messages}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("out")
    p.add_argument("--mb", type=float, default=100.0)
    p.add_argument("--seed", type=int, default=1)
    cache = os.environ.get("LLMCPU_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "llmcpu")
    p.add_argument("--words", default=os.path.join(cache, "brown", "text"))
    a = p.parse_args()
    rng = random.Random(a.seed)
    text = Text(corpus_words(a.words), rng)
    target, written, count = int(a.mb * 1e6), 0, 0
    with open(a.out, "w", encoding="utf-8") as f:
        while written < target:
            line = json.dumps(conversation(rng, text), ensure_ascii=False) + "\n"
            f.write(line)
            written += len(line.encode("utf-8"))
            count += 1
    print(f"{a.out}: {count} conversations, {written / 1e6:.1f} MB")


if __name__ == "__main__":
    main()
