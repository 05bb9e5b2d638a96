#!/usr/bin/env python3
"""Held-out evaluation of scout's straggler and hang decisions (bench/heldout/README.md).

Runs the held-out set written in bench/heldout/split.json (fresh seeds, never used to set a threshold) and
prints precision and recall of that set only:

  straggler  bench/straggler_campaign.py with the split's seeds (clean, compute-trainer, compute-stall,
             compute-outside; worlds 2-8; factors 1.3-1.4x), every run's evidence and verdict kept;
             goal precision >= 0.98, recall >= 0.95 of the named compute stragglers
  hang       bench/hang_cascade_campaign.py with the split's seed; goal 0 innocent ranks named

    python3 bench/heldout_eval.py [--batch b1] [--out DIR] [--only straggler|hang]
    python3 bench/heldout_eval.py --from DIR      # re-decide DIR's kept straggler evidence with this binary

--from DIR reads DIR/straggler.json (each run's truth) and DIR/straggler/*.evidence.json, decides each again
(`scout straggler --evidence-in`) and scores the new verdicts; the hang runs kept in DIR/hang.json are
re-scored as recorded (a hang probe is live: its evidence is not replayed here).

Before running, every held-out seed is looked up in the base commit's tree (`git grep`, bench/heldout/ left
out): a seed found there was seen while tuning, and the evaluation refuses to run it.

Needs a build (SCOUT_BIN / SCOUT_BUILD_DIR as the integration tests; default build/).
"""
import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SPLIT = os.path.join(HERE, "heldout", "split.json")
BUILD_DIR = os.environ.get("SCOUT_BUILD_DIR", os.path.join(ROOT, "build"))
SCOUT_BIN = os.environ.get("SCOUT_BIN", os.path.join(BUILD_DIR, "bin", "scout"))
BASE_COMMIT = "9fe617d"


def load_split():
    with open(SPLIT) as f:
        return json.load(f)


def batches(split):
    """The held-out batches: name -> (straggler batch or None, hang batch or None). "b1" is the split's first."""
    s = split["heldout"]
    out = {"b1": ({"base_seed": s["straggler"]["base_seed"], "runs": len(s["straggler"]["seeds"]["clean"]),
                   "torch": "1.13", "seeds": s["straggler"]["seeds"]},
                  {"seed": s["hang"]["seed"], "runs": s["hang"]["runs"]})}
    more = s.get("more", {})
    for b in more.get("straggler", []):
        out[b["name"]] = (b, None)
    for h in more.get("hang", []):
        out[h["name"]] = (None, h)
    return out


def heldout_seeds(split):
    out = []
    for st, h in batches(split).values():
        if st:
            out += [x for v in st["seeds"].values() for x in v]
        if h:
            out += [h["seed"] + k for k in range(3)]
    out.append(split["heldout"]["simulator"]["base_seed"])
    return out


def check_fresh(seeds):
    """Seeds `git grep` finds in the base commit's tree (outside bench/heldout/): tuning set, not held out."""
    seen = []
    for seed in seeds:
        p = subprocess.run(["git", "-C", ROOT, "grep", "-l", "-w", str(seed), BASE_COMMIT, "--", ".",
                            ":(exclude)bench/heldout"], capture_output=True, text=True, timeout=60)
        if p.returncode == 0 and p.stdout.strip():
            seen.append((seed, p.stdout.split()[:3]))
        elif p.returncode not in (0, 1):
            sys.exit(f"heldout_eval: git grep failed; {p.stderr.strip()}; run it in a git checkout of scout")
    return seen


def run_logged(cmd, log_path, env=None, timeout=7200):
    """Runs cmd, its output both printed and written to log_path."""
    with open(log_path, "w") as log:
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT, env=env)
        t0 = time.monotonic()
        for line in p.stdout:
            sys.stdout.write("  | " + line)
            sys.stdout.flush()
            log.write(line)
            if time.monotonic() - t0 > timeout:
                p.kill()
                break
        return p.wait()


def redecide(runs, kept):
    """Each run's kept evidence decided again by this binary: the run's `scout` (named compute ranks) replaced."""
    out = []
    for r in runs:
        ev = os.path.join(kept, f"{r['scenario']}-{r['seed']}.evidence.json")
        if "truth" not in r or not os.path.exists(ev):
            out.append(r)
            continue
        with open(ev) as f:
            job = json.load(f).get("job", "")
        p = subprocess.run([SCOUT_BIN, "straggler", "--job", job, "--evidence-in", ev, "--format", "json"],
                           capture_output=True, text=True, timeout=300)
        try:
            v = json.loads(p.stdout)
        except json.JSONDecodeError:
            out.append(dict(r, scout=None, summary=f"re-decision failed: rc {p.returncode}: {p.stderr[-200:]}"))
            continue
        named = sorted({s["rank"] for s in v.get("suspects", []) if s.get("reason") == "compute" and s["rank"] is not None})
        slow = [g["members"] for g in v.get("details", {}).get("straggler", {}).get("slow_groups", [])]
        measures = {s["rank"]: s["evidence"].get("measure") for s in v.get("suspects", []) if s.get("reason") == "compute"}
        out.append(dict(r, scout=named, measures=measures, summary=v.get("summary", ""), slow_groups=slow,
                        innocent=sorted(set(named) - set(r["truth"]))))
    return out


