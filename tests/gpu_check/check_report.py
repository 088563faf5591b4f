#!/usr/bin/env python3
"""Checks a report of tools/gpu-check.sh (OUT/report.md and OUT/report.json).

Every section is there; report.json parses; every cell of a column with a unit in its header
("step (ms)") is a finite number or null, in the JSON and in the markdown alike, and the two agree
row by row; the parts' table holds the five parts. With --expect-device (a Vulkan driver, lavapipe
or a GPU, is present) the device's parts must have measured: tests passed and none failed, every
verify OK, device step rows and GEMM rows with numbers. With --expect-mpirun the mpirun table has
rows with numbers.

  check_report.py OUT [--expect-device] [--expect-mpirun] [--expect-parts-ok]
"""
import argparse
import json
import math
import re
import sys

SECTIONS = ["## Summary", "## Parts", "## 1. The machine", "## 2. Correct on the GPU",
            "## 3. Fast on the GPU", "## 4. CPU scaling"]
TABLES = ["summary", "parts", "machine", "devices", "coopmat", "tests", "verify", "steps", "roof", "gemm",
          "scaling", "mpirun"]
UNIT = re.compile(r"\((ms|s|x|%|kB|MiB|GFLOP/s)\)$|^(tokens/s|GFLOP/s|M|N|K|T|B|passed|failed|skipped|ranks)$|^B per rank$|^threads per rank$")
NUMBER = re.compile(r"^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?$")

errors = []


def fail(msg):
    errors.append(msg)


def numeric_column(header):
    return bool(UNIT.search(header))


def markdown_tables(text):
    """The markdown tables in order, each as (header cells, rows of cells)."""
    tables, lines = [], text.splitlines()
    i = 0
    while i < len(lines):
        if lines[i].startswith("|") and i + 1 < len(lines) and lines[i + 1].startswith("|---"):
            header = [c.strip() for c in lines[i].strip().strip("|").split("|")]
            rows, i = [], i + 2
            while i < len(lines) and lines[i].startswith("|"):
                rows.append([c.strip() for c in lines[i].strip().strip("|").split("|")])
                i += 1
            tables.append((header, rows))
        else:
            i += 1
    return tables


def check_numbers(name, header, rows, source):
    for r, row in enumerate(rows):
        if len(row) != len(header):
            fail(f"{source} table {name} row {r + 1}: {len(row)} cells for {len(header)} columns")
            continue
        for h, cell in zip(header, row):
            if not numeric_column(h):
                continue
            if source == "json":
                ok = cell is None or (isinstance(cell, (int, float)) and not isinstance(cell, bool)
                                      and math.isfinite(cell))
            else:
                ok = cell == "-" or (NUMBER.match(cell) is not None and math.isfinite(float(cell)))
            if not ok:
                fail(f"{source} table {name} row {r + 1} column '{h}': {cell!r} is not a number")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--expect-device", action="store_true")
    ap.add_argument("--expect-mpirun", action="store_true")
    ap.add_argument("--expect-parts-ok", action="store_true")
    a = ap.parse_args()

    md = open(f"{a.out}/report.md", encoding="utf-8").read()
    for s in SECTIONS:
        if s not in md.splitlines():
            fail(f"report.md has no section '{s}'")
    try:
        rep = json.load(open(f"{a.out}/report.json", encoding="utf-8"),
                        parse_constant=lambda c: fail(f"report.json holds {c}"))
    except json.JSONDecodeError as e:
        print(f"report.json does not parse: {e}")
        return 1
    tables = rep.get("tables", {})
    for t in TABLES:
        if t not in tables or not isinstance(tables[t], list):
            fail(f"report.json has no table '{t}'")
    if errors:
        print("\n".join(errors))
        return 1

    # Each JSON table against its markdown twin, in the report's order (the scaling and mpirun
    # tables share their columns; an empty table is a "(no rows" line in the markdown).
    md_list, pos = markdown_tables(md), 0
    for t in TABLES:
        rows = tables[t]
        if not rows:
            continue
        header = list(rows[0].keys())
        check_numbers(t, header, [[row[h] for h in header] for row in rows], "json")
        while pos < len(md_list) and md_list[pos][0] != header:
            pos += 1
        if pos == len(md_list):
            fail(f"report.md has no table with the columns of '{t}' after the previous one: {header}")
            break
        md_rows = md_list[pos][1]
        pos += 1
        check_numbers(t, header, md_rows, "markdown")
        if len(md_rows) != len(rows):
            fail(f"table {t}: {len(md_rows)} markdown rows, {len(rows)} JSON rows")
            continue
        for r, (jr, mr) in enumerate(zip(rows, md_rows)):
            for h, mcell in zip(header, mr):
                jv = jr[h]
                if jv is None:
                    same = mcell == "-"
                elif isinstance(jv, (int, float)):
                    same = NUMBER.match(mcell) is not None and float(mcell) == float(jv)
                else:
                    same = mcell == jv
                if not same:
                    fail(f"table {t} row {r + 1} column '{h}': markdown {mcell!r}, JSON {jv!r}")

    parts = tables["parts"]
    if [p["part"] for p in parts] != [1, 2, 3, 4, 5]:
        fail(f"parts table: parts {[p['part'] for p in parts]}, expected 1..5")
    if a.expect_parts_ok:
        for p in parts:
            if p["status"] != "ok":
                fail(f"part {p['part']} ({p['name']}): {p['status']}")
    if not any(r["item"] == "CPU" and r["value"] for r in tables["machine"]):
        fail("machine table: no CPU row")
    if not rep.get("topology"):
        fail("no topology (llmcpu topo) in the report")

    def measured(rows, column):
        return [r for r in rows if r.get(column) is not None]

    ran = {p["part"] for p in parts if p["status"] != "not run (--parts)"}
    cpu_steps = [r for r in tables["steps"] if r["where"] == "CPU"]
    if 3 in ran and not measured(cpu_steps, "step (ms)"):
        fail("steps table: no CPU step measured")
    if 4 in ran and not measured(tables["scaling"], "tokens/s"):
        fail("scaling table: nothing measured")
    if a.expect_device:
        if not [d for d in tables["devices"] if d["chosen"] == "yes"]:
            fail("devices table: no device chosen")
        tests = tables["tests"]
        if len(tests) != 2 or any(t["passed"] in (None, 0) or t["failed"] != 0 for t in tests):
            fail(f"tests table: expected both suites passing, got {tests}")
        if not tables["verify"] or any(v["result"] != "OK" for v in tables["verify"]):
            fail(f"verify table: expected every row OK, got {[v['result'] for v in tables['verify']]}")
        dev = [r for r in tables["steps"] if r["where"] == "device"]
        if len(measured(dev, "step (ms)")) < 2 or not measured(dev, "device compute (ms)"):
            fail(f"steps table: device rows not measured: {dev}")
        if not measured(tables["gemm"], "GFLOP/s"):
            fail("gemm table: no GEMM measured")
        if not measured(tables["roof"], "fp32 FMA roof (GFLOP/s)"):
            fail("roof table: no FMA roof measured")
    if a.expect_mpirun and len(measured(tables["mpirun"], "tokens/s")) < 2:
        fail("mpirun table: fewer than two runs measured")

    if errors:
        print("\n".join(errors))
        return 1
    print(f"report OK: {sum(len(v) for v in tables.values())} rows in {len(TABLES)} tables")
    return 0


if __name__ == "__main__":
    sys.exit(main())
