#!/usr/bin/env python3
"""Checks that the code keeps to small files and short functions: no file of core/, simd/ or
plugins/ over 600 lines, no function of core/, simd/, tools/ or plugins/ over 80 lines (from its
signature to its closing brace). A function that is a table (a list of entries read as data, not
steps) is exempt when a comment `// size: table` stands on its first line or on the line just above
it. Exit 0 when the code keeps to the sizes; 1 with every file and function over them listed.

Functions are found by universal-ctags (Debian universal-ctags: its `end:` field gives where a
function's body closes). A lambda is part of the function it stands in: only the enclosing
function's length counts. --self-test runs the check on a made-up folder (a 601-line file, a
600-line one, an 81-line function and an 80-line one each with a lambda inside, a long function
marked as a table) and fails unless it reports exactly the 601-line file and the 81-line function,
so that the check cannot pass by finding nothing.

  check_sizes.py SOURCE_DIR [--ctags CTAGS]
  check_sizes.py --self-test [--ctags CTAGS]
"""
import argparse
import os
import subprocess
import sys
import tempfile

MAX_FILE_LINES = 600
MAX_FUNCTION_LINES = 80
FILE_FOLDERS = ("core", "simd", "plugins")
FUNCTION_FOLDERS = ("core", "simd", "tools", "plugins")
SOURCES = (".h", ".cpp", ".cc")
TABLE_MARKER = "// size: table"


def sources(src, folders):
    """Paths relative to src of the C++ sources under the folders, sorted."""
    found = []
    for folder in folders:
        for root, dirs, files in os.walk(os.path.join(src, folder)):
            dirs.sort()
            for name in files:
                if name.endswith(SOURCES):
                    found.append(os.path.relpath(os.path.join(root, name), src))
    return sorted(found)


