#!/usr/bin/env python3
"""`llmcpu train --metrics FILE.jsonl --plot FILE.svg --log FILE` on a committed fixture, checked
against the llm.c log of the same run: every metrics line parses as JSON (Python's json module, as
pandas.read_json(lines=True) needs) and has the documented keys, the steps are the log's (0 to N-1,
then N for the validation after the last step), each loss equals the log's trl for that step to the
log's 6 decimals, val_loss appears exactly on the steps with a tel line and equals it; the plot is
an SVG with 2 series (train and val). Then the same keys from a config file, and --plot's errors.
Then the whole stream across stops and resumes (core/report/metrics.h's rule): one line per step,
consecutive, no gaps and no repeats, the losses the log's (its newest line per step), after a
resume at the end of --steps, after a stop by --max-bad-steps (its skipped steps marked) and a
resume from the checkpoint before it, and after a Ctrl-C (SIGINT) and a resume."""
import argparse
import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
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


def same(a, b):
    """A metrics number (JSON null for a non-finite one) equals the log's, to its 6 decimals."""
    if a is None or not math.isfinite(b):
        return a is None and not math.isfinite(b)
    return abs(a - b) <= 5e-7 + 1e-7 * abs(b)


def check_stream(what, metrics, log, last, skipped=()):
    """The whole metrics file against the whole log, of a run (or runs, resumed) that took `last`
    steps and validated after the last one: a line per step 0..last, each once, in order; the
    training keys on steps < last, the loss the log's newest trl of that step; "skipped": true on
    the `skipped` steps alone; val_loss exactly where the log has tel, equal to it."""
    train, val = read_log(log)
    rows = [json.loads(line) for line in open(metrics)]
    steps = [row["step"] for row in rows]
    check(steps == list(range(last + 1)), "%s: one line per step 0..%d: %s" % (what, last, steps))
    check(sorted(train) == list(range(last)), "%s: the log has trl for 0..%d" % (what, last - 1))
    keys = {"step", "loss", "lr", "grad_norm", "ms", "tokens_per_s"}
    wrong_keys, wrong_loss, wrong_skip, wrong_val = [], [], [], []
    for row in rows:
        s = row["step"]
        if s < last:
            if not keys <= set(row) <= keys | {"val_loss", "skipped"}:
                wrong_keys.append(row)
            if not same(row["loss"], train.get(s, math.nan)):
                wrong_loss.append((row, train.get(s)))
            if row.get("skipped") is not (True if s in skipped else None):
                wrong_skip.append(row)
        elif set(row) != {"step", "val_loss"}:
            wrong_keys.append(row)
        if ("val_loss" in row) != (s in val) or (s in val and not same(row["val_loss"], val[s])):
            wrong_val.append((row, val.get(s)))
    check(not wrong_keys, "%s: the training keys on steps < %d, only val_loss on %d: %s"
          % (what, last, last, wrong_keys))
    check(not wrong_loss, "%s: every loss is the log's trl: %s" % (what, wrong_loss))
    check(not wrong_skip, "%s: \"skipped\": true on steps %s alone: %s"
          % (what, sorted(skipped), wrong_skip))
    check(not wrong_val, "%s: val_loss exactly where the log has tel, equal to it: %s"
          % (what, wrong_val))
    return rows


