#!/usr/bin/env python3
"""`llmcpu plot` as a user runs it, checked with independent readers: the PNG's IHDR chunk (width,
height), the SVG parsed by xml.etree with its plot series counted (gnuplot's svg terminal puts each
series in a <g id="gnuplot_plot_N..."> group), and the errors: no loss line, an unreadable log, a
wrong extension, no gnuplot on PATH; a failed plot writes nothing and keeps an older image.
The logs are written here in llm.c's documented format (s:STEP trl:LOSS, s:STEP tel:LOSS)."""
import argparse
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)


def run(llmcpu, args, env=None):
    r = subprocess.run([llmcpu, "plot"] + args, capture_output=True, text=True, env=env)
    return r.returncode, r.stdout + r.stderr


def write_log(path, train_steps, val_every=None, extra_fields=False):
    """A log like train --log writes: val at 0, every val_every steps and after the last step."""
    with open(path, "w") as f:
        for s in range(train_steps + 1):
            if val_every and (s % val_every == 0 or s == train_steps):
                f.write("s:%d tel:%f\n" % (s, 5.0 / (1 + 0.1 * s) + 0.2))
            if s < train_steps:
                tail = " lr:0.000300 norm:1.23" if extra_fields else ""
                f.write("s:%d trl:%f%s\n" % (s, 5.0 / (1 + 0.1 * s), tail))


