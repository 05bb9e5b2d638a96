"""Multi-node fault campaign on one machine: real torch 2.x jobs on namespace
nodes (tests/integration/netns_nodes.py, multinode_job.py: a network, mount
and UTS namespace per node, one torchrun per node with a c10d rendezvous on
node 0, workers under `python -m scout_publisher`, gloo across the nodes'
veths, one scout observer per node joining torchrun's store).

Per fault kind, runs at random (culprit node, moment and rate drawn from each
run's seed, printed; `--seed S --runs 1 --faults F` reproduces one run):
  link-down   the culprit node's veth down (both ends): probe-hang
  freeze      every process of its job frozen (cgroup v1 freezer): probe-hang
  kill        every process of its job SIGKILLed, its observer alive: probe-hang
  power-off   every process of the node SIGKILLed, its observer too (it never runs): probe-hang
  freeze-link its job frozen and its link down: probe-hang
  rate-limit  its link limited by tc tbf to 8, 16 or 32 Mbit/s (the kernel here has no
              netem, so no delay), in a layout where its slow groups meet in it only
              (multinode_job.link_layout): straggler
  none-hang, none-straggler   controls: no fault, nothing may be named
Every observer's verdict is classed (multinode_job.judge): right, innocent,
wrong_reason, ranks_only (a killed node's ranks named, not the node), missed, cut_off (the culprit's own observer behind its downed
link, naming no one), unavailable (no verdict: e.g. the store's host is the
culprit), dead (the culprit's observer, lost with its node), and whether every observer (the cut-off and dead
ones aside) agreed. Rows are split by whether the culprit is node 0, which hosts torchrun's store ("store host"),
and by the observers' store (--observer-store, a comma-separated list: torchrun, separate, etcd: a 3-member etcd
cluster on nodes 0-2, its members dying and freezing with their nodes; etcd-v2: that cluster, torchrun's own
rendezvous on it too, --rdzv-backend etcd-v2).

    python3 bench/multinode_campaign.py --size 3x2 --link-size 4x1 --runs 3 [--faults freeze,kill] [--seed S]
        [--observer-store torchrun,etcd]
Needs root, iproute2 and the torch 2.x venv; prints why not and exits 5 otherwise.
"""
import argparse
import collections
import os
import random
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))

import multinode_job as mj  # noqa: E402
import netns_nodes  # noqa: E402

CLASSES = ("right", "innocent", "wrong_reason", "ranks_only", "missed", "cut_off", "unavailable", "dead", "clean")


