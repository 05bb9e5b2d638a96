#!/usr/bin/env python3
"""Overhead of in-job replay and of recipe export at the paper's cadence
(V=3 variants every I=20 steps) on a small CPU data-parallel training loop
(bench/replay_trainer.py, gloo), as step-time ratios measured in one run
(both enabled, each call timed apart): the time the replay (and the export)
calls took over the time of the training steps themselves, printed beside
the cost model V/(I*N) (N = repeated layers: each replayed layer costs about
1/N of a step). --baseline also runs the loop without either, for reference.

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
    # Each rank prints one JSON object; two ranks' writes may land on one line ("{...}{...}\n\n").
    rows, dec, at = [], json.JSONDecoder(), 0
    while (at := p.stdout.find("{", at)) >= 0:
        row, at = dec.raw_decode(p.stdout, at)
        rows.append(row)
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--world", type=int, default=2)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--dim", type=int, default=256)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--every", type=int, default=20)
    ap.add_argument("--variants", type=int, default=3)
    ap.add_argument("--baseline", action="store_true", help="also run the loop without either (a second run, for reference)")
    a = ap.parse_args()
    model = a.variants / (a.every * a.layers)
    print(f"training loop: world {a.world}, {a.layers} layers of dim {a.dim}, batch {a.batch}, {a.steps} steps; V={a.variants}, I={a.every}")
    with tempfile.TemporaryDirectory() as tmp:
        # One run with both: every rank replays in-job, rank 0 also exports; each call is timed apart.
        rows = run(a, tmp, "both", ["--replay-dir", os.path.join(tmp, "ev"), "--export-dir", os.path.join(tmp, "exp")])
        print(f"{'rank':<5} {'total s':>9} {'train s':>9} {'replay s':>9} {'replay':>8} {'export s':>9} {'export':>8} {'cycles':>7} {'exported':>9}")
        worst_rep = worst_exp = 0.0
        for r in sorted(rows, key=lambda r: r["rank"]):
            train = r["total_s"] - r["replay_s"] - r["export_s"]
            rep, exp = r["replay_s"] / train, r["export_s"] / train
            worst_rep, worst_exp = max(worst_rep, rep), max(worst_exp, exp)
            print(f"{r['rank']:<5} {r['total_s']:9.2f} {train:9.2f} {r['replay_s']:9.3f} {100 * rep:7.2f}% {r['export_s']:9.3f} {100 * exp:7.2f}% "
                  f"{r['replay_cycles']:7d} {r['exported']:9d}")
        print(f"in-job replay overhead {100 * worst_rep:.2f}%, recipe export overhead {100 * worst_exp:.2f}% (worst rank), "
              f"cost model V/(I*N) = {a.variants}/({a.every}*{a.layers}) = {100 * model:.2f}%")
        if a.baseline:
            base = max(r["total_s"] for r in run(a, tmp, "none", []))
            print(f"reference: the same loop without replay or export took {base:.2f} s (another run: load differs)")
    print("overhead = time in the replay/export calls / time of the training steps, from the same run")
    return 0


if __name__ == "__main__":
    sys.exit(main())