def premise_failed(r):
    """A run whose fault did not slow its victim as the scenario needs (compute-contention: bench/straggler_campaign.py)."""
    return bool(r.get("premise")) and r["premise"].get("held") is False


def score(r):
    """(TP, FP, FN) of one run: named compute ranks against the slowed rank, or, where a group's link was slowed
    (truth_group), the slow groups found against that group (a compute rank named there is a false positive)."""
    got = set(r["scout"])
    if r.get("truth_group"):
        slow = [list(g) for g in r.get("slow_groups") or []]
        hit = list(r["truth_group"]) in slow
        return int(hit), len(slow) - int(hit) + len(got), int(not hit)
    truth = set(r["truth"])
    return len(truth & got), len(got - truth), len(truth - got)


def straggler_report(runs):
    """Precision and recall per scenario (class) and over all; the goal holds per class."""
    lines = []
    by = {}
    failed = [r for r in runs if "truth" not in r or r.get("scout") is None]
    unscored = [r for r in runs if r not in failed and premise_failed(r)]
    for r in runs:
        if r in failed or r in unscored:
            continue
        row = by.setdefault(r["scenario"], [0, 0, 0, 0])
        row[0] += 1
        for k, x in enumerate(score(r)):
            row[k + 1] += x

    def pr(tp, fp, fn):
        return (tp / (tp + fp) if tp + fp else 1.0), (tp / (tp + fn) if tp + fn else 1.0)

    lines.append(f"{'scenario':18} {'runs':>4} {'TP':>3} {'FP':>3} {'FN':>3} {'precision':>9} {'recall':>6}")
    classes_ok = True
    for sc, (n, a, b, c) in by.items():
        p, rec = pr(a, b, c)
        lines.append(f"{sc:18} {n:4d} {a:3d} {b:3d} {c:3d} {p:9.3f} {rec:6.3f}")
        classes_ok &= p >= 0.98 and rec >= 0.95
    tp, fp, fn = (sum(row[k] for row in by.values()) for k in (1, 2, 3))
    p, rec = pr(tp, fp, fn)
    lines.append(f"straggler (held out): {sum(row[0] for row in by.values())} runs scored, TP {tp} FP {fp} FN {fn}  "
                 f"precision {p:.3f} (goal >= 0.98)  recall {rec:.3f} (goal >= 0.95)  innocent ranks or groups named "
                 f"{fp}; per class: {'goals met' if classes_ok else 'goals NOT met'}")
    for r in runs:
        if r in failed:
            lines.append(f"  not scored: {r['scenario']} seed {r['seed']}: {r.get('summary', '')[:200]}")
        elif r in unscored:
            lines.append(f"  premise failed (not scored): {r['scenario']} seed {r['seed']} premise {r.get('premise')}")
        elif score(r)[1:] != (0, 0):
            lines.append(f"  wrong: {r['scenario']} seed {r['seed']} world {r.get('world')} factor "
                         f"{r.get('factor') and round(r['factor'], 3)} truth {r.get('truth_group') or r['truth']} named "
                         f"{r['scout']} slow groups {r.get('slow_groups')} load {r.get('load')} measures "
                         f"{r.get('measures')}: {r.get('summary', '')[:160]}")
    return lines, (p, rec, fp, classes_ok)


