#!/usr/bin/env python3
"""Decides every recorded straggler run (tests/integration/data/straggler) with two scout binaries and compares:
the verdict JSON (created_at left out) and the decision's debug lines (every rank's figures and flags, every group's
link figures, per round; the log's timestamps left out). For a change that must not change a verdict (the decision's
cost, issue 40).

  bench/straggler_recorded_diff.py OLD_SCOUT NEW_SCOUT

Prints one line per run (same / differs and where) and the count; exits 1 where any differs."""
import json
import os
import re
import subprocess
import sys

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "integration", "data", "straggler")
# The extra flags a run is decided with (tests/integration/test_straggler.py StragglerRecordedRuns.CASES).
EXTRA = {name: ["--mesh", "dp=4"] for name in ("inside-477098678", "inside2-438547015", "inside-clean-717940639")}


def decide(binary, path, job, extra):
    p = subprocess.run([binary, "straggler", "--job", job, "--evidence-in", path, "--format", "json", "--log-level",
                        "debug", *extra], capture_output=True, text=True, timeout=300)
    doc = json.loads(p.stdout)
    doc.pop("created_at", None)
    lines = [re.sub(r"^\S+ \S+ ", "", ln) for ln in p.stderr.splitlines()]  # "TIME LEVEL text"
    return p.returncode, doc, [ln for ln in lines if ln.startswith("straggler:")]


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    old, new = sys.argv[1:]
    names = sorted(f[: -len(".evidence.json")] for f in os.listdir(DATA) if f.endswith(".evidence.json"))
    same = 0
    for name in names:
        path = os.path.join(DATA, f"{name}.evidence.json")
        with open(path) as f:
            job = json.load(f)["job"]
        a = decide(old, path, job, EXTRA.get(name, []))
        b = decide(new, path, job, EXTRA.get(name, []))
        where = [what for what, x, y in (("exit", a[0], b[0]), ("verdict", a[1], b[1]), ("debug", a[2], b[2]))
                 if x != y]
        same += 0 if where else 1
        print(f"{name:28s} {'same' if not where else 'differs: ' + ', '.join(where)} (exit {a[0]}, status "
              f"{a[1].get('status')}, suspects {[s.get('rank') for s in a[1].get('suspects', [])]}, "
              f"{len(a[2])} debug lines)")
    print(f"{same} of {len(names)} recorded runs decided the same (verdict JSON and debug lines)")
    sys.exit(0 if same == len(names) else 1)


if __name__ == "__main__":
    main()
