#!/usr/bin/env python3
"""Checks the include graph against ARCHITECTURE.md's "may depend on" table.

Every `#include "..."` of a tracked C/C++/CUDA file is mapped to the folder
(area) it names; an include of another area is allowed only where the table's
row for the including file's area lists it. Prints each violation as
`file:line: area includes other (allowed: ...)` and exits 1 when any exists.
  scripts/check-includes.py            check
  scripts/check-includes.py --graph    print the area graph actually used
"""
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def areas_of_cell(cell):
    """Folder names of one table cell: `lib/hang/`, `common`, `lib/` ..."""
    return [c.strip().rstrip("/") for c in re.findall(r"`([^`]+)`", cell)]


def normalize(name):
    name = name.rstrip("/")
    if name in ("cli", "commands", "cuda", "integrations", "tests", "bench", "scripts", "schemas", "docs", "lib"):
        return name
    if name.startswith("lib/"):
        return "lib/" + name.split("/")[1]
    return "lib/" + name  # bare `common`, `hash`, ...


def read_table():
    """{area: (set of allowed areas, special rule)} from ARCHITECTURE.md."""
    with open(os.path.join(ROOT, "ARCHITECTURE.md")) as f:
        text = f.read()
    table = {}
    for line in text.splitlines():
        if not line.startswith("| `"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 3 or not cells[0].startswith("`"):
            continue
        folders = [normalize(a) for a in areas_of_cell(cells[0]) if "." not in os.path.basename(a) or a.endswith("/")]
        dep_cell = cells[2]
        if dep_cell in ("—", "-", ""):
            allowed, rule = set(), None
        elif dep_cell.startswith("everything"):
            allowed, rule = set(), "everything"
        elif "only" in dep_cell:  # `lib/records/layout.hpp` only
            allowed, rule = set(), ("only", set(areas_of_cell(dep_cell)))
        elif "headers" in dep_cell:  # `lib/` headers
            allowed, rule = set(), "lib-headers"
        elif "LibTorch" in dep_cell and "`" not in dep_cell:
            allowed, rule = set(), "lib-any"  # the module sits behind C ABIs declared in lib/
        else:
            allowed, rule = {normalize(a) for a in areas_of_cell(dep_cell)}, None
        for folder in folders:
            table[folder] = (allowed, rule)
    return table


def area_of_file(path):
    parts = path.split("/")
    if parts[0] == "lib" and len(parts) > 2:
        return "lib/" + parts[1]
    return parts[0]


def area_of_include(inc, including):
    if inc.startswith("scout/"):
        return "lib/common"  # generated from lib/common/config.hpp.in
    if "/" not in inc:
        return area_of_file(including)  # same folder
    return area_of_file(inc)


def allowed(area, target, inc, table):
    if target == area:
        return True
    if area not in table:
        return True  # not under the rule (scripts, docs)
    deps, rule = table[area]
    if rule == "everything":
        return True
    if rule == "lib-headers" or rule == "lib-any":
        return target.startswith("lib/") or target == area
    if isinstance(rule, tuple) and rule[0] == "only":
        return inc in rule[1]
    for d in deps:
        if d == target or (d == "lib" and target.startswith("lib/")):
            return True
    return False


def main():
    table = read_table()
    files = subprocess.run(["git", "-C", ROOT, "ls-files", "*.c", "*.h", "*.cc", "*.cpp", "*.hpp", "*.cu", "*.cuh", "*.def"],
                           capture_output=True, text=True, check=True).stdout.split()
    graph = {}
    bad = []
    for path in files:
        area = area_of_file(path)
        with open(os.path.join(ROOT, path), errors="replace") as f:
            for no, line in enumerate(f, 1):
                m = re.match(r'\s*#\s*include\s+"([^"]+)"', line)
                if not m:
                    continue
                inc = m.group(1)
                target = area_of_include(inc, path)
                if target != area:
                    graph.setdefault(area, set()).add(target)
                if not allowed(area, target, inc, table):
                    deps, rule = table.get(area, (set(), None))
                    bad.append(f"{path}:{no}: {area} includes {inc} ({target}); ARCHITECTURE.md allows "
                               f"{', '.join(sorted(deps)) or rule or 'nothing'}")
    if "--graph" in sys.argv:
        for a in sorted(graph):
            print(f"{a}: {', '.join(sorted(graph[a]))}")
        return 0
    for b in bad:
        print(b)
    if bad:
        print(f"check-includes: {len(bad)} include(s) break ARCHITECTURE.md's 'may depend on' table", file=sys.stderr)
        return 1
    print(f"check-includes: {len(files)} files follow ARCHITECTURE.md's 'may depend on' table", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
