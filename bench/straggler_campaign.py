#!/usr/bin/env python3
"""Repeated randomized straggler runs on real DDP jobs (gloo, CPU, the scout
publisher), with counts, and a precision/recall comparison on the same
recorded evidence (the rounds scout decided on, --evidence-out) against two
baselines:

  naive   any rank whose step time exceeds the mean by 20%
  NVRx    NVIDIA Resiliency Extension's straggler scoring: relative score =
          reference (median of the ranks' medians) / the rank's median, and
          individual score = the rank's own best / its current median; a
          straggler when a score is below 0.75

The per-rank "step time" both baselines get is the rank's own busy time per
collective from the same rings (its compute between collectives): in
synchronous training every rank's wall-clock step time is the same (the
others wait for the straggler), which would leave both baselines blind.

Scenarios (every run draws its rank, factor, group and delay from its seed):
  clean            no slowdown (ordinary jitter of a loaded machine)
  compute-trainer  one random rank's whole computation takes F x its CPU, F in [1.3, 3] (the trainer burns
                   (F - 1) x its step's CPU after computing: straggler_trainer.py)
  compute-stall    the same extra CPU all in one gap of the step (after the optimizer step): a host-side
                   stall such as a slow data loader; F from --trainer-factors too
  compute-sleep    the stall slept instead ((F - 1) x the step's wall time): a rank blocked off its CPU (I/O)
  compute-outside  one random rank SIGSTOP/SIGCONT-duty-cycled to 1/F of the CPU, F in [1.3, 3]
  compute-quota    one random rank under a real cgroup (v1 or v2) CPU quota of 1/F of the CPU it used, F in [1.5, 3]
                   (root; the cgroup is removed after the run); its cause should be cpu_quota
  compute-contention  one random rank pinned to one CPU with H busy loops pinned there, H in [8, 12]
                   (no quota); its cause should be cpu_contention
  link-tp / link-dp  a delay in [10, 30] ms inside one tp / dp group's collectives (dp=2,tp=2, 2 hosts)
  memory           every rank reads the next 64 MB of its 256 MB data shard each step; one random rank's memory
                   cgroup (v1) limited to M MB, M in [8, 24], so it reads its batch from disk every step (root and
                   the v1 memory controller); its cause should be memory_pressure
  fleet            every rank 3x slower after three --history probes (temporal finding)

Premises: a compute-contention run is scored only when the hogs slowed its victim: its busy time (main
thread on a CPU or waiting for one) at least 1.5x its peers' median before the rounds and in a strict
majority of the rounds scout decided on (from the scheduler counters in the evidence). How much pinned
hogs slow a rank depends on the host's other load, which pinning cannot control; a run whose premise
failed is reported apart ("premise failed"), not counted right or wrong. A compute-trainer or
compute-outside run reports its victim's main-thread CPU and busy time per call against its peers' per
round (premise figures), and is always scored.

Shapes: --world W (default 4) and --tp T (dp=W/T,tp=T) for the clean and compute scenarios, or --worlds
W,... (each run draws its world from the list with its seed); the link scenarios are always world 4,
dp=2,tp=2 on 2 hosts. --load N runs N busy loops beside the jobs for the whole campaign (a loaded host,
the same for every run; `stress -c N` alike), ended at exit.

    python3 bench/straggler_campaign.py --runs 4 [--scenarios clean,compute-trainer] [--seed N] [--torch 2]
    python3 bench/straggler_campaign.py --world 2 --scenarios compute-trainer --trainer-factors 1.3,2 --load 2
"""
import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))
from straggler_jobs import StragglerJob, busy_per_round, busy_ratio, python_for, remove_stale_cgroups  # noqa: E402
from trainer_harness import SCOUT_BIN  # noqa: E402

SCENARIOS = ("clean", "compute-trainer", "compute-outside", "link-tp", "link-dp", "fleet", "compute-quota",
             "compute-contention", "compute-stall", "compute-sleep", "memory")
CAUSE = {"compute-trainer": "slow_compute", "compute-quota": "cpu_quota", "compute-contention": "cpu_contention",
         "compute-stall": "slow_compute", "compute-sleep": "blocked", "memory": "memory_pressure"}