def size(text):
    try:
        n, r = (int(x) for x in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected NODESxRANKS, e.g. 3x2") from None
    if not (2 <= n <= 8 and 1 <= r <= 4):
        raise argparse.ArgumentTypeError(f"{text}: 2 to 8 nodes, 1 to 4 ranks a node")
    return n, r


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--size", type=size, default=(3, 2), help="nodes x ranks for the hang faults (default 3x2)")
    p.add_argument("--link-size", type=size, default=(4, 1),
                   help="nodes x ranks for rate-limit (a layout must exist: 4x1, 6xR, 8x1; default 4x1)")
    p.add_argument("--runs", type=int, default=3, help="runs per fault kind (default 3)")
    p.add_argument("--faults", default=",".join(mj.FAULTS + mj.CONTROLS))
    p.add_argument("--seed", type=int, help="base seed (run i of a kind uses seed + i)")
    p.add_argument("--observer-store", default="torchrun",
                   help="where the observers meet, a comma-separated list run in turn: torchrun (its store on node 0, "
                        "the default), separate (a TCPStore on one more node that runs no job), etcd (a 3-member etcd "
                        "cluster on nodes 0-2)")
    p.add_argument("--probe-timeout", type=float, default=10,
                   help="the observers' probe-hang --timeout (default 10, scout's own default)")
    p.add_argument("--store-host-share", action="store_true",
                   help="even runs put the fault on node 0 (the store's host), odd runs on another node drawn from "
                        "the seed: half the runs in each culprit row")
    a = p.parse_args()
    stores = [x for x in a.observer_store.split(",") if x]
    for x in stores:
        if x not in mj.STORES:
            p.error(f"unknown --observer-store {x!r}: {', '.join(mj.STORES)}")
    faults = [f for f in a.faults.split(",") if f]
    for f in faults:
        if f not in mj.FAULTS + mj.CONTROLS:
            p.error(f"unknown fault {f!r}: {', '.join(mj.FAULTS + mj.CONTROLS)}")
    if mj.link_layout(*a.link_size) is None:
        p.error(f"--link-size {a.link_size[0]}x{a.link_size[1]}: no layout (see multinode_job.link_layout)")
    why = netns_nodes.unavailable()
    if why:
        print(f"multinode_campaign: namespace nodes unavailable: {why}", file=sys.stderr)
        return 5
    base = a.seed if a.seed is not None else random.SystemRandom().randrange(1 << 30)
    print(f"multinode_campaign: base seed {base}; hang faults on {a.size[0]}x{a.size[1]}, rate-limit on "
          f"{a.link_size[0]}x{a.link_size[1]}; observers' stores: {','.join(stores)}; netem {'present' if netns_nodes.netem_available() else 'absent (tbf)'}; "
          f"load {os.getloadavg()[0]:.1f}", flush=True)
    table = collections.OrderedDict()
    t_all = time.monotonic()
    def row_of(key, n, r):
        return table.setdefault(key, {"runs": 0, "agree": 0, "seeds": [], **{c: 0 for c in CLASSES}, "errors": 0,
                                      "size": f"{n}x{r}", "decide": []})

    for store, f in ((st, fa) for st in stores for fa in faults):
        n, r = a.link_size if f in ("rate-limit", "none-straggler") else a.size
        for i in range(a.runs):
            seed = base + i
            t0 = time.monotonic()
            try:
                culprit = None
                if a.store_host_share:
                    culprit = 0 if i % 2 == 0 else random.Random(seed).randrange(1, n)
                res = mj.run_case(netns_nodes.NetnsNodes, n, r, f, seed, out=sys.stdout, observer_store=store,
                                  culprit=culprit, probe_timeout=a.probe_timeout)
            except Exception as e:  # a run that could not be made is reported, not a verdict
                print(f"  {f} seed {seed} store {store}: run failed: {type(e).__name__}: {e}", flush=True)
                row = row_of((f, store, "?"), n, r)
                row["errors"] += 1
                row["seeds"].append(seed)
                continue
            where = "store host" if res["culprit"] == 0 and store != "separate" else "other node"
            row = row_of((f, store, where), n, r)
            row["runs"] += 1
            row["seeds"].append(seed)
            row["agree"] += 1 if res["agree"] else 0
            if res.get("decide_s") is not None:
                row["decide"].append(res["decide_s"])
            for c in res["per_observer"]:
                row[c] += 1
            print(f"  {f} seed {seed} store {store} culprit node {res['culprit']}: {res['per_observer']} agree={res['agree']} "
                  f"({time.monotonic() - t0:.0f} s, load {os.getloadavg()[0]:.1f})", flush=True)
            for line in res["summaries"]:
                print(f"    {line}", flush=True)
    print(f"\nmultinode_campaign: base seed {base}, {time.monotonic() - t_all:.0f} s; counts are observers' "
          f"verdicts (a run has one per node), agree counts runs; verdict s: from the observers' start (3 s after "
          f"the job went silent, --threshold 2, --timeout {a.probe_timeout:g}) to the last observer's verdict, "
          f"median and max")
    cols = ("size", "runs", "agree") + CLASSES + ("errors",)
    print("| fault | store | culprit | " + " | ".join(cols) + " | verdict s | seeds |")
    print("|---" * (len(cols) + 5) + "|")
    for (f, store, where), row in table.items():
        d = sorted(row["decide"])
        took = f"{d[len(d) // 2]:.1f} / {d[-1]:.1f}" if d else "-"
        print(f"| {f} | {store} | {where} | " + " | ".join(str(row[c]) for c in cols) +
              f" | {took} | {','.join(map(str, row['seeds']))} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
