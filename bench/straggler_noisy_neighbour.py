#!/usr/bin/env python3
"""Noisy neighbour (issue 40): a rank that shares its CPU with other busy processes and is slowed 1.15x or more
should be named, with the cause cpu_contention. Each run starts a real DDP job (gloo, CPU, the scout publisher;
world 4, 60 ms of the trainer's work per step, as test_straggler's contention test), pins a random rank's threads to
one CPU with H busy loops (straggler_jobs.cpu_hogs: the other ranks pinned to the other CPUs), and runs
`scout straggler --rounds 3 --interval 1.5`. Few hogs slow the victim mildly (the test's 8-12 slow it 1.7-3.4x).

Per run it prints the seed (run i: base + i; the seed draws the victim), H, the host's load, the victim's busy time
(main thread on a CPU or waiting for one) against its peers' median before the rounds and in each round, its
compute per call (the mean gap between its collectives) and main-thread CPU per call against its peers' per round,
its compute ratio per round as scout's decision computes it (scout: what its floors and majority apply to), then
scout's verdict: who it named, the measure, the compute ratio and the cause with its
figures (cpu, peers' cpu, wait, wait at the peers' rate, more_work_s, wait_beyond_work_s).

    python3 bench/straggler_noisy_neighbour.py --hogs 1,2,3 --runs 6 [--seed N] [--keep DIR]
    python3 bench/straggler_noisy_neighbour.py --redecide DIR    # DIR's kept runs decided again

Needs 2 CPUs and a build (SCOUT_BIN / SCOUT_BUILD_DIR as the integration tests)."""
import argparse
import glob
import json
import os
import re
import random
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))
sys.path.insert(0, HERE)
from straggler_campaign import busy_per_call, median, premise_figures  # noqa: E402
from straggler_jobs import StragglerJob, busy_per_round, busy_ratio  # noqa: E402
from trainer_harness import SCOUT_BIN  # noqa: E402


def compute_per_round(evidence, victim):
    """The victim's compute per call (busy_per_call: between its collectives) against its peers' median, per round."""
    out = []
    for per in busy_per_call(evidence):
        if victim in per and len(per) > 1:
            peers = median([v for k, v in per.items() if k != victim])
            out.append(round(per[victim] / peers, 2) if peers > 0 else None)
    return out


def scout_ratios(ev_path, job, victim):
    """The victim's compute ratio per round as scout's decision computes it (its debug lines, decided again from the
    evidence): what its floors and the majority of rounds apply to."""
    p = subprocess.run([SCOUT_BIN, "straggler", "--job", job, "--evidence-in", ev_path, "--format", "json", "--log-level",
                        "debug"], capture_output=True, text=True, timeout=180)
    return [float(m.group(1)) for m in re.finditer(rf"straggler: rank {victim} calls \d+ compute [\d.]+ ms \(x([\d.]+)\)",
                                                  p.stderr)]


def redecide(directory):
    """Per kept run (noisy-H-SEED.evidence.json; the seed draws the victim): scout's per-round ratios and verdict."""
    for path in sorted(glob.glob(os.path.join(directory, "noisy-*.evidence.json"))):
        hogs, seed = (int(x) for x in os.path.basename(path).split(".")[0].split("-")[1:3])
        victim = random.Random(seed).randrange(4)
        with open(path) as f:
            job = json.load(f)["job"]
        p = subprocess.run([SCOUT_BIN, "straggler", "--job", job, "--evidence-in", path, "--format", "json"],
                           capture_output=True, text=True, timeout=180)
        v = json.loads(p.stdout)
        got = [(s.get("rank"), s.get("reason"), s["evidence"].get("cause")) for s in v.get("suspects", [])]
        print(f"seed {seed} hogs {hogs} victim {victim}: scout's compute ratio per round "
              f"{scout_ratios(path, job, victim)}; named {got}")


