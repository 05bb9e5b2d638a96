#!/usr/bin/env python3
"""The large randomized hang campaign: real gloo jobs (the venv's torch 2.x,
tests/integration/trainers/cascade_trainer.py), cascade (DDP, worlds 4, 6, 8)
and hybrid meshes (dp=4,tp=2, dp=3,tp=2, dp=2,pp=2,tp=2, dp=4,pp=2), random
faults and probe delays; kill: one rank SIGKILLed from outside at a random
moment (worlds 4, 6, 8), which must be named once every process is gone.
SCOUT_VENV names another torch 2.x venv. Prints every run (with its seed) and a table of
counts by world/mesh and fault; exits 1 if any run named an innocent rank or
missed a faulty rank its position singled out.

    python3 bench/hang_cascade_campaign.py --runs 40 --seed 1 [--kind cascade|hybrid|kill|both|all] [--observers]

--observers: each probe is several observers (a stall's compact gather and its rings' gather,
lib/hang/position.hpp), and they must all print the same verdict.

Needs a build (SCOUT_BUILD_DIR, default build/) and the torch 2.x venv (scripts/install-deps.sh).
"""
import argparse
import json
import os
import random
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))

import hang_campaign  # noqa: E402


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", type=int, default=20, help="runs per kind")
    p.add_argument("--seed", type=int)
    p.add_argument("--kind", choices=("cascade", "hybrid", "kill", "both", "all"), default="both",
                   help="both: cascade and hybrid; all: also kill (one rank SIGKILLed from outside at a random moment)")
    p.add_argument("--json", help="write every run's result here")
    p.add_argument("--worlds", help="WORLD,...: the worlds of the cascade and kill runs, in turn (default: drawn from "
                                    "4, 6 and 8); e.g. 2,3,5")
    p.add_argument("--observers", action="store_true",
                   help="probe with several observers gathering across \"nodes\" (drawn per run: 1, 2, half the world "
                        "or one a rank, in two levels half the time from 4 on); every observer must print the same "
                        "verdict")
    a = p.parse_args()
    worlds = [int(w) for w in a.worlds.split(",")] if a.worlds else None
    if worlds and any(w < 2 for w in worlds):
        p.error("--worlds: every world needs 2 ranks or more")
    seed = a.seed if a.seed is not None else random.SystemRandom().randrange(1 << 31)
    print(f"hang_cascade_campaign: seed {seed}", flush=True)
    kinds = {"both": ("cascade", "hybrid"), "all": ("cascade", "hybrid", "kill")}.get(a.kind, (a.kind,))
    results = []
    t0 = time.monotonic()
    for i, kind in enumerate(kinds):
        results += hang_campaign.campaign(a.runs, seed + i, kind, worlds=worlds if kind != "hybrid" else None,
                                          log=lambda m: print(m, flush=True), observers=a.observers)
    print(f"\n{len(results)} runs in {time.monotonic() - t0:.0f} s, seed {seed}")
    print(f"{'world/mesh':>16} {'fault':<8} {'runs':>5} {'named':>6} {'innocent':>9} {'missed':>7}")
    for key, (n, named, bad, missed) in sorted(hang_campaign.counts(results).items()):
        print(f"{key[0]:>16} {key[1]:<8} {n:5d} {named:6d} {bad:9d} {missed:7d}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump([{k: v for k, v in r.items() if k != "logs"} for r in results], f, indent=1)
    return 1 if any(r["innocent"] or r["missed"] for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
