#!/usr/bin/env python3
"""Scale of the observers' session: N observer processes on loopback over one
FileStore directory (bench/session_scale_member_bench.cpp), synthetic
positions and evidence, three ways of getting a verdict's inputs:

  flat-full  today's probe: one flat Gloo group, every node's full evidence
             (ranks x --evidence-bytes, about the size of today's CBOR blob
             with 8 ring events) all-gathered to every observer
  flat       one flat group, two-phase: fixed-size positions, then details
             (rings) only from the nodes that stand out
  hier       groups of --group-size plus a group of their leaders, two-phase
  hier-stall the same in a stall, as probe-hang gathers one: positions, every
             node's compact evidence (ranks x --compact-bytes), then the full
             evidence (ranks x --evidence-bytes) of the nodes holding a distinct
             ring (one here) in a second two-phase gather

Per N and mode it prints, per observer: Gloo pairs (connections), payload bytes
in and out per probe (max over observers; the model's figures beneath), bytes
written to sockets per probe (/proc/self/io), store operations while forming,
Gloo collectives per probe, time per probe (the slowest observer's median) and
formation time. Then
it fits the time per probe of each mode to the cost model in lib/session/README.md
("Observer session: cost model"), t = alpha * steps, and extrapolates every figure to --target-nodes (12,500 nodes x 8 ranks = 100,000
ranks). The loopback figures are from this machine; the extrapolated times
carry the alpha measured here (a loaded 2-core machine is far slower per step than
a datacenter network), so read them as an upper bound and for the ratios.

    /usr/bin/python3 bench/session_scale.py [--sizes 8,16,32] [--modes flat-full,flat,hier]
        [--group-size 8] [--ranks 8] [--probes 5] [--seed S] [--target-nodes 12500]
"""
import argparse
import json
import math
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE_DIR = os.environ.get("SCOUT_SOURCE_DIR", os.path.abspath(os.path.join(HERE, "..")))
BUILD_DIR = os.environ.get("SCOUT_BUILD_DIR", os.path.join(SOURCE_DIR, "build"))
MEMBER = os.path.join(BUILD_DIR, "bench", "session_scale_member_bench")


