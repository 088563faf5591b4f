#!/usr/bin/env python3
"""Checks that every include in core/ runs to the same or a lower floor, and that no two files
include each other in a circle, with the floors docs/architecture.md lists.

The floors are read from docs/architecture.md's table (| floor | folder | may include |, bottom
first), so that the document and the check cannot disagree. A file of core/ may include files of
its own folder, of any lower floor, core/plugin_abi.h and simd/ (below core). Exit 0 when the code
keeps to them; 1 with every violation listed.

  check_floors.py SOURCE_DIR
"""
import os
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def floors_of(architecture_md):
    """{folder: floor} from the table rows "| N | `core/NAME/` | ... |"."""
    floors = {}
    for m in re.finditer(r"^\|\s*(\d+)\s*\|\s*`core/([a-z_]+)/`\s*\|", architecture_md, re.M):
        floors[m.group(2)] = int(m.group(1))
    return floors


def main():
    src = sys.argv[1]
    floors = floors_of(open(os.path.join(src, "docs", "architecture.md"), encoding="utf-8").read())
    errors = []
    core = os.path.join(src, "core")
    folders = sorted(d for d in os.listdir(core) if os.path.isdir(os.path.join(core, d)))
    for d in folders:
        if d not in floors:
            errors.append(f"core/{d}/ is not in docs/architecture.md's floors")
    graph = {}
    for d in folders:
        for name in sorted(os.listdir(os.path.join(core, d))):
            if not name.endswith((".h", ".cpp")):
                continue
            path = f"core/{d}/{name}"
            text = open(os.path.join(src, path), encoding="utf-8").read()
            graph[path] = []
            for inc in INCLUDE.findall(text):
                if not inc.startswith("core/") or inc == "core/plugin_abi.h":
                    continue
                graph[path].append(inc)
                to = inc.split("/")[1]
                if to != d and d in floors and to in floors and floors[to] > floors[d]:
                    errors.append(f"{path} includes {inc}: core/{to}/ (floor {floors[to]}) is above "
                                  f"core/{d}/ (floor {floors[d]})")
    # Circles among files: a depth-first search for a back edge.
    state = {}

    def visit(f, stack):
        state[f] = 1
        for g in graph.get(f, []):
            if g.endswith(".h") and g in graph:
                if state.get(g) == 1:
                    errors.append("include circle: " + " -> ".join(stack[stack.index(g):] + [g]))
                elif g not in state:
                    visit(g, stack + [g])
        state[f] = 2

    for f in graph:
        if f not in state:
            visit(f, [f])
    if errors:
        print("\n".join(errors))
        return 1
    print(f"core/ keeps to its {len(floors)} floors: {len(graph)} files, no include goes up, no circle")
    return 0


if __name__ == "__main__":
    sys.exit(main())
