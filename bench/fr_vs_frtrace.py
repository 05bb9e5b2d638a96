#!/usr/bin/env python3
"""scout's Flight Recorder verdict beside torch's own analyzer (issue 39).

For each scenario (clean; one rank exits; one rank stops (SIGSTOP); one rank
skips a collective; one rank issues the world all-reduce with another shape;
one rank issues another kind) on each layout, a 4-rank (--world 8: 8) gloo job runs with
Flight Recorder on, without scout's publisher, until every survivor's
collective times out and it dumps its recorder (pickle and JSON, as NCCL's
dump-on-timeout does; gloo does not dump by itself). Then on the same dumps:

  scout   scout probe-hang --flight-recorder DIR/json --format json
  fr_trace  python -m torch.distributed.flight_recorder.fr_trace DIR/pickle
            --allow-incomplete-ranks -p rank_

Layouts (the job scripts of the FR integration tests):
  groups  tests/integration/trainers/fr_mesh_job.py, dp=2 x tp=2 by new_group
  mesh    the same on init_device_mesh (dims dp, tp)
  ddp     tests/integration/trainers/torch2_trainer.py --mode ddp (plain DDP,
          then one world all_reduce per step; that trainer has no other-kind
          fault, so ddp/other-kind is not run). Its clean run does not dump by
          itself: a wrapper dumps before destroy_process_group, once the
          recorder retired the closing barrier (up to 3 s).
  fsdp2, hsdp, tp, compile
          the same trainer, wrapper, steps and fault set as ddp, with
          --mode fsdp2 (fully_shard on a 1-D mesh of all ranks), hsdp
          (fully_shard on a (dp_replicate 2, dp_shard world/2) mesh), tp
          (DTensor Colwise/Rowwise over tp of a (dp world/2, tp 2) mesh,
          fully_shard over dp), compile (torch.compile, aot_eager, with a
          functional all_reduce in the graph; gradients all-reduced by hand).
          The fault is at the world all_reduce after the step, as for ddp.

What a tool "names" (blames): scout: the ranks of `suspects`; fr_trace: every
rank in its "missing ranks: {..}" (not all ranks joining) and "Culprit rank N"
(mismatch) lines, over its whole output. A rank listed only as having left no
dump (scout's details.missing_ranks, fr_trace's "missed FR dumps from ranks")
is shown in the log but not counted as named: such a rank did die or stop.
Per run and tool:
  right     named exactly {culprit} (clean job: named nobody)
  innocent  named any rank that is not the culprit (clean job: any rank)
  nothing   named nobody (fault), or the tool failed (fr_trace's error class
            is counted beside)

The culprit rank and step of each run are drawn from Random(f"{seed}/{layout}/
{fault}/{i}") (the culprit among --world ranks; at world 4 the draws of the
layouts that were here before are unchanged); the seed is printed and --seed
reproduces the whole campaign.

usage: .venv/bin/python bench/fr_vs_frtrace.py [--seed S] [--runs 2] [--world 4|8]
         [--layouts groups mesh ddp fsdp2 hsdp tp compile] [--faults ...] [--out FILE]
"""
import argparse
import collections
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.abspath(os.path.join(HERE, ".."))
sys.path.insert(0, os.path.join(SRC, "tests", "integration"))
import trainer_harness as th  # noqa: E402  (free_port, PYTHON_DIR)

SCOUT = os.environ.get("SCOUT_BIN", os.path.join(SRC, "build", "bin", "scout"))
# torch 2.x: SCOUT_TORCH2_PYTHON, else the checkout's .venv, else the interpreter running this script.
PY = os.environ.get("SCOUT_TORCH2_PYTHON") or (th.VENV_PYTHON if os.path.exists(th.VENV_PYTHON) else sys.executable)
MESH_JOB = os.path.join(SRC, "tests", "integration", "trainers", "fr_mesh_job.py")
DDP_TRAINER = os.path.join(SRC, "tests", "integration", "trainers", "torch2_trainer.py")
WORLD = 4  # --world sets it (4 or 8)
DDP_STEPS = 4
FAULTS = ("none", "exit", "stop", "skip", "wrong-shape", "other-kind")
# Layouts run by torch2_trainer.py --mode <layout> (the ddp wrapper, the ddp fault set, the ddp step draw).
TRAINER_LAYOUTS = ("ddp", "fsdp2", "hsdp", "tp", "compile")
LAYOUTS = ("groups", "mesh") + TRAINER_LAYOUTS
DDP_FAULT = {"none": "none", "exit": "exit", "stop": "stop-before-collective", "skip": "skip-collective",
             "wrong-shape": "wrong-shape"}

