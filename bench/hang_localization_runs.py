#!/usr/bin/env python3
"""Localization accuracy of `scout probe-hang` over repeated randomized runs
with real PyTorch DDP trainers (gloo, the scout publisher, N processes).

Each run starts a fresh job, injects one fault at a random rank and step (the
harness prints each seed), waits for the records to go silent, probes once and
checks the verdict: the injected rank and nothing else for rank faults,
group_stall for the link taken down between two network-namespace "nodes"
(root only), healthy for a clean job (probed while it trains and after it
ends). Prints one row per fault: runs, correct, wrong, and the median probe
wall time against `scout --version` measured in the same run.

    /usr/bin/python3 bench/hang_localization_runs.py [--runs 5] [--world 4] [--faults exit,crash,...]
"""
import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE_DIR = os.environ.get("SCOUT_SOURCE_DIR", os.path.abspath(os.path.join(HERE, "..")))
sys.path.insert(0, os.path.join(SOURCE_DIR, "tests", "integration"))

from trainer_harness import SCOUT_BIN, TrainerJob, group_stalled_job, have_netns  # noqa: E402

RANK_FAULTS = ("stop-before-collective", "exit", "crash", "skip-collective", "wrong-shape", "stop-inside-collective")


def probe(job, threshold="1"):
    t0 = time.perf_counter()
    proc = subprocess.run([SCOUT_BIN, "probe-hang", "--job", job, "--threshold", threshold, "--timeout", "10",
                           "--format", "json"], capture_output=True, text=True, timeout=60)
    elapsed = time.perf_counter() - t0
    try:
        return json.loads(proc.stdout), elapsed
    except json.JSONDecodeError:
        return {"status": f"no verdict (exit {proc.returncode}): {proc.stderr.strip()[-200:]}", "suspects": []}, elapsed


def run_rank_fault(fault, world):
    with TrainerJob(world=world, steps=6, fault=fault) as job:
        job.start()
        job.settle()
        doc, t = probe(job.job)
        named = sorted(s.get("rank") for s in doc["suspects"])
        ok = doc["status"] == "attributed" and named == [job.fault_rank]
        return ok, t, f"seed {job.seed} rank {job.fault_rank} step {job.fault_step}: {doc['status']} {named}"


def run_clean(world):
    with TrainerJob(world=world, steps=40, fault="none", step_delay=0.1) as job:
        job.start()
        job.wait_training(min_step=2)
        during, t = probe(job.job, threshold="5")
        job.wait_exit(timeout=120)
        after, _ = probe(job.job)
        ok = during["status"] == "healthy" and after["status"] == "healthy"
        return ok, t, f"seed {job.seed}: {during['status']} while training, {after['status']} after"


def run_group_stall(world):
    with group_stalled_job(world, random.Random()) as job:
        doc, t = probe(job.job)
        ok = doc["status"] == "group_stall" and not doc["suspects"]
        return ok, t, f"seed {job.seed}: {doc['status']}"


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--world", type=int, default=4)
    p.add_argument("--faults", default=",".join(RANK_FAULTS + ("group-stall", "clean")))
    a = p.parse_args()
    faults = [f for f in a.faults.split(",") if f]
    subprocess.run([SCOUT_BIN, "--version"], capture_output=True)  # warm the page cache
    version_times = []
    for _ in range(11):
        t0 = time.perf_counter()
        subprocess.run([SCOUT_BIN, "--version"], capture_output=True)
        version_times.append(time.perf_counter() - t0)
    version_s = statistics.median(version_times)

    rows = []
    for fault in faults:
        if fault == "group-stall" and not have_netns():
            print("group-stall: skipped (needs root and ip netns)", file=sys.stderr)
            continue
        correct, times, failures = 0, [], []
        for i in range(a.runs):
            if fault == "clean":
                ok, t, what = run_clean(a.world)
            elif fault == "group-stall":
                ok, t, what = run_group_stall(a.world)
            else:
                ok, t, what = run_rank_fault(fault, a.world)
            print(f"{fault} run {i + 1}/{a.runs}: {'ok' if ok else 'WRONG'} ({what})", file=sys.stderr, flush=True)
            correct += ok
            times.append(t)
            if not ok:
                failures.append(what)
        rows.append((fault, a.runs, correct, statistics.median(times), failures))

    print(f"\nworld {a.world}, {a.runs} randomized runs per fault; scout --version {version_s * 1000:.1f} ms (median of 11)")
    print(f"{'fault':<24} {'runs':>5} {'correct':>8} {'wrong':>6} {'probe ms':>9} {'x --version':>12}")
    for fault, runs, correct, med, failures in rows:
        print(f"{fault:<24} {runs:>5} {correct:>8} {runs - correct:>6} {med * 1000:>9.1f} {med / version_s:>12.1f}")
        for f in failures:
            print(f"    wrong: {f}")
    return 0 if all(r[2] == r[1] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
