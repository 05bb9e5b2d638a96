#!/usr/bin/env python3
"""Replay time of each battery recipe and of the whole battery (issue #12).

For each recipe, `scout replay --recipes R` on N peers, wall time of the whole
command (process start, LibTorch load, transport) and the peers' median module
time (forward + backward) and gather time from the verdict; then the whole
battery. The reference is the empty-work recipe param_allgather measured in the
same run (its wall time is scout's fixed cost), so ratios are comparable across
machines.

  python3 bench/replay_battery_bench.py [--size small] [--peers 4] [--rounds 3]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCOUT = os.environ.get("SCOUT_BIN", os.path.join(ROOT, "build", "bin", "scout"))
RECIPES = ["param_allgather", "transformer_block", "adamw_step", "expert_gemm"]


def once(size, peers, recipes):
    t = time.perf_counter()
    p = subprocess.run([SCOUT, "replay", "--battery", "standard", "--size", size, "--peers", str(peers), "--format", "json"]
                       + (["--recipes", ",".join(recipes)] if recipes else []), capture_output=True, text=True, timeout=900)
    wall = time.perf_counter() - t
    if p.returncode != 0:
        raise SystemExit(f"scout replay failed (rc {p.returncode}): {p.stderr[-500:]}")
    doc = json.loads(p.stdout)
    per = {}
    for r in doc["details"]["recipes"]:
        ps = r["timings"]["peers"]
        per[r["recipe"]] = (statistics.median(x["forward_s"] + x["backward_s"] for x in ps), statistics.median(x["gather_s"] for x in ps))
    return wall, per


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", default="small")
    ap.add_argument("--peers", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    print(f"scout replay battery, size {a.size}, {a.peers} peers, median of {a.rounds} rounds")
    print(f"{'recipe':<20} {'wall s':>8} {'x ref':>7} {'module ms':>10} {'gather ms':>10}")
    ref = None
    for r in RECIPES + [None]:
        walls, mods, gats = [], [], []
        for _ in range(a.rounds):
            wall, per = once(a.size, a.peers, [r] if r else None)
            walls.append(wall)
            mods.append(sum(v[0] for v in per.values()))
            gats.append(sum(v[1] for v in per.values()))
        w = statistics.median(walls)
        if ref is None:
            ref = w
        print(f"{(r or 'whole battery'):<20} {w:8.2f} {w / ref:7.2f} {1e3 * statistics.median(mods):10.2f} {1e3 * statistics.median(gats):10.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
