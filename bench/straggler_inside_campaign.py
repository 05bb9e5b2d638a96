#!/usr/bin/env python3
"""Innocent ranks flagged beside a rank stopped inside its collectives, on a busy host (issue 40: no innocent named).

Each job is test_straggler's stopped-inside-collectives job (world 4, tp=4: every rank sleeps 0.3 s inside its tp
all-reduce each step and computes ~2 ms, so a step is nearly all wait; one random rank SIGSTOP-cycled at a random
1.5-3x), beside --hogs busy loops. A job is probed --probes times (`scout straggler --rounds 3 --interval 2 --mesh
dp=4 --evidence-out`), and with --clean no rank is stopped. Every probe's evidence is kept; each binary given
(--scout, repeatable: before and after a change) decides all of it again, and the campaign prints, per binary, the
probes that named a wrong set (an innocent, or the victim missed) and the rounds in which an innocent was flagged.

  bench/straggler_inside_campaign.py --jobs 6 --probes 8 --seed S [--hogs 3] [--clean] --scout OLD --scout NEW

A job's seed is printed; `--seed S --jobs 1` with that seed runs it again (the faults follow the seed, the host's
noise does not). SCOUT_BIN (default build/bin/scout) runs the probes."""
import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
os.environ.setdefault("SCOUT_BIN", os.path.join(ROOT, "build", "bin", "scout"))
os.environ.setdefault("SCOUT_BUILD_DIR", os.path.join(ROOT, "build"))
os.environ.setdefault("SCOUT_SOURCE_DIR", ROOT)

import scoutlib  # noqa: E402
from straggler_jobs import StragglerJob  # noqa: E402


def probe_job(seed, probes, clean, keep):
    """Runs one job; returns [(evidence path, victim or None)]."""
    import test_straggler
    out = []
    with StragglerJob(world=4, tp=4, seed=seed, python=test_straggler.require_python(), work_ms=2) as job:
        victim = job.rng.randrange(4)
        factor = round(job.rng.uniform(1.5, 3.0), 2)
        print(f"job seed {seed}: " + ("clean" if clean else f"rank {victim} stopped at {factor}x"), flush=True)
        job.start(slow_group=[0, 1, 2, 3], slow_group_delay=0.3)
        job.wait_steps(3)
        if not clean:
            job.duty_cycle(victim, factor)
        time.sleep(1.0)
        for p in range(probes):
            ev = os.path.join(keep, f"{seed}-{p}.evidence.json")
            r = scoutlib.run(["straggler", "--job", job.job, "--rounds", "3", "--interval", "2", "--mesh", "dp=4",
                              "--evidence-out", ev], timeout=120)
            if os.path.exists(ev):
                out.append((ev, None if clean else victim))
            print(f"  probe {p}: rc {r.rc} {r.json().get('summary', '')[:120] if r.stdout else r.stderr[-200:]}",
                  flush=True)
    return out


def decide(binary, ev):
    p = subprocess.run([binary, "--log-level", "debug", "straggler", "--evidence-in", ev, "--mesh", "dp=4"],
                       capture_output=True, text=True, timeout=120)
    doc = json.loads(p.stdout)
    per_round = [set(r.get("flagged") or []) for r in doc["details"]["straggler"]["per_round"]]
    return [(s["rank"], s["evidence"].get("measure")) for s in doc["suspects"]], per_round


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jobs", type=int, default=6)
    ap.add_argument("--probes", type=int, default=8)
    ap.add_argument("--seed", type=int, default=random.SystemRandom().randrange(1 << 31))
    ap.add_argument("--hogs", type=int, default=3)
    ap.add_argument("--clean", action="store_true", help="no rank stopped")
    ap.add_argument("--scout", action="append", help="a binary to decide the kept evidence with (repeatable)")
    ap.add_argument("--keep", help="where evidence is kept (default: a new temporary directory)")
    a = ap.parse_args()
    keep = a.keep or tempfile.mkdtemp(prefix="scout-inside-")
    os.makedirs(keep, exist_ok=True)
    print(f"campaign seed {a.seed}, {a.jobs} jobs x {a.probes} probes, {a.hogs} busy loops, evidence in {keep}",
          flush=True)
    rng = random.Random(a.seed)
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(a.hogs)]
    runs = []
    try:
        for _ in range(a.jobs):
            runs += probe_job(rng.randrange(1 << 31), a.probes, a.clean, keep)
    finally:
        for h in hogs:
            h.kill()
    print(f"load after: {os.getloadavg()}")
    for binary in a.scout or [os.environ["SCOUT_BIN"]]:
        wrong, innocent_rounds, rounds = 0, 0, 0
        for ev, victim in runs:
            named, per_round = decide(binary, ev)
            expect = [] if victim is None else [(victim, "stopped")]
            innocents = [sorted(f - {victim}) for f in per_round]
            rounds += len(per_round)
            innocent_rounds += sum(1 for x in innocents if x)
            if named != expect:
                wrong += 1
                print(f"  {binary}: {os.path.basename(ev)}: named {named}, expected {expect}; flagged {per_round}")
        print(f"{binary}: {len(runs)} probes, {wrong} named a wrong set; an innocent flagged in {innocent_rounds} of "
              f"{rounds} rounds")


if __name__ == "__main__":
    main()