def scout(job, *args, timeout=180):
    p = subprocess.run([SCOUT_BIN, "straggler", "--job", job, "--format", "json", *args], capture_output=True, text=True,
                       timeout=timeout)
    try:
        return p.returncode, json.loads(p.stdout)
    except json.JSONDecodeError:
        return p.returncode, {"error": p.stderr}


def busy_per_call(evidence):
    """Per round, per rank: mean compute per completed collective (what each rank would time of its own work)."""
    out = []
    for rnd in evidence["rounds"]:
        if rnd.get("baseline"):
            continue  # the read that opens scout's counter window, not a round it decided on
        per = {}
        for r in rnd["ranks"]:
            ev = sorted((e for e in r["events"] if e[0] > 0), key=lambda e: e[0])
            gaps, prev = [], 0
            for op, gid, typ, count, seq, enter, exit_, *_kind in ev:  # 7 fields, or 8 with the exit kind
                if exit_ <= 0:
                    continue
                if prev > 0 and enter >= prev:
                    gaps.append(enter - prev)
                prev = max(prev, exit_)
            if gaps:
                per[r["rank"]] = sum(gaps) / len(gaps)
        out.append(per)
    return out


def stopped_shares(evidence):
    """Per rank, the share of the observer's process state samples that found it stopped over the decided
    rounds (None where it was not sampled: evidence of an older scout)."""
    samples, stopped = {}, {}
    for rnd in evidence["rounds"]:
        if rnd.get("baseline"):
            continue
        for r in rnd["ranks"]:
            if "stopped" in r:
                samples[r["rank"]] = samples.get(r["rank"], 0) + r["stopped"][0]
                stopped[r["rank"]] = stopped.get(r["rank"], 0) + r["stopped"][1]
    return {k: round(stopped[k] / n, 3) if n else None for k, n in samples.items()}


def sched_per_round(evidence):
    """Per decided round, per rank: (CPU of all threads, main thread's CPU wait, main thread's CPU) per call
    completed since the previous read, from the scheduler counters of the evidence (None: not counted)."""
    out, prev = [], None
    for rnd in evidence["rounds"]:
        cur = {r["rank"]: (r.get("sched"), r["written"]) for r in rnd["ranks"]}
        if prev is not None:
            per = {}
            for k, (sc, written) in cur.items():
                psc, pwritten = prev.get(k, (None, 0))
                if sc and psc and written > pwritten and sc[2] >= 0 and psc[2] >= 0:
                    n = written - pwritten
                    per[k] = tuple((a - b) / n for a, b in zip(sc, psc))
            out.append(per)
        prev = cur
    return out


def premise_figures(evidence, victim):
    """Per decided round, the victim's main-thread CPU per call and busy time per call (main thread on a CPU
    or waiting for one) against its peers' median: what a slowdown that is real must move."""
    cpu, busy = [], []
    for per in sched_per_round(evidence):
        if victim not in per or len(per) < 2:
            continue
        peers = [v for k, v in per.items() if k != victim]
        mc = median([p[2] for p in peers])
        mb = median([p[1] + p[2] for p in peers])
        cpu.append(round(per[victim][2] / mc, 2) if mc > 0 else None)
        busy.append(round((per[victim][1] + per[victim][2]) / mb, 2) if mb > 0 else None)
    return {"main_cpu": cpu, "busy": busy}


def median(v):
    v = sorted(v)
    n = len(v)
    return 0 if n == 0 else (v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2)


def baselines(evidence):
    rounds = busy_per_call(evidence)
    ranks = sorted(set().union(*[set(r) for r in rounds])) if rounds else []
    med = {k: median([r[k] for r in rounds if k in r]) for k in ranks}
    mean = sum(med.values()) / len(med) if med else 0
    naive = {k for k, v in med.items() if v > 1.2 * mean}
    ref = median(list(med.values()))
    relative = {k for k, v in med.items() if v > 0 and ref / v < 0.75}
    individual = set()
    for k in ranks:
        series = [r[k] for r in rounds if k in r]
        if len(series) >= 2 and series[-1] > 0 and min(series[:-1]) / series[-1] < 0.75:
            individual.add(k)
    return {"naive": naive, "nvrx": relative | individual, "nvrx_relative": relative}