def functions(ctags, src, paths):
    """{path: [(first line, last line, name)]} of every function definition, as ctags reads it."""
    if not paths:
        return {}
    try:
        version = subprocess.run([ctags, "--version"], check=True, capture_output=True, text=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        sys.exit(f"check_sizes.py: cannot run {ctags} ({e}): install universal-ctags "
                 f"(tools/install-deps.sh)")
    if "Universal Ctags" not in version:
        sys.exit(f"check_sizes.py: {ctags} is not universal-ctags (no end: field): install "
                 f"universal-ctags (tools/install-deps.sh)")
    out = subprocess.run([ctags, "--language-force=C++", "--kinds-C++=f", "--fields=+ne", "--excmd=number",
                          "--sort=no", "-o", "-", "-L", "-"], cwd=src, input="\n".join(paths) + "\n",
                         check=True, capture_output=True, text=True).stdout
    found = {}
    for line in out.splitlines():
        parts = line.split("\t")
        fields = dict(p.split(":", 1) for p in parts[3:] if ":" in p)
        if "line" not in fields or "end" not in fields:
            continue
        name = parts[0]
        scope = fields.get("class") or fields.get("struct")
        if scope:
            name = scope.split("::")[-1] + "::" + name
        if name.startswith("__anon"):
            name = "a lambda"
        found.setdefault(parts[1], []).append((int(fields["line"]), int(fields["end"]), name))
    return found


def outermost(spans):
    """The spans not inside another one: a lambda (or a local class's member) counts as part of the
    function it stands in."""
    kept = []
    for first, last, name in sorted(spans, key=lambda s: (s[0], -s[1])):
        if kept and first >= kept[-1][0] and last <= kept[-1][1]:
            continue
        kept.append((first, last, name))
    return kept


def is_table(lines, first):
    """Whether the marker comment stands on the function's first line or on the line above it."""
    return any(TABLE_MARKER in lines[i - 1] for i in (first - 1, first) if 1 <= i <= len(lines))


def check(src, ctags):
    """Every file and function over the sizes, one line each."""
    errors = []
    for path in sources(src, FILE_FOLDERS):
        with open(os.path.join(src, path), encoding="utf-8") as f:
            count = sum(1 for _ in f)
        if count > MAX_FILE_LINES:
            errors.append(f"{path}: {count} lines (at most {MAX_FILE_LINES}): split it into files "
                          f"that each hold one concern")
    for path, spans in sorted(functions(ctags, src, sources(src, FUNCTION_FOLDERS)).items()):
        with open(os.path.join(src, path), encoding="utf-8") as f:
            lines = f.read().split("\n")
        for first, last, name in outermost(spans):
            length = last - first + 1
            if length > MAX_FUNCTION_LINES and not is_table(lines, first):
                errors.append(f"{path}:{first}: {name} is {length} lines (at most "
                              f"{MAX_FUNCTION_LINES}): split it into named steps, or, if it is a "
                              f"table, mark it with '{TABLE_MARKER}'")
    return errors


def function_text(name, body_lines, marker=False, lambda_inside=False):
    """A function of exactly 2 + body_lines lines (signature, body, closing brace), with the table
    marker on the line above it or a 3-line lambda as the start of its body if asked."""
    text = f"{TABLE_MARKER}\n" if marker else ""
    text += f"int {name}(int x) {{\n"
    if lambda_inside:
        text += "  auto add = [](int a) {\n    return a + 1;\n  };\n"
        body_lines -= 3
    return text + "  x += 1;\n" * body_lines + "}\n"


def self_test(ctags):
    with tempfile.TemporaryDirectory(prefix="llmcpu_sizes_") as src:
        os.makedirs(os.path.join(src, "core", "big"))
        os.makedirs(os.path.join(src, "tools"))
        with open(os.path.join(src, "core", "big", "long_file.cpp"), "w", encoding="utf-8") as f:
            f.write("// filler\n" * (MAX_FILE_LINES + 1))
        with open(os.path.join(src, "core", "big", "fits.h"), "w", encoding="utf-8") as f:
            f.write("// filler\n" * MAX_FILE_LINES)
        with open(os.path.join(src, "tools", "functions.cpp"), "w", encoding="utf-8") as f:
            f.write("namespace llmcpu {\n\n")  # lines 1-2; too_long starts on line 3
            f.write(function_text("too_long", MAX_FUNCTION_LINES - 1, lambda_inside=True) + "\n")
            f.write(function_text("just_fits", MAX_FUNCTION_LINES - 2, lambda_inside=True) + "\n")
            f.write(function_text("a_table", MAX_FUNCTION_LINES + 20, marker=True) + "\n")
            f.write("}  // namespace llmcpu\n")
        got = check(src, ctags)
    wanted = [f"core/big/long_file.cpp: {MAX_FILE_LINES + 1} lines",
              f"tools/functions.cpp:3: too_long is {MAX_FUNCTION_LINES + 1} lines"]
    if len(got) != len(wanted) or not all(g.startswith(w) for g, w in zip(got, wanted)):
        print("check_sizes.py's self-test failed: wanted reports starting with")
        print("\n".join("  " + w for w in wanted))
        print("got")
        print("\n".join("  " + g for g in got) or "  nothing")
        return 1
    print("check_sizes.py's self-test: a 601-line file and an 81-line function are reported; a "
          "600-line file, an 80-line function, a marked table and the lambdas inside are not")
    return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("source_dir", nargs="?")
    parser.add_argument("--ctags", default="ctags", help="universal-ctags (default: ctags on PATH)")
    parser.add_argument("--self-test", action="store_true")
    args = parser.parse_args()
    if args.self_test:
        return self_test(args.ctags)
    if not args.source_dir:
        parser.error("SOURCE_DIR is needed unless --self-test is given")
    errors = check(args.source_dir, args.ctags)
    if errors:
        print("\n".join(errors))
        return 1
    print(f"core/, simd/ and plugins/ files are at most {MAX_FILE_LINES} lines; functions of "
          f"core/, simd/, tools/ and plugins/ at most {MAX_FUNCTION_LINES}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