def png_size(path):
    with open(path, "rb") as f:
        head = f.read(24)
    assert head[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG signature"
    assert head[12:16] == b"IHDR", "first chunk is not IHDR"
    return struct.unpack(">II", head[16:24])


def svg_series(path):
    """(width, height, number of plot series) of gnuplot's SVG, parsed as XML."""
    root = ET.parse(path).getroot()
    ns = "{http://www.w3.org/2000/svg}"
    assert root.tag == ns + "svg", root.tag
    series = set()
    for g in root.iter(ns + "g"):
        m = re.fullmatch(r"gnuplot_plot_(\d+)[a-z]*", g.get("id", ""))
        if m:
            series.add(int(m.group(1)))
    texts = ["".join(t.itertext()) for t in root.iter(ns + "text")]
    return int(float(root.get("width"))), int(float(root.get("height"))), len(series), texts


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--llmcpu", required=True)
    a = ap.parse_args()
    d = tempfile.mkdtemp(prefix="llmcpu_plot_")
    p = lambda name: os.path.join(d, name)
    write_log(p("run_a.txt"), 40, val_every=10)
    write_log(p("run_b.txt"), 30, val_every=5, extra_fields=True)
    write_log(p("train_only.txt"), 25)

    # One log to PNG, at the requested size.
    rc, out = run(a.llmcpu, [p("run_a.txt"), "-o", p("one.png"), "--width", "640", "--height", "400"])
    check(rc == 0, "one log to PNG exits 0: " + out)
    check(os.path.getsize(p("one.png")) > 1000, "PNG is not empty")
    check(png_size(p("one.png")) == (640, 400), "PNG IHDR is 640x400: %s" % (png_size(p("one.png")),))

    # One log to SVG: a train and a val series.
    rc, out = run(a.llmcpu, [p("run_a.txt"), "-o", p("one.svg"), "--width", "700", "--height", "450"])
    check(rc == 0, "one log to SVG exits 0: " + out)
    w, h, n, _ = svg_series(p("one.svg"))
    check((w, h) == (700, 450), "SVG is 700x450: %dx%d" % (w, h))
    check(n == 2, "one log with val lines: 2 series, got %d" % n)

    # Three logs, one without val lines, log scale: 2 + 2 + 1 series, named after the files.
    rc, out = run(a.llmcpu, [p("run_a.txt"), p("run_b.txt"), p("train_only.txt"), "-o",
                             p("three.svg"), "--log-scale", "--title", "runs <a> & 'b' \"c\" ^_@"])
    check(rc == 0, "three logs exit 0: " + out)
    w, h, n, texts = svg_series(p("three.svg"))
    check((w, h) == (800, 500), "default size 800x500: %dx%d" % (w, h))
    check(n == 5, "three logs (one train-only): 5 series, got %d" % n)
    for key in ("run_a.txt train", "run_a.txt val", "run_b.txt val", "train_only.txt train"):
        check(key in texts, "key entry '%s' in the SVG" % key)
    check("runs <a> & 'b' \"c\" ^_@" in texts, "the title shows as given (escaped in the XML)")

    # Two logs of the same file name: named by their paths.
    for sub in ("x", "y"):
        os.mkdir(p(sub))
        write_log(os.path.join(d, sub, "log.txt"), 10, val_every=5)
    rc, out = run(a.llmcpu, [p("x/log.txt"), p("y/log.txt"), "-o", p("same.svg")])
    texts = svg_series(p("same.svg"))[3] if rc == 0 else []
    check(p("x/log.txt") + " train" in texts and p("y/log.txt") + " val" in texts,
          "logs of the same file name are named by their paths: " + out)

    rc, out = run(a.llmcpu, [p("train_only.txt"), "-o", p("train_only.svg")])
    check(rc == 0 and svg_series(p("train_only.svg"))[2] == 1, "a train-only log: 1 series")
    rc, out = run(a.llmcpu, [p("run_a.txt"), p("train_only.txt"), "-o", p("two.png")])
    check(rc == 0 and png_size(p("two.png")) == (800, 500), "two logs to PNG at 800x500")

    # Errors: no loss line (named), nothing written, an older image kept.
    with open(p("empty.txt"), "w") as f:
        f.write("s:0 eval:0.25\n\n")
    with open(p("keep.svg"), "w") as f:
        f.write("old")
    rc, out = run(a.llmcpu, [p("run_a.txt"), p("empty.txt"), "-o", p("keep.svg")])
    check(rc != 0 and "empty.txt" in out and "no loss line" in out,
          "a log without a loss line is an error naming it: " + out)
    check(open(p("keep.svg")).read() == "old", "the older image is kept")
    rc, out = run(a.llmcpu, [p("empty.txt"), "-o", p("none.png")])
    check(rc != 0 and not os.path.exists(p("none.png")), "no file written for a log without losses")
    check(not [f for f in os.listdir(d) if ".tmp." in f], "no temporary file left behind")

    with open(p("bad.txt"), "w") as f:
        f.write("s:0 trl:5.0\ns:1 trl:oops\n")
    rc, out = run(a.llmcpu, [p("bad.txt"), "-o", p("bad.png")])
    check(rc != 0 and "bad.txt" in out and "line 2" in out, "a malformed line is named: " + out)
    rc, out = run(a.llmcpu, [p("missing.txt"), "-o", p("m.png")])
    check(rc != 0 and "missing.txt" in out, "an unreadable log is named: " + out)
    rc, out = run(a.llmcpu, [p("run_a.txt"), "-o", p("loss.jpg")])
    check(rc != 0 and ".png or .svg" in out and not os.path.exists(p("loss.jpg")),
          "another extension is refused naming the expected ones: " + out)
    rc, out = run(a.llmcpu, [p("run_a.txt")])
    check(rc != 0 and "--output" in out, "no --output: " + out)
    rc, out = run(a.llmcpu, ["-o", p("x.png")])
    check(rc != 0 and "no log file" in out, "no log: " + out)
    rc, out = run(a.llmcpu, [p("run_a.txt"), "-o", p("x.png"), "--width", "5"])
    check(rc != 0 and "--width" in out, "a bad --width: " + out)
    rc, out = run(a.llmcpu, [p("run_a.txt"), "-o", p("x.png"), "--bogus"])
    check(rc != 0 and "--bogus" in out, "an unknown flag: " + out)

    # No gnuplot on PATH: says how to install it.
    env = dict(os.environ, PATH=d)
    rc, out = run(a.llmcpu, [p("run_a.txt"), "-o", p("nognuplot.png")], env=env)
    check(rc != 0 and "apt-get install gnuplot-nox" in out and not os.path.exists(p("nognuplot.png")),
          "no gnuplot: " + out)

    # A gnuplot that writes part of the image and fails: the error carries its message, the older
    # image stays, the partial one is removed.
    fake = os.path.join(d, "fake_bin")
    os.mkdir(fake)
    with open(os.path.join(fake, "gnuplot"), "w") as f:
        f.write("#!/bin/sh\n"
                "out=$(sed -n \"s/^set output '\\(.*\\)'$/\\1/p\")\n"
                "printf partial > \"$out\"\n"
                "echo 'line 9: simulated failure' >&2\n"
                "exit 1\n")
    os.chmod(os.path.join(fake, "gnuplot"), 0o755)
    env = dict(os.environ, PATH=fake + os.pathsep + os.environ.get("PATH", ""))
    rc, out = run(a.llmcpu, [p("run_a.txt"), "-o", p("keep.svg")], env=env)
    check(rc != 0 and "simulated failure" in out and "exit status 1" in out,
          "a failing gnuplot is an error with its message: " + out)
    check(open(p("keep.svg")).read() == "old", "a failing gnuplot keeps the older image")
    check(not [f for f in os.listdir(d) if ".tmp." in f], "and leaves no partial file")

    if failures:
        print("%d check(s) failed" % len(failures))
        sys.exit(1)
    shutil.rmtree(d)
    print("all plot checks passed")


if __name__ == "__main__":
    main()