def val_markers(path):
    """The point markers (<use> elements) of the val series (gnuplot_plot_2): one per point, and
    one beside its entry in the key."""
    ns = "{http://www.w3.org/2000/svg}"
    for g in ET.parse(path).getroot().iter(ns + "g"):
        if g.get("id") == "gnuplot_plot_2":
            return len(list(g.iter(ns + "use")))
    return 0


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
    check(val_markers(p("loss.svg")) == len(val) + 1, "the val series has the log's %d points" % len(val))

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

    # A gnuplot that fails: the run warns once mid-run and once at the end, and finishes (exit 0)
    # with its metrics complete.
    fake = os.path.join(d, "fake_bin")
    os.mkdir(fake)
    with open(os.path.join(fake, "gnuplot"), "w") as f:
        f.write("#!/bin/sh\ncat >/dev/null\necho 'simulated failure' >&2\nexit 1\n")
    os.chmod(os.path.join(fake, "gnuplot"), 0o755)
    env = dict(os.environ, PATH=fake + os.pathsep + os.environ.get("PATH", ""))
    r = subprocess.run(base + ["--val-every", str(val_every), "--plot", p("fail.svg"), "--metrics",
                               p("m3.jsonl")], capture_output=True, text=True, env=env)
    check(r.returncode == 0, "a failing plot does not stop training: " + r.stderr)
    check(r.stderr.count("warning: the loss plot was not drawn") == 1 and
          r.stderr.count("warning: the final loss plot was not drawn") == 1 and
          "simulated failure" in r.stderr, "one warning mid-run, one at the end: " + r.stderr)
    check(len(open(p("m3.jsonl")).readlines()) == steps + 1 and not os.path.exists(p("fail.svg")),
          "the metrics are complete, no plot file")

    # A resumed run with its --log: the plot has the validations of both runs; the metrics file
    # is appended to.
    ck = p("ck")
    with_steps = lambda n: (base[:base.index("--steps")] + ["--steps", str(n)] +
                            base[base.index("--steps") + 2:])
    first = with_steps(4)
    r = subprocess.run(first + ["--val-every", "2", "--checkpoint-dir", ck, "--log", p("r.txt"),
                                "--plot", p("r.svg"), "--metrics", p("r.jsonl")],
                       capture_output=True, text=True)
    check(r.returncode == 0 and val_markers(p("r.svg")) == 3 + 1, "first run: val at 0, 2, 4")
    r = subprocess.run(base + ["--val-every", "2", "--resume", ck, "--log", p("r.txt"), "--plot",
                               p("r.svg"), "--metrics", p("r.jsonl")], capture_output=True, text=True)
    _, val = read_log(p("r.txt"))
    check(r.returncode == 0 and sorted(val) == [0, 2, 4, 6, 7], "resumed: the log's val steps %s"
          % sorted(val))
    check(val_markers(p("r.svg")) == 5 + 1, "resumed: the plot has all 5 validations, got %d"
          % (val_markers(p("r.svg")) - 1))
    # The first run's validation-only line of step 4 became the resumed run's line of step 4.
    rows = check_stream("resumed at the end of --steps", p("r.jsonl"), p("r.txt"), steps)
    check("val_loss" in rows[4] and "loss" in rows[4], "resumed: step 4's line has both losses")

    # A run stopped by --max-bad-steps: steps 3 and 4 (the 4th and 5th, LLMCPU_FAULT counts from 1)
    # have a NaN gradient; the run stops at step 4, whose line is written too. Resumed from its
    # checkpoint of step 4 (-n 2), the file is cut before that step and goes on from there.
    bad = ["--val-every", "2", "-n", "2", "--log", p("b.txt"), "--metrics", p("b.jsonl")]
    env = dict(os.environ, LLMCPU_FAULT="nan@grad-lnfb#4,nan@grad-lnfb#5")
    r = subprocess.run(base + ["-o", p("bk"), "--max-bad-steps", "2"] + bad, capture_output=True,
                       text=True, env=env)
    check(r.returncode == 2 and "2 steps in a row (4 to 5)" in r.stderr,
          "stopped by --max-bad-steps: " + r.stderr)
    rows = [json.loads(line) for line in open(p("b.jsonl"))]
    check([row["step"] for row in rows] == [0, 1, 2, 3, 4] and rows[4].get("skipped") is True and
          rows[4]["grad_norm"] is None and "val_loss" in rows[4],
          "stopped: the line of the step it stopped at: %s" % rows[-1:])
    r = subprocess.run(base + ["--resume", p("bk")] + bad, capture_output=True, text=True)
    check(r.returncode == 0 and "state_00000004.bin at step 4" in r.stdout,
          "resumed from step 4 after the stop: " + r.stdout + r.stderr)
    check_stream("resumed after --max-bad-steps", p("b.jsonl"), p("b.txt"), steps, skipped={3})

    # Ctrl-C: the first SIGINT ends the run after a step, with a checkpoint and (with --val-every 1)
    # a validation-only line of the step it stopped at, which the resumed run folds into its own.
    sig = ["--val-every", "1", "--log", p("i.txt"), "--metrics", p("i.jsonl")]
    proc = subprocess.Popen(with_steps(100000000) + ["-o", p("ik")] + sig, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None and (
            not os.path.exists(p("i.jsonl")) or len(open(p("i.jsonl")).readlines()) < 3):
        time.sleep(0.01)  # until it has trained (the outcome does not depend on when)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    rows = [json.loads(line) for line in open(p("i.jsonl"))]
    stop = rows[-1]["step"]
    check(proc.returncode == 0 and set(rows[-1]) == {"step", "val_loss"} and stop >= 2,
          "interrupted at step %d, its validation's own line last: %s %s" % (stop, rows[-1:], err))
    r = subprocess.run(with_steps(stop + 3) + ["--resume", p("ik")] + sig, capture_output=True,
                       text=True)
    check(r.returncode == 0, "resumed after Ctrl-C: " + r.stderr)
    rows = check_stream("resumed after Ctrl-C", p("i.jsonl"), p("i.txt"), stop + 3)
    check(len(rows) > stop and "loss" in rows[stop] and "val_loss" in rows[stop],
          "resumed after Ctrl-C: step %d's line has both losses" % stop)

    if failures:
        print("%d check(s) failed" % len(failures))
        sys.exit(1)
    shutil.rmtree(d)
    print("all train report checks passed")


if __name__ == "__main__":
    main()