def one_run(seed, hogs, tmp, keep=None):
    rng = random.Random(seed)
    with StragglerJob(world=4, seed=seed, python="/usr/bin/python3", work_ms=60) as job:
        victim = rng.randrange(4)
        job.start()
        job.wait_steps(3)
        job.cpu_hogs(victim, hogs)
        time.sleep(1.0)
        before = busy_ratio([p.pid for p in job.procs], victim, 2.0)
        load = os.getloadavg()[0]
        ev_path = os.path.join(tmp, f"ev-{seed}.json")
        p = subprocess.run([SCOUT_BIN, "straggler", "--job", job.job, "--format", "json", "--rounds", "3", "--interval",
                            "1.5", "--evidence-out", ev_path], capture_output=True, text=True, timeout=180)
    v = json.loads(p.stdout)
    with open(ev_path) as f:
        evidence = json.load(f)
    if keep:
        shutil.copy(ev_path, os.path.join(keep, f"noisy-{hogs}-{seed}.evidence.json"))
        with open(os.path.join(keep, f"noisy-{hogs}-{seed}.verdict.json"), "w") as f:
            f.write(p.stdout)
    fig = premise_figures(evidence, victim)
    out = {"seed": seed, "hogs": hogs, "victim": victim, "load": round(load, 1), "busy_before": round(before, 2),
           "busy": [round(x, 2) for x in busy_per_round(ev_path, victim)], "compute": compute_per_round(evidence, victim),
           "main_cpu": fig["main_cpu"], "scout": scout_ratios(ev_path, evidence["job"], victim), "named": [(s.get("rank"), s.get("reason")) for s in v.get("suspects", [])],
           "summary": v.get("summary")}
    for s in v.get("suspects", []):
        if s.get("rank") == victim and s.get("reason") == "compute":
            ev = s["evidence"]
            f = ev.get("cause_figures", {})
            out.update(measure=ev.get("measure"), ratio=ev.get("compute_ratio"), cause=ev.get("cause"),
                       figures={k: f.get(k) for k in ("cpu_s", "peers_cpu_s", "runq_s", "runq_at_peers_rate_s", "excess_s",
                                                      "more_work_s", "wait_beyond_work_s")})
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hogs", type=lambda t: [int(x) for x in t.split(",")], default=[2, 3],
                    help="busy loops pinned with the victim; run i uses the (i mod len)th")
    ap.add_argument("--runs", type=int, default=6)
    ap.add_argument("--seed", type=int, help="base seed (printed); run i uses base + i")
    ap.add_argument("--keep", help="keep every run's evidence and verdict in this directory")
    ap.add_argument("--redecide", metavar="DIR", help="decide DIR's kept runs again with this scout and print them")
    a = ap.parse_args()
    if a.redecide:
        redecide(a.redecide)
        return
    if len(os.sched_getaffinity(0)) < 2:
        sys.exit("straggler_noisy_neighbour: needs 2 CPUs")
    base = a.seed if a.seed is not None else random.SystemRandom().randrange(1 << 30)
    if a.keep:
        os.makedirs(a.keep, exist_ok=True)
    print(f"straggler_noisy_neighbour: base seed {base}, hogs {a.hogs}, {a.runs} runs, scout {SCOUT_BIN}, load "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs", flush=True)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(a.runs):
            r = one_run(base + i, a.hogs[i % len(a.hogs)], tmp, a.keep)
            rows.append(r)
            named = r["named"] == [(r["victim"], "compute")]
            print(f"seed {r['seed']} hogs {r['hogs']} victim {r['victim']} load {r['load']}: busy before {r['busy_before']}x, "
                  f"rounds busy {r['busy']} compute {r['compute']} main_cpu {r['main_cpu']} scout {r['scout']}; "
                  + (f"NAMED ({r['measure']}, {r['ratio']}x) cause {r['cause']} {r['figures']}" if named
                     else f"named {r['named']}: {r['summary']}"), flush=True)
    for h in a.hogs:
        mine = [r for r in rows if r["hogs"] == h]
        n = sum(r["named"] == [(r["victim"], "compute")] for r in mine)
        c = sum(r.get("cause") == "cpu_contention" for r in mine)
        slow = sorted(median(r["scout"]) for r in mine if r["scout"])
        print(f"hogs {h}: {len(mine)} runs, victim named {n}, cause cpu_contention {c}; its median compute ratio "
              f"per run (scout's) {[round(x, 2) for x in slow]}")


if __name__ == "__main__":
    main()
