#!/usr/bin/env python3
"""Full-size replay fault-injection campaign (issue #12): at least 200 bit
flips over random peers, recipes, compared quantities, word positions and all
64 bit positions (sign and top exponent bits of odd elements included), each
of which must be localized to the injected peer, and 50 clean runs that must
attribute nothing. Several flips go into one run, each in its own (recipe,
quantity) cell, so each is decided by its own C3. Prints the seed and the counts.

  python3 bench/replay_campaign.py [--injections 200] [--clean 50] [--seed S] [--max-seconds T]
"""
import argparse
import json
import os
import random
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCOUT = os.environ.get("SCOUT_BIN", os.path.join(ROOT, "build", "bin", "scout"))
QUANTITIES = {"transformer_block": ["output", "input_grad", "param_grad", "param"], "adamw_step": ["output", "param"],
              "expert_gemm": ["output", "input_grad", "param_grad"], "param_allgather": ["param"]}


def run(args):
    p = subprocess.run([SCOUT, "replay", "--battery", "standard", "--size", "tiny", "--repeat", "1", "--format", "json"] + args,
                       capture_output=True, text=True, timeout=600)
    return p.returncode, (json.loads(p.stdout) if p.stdout.strip() else None), p.stderr


def localized(rc, doc, inj):
    """Which of the run's injections were localized to their peer (and nothing else named)."""
    got = {}
    if doc:
        for r in doc["details"]["recipes"]:
            for x in r["quantities"]:
                if x["outliers"]:
                    got[(r["recipe"], x["quantity"])] = x["outliers"]
    named = sorted({(s["rank"], s["reason"]) for s in doc["suspects"]}) if doc else None
    want = sorted({(x[0], "sdc") for x in inj})
    return [rc == 1 and got.get((recipe, q)) == [p] and named == want for p, recipe, q, w, b in inj], got


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--injections", type=int, default=200)
    ap.add_argument("--clean", type=int, default=50)
    ap.add_argument("--seed", type=int, default=random.randrange(1 << 30))
    ap.add_argument("--per-run", type=int, default=4)
    ap.add_argument("--max-seconds", type=float, default=0, help="stop starting runs after this long (0: no limit); the counts say how many ran")
    a = ap.parse_args()
    print(f"seed {a.seed}", flush=True)
    rng = random.Random(a.seed)
    cells = [(r, q) for r, qs in QUANTITIES.items() for q in qs]
    bits_seen = set()
    done = ok = runs = clean_runs = clean_ok = clean_numbers = 0
    failures = []
    t0 = time.time()
    # Every bit position at least once: bits are dealt from shuffled decks of 0..63.
    deck = []
    # Injection runs and clean runs interleaved, so a run cut short by --max-seconds still has both.
    inj_runs = -(-a.injections // a.per_run)
    schedule = ["inject"] * inj_runs + ["clean"] * a.clean
    rng.shuffle(schedule)
    stopped = False
    for kind in schedule:
        if a.max_seconds and time.time() - t0 > a.max_seconds:
            stopped = True
            break
        if kind == "clean":
            rc, doc, err = run(["--peers", str(rng.choice([3, 4, 5])), "--seed", str(rng.randrange(1, 1 << 20))])
            if rc == 0 and doc and not doc["suspects"]:
                clean_ok += 1
            if doc and doc["details"]["numerics"] == "clean" and not any(x["reason"] == "sdc" for x in doc["suspects"]):
                clean_numbers += 1
            else:
                failures.append({"clean_run": clean_runs, "rc": rc, "suspects": doc["suspects"] if doc else None, "stderr": err[-300:]})
            clean_runs += 1
            continue
        peers = rng.choice([3, 4, 5, 6])
        k = min(a.per_run, a.injections - done)
        inj = []
        for recipe, q in rng.sample(cells, k):
            if not deck:
                deck = list(range(64))
                rng.shuffle(deck)
            bit = deck.pop()
            inj.append((rng.randrange(peers), recipe, q, rng.randrange(1 << 24), bit))
        args = ["--peers", str(peers), "--seed", str(rng.randrange(1, 1 << 20))]
        for p, recipe, q, w, b in inj:
            args += ["--inject", f"sdc:peer={p},tensor={q},word={w},bit={b},recipe={recipe}"]
        rc, doc, err = run(args)
        runs += 1
        marks, got = localized(rc, doc, inj)
        for (p, recipe, q, w, b), good in zip(inj, marks):
            done += 1
            bits_seen.add(b)
            if good:
                ok += 1
            else:
                failures.append({"peer": p, "recipe": recipe, "quantity": q, "word": w, "bit": b, "rc": rc, "got": str(got),
                                 "suspects": doc["suspects"] if doc else None, "stderr": err[-300:]})
        print(f"  {time.time() - t0:6.0f} s: {runs} injection runs ({done} injections, {ok} localized), {clean_runs} clean runs ({clean_ok} attributed nothing)",
              flush=True)
    dt = time.time() - t0
    print(f"seed {a.seed}: {ok}/{done} injections localized to the injected peer ({len(bits_seen)} distinct bit positions), "
          f"{clean_ok}/{clean_runs} clean runs attributed nothing ({clean_numbers}/{clean_runs} with clean numerics and no sdc); "
          f"{runs + clean_runs} scout runs in {dt:.0f} s"
          + (f"; STOPPED at --max-seconds {a.max_seconds:.0f} before the planned {a.injections} injections and {a.clean} clean runs" if stopped else ""))
    for f in failures[:10]:
        print("FAILURE", json.dumps(f))
    return 0 if ok == done and clean_ok == clean_runs and not stopped else 1


if __name__ == "__main__":
    sys.exit(main())
