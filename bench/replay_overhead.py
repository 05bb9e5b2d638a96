#!/usr/bin/env python3
"""Overhead of in-job replay and of recipe export at the paper's cadence
(V=3 variants every I=20 steps) on a small CPU data-parallel training loop
(bench/replay_trainer.py, gloo), as a step-time ratio measured in one run:
the time the replay (or export) calls took over the time of the training
steps themselves, printed beside the cost model V/(I*N) (N = repeated layers:
each replayed layer costs about 1/N of a step). Also the same loop without
either, for reference.

  python3 bench/replay_overhead.py [--world 2] [--steps 200] [--layers 12]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def run(a, tmp, name, extra):
    init = os.path.join(tmp, f"init-{name}")
    p = subprocess.run([sys.executable, os.path.join(HERE, "replay_trainer.py"), "--world", str(a.world), "--steps", str(a.steps),
                        "--layers", str(a.layers), "--dim", str(a.dim), "--batch", str(a.batch), "--every", str(a.every),
                        "--variants", str(a.variants), "--init-file", init] + extra,
                       capture_output=True, text=True, timeout=3600,
                       env=dict(os.environ, SCOUT_HASH_LIB=os.environ.get("SCOUT_HASH_LIB", os.path.join(ROOT, "build", "lib", "libscout_hash.so"))))
    if p.returncode != 0:
        raise SystemExit(p.stderr[-2000:])
    rows = [json.loads(l) for l in p.stdout.splitlines() if l.startswith("{")]
    total = max(r["total_s"] for r in rows)
    rep = max(r["replay_s"] for r in rows)
    return total, rep


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--world", type=int, default=2)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--dim", type=int, default=256)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--every", type=int, default=20)
    ap.add_argument("--variants", type=int, default=3)
    a = ap.parse_args()
    model = a.variants / (a.every * a.layers)
    print(f"training loop: world {a.world}, {a.layers} layers of dim {a.dim}, batch {a.batch}, {a.steps} steps; V={a.variants}, I={a.every}")
    with tempfile.TemporaryDirectory() as tmp:
        base, _ = run(a, tmp, "none", [])
        print(f"{'mode':<16} {'total s':>9} {'replay s':>9} {'overhead':>9} {'model V/(I*N)':>14}")
        print(f"{'none':<16} {base:9.2f} {0:9.2f} {'-':>9} {'-':>14}")
        for name, extra in (("in-job replay", ["--replay-dir", os.path.join(tmp, "ev")]), ("recipe export", ["--export-dir", os.path.join(tmp, "exp")])):
            total, rep = run(a, tmp, name.split()[0], extra)
            ratio = rep / (total - rep)
            print(f"{name:<16} {total:9.2f} {rep:9.2f} {100 * ratio:8.2f}% {100 * model:13.2f}%")
    print("overhead = time in the replay/export calls / time of the training steps, from the same run")
    return 0


if __name__ == "__main__":
    sys.exit(main())
