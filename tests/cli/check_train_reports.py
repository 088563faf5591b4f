#!/usr/bin/env python3
"""`llmcpu train --metrics FILE.jsonl --plot FILE.svg --log FILE` on a committed fixture, checked
against the llm.c log of the same run: every metrics line parses as JSON (Python's json module, as
pandas.read_json(lines=True) needs) and has the documented keys, the steps are the log's (0 to N-1,
then N for the validation after the last step), each loss equals the log's trl for that step to the
log's 6 decimals, val_loss appears exactly on the steps with a tel line and equals it; the plot is
an SVG with 2 series (train and val). Then the same keys from a config file, and --plot's errors."""
import argparse
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)


def read_log(path):
    train, val = {}, {}
    for line in open(path):
        m = re.fullmatch(r"s:(\d+) (trl|tel):(\S+)\n", line)
        assert m, "unexpected log line %r" % line
        (train if m.group(2) == "trl" else val)[int(m.group(1))] = float(m.group(3))
    return train, val


def svg_series(path):
    root = ET.parse(path).getroot()
    ids = {re.fullmatch(r"gnuplot_plot_(\d+)[a-z]*", g.get("id", "")) for g in
           root.iter("{http://www.w3.org/2000/svg}g")}
    return len({m.group(1) for m in ids if m})


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--llmcpu", required=True)
    ap.add_argument("--fixtures", required=True)
    a = ap.parse_args()
    d = tempfile.mkdtemp(prefix="llmcpu_train_reports_")
    p = lambda name: os.path.join(d, name)
    steps, val_every = 7, 3
    base = [a.llmcpu, "train", "--model", os.path.join(a.fixtures, "tiny_model.bin"),
            "--train-data", os.path.join(a.fixtures, "tiny_train.bin"),
            "--val-data", os.path.join(a.fixtures, "tiny_train.bin"), "-b", "2", "-t", "8",
            "--steps", str(steps), "--val-batches", "2", "--threads", "1"]
    r = subprocess.run(base + ["--val-every", str(val_every), "--log", p("log.txt"), "--metrics",
                               p("metrics.jsonl"), "--plot", p("loss.svg")],
                       capture_output=True, text=True)
    check(r.returncode == 0, "train with --metrics and --plot exits 0: " + r.stdout + r.stderr)
    train, val = read_log(p("log.txt"))
    check(sorted(train) == list(range(steps)), "the log has trl for steps 0..%d" % (steps - 1))
    check(sorted(val) == [0, 3, 6, 7], "the log has tel at 0, 3, 6 and 7: %s" % sorted(val))

    rows = [json.loads(line) for line in open(p("metrics.jsonl"))]
    check([row["step"] for row in rows] == list(range(steps + 1)),
          "metrics steps 0..%d: %s" % (steps, [row["step"] for row in rows]))
    keys = {"step", "loss", "lr", "grad_norm", "ms", "tokens_per_s"}
    for row in rows:
        s = row["step"]
        if s < steps:
            check(keys <= set(row) and set(row) <= keys | {"val_loss"},
                  "step %d has the training keys: %s" % (s, sorted(row)))
            check(abs(row["loss"] - train[s]) <= 5e-7 + 1e-7 * abs(train[s]),
                  "step %d loss %r equals the log's %r (to its 6 decimals)" % (s, row["loss"], train[s]))
            check(row["lr"] == 3e-4 and row["ms"] > 0 and row["tokens_per_s"] > 0
                  and math.isfinite(row["grad_norm"]) and row["grad_norm"] > 0,
                  "step %d lr, ms, tokens_per_s, grad_norm" % s)
            check(abs(row["tokens_per_s"] - 2 * 8 / (row["ms"] / 1000)) <= 1e-6 * row["tokens_per_s"],
                  "step %d tokens_per_s = B*T / seconds" % s)
        else:
            check(set(row) == {"step", "val_loss"}, "the last validation's own line: %s" % row)
        check(("val_loss" in row) == (s in val), "val_loss on step %d exactly where the log has tel" % s)
        if s in val:
            check(abs(row["val_loss"] - val[s]) <= 5e-7 + 1e-7 * abs(val[s]),
                  "step %d val_loss equals the log's tel" % s)
    check(svg_series(p("loss.svg")) == 2, "the plot has a train and a val series")

    # The config keys, without --log (the losses kept in memory), a PNG; no validation: 1 series.
    with open(p("run.toml"), "w") as f:
        f.write('metrics = "%s"\nplot = "%s"\n' % (p("m2.jsonl"), p("loss2.svg")))
    r = subprocess.run(base + ["--config", p("run.toml")], capture_output=True, text=True)
    check(r.returncode == 0, "config keys metrics and plot: " + r.stdout + r.stderr)
    rows = [json.loads(line) for line in open(p("m2.jsonl"))]
    check([row["step"] for row in rows] == list(range(steps)) and
          all("val_loss" not in row for row in rows), "no validation: no val_loss, steps 0..N-1")
    check(svg_series(p("loss2.svg")) == 1, "no validation: one series")

    # --plot's errors come before training: the extension, gnuplot missing.
    r = subprocess.run(base + ["--plot", p("loss.gif")], capture_output=True, text=True)
    check(r.returncode != 0 and ".png or .svg" in r.stderr and "step" not in r.stdout,
          "--plot loss.gif refused before training: " + r.stderr)
    env = dict(os.environ, PATH=d)
    r = subprocess.run(base + ["--plot", p("x.png"), "--metrics", p("x.jsonl")],
                       capture_output=True, text=True, env=env)
    check(r.returncode != 0 and "apt-get install gnuplot-nox" in r.stderr and
          not os.path.exists(p("x.jsonl")), "no gnuplot: refused before training: " + r.stderr)
    r = subprocess.run(base + ["--metrics", os.path.join(d, "no", "such", "m.jsonl")],
                       capture_output=True, text=True)
    check(r.returncode != 0 and "m.jsonl" in r.stderr, "an unwritable metrics file: " + r.stderr)

    if failures:
        print("%d check(s) failed" % len(failures))
        sys.exit(1)
    print("all train report checks passed")


if __name__ == "__main__":
    main()
