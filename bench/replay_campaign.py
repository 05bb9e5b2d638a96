#!/usr/bin/env python3
"""Full-size replay fault-injection campaign (issue #12): at least 200 bit
flips over random peers, recipes, compared quantities, word positions and all
64 bit positions (sign and top exponent bits of odd elements included), each
of which must be localized to the injected peer, and 50 clean runs that must
attribute nothing. Several flips go into one run, each in its own (recipe,
quantity) cell, so each is decided by its own C3. Prints the seed and the counts.

  python3 bench/replay_campaign.py [--injections 200] [--clean 50] [--seed S]
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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--injections", type=int, default=200)
    ap.add_argument("--clean", type=int, default=50)
    ap.add_argument("--seed", type=int, default=random.randrange(1 << 30))
    ap.add_argument("--per-run", type=int, default=4)
    a = ap.parse_args()
    print(f"seed {a.seed}", flush=True)
    rng = random.Random(a.seed)
    cells = [(r, q) for r, qs in QUANTITIES.items() for q in qs]
    bits_seen = set()
    done = ok = runs = 0
    failures = []
    t0 = time.time()
    # Every bit position at least once: bits are dealt from shuffled decks of 0..63.
    deck = []
    while done < a.injections:
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
        got = {}
        if doc:
            for r in doc["details"]["recipes"]:
                for x in r["quantities"]:
                    if x["outliers"]:
                        got[(r["recipe"], x["quantity"])] = x["outliers"]
        named = sorted({(s["rank"], s["reason"]) for s in doc["suspects"]}) if doc else None
        for p, recipe, q, w, b in inj:
            done += 1
            bits_seen.add(b)
            if rc == 1 and got.get((recipe, q)) == [p] and named == sorted({(x[0], "sdc") for x in inj}):
                ok += 1
            else:
                failures.append({"peer": p, "recipe": recipe, "quantity": q, "word": w, "bit": b, "rc": rc, "got": str(got), "stderr": err[-300:]})
        print(f"  run {runs}: {done} injections, {ok} localized", flush=True)
    clean_ok = 0
    for i in range(a.clean):
        rc, doc, err = run(["--peers", str(rng.choice([3, 4, 5])), "--seed", str(rng.randrange(1, 1 << 20))])
        if rc == 0 and doc and not doc["suspects"]:
            clean_ok += 1
        else:
            failures.append({"clean_run": i, "rc": rc, "stderr": err[-300:]})
    dt = time.time() - t0
    print(f"seed {a.seed}: {ok}/{done} injections localized to the injected peer ({len(bits_seen)} distinct bit positions), "
          f"{clean_ok}/{a.clean} clean runs attributed nothing; {runs + a.clean} scout runs in {dt:.0f} s")
    for f in failures[:10]:
        print("FAILURE", json.dumps(f))
    return 0 if ok == done and clean_ok == a.clean else 1


if __name__ == "__main__":
    sys.exit(main())