def one_run(scenario, seed, python, tmp, work_ms=25, keep=None, factors=None, world=4, tp=1, trainer_factors=None,
            worlds=None):
    rng = random.Random(seed)
    if scenario.startswith("link"):
        world, tp = 4, 2
    elif worlds:
        world = rng.choice(worlds)  # drawn first: a fixed --world draws the same victim and factor as before
    truth_ranks, truth_group = set(), None
    factor = None
    premise = None  # None: this scenario has none; else {"held": bool, figures...}
    with StragglerJob(world=world, tp=tp, seed=seed, python=python,
                      ranks_per_host=2 if scenario.startswith("link") else None, work_ms=work_ms) as job:
        if scenario in ("compute-trainer", "compute-stall", "compute-sleep"):
            victim, factor = rng.randrange(world), rng.uniform(*(trainer_factors or (1.3, 3.0)))
            truth_ranks = {victim}
            job.start(slow_rank=victim, slow_factor=factor, slow_at="each" if scenario == "compute-trainer" else "end",
                      slow_kind="sleep" if scenario == "compute-sleep" else "cpu")
        elif scenario in ("link-tp", "link-dp"):
            index = rng.randrange(2)
            truth_group = [2 * index, 2 * index + 1] if scenario == "link-tp" else [index, index + 2]
            job.start(slow_group=truth_group, slow_group_delay=rng.uniform(0.01, 0.03))
        elif scenario == "fleet":
            job.start(slow_all_factor=3.0)
        elif scenario == "memory":
            job.start(read_mb=64)
        else:
            job.start()
        job.wait_steps(3)
        if scenario == "compute-outside":
            victim, factor = rng.randrange(world), rng.uniform(*(factors or (1.3, 3.0)))
            truth_ranks = {victim}
            job.duty_cycle(victim, factor)
        elif scenario == "compute-quota":
            victim, factor = rng.randrange(world), rng.uniform(1.5, 3.0)
            truth_ranks = {victim}
            job.cpu_quota(victim, factor)
        elif scenario == "memory":
            victim, factor = rng.randrange(world), rng.randint(8, 24)  # factor: the limit in MB
            truth_ranks = {victim}
            job.memory_limit(victim, factor)
            time.sleep(1.0)
        elif scenario == "compute-contention":
            victim, factor = rng.randrange(world), rng.randint(8, 12)
            truth_ranks = {victim}
            job.cpu_hogs(victim, factor)
            # The premise, before the rounds: the hogs slow the victim more than the host's other load slows its
            # peers (its busy time per step at least 1.5x theirs; the job is synchronous, so per second is per step).
            time.sleep(1.0)
            premise = {"before": round(busy_ratio([p.pid for p in job.procs], victim, 2.0), 2)}
        history = os.path.join(tmp, f"h-{seed}.json")
        if scenario == "fleet":
            for _ in range(3):
                scout(job.job, "--rounds", "2", "--interval", "1", "--history", history)
            job.slow_all()
            time.sleep(1.5)
            ev_path = os.path.join(tmp, f"ev-{seed}.json")
            rc, v = scout(job.job, "--rounds", "2", "--interval", "1", "--history", history, "--evidence-out", ev_path)
            fleet = v.get("details", {}).get("temporal", {}).get("status") == "fleet_slowdown"
            if keep and os.path.exists(ev_path):
                shutil.copy(ev_path, os.path.join(keep, f"{scenario}-{seed}.evidence.json"))
            return {"scenario": scenario, "seed": seed, "ok": fleet and not v.get("suspects"), "rc": rc,
                    "world": world, "innocent": sorted(s["rank"] for s in v.get("suspects", [])),
                    "summary": v.get("summary", v.get("error"))}
        ev_path = os.path.join(tmp, f"ev-{seed}.json")
        load = round(os.getloadavg()[0], 1)  # what the tests' overload guard reads
        t0 = time.monotonic()
        rc, v = scout(job.job, "--rounds", "3", "--interval", "1.5", "--evidence-out", ev_path)
        wall = time.monotonic() - t0
    if "error" in v:
        return {"scenario": scenario, "seed": seed, "ok": False, "rc": rc, "summary": v["error"], "world": world}
    if truth_ranks:
        # ... and in the rounds scout decided on (the host's load moves within seconds): the victim's busy time
        # at least 1.5x its peers' in a strict majority of them. Reported for every slowed rank; a premise only
        # for contention, whose slowdown the campaign does not control.
        (victim,) = truth_ranks
        figures = premise_figures(_load_json(ev_path), victim)
        if scenario == "compute-contention":
            busy = busy_per_round(ev_path, victim)  # as test_straggler's contention test checks it
            premise.update(rounds=[round(x, 2) for x in busy])
            premise["held"] = premise["before"] >= 1.5 and 2 * sum(x >= 1.5 for x in busy) > len(busy)
        else:
            premise = {"figures": figures}
    named = {(s["rank"], s["reason"]) for s in v["suspects"] if s["rank"] is not None}
    causes = {s["rank"]: s["evidence"].get("cause") for s in v["suspects"] if s["reason"] == "compute"}
    compute_named = {r for r, why in named if why == "compute"}
    slow = [g["members"] for g in v["details"]["straggler"]["slow_groups"]]
    if truth_group is not None:
        ok = slow == [truth_group] and not compute_named
    else:
        ok = compute_named == truth_ranks and not slow and all(why == "compute" for _, why in named)
        if scenario in CAUSE:
            ok = ok and all(c == CAUSE[scenario] for c in causes.values())
    evidence = _load_json(ev_path)
    base = baselines(evidence)
    shares = stopped_shares(evidence)
    measures = {s["rank"]: s["evidence"].get("measure") for s in v["suspects"] if s["reason"] == "compute"}
    sampling = v["details"]["straggler"].get("state_sampling", {})
    if keep:
        shutil.copy(ev_path, os.path.join(keep, f"{scenario}-{seed}.evidence.json"))
        with open(os.path.join(keep, f"{scenario}-{seed}.verdict.json"), "w") as f:
            json.dump(v, f)
    return {"scenario": scenario, "seed": seed, "ok": ok, "rc": rc, "truth": sorted(truth_ranks), "scout": sorted(compute_named),
            "factor": factor, "causes": causes, "load": load,
            "baselines": {k: sorted(x) for k, x in base.items()}, "summary": v["summary"], "wall_s": round(wall, 1),
            "measures": measures, "stopped_shares": shares, "sampling_cpu_share": sampling.get("cpu_share"),
            "world": world, "tp": tp, "premise": premise, "innocent": sorted(compute_named - truth_ranks),
            "truth_group": truth_group, "slow_groups": slow}