def run(n, mode, a, seed):
    store = tempfile.mkdtemp(prefix="scout-scale-")
    try:
        procs = []
        for i in range(n):
            cmd = [MEMBER, "--store", store, "--member", str(i), "--members", str(n), "--mode", mode,
                   "--group-size", str(a.group_size), "--ranks", str(a.ranks), "--position-bytes", str(a.position_bytes),
                   "--evidence-bytes", str(a.evidence_bytes), "--details-bytes", str(a.details_bytes),
                   "--compact-bytes", str(a.compact_bytes),
                   "--outliers", "1", "--probes", str(a.probes), "--timeout-ms", str(a.timeout_ms), "--seed", str(seed)]
            procs.append(subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
        rows = []
        for p in procs:
            try:
                out, err = p.communicate(timeout=a.timeout_ms / 1000 * (a.probes + 4))
            except subprocess.TimeoutExpired:
                p.kill()
                out, err = p.communicate()
            if p.returncode != 0 or not out.strip():
                raise RuntimeError(f"observer failed (rc {p.returncode}) n={n} mode={mode} seed={seed}: {err[-2000:]}")
            rows.append(json.loads(out.strip().splitlines()[-1]))
        return rows
    finally:
        shutil.rmtree(store, ignore_errors=True)


def model(mode, n, r, g, a):
    """Steps (latency rounds) and bytes into the busiest observer per probe, per the lib/session/README.md model."""
    pos = r * a.position_bytes + 32          # one node's signed position block
    det = r * a.details_bytes + 32           # one selected node's details
    k = 1                                    # nodes that stand out
    if mode == "flat-full":
        ev = r * a.evidence_bytes + 32
        return {"pairs": n - 1, "steps": 2 * (n - 1), "calls": 2, "bytes_in": (n - 1) * ev, "bytes_out": (n - 1) * ev}
    if mode == "flat":
        return {"pairs": n - 1, "steps": 4 * (n - 1), "calls": 4, "bytes_in": (n - 1) * pos + k * det,
                "bytes_out": (n - 1) * pos + k * det}
    groups = math.ceil(n / g)
    # level 1: positions (sizes + bytes: 2 ring all-gathers), selection (sizes ring + binomial broadcast),
    # details (2 rings), decision (sizes ring + broadcast);
    # level 2 (leaders): positions (2) and details (2) ring all-gathers over the groups' blocks.
    g = min(g, n)
    steps = 6 * (g - 1) + 2 * math.ceil(math.log2(max(g, 2))) + 4 * (groups - 1)
    block = g * (pos + 16) + 32
    # The busiest observer is a leader: its group's positions, the other groups' blocks, and the
    # details once (from its group, or in the other leaders' blocks).
    bytes_in = (g - 1) * pos + (groups - 1) * block + k * det
    if mode == "hier-stall":
        # The details are every node's compact evidence (all of them come up, as the positions did),
        # then a second two-phase gather: 1-byte positions and the full evidence of the k holders.
        compact = r * a.compact_bytes + 32
        full = r * a.evidence_bytes + 32
        cblock = g * (compact + 16) + 32
        oblock = g * (1 + 32 + 16) + 32
        bytes_in = (g - 1) * pos + (groups - 1) * block + (g - 1) * compact + (groups - 1) * cblock + \
            (g - 1) * 33 + (groups - 1) * oblock + k * full
        return {"pairs": (g - 1) + (groups - 1), "steps": 2 * steps, "calls": 2 * (8 + (4 if groups > 1 else 0)),
                "bytes_in": bytes_in, "bytes_out": bytes_in}
    return {"pairs": (g - 1) + (groups - 1), "steps": steps, "calls": 8 + (4 if groups > 1 else 0),
            "bytes_in": bytes_in, "bytes_out": bytes_in}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="8,16,32")
    ap.add_argument("--modes", default="flat-full,flat,hier")
    ap.add_argument("--group-size", type=int, default=8)
    ap.add_argument("--ranks", type=int, default=8)
    ap.add_argument("--position-bytes", type=int, default=32)
    ap.add_argument("--evidence-bytes", type=int, default=600)
    ap.add_argument("--details-bytes", type=int, default=4096)
    ap.add_argument("--compact-bytes", type=int, default=240,
                    help="hier-stall: a rank's compact evidence (its record, its ring by digest)")
    ap.add_argument("--probes", type=int, default=5)
    ap.add_argument("--timeout-ms", type=int, default=120000)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--target-nodes", type=int, default=12500)
    ap.add_argument("--target-group-size", type=int, default=112)
    ap.add_argument("--dc-alpha-us", type=float, default=50.0)
    ap.add_argument("--dc-beta-ns", type=float, default=0.8)
    a = ap.parse_args()
    seed = a.seed if a.seed is not None else random.SystemRandom().randrange(1 << 31)
    print(f"session scale: seed {seed} (--seed {seed} repeats it); {a.ranks} ranks per node, group size {a.group_size}")
    if not os.path.exists(MEMBER):
        sys.exit(f"{MEMBER} is missing: build the bench target first")
    modes = a.modes.split(",")
    measured = {m: [] for m in modes}
    store_per_peer = {m: [] for m in modes}
    hdr = (f"{'N':>5} {'mode':>10} {'pairs max':>9} {'in B max':>10} {'out B max':>10} {'sock wr max':>11} "
           f"{'store ops':>9} {'coll':>5} {'probe s':>8} {'form s':>7} right")
    print(hdr)
    for n in [int(x) for x in a.sizes.split(",")]:
        for mode in modes:
            rows = run(n, mode, a, seed)
            probe = max(statistics.median(r["probe_s"]) for r in rows)
            form = max(r["form_s"] for r in rows)
            m = model(mode, n, a.ranks, a.group_size, a)
            measured[mode].append((m["steps"], max(r["bytes_in"] for r in rows), probe))
            ops = max(r["store_ops"] for r in rows)
            store_per_peer[mode].append(ops / max(1, m["pairs"]))
            print(f"{n:>5} {mode:>10} {max(r['connections'] for r in rows):>9} {max(r['bytes_in'] for r in rows):>10} "
                  f"{max(r['bytes_out'] for r in rows):>10} {max(r['socket_write'] for r in rows):>11} "
                  f"{ops:>9} {max(r['collectives'] for r in rows):>5} "
                  f"{probe:>8.4f} {form:>7.3f} {all(r['right'] for r in rows)}")
            print(f"{'':>5} {'model':>10} {m['pairs']:>9} {m['bytes_in']:>10} {m['bytes_out']:>10} {'':>11} {'':>9} "
                  f"{m['calls']:>5}   ({m['steps']} steps)")
    n_t, g_t = a.target_nodes, a.target_group_size
    print(f"\nextrapolated to {n_t} nodes x {a.ranks} ranks = {n_t * a.ranks} ranks "
          f"(hier: groups of {g_t}, {math.ceil(n_t / g_t)} leaders).")
    print("probe s (here): alpha = median over the sizes above of (time per probe / model steps), per mode, on this")
    print("                machine's loopback (a loaded 2-core machine: an upper bound, read it for the ratios);")
    print(f"probe s (dc): alpha = {a.dc_alpha_us} us per step, beta = {a.dc_beta_ns} ns per byte (assumed datacenter network);")
    print("store ops: this machine's store operations per peer while forming, times the peers at the target.")
    print(f"{'mode':>10} {'alpha s':>9} {'pairs/obs':>9} {'pairs total':>12} {'in B/obs':>11} {'steps':>6} "
          f"{'store ops':>10} {'probe s (here)':>14} {'probe s (dc)':>12}")
    for mode in modes:
        alpha = statistics.median(t / max(1, steps) for steps, _, t in measured[mode])
        m = model(mode, n_t, a.ranks, g_t, a)
        if mode in ("hier", "hier-stall"):
            groups = math.ceil(n_t / g_t)
            total_pairs = groups * g_t * (g_t - 1) // 2 + groups * (groups - 1) // 2
        else:
            total_pairs = n_t * (n_t - 1) // 2
        here = alpha * m["steps"]
        dc = a.dc_alpha_us * 1e-6 * m["steps"] + a.dc_beta_ns * 1e-9 * m["bytes_in"]
        ops = statistics.median(store_per_peer[mode]) * m["pairs"]
        print(f"{mode:>10} {alpha:>9.2e} {m['pairs']:>9} {total_pairs:>12} {m['bytes_in']:>11} {m['steps']:>6} "
              f"{ops:>10.0f} {here:>14.3f} {dc:>12.3f}")


if __name__ == "__main__":
    main()