# torch2_trainer dumps only when a collective fails; a clean run dumps after its closing barrier, once its
# recorder retired it (as fr_mesh_job's settled_dump: gloo retires a call after it returns, on another thread;
# dumped at once, 2 of 3 clean runs held one or two ranks' barrier unretired, which scout without --world
# cannot tell from survivors of a stopped last rank; a real dump is taken on a timeout, long after).
DDP_WRAPPER = r"""
import json, os, runpy, sys, time
import torch
import torch.distributed as dist
sys.path.insert(0, os.path.dirname(sys.argv[1]))
import torch2_trainer as t
orig = dist.destroy_process_group
def destroy(*a, **k):
    deadline = time.monotonic() + 3.0
    while time.monotonic() < deadline:
        doc = json.loads(torch._C._distributed_c10d._dump_fr_trace_json(includeCollectives=True))
        entries = doc.get("entries") or []
        if entries and entries[-1].get("retired"):
            break
        time.sleep(0.02)
    t.dump_flight_recorder(int(os.environ["RANK"]))
    return orig(*a, **k)
dist.destroy_process_group = destroy
code = t.main(sys.argv[2:])
sys.stdout.flush(); sys.stderr.flush()
os._exit(code)
"""


def draw(seed, layout, fault, i):
    rng = random.Random(f"{seed}/{layout}/{fault}/{i}")
    if fault == "none":
        return -1, -1
    rank = rng.randrange(WORLD)
    step = rng.randrange(1, 4) if layout not in TRAINER_LAYOUTS else rng.randint(2, DDP_STEPS - 1)
    return rank, step


def run_job(layout, fault, rank, step, d, pg_timeout):
    """Runs one job until every survivor has ended (or the deadline); returns a note."""
    port = str(th.free_port())
    env = dict(os.environ, TORCH_FR_BUFFER_SIZE="2000", OMP_NUM_THREADS="1", SCOUT_TEST_FR_DIR=d)
    procs = []
    for r in range(WORLD):
        if layout in TRAINER_LAYOUTS:
            renv = dict(env, RANK=str(r), WORLD_SIZE=str(WORLD), LOCAL_RANK=str(r), MASTER_ADDR="127.0.0.1",
                        MASTER_PORT=port, SCOUT_JOB="frbench", SCOUT_AUTOPROBE="0",
                        PYTHONPATH=os.pathsep.join([th.PYTHON_DIR] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])))
            cmd = [PY, "-c", DDP_WRAPPER, DDP_TRAINER, "--mode", layout, "--steps", str(DDP_STEPS), "--publisher", "off",
                   "--fault", DDP_FAULT[fault], "--fault-rank", str(rank), "--fault-step", str(step),
                   "--pg-timeout", str(pg_timeout)]
        else:
            renv = env
            cmd = [PY, MESH_JOB, str(r), str(WORLD), d, port, fault, str(rank), str(step), layout]
        procs.append(subprocess.Popen(cmd, env=renv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                      stderr=subprocess.DEVNULL, start_new_session=True))
    survivors = WORLD - 1 if fault == "stop" else WORLD
    deadline = time.monotonic() + 150
    note = ""
    try:
        while time.monotonic() < deadline:
            if sum(p.poll() is not None for p in procs) >= survivors:
                break
            time.sleep(0.2)
        else:
            note = "job-deadline"
    finally:
        for p in procs:
            if p.poll() is None:
                # SIGKILL first: it ends a stopped rank too. Continued first, a stopped rank could run a few ms on a
                # loaded machine before the kill, fail its collective (peers gone) and dump, or half-dump (seen:
                # world 8 hsdp/stop, 8 dumps, scout group_stall; world 4 tp/stop, a .rank_1.tmp left).
                for sig in (signal.SIGKILL, signal.SIGCONT):
                    try:
                        os.kill(p.pid, sig)
                    except ProcessLookupError:
                        pass
            p.wait()
    # A rank still running when the job is ended (a stopped rank, continued then killed) can leave a half-written
    # dump (.rank_N.tmp): fr_trace reads it as rank "N.tmp" (ValueError). Such a rank left no dump.
    partial = []
    for sub in ("pickle", "json"):
        sd = os.path.join(d, sub)
        for name in (os.listdir(sd) if os.path.isdir(sd) else []):
            if name.startswith(".") and name.endswith(".tmp"):
                os.remove(os.path.join(sd, name))
                partial.append(f"{sub}/{name}")
    if partial:
        note = (note + " " if note else "") + "removed partial " + ",".join(partial)
    return note