def _load_json(path):
    with open(path) as f:
        return json.load(f)


def premise_failed(r):
    return bool(r.get("premise")) and r["premise"].get("held") is False


def prf(runs, key):
    tp = fp = fn = 0
    for r in runs:
        if "truth" not in r or premise_failed(r):
            continue
        truth = set(r["truth"])
        got = set(r["scout"]) if key == "scout" else set(r["baselines"][key])
        tp += len(truth & got)
        fp += len(got - truth)
        fn += len(truth - got)
    p = tp / (tp + fp) if tp + fp else 1.0
    rec = tp / (tp + fn) if tp + fn else 1.0
    return tp, fp, fn, p, rec


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3, help="runs per scenario")
    ap.add_argument("--scenarios", default=",".join(SCENARIOS))
    ap.add_argument("--seed", type=int, help="base seed (printed); run i of scenario j uses base + 1000 j + i")
    ap.add_argument("--torch", choices=("1.13", "2"), default="2",
                    help="2: the venv's torch (default); 1.13: Debian's, to rerun a batch recorded on it")
    ap.add_argument("--json", help="also write every run's result here")
    ap.add_argument("--work-ms", type=float, default=25, help="the trainer's fixed work per step (the tests use 60)")
    ap.add_argument("--factors", type=lambda t: tuple(float(x) for x in t.split(",")),
                    help="LO,HI: the compute-outside factor range (default 1.3,3)")
    ap.add_argument("--keep", help="keep every run's evidence and verdict in this directory (scout --evidence-in)")
    ap.add_argument("--world", type=int, default=4, help="ranks of the clean and compute scenarios' jobs (default 4)")
    ap.add_argument("--worlds", type=lambda t: [int(x) for x in t.split(",")],
                    help="W,...: each run of those scenarios draws its world from this list (a mixed batch)")
    ap.add_argument("--tp", type=int, default=1, help="tp of those jobs (mesh dp=W/T,tp=T; default 1)")
    ap.add_argument("--trainer-factors", type=lambda t: tuple(float(x) for x in t.split(",")),
                    help="LO,HI: the compute-trainer, -stall and -sleep factor range (default 1.3,3)")
    ap.add_argument("--load", type=int, default=0, help="N busy loops beside the jobs for the whole campaign")
    a = ap.parse_args()
    python = python_for(a.torch)
    if python is None:
        print(f"no torch {a.torch} interpreter (set SCOUT_VENV)", file=sys.stderr)
        return 2
    if subprocess.run([python, "-c", "import torch"], capture_output=True, timeout=300).returncode != 0:
        hint = "apt-get install python3-torch (Debian's torch 1.13)" if a.torch == "1.13" else "scripts/install-deps.sh"
        print(f"{python} cannot import torch: {hint}", file=sys.stderr)
        return 2
    base = a.seed if a.seed is not None else random.SystemRandom().randrange(1 << 30)
    shape = f"worlds {a.worlds}" if a.worlds else f"world {a.world}"
    print(f"straggler_campaign: base seed {base}, torch {a.torch} ({python}), {shape}, tp {a.tp}, "
          f"trainer factors {a.trainer_factors or (1.3, 3.0)}, {a.load} busy loop(s) beside, "
          f"load {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs", flush=True)
    results = []
    remove_stale_cgroups()
    if a.keep:
        os.makedirs(a.keep, exist_ok=True)
    loops = [subprocess.Popen([sys.executable, "-c", "while True: pass"], stdin=subprocess.DEVNULL,
                              start_new_session=True) for _ in range(a.load)]
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for j, sc in enumerate(a.scenarios.split(",")):
                if sc not in SCENARIOS:
                    print(f"unknown scenario {sc}", file=sys.stderr)
                    return 2
                for i in range(a.runs):
                    seed = base + 1000 * SCENARIOS.index(sc) + i
                    try:
                        r = one_run(sc, seed, python, tmp, a.work_ms, a.keep, a.factors, a.world, a.tp,
                                    a.trainer_factors, a.worlds)
                    except Exception as e:  # a run that could not even start counts as failed, with why
                        r = {"scenario": sc, "seed": seed, "ok": False, "summary": f"run failed: {e}"[:300]}
                    results.append(r)
                    verdict = "ok " if r["ok"] else "PREMISE FAILED" if premise_failed(r) else "BAD"
                    factor = f"{r['factor']:.2f}" if isinstance(r.get("factor"), float) else r.get("factor")
                    print(f"{sc:16} seed {seed}: {verdict} world {r.get('world')} truth {r.get('truth')} factor {factor} "
                          f"load {r.get('load')} causes {r.get('causes')} measures {r.get('measures')} "
                          f"premise {r.get('premise')} stopped {r.get('stopped_shares')} "
                          f"{r.get('summary', '')[:150]}", flush=True)
    finally:
        for p in loops:
            p.kill()
            p.wait()
    print("\ncounts (scenario: right / runs scored; runs whose premise failed are not scored)")
    for sc in a.scenarios.split(","):
        rs = [r for r in results if r["scenario"] == sc]
        scored = [r for r in rs if not premise_failed(r)]
        failed = len(rs) - len(scored)
        print(f"  {sc:16} {sum(r['ok'] for r in scored)} / {len(scored)}" +
              (f"  (premise failed: {failed}: seeds {[r['seed'] for r in rs if premise_failed(r)]})" if failed else ""))
    innocent = [(r["seed"], r["innocent"]) for r in results if r.get("innocent")]
    print(f"innocent ranks named: {sum(len(x) for _, x in innocent)}" + (f" {innocent}" if innocent else ""))
    innocent = [x for r in results for k, x in (r.get("stopped_shares") or {}).items()
                if x is not None and k not in r.get("truth", [])]
    if innocent:
        print(f"\nstopped share of ranks not stopped from outside: max {max(innocent):.3f} over {len(innocent)} rank-runs")
    print("\nprecision / recall of compute-straggler ranks on the same recorded evidence (clean + compute + link runs)")
    for key, label in (("scout", "scout"), ("naive", "naive (> mean + 20%)"), ("nvrx", "NVRx (relative or individual < 0.75)"),
                       ("nvrx_relative", "NVRx relative only")):
        tp, fp, fn, p, rec = prf(results, key)
        print(f"  {label:40} TP {tp:3} FP {fp:3} FN {fn:3}  precision {p:.2f}  recall {rec:.2f}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