def hang_report(runs):
    lines = []
    innocent = [r for r in runs if r.get("innocent")]
    missed = [r for r in runs if r.get("missed")]
    named = sum(1 for r in runs if any(pr.get("named") for pr in r.get("probes", [])))
    lines.append(f"hang (held out): {len(runs)} runs, {named} with a rank named, runs naming an innocent rank "
                 f"{len(innocent)} (goal 0), runs missing a faulty rank its position singled out {len(missed)}")
    for r in runs:
        named = sorted({x for pr in r.get("probes", []) for x in (pr.get("named") or [])})
        lines.append(f"  seed {r.get('seed')} {r.get('mesh', ''):14} fault {r.get('fault', ''):5} faults {r.get('faults')} "
                     f"named {named} innocent {r.get('innocent')} missed {r.get('missed')}")
    return lines, len(innocent)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", help="where runs are kept (straggler.json, straggler/, hang.json, logs); default "
                                  "bench/heldout/kept (batch b1) or bench/heldout/kept-BATCH")
    ap.add_argument("--from", dest="from_dir", help="re-decide and score the runs kept in this directory")
    ap.add_argument("--only", choices=("straggler", "hang"), help="run one of the two")
    ap.add_argument("--batch", default="b1", help="the held-out batch to run (split.json: b1, or a name under "
                                                  "heldout.more); default b1")
    a = ap.parse_args()
    split = load_split()
    seen = check_fresh(heldout_seeds(split))
    if seen:
        print(f"heldout_eval: held-out seeds found in the base commit {BASE_COMMIT}: {seen}; they are tuning set; "
              f"draw new seeds in {SPLIT}", file=sys.stderr)
        return 4
    if not os.path.exists(SCOUT_BIN):
        print(f"heldout_eval: no scout binary at {SCOUT_BIN}; build first (scripts/build.sh) or set SCOUT_BIN",
              file=sys.stderr)
        return 5
    head = subprocess.run(["git", "-C", ROOT, "log", "-1", "--format=%h %s"], capture_output=True, text=True).stdout
    print(f"heldout_eval: split {os.path.relpath(SPLIT, ROOT)}, base commit {BASE_COMMIT}, checkout {head.strip()[:90]}")
    print(f"heldout_eval: scout {SCOUT_BIN}; load {os.getloadavg()} on {os.cpu_count()} CPUs at "
          f"{time.strftime('%Y-%m-%d %H:%M:%SZ', time.gmtime())} (the host is shared: timing noise is the host's)")
    report, ok = [], True
    if a.out is None:
        a.out = os.path.join(HERE, "heldout", "kept" if a.batch == "b1" else f"kept-{a.batch}")
    if a.from_dir:
        d = a.from_dir
        if a.only != "hang" and os.path.exists(os.path.join(d, "straggler.json")):
            with open(os.path.join(d, "straggler.json")) as f:
                runs = redecide(json.load(f), os.path.join(d, "straggler"))
            lines, (p, rec, fp, classes_ok) = straggler_report(runs)
            report += ["re-decided by this binary from " + d] + lines
            ok &= p >= 0.98 and rec >= 0.95 and classes_ok
        if a.only != "straggler" and os.path.exists(os.path.join(d, "hang.json")):
            with open(os.path.join(d, "hang.json")) as f:
                lines, bad = hang_report(json.load(f))
            report += ["as recorded in " + d] + lines
            ok &= bad == 0
    else:
        os.makedirs(a.out, exist_ok=True)
        all_batches = batches(split)
        if a.batch not in all_batches:
            print(f"heldout_eval: no batch {a.batch} in {SPLIT} (batches: {', '.join(all_batches)})", file=sys.stderr)
            return 2
        st_batch, hang_batch = all_batches[a.batch]
        print(f"heldout_eval: batch {a.batch}")
        if a.only != "hang" and st_batch:
            s = st_batch
            js = os.path.join(a.out, "straggler.json")
            scenarios = s.get("scenarios", ["clean", "compute-trainer", "compute-stall", "compute-outside"])
            cmd = [sys.executable, os.path.join(HERE, "straggler_campaign.py"), "--worlds", "2,3,4,5,6,8", "--scenarios",
                   ",".join(scenarios), "--trainer-factors", "1.3,1.4", "--factors",
                   "1.3,1.4", "--runs", str(s["runs"]), "--seed", str(s["base_seed"]), "--torch", s["torch"],
                   "--json", js, "--keep", os.path.join(a.out, "straggler")]
            print("heldout_eval: " + " ".join(cmd[1:]), flush=True)
            t0 = time.monotonic()
            run_logged(cmd, os.path.join(a.out, "straggler.log"))
            with open(js) as f:
                runs = json.load(f)
            expected = sorted(x for v in s["seeds"].values() for x in v)
            if sorted(r["seed"] for r in runs) != expected:
                print("heldout_eval: the campaign ran other seeds than the split's", file=sys.stderr)
                return 70
            lines, (p, rec, fp, classes_ok) = straggler_report(runs)
            report += [f"straggler campaign: {time.monotonic() - t0:.0f} s, load after {os.getloadavg()}"] + lines
            ok &= p >= 0.98 and rec >= 0.95 and classes_ok
        if a.only != "straggler" and hang_batch:
            h = hang_batch
            js = os.path.join(a.out, "hang.json")
            cmd = [sys.executable, os.path.join(HERE, "hang_cascade_campaign.py"), "--kind", "all", "--runs",
                   str(h["runs"] // 3), "--seed", str(h["seed"]), "--json", js]
            print("heldout_eval: " + " ".join(cmd[1:]), flush=True)
            t0 = time.monotonic()
            run_logged(cmd, os.path.join(a.out, "hang.log"))
            with open(js) as f:
                lines, bad = hang_report(json.load(f))
            report += [f"hang campaign: {time.monotonic() - t0:.0f} s, load after {os.getloadavg()}"] + lines
            ok &= bad == 0
    print("\n== held-out set only ==")
    print("\n".join(report))
    print(f"goals met: {'yes' if ok else 'NO'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