def scout_names(d):
    jdir = os.path.join(d, "json")
    if not os.path.isdir(jdir) or not os.listdir(jdir):
        return None, "no-dumps", "", None
    p = subprocess.run([SCOUT, "probe-hang", "--job", "frbench", "--flight-recorder", jdir, "--threshold", "1",
                        "--format", "json"], capture_output=True, text=True, timeout=120)
    try:
        doc = json.loads(p.stdout)
    except ValueError:
        return None, f"exit{p.returncode}", (p.stdout + p.stderr)[-300:], None
    named = {int(s["rank"]) for s in doc.get("suspects", [])}
    missing = {int(r) for r in (doc.get("details", {}).get("missing_ranks") or [])}
    info = (f"status={doc.get('status')} kind={doc.get('details', {}).get('kind')} "
            f"suspects={sorted(named)} missing={sorted(missing)}")
    return named, None, info, (doc.get("status"), missing)


SET_RE = r"\{([0-9, ]*)\}"


def frtrace_names(d):
    pdir = os.path.join(d, "pickle")
    if not os.path.isdir(pdir) or not os.listdir(pdir):
        return None, "no-dumps", ""
    p = subprocess.run([PY, "-m", "torch.distributed.flight_recorder.fr_trace", pdir, "--allow-incomplete-ranks",
                        "-p", "rank_"], capture_output=True, text=True, timeout=300)
    text = p.stdout + "\n" + p.stderr
    if p.returncode != 0:
        exc = re.findall(r"^(\w+(?:Error|Exception|Interrupt)\b)[^\n]*", text, re.M)
        return None, (exc[-1] if exc else f"exit{p.returncode}"), text.strip().splitlines()[-1][:300] if text.strip() else ""
    named, parts = set(), []
    for m in re.finditer(r"missing ranks: " + SET_RE, text):
        s = {int(x) for x in m.group(1).replace(" ", "").split(",") if x}
        named |= s
        parts.append(f"not-joining{sorted(s)}")
    for m in re.finditer(r"Culprit rank (\d+)", text):
        named.add(int(m.group(1)))
        parts.append(f"culprit[{m.group(1)}]")
    for m in re.finditer(r"missed FR dumps from ranks \(" + SET_RE + r"\)", text):
        s = {int(x) for x in m.group(1).replace(" ", "").split(",") if x}
        parts.append(f"no-dump{sorted(s)}")  # not a blame (see the docstring)
    if "No errors found for this collective entry" in text:
        parts.append("no-errors-found")
    # Collapse repeats for the log line.
    seen = collections.OrderedDict((x, None) for x in parts)
    return named, None, " ".join(seen) or "(names nobody)"


def classify(fault, culprit, named):
    if named is None:
        return "nothing"
    if fault == "none":
        return "right" if not named else "innocent"
    if not named:
        return "nothing"
    return "right" if named == {culprit} else "innocent"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--world", type=int, default=4, choices=(4, 8),
                    help="ranks per job (hsdp: mesh 2 x world/2; tp: world/2 x 2)")
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--layouts", nargs="+", default=list(LAYOUTS), choices=LAYOUTS)
    ap.add_argument("--faults", nargs="+", default=list(FAULTS), choices=FAULTS)
    ap.add_argument("--pg-timeout", type=float, default=6.0, help="ddp layout's collective timeout (fr_mesh_job: 6 s)")
    ap.add_argument("--keep", action="store_true", help="keep the dump directories")
    ap.add_argument("--out", default="", help="also write the printout here")
    args = ap.parse_args()
    global WORLD
    WORLD = args.world
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1 << 31)
    lines = []

    def out(s=""):
        print(s, flush=True)
        lines.append(s)

    out(f"fr_vs_frtrace: seed {seed} (--seed {seed} reproduces), world {WORLD}, runs {args.runs} per scenario")
    out(f"scout: {SCOUT}; torch: {PY}")
    # counts[(layout, fault)][tool][class]; errors[(layout, fault)][tool] -> Counter of error classes
    counts = collections.defaultdict(lambda: {"scout": collections.Counter(), "fr_trace": collections.Counter()})
    errors = collections.defaultdict(lambda: {"scout": collections.Counter(), "fr_trace": collections.Counter()})
    statuses = collections.defaultdict(collections.Counter)  # scout's verdict status per scenario
    innocents, notes = [], []
    t0 = time.monotonic()
    for i in range(args.runs):
        for layout in args.layouts:
            for fault in args.faults:
                if layout in TRAINER_LAYOUTS and fault not in DDP_FAULT:
                    continue
                rank, step = draw(seed, layout, fault, i)
                d = tempfile.mkdtemp(prefix="scout-frbench-")
                try:
                    t1 = time.monotonic()
                    note = run_job(layout, fault, rank, step, d, args.pg_timeout)
                    ndumps = len(os.listdir(os.path.join(d, "json"))) if os.path.isdir(os.path.join(d, "json")) else 0
                    s_named, s_err, s_info, s_status = scout_names(d)
                    s_status, s_missing = s_status or ("-", set())
                    statuses[(layout, fault)][s_status] += 1
                    if fault == "none" and s_status != "healthy":
                        notes.append(f"clean job not read healthy by scout: {s_status} on {layout} (seed {seed}, run {i})")
                    if fault != "none" and s_status == "healthy":
                        notes.append(f"hung job read healthy by scout: {layout}/{fault} culprit {rank} step {step} "
                                     f"(seed {seed}, run {i})")
                    if s_missing - {rank}:
                        notes.append(f"scout listed rank(s) {sorted(s_missing - {rank})} as left no dump (not blamed) on "
                                     f"{layout}/{fault} culprit {rank} step {step} (seed {seed}, run {i})")
                    f_named, f_err, f_info = frtrace_names(d)
                    key = (layout, fault)
                    for tool, named, err in (("scout", s_named, s_err), ("fr_trace", f_named, f_err)):
                        c = classify(fault, rank, named)
                        counts[key][tool][c] += 1
                        if err:
                            errors[key][tool][err] += 1
                        if c == "innocent":
                            innocents.append(f"{tool} named {sorted(named)} on {layout}/{fault} culprit {rank} "
                                             f"step {step} (seed {seed}, run {i})")
                    out(f"[{i}] {layout:6s} {fault:11s} culprit {rank:2d} step {step:2d} dumps {ndumps} "
                        f"({time.monotonic() - t1:.0f}s{' ' + note if note else ''})")
                    out(f"      scout    -> {classify(fault, rank, s_named):8s} {s_err or s_info}")
                    out(f"      fr_trace -> {classify(fault, rank, f_named):8s} {(f_err + ': ' + f_info) if f_err else f_info}")
                finally:
                    if args.keep:
                        out(f"      kept {d}")
                    else:
                        shutil.rmtree(d, ignore_errors=True)

    out()
    out(f"Table: runs per scenario x tool, right / innocent / nothing (clean: right = named nobody); seed {seed}")
    hdr = (f"{'scenario':20s} {'n':>3s} | {'scout r/i/n':>12s} | {'fr_trace r/i/n':>14s} | "
           f"{'scout status':32s} | fr_trace errors")
    out(hdr)
    out("-" * len(hdr))
    tot = {"scout": collections.Counter(), "fr_trace": collections.Counter()}
    for layout in args.layouts:
        for fault in args.faults:
            key = (layout, fault)
            if key not in counts:
                continue
            cs, cf = counts[key]["scout"], counts[key]["fr_trace"]
            n = sum(cs.values())
            for tool in tot:
                tot[tool].update(counts[key][tool])
            errs = ", ".join(f"{k} x{v}" for k, v in sorted(errors[key]["fr_trace"].items())) or "-"
            serr = errors[key]["scout"]
            if serr:
                errs += "; scout: " + ", ".join(f"{k} x{v}" for k, v in sorted(serr.items()))
            st = " ".join(f"{k} x{v}" for k, v in sorted(statuses[key].items()))
            out(f"{layout + '/' + fault:20s} {n:3d} | {cs['right']:3d}/{cs['innocent']:3d}/{cs['nothing']:3d}  "
                f"| {cf['right']:4d}/{cf['innocent']:3d}/{cf['nothing']:3d}  | {st:32s} | {errs}")
    out("-" * len(hdr))
    n = sum(tot["scout"].values())
    out(f"{'total':20s} {n:3d} | {tot['scout']['right']:3d}/{tot['scout']['innocent']:3d}/{tot['scout']['nothing']:3d}  "
        f"| {tot['fr_trace']['right']:4d}/{tot['fr_trace']['innocent']:3d}/{tot['fr_trace']['nothing']:3d}  |")
    out()
    out(f"summary: {n} runs (seed {seed}, {time.monotonic() - t0:.0f}s): scout right {tot['scout']['right']}, "
        f"innocent {tot['scout']['innocent']}, nothing {tot['scout']['nothing']}; fr_trace right "
        f"{tot['fr_trace']['right']}, innocent {tot['fr_trace']['innocent']}, nothing {tot['fr_trace']['nothing']}")
    for s in innocents:
        out(f"innocent named: {s}")
    for s in notes:
        out(f"note: {s}")
    if args.out:
        with open(args.out, "w") as f:
            f.write("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
