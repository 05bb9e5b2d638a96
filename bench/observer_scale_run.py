#!/usr/bin/env python3
"""A real scale run of the observers' session: N nodes, each its own mount
and UTS namespace (its own tmpfs /dev/shm and host name node-<i>), K synthetic
trainer ranks per node writing real shared-memory records through
libscout_publisher.so (bench/observer_scale_writer.cpp: lock-step steps on a
shared clock, an all_reduce of the world group per step), and the real
`scout probe-hang --nodes N --node-index i` as each node's observer, all over
one Gloo FileStore directory (outside /dev/shm, so every namespace sees it),
in two levels (the session's Hierarchy: groups of G plus a group of their
leaders; G automatic, about sqrt(2N/3), unless --group-size).

Two probes:
  healthy  every rank steps; every observer must print healthy (exit 0), the
           same verdict, decided on positions alone
  stall    one rank (random, seed printed) never enters all_reduce #S while
           every other rank enters it and waits; every observer must print the
           same verdict (exit 1) naming that rank, on its node

Per probe it prints the time to verdict (first observer started -> last
verdict; per observer: started -> exited), and per observer, for members and
leaders apart: Gloo pairs (the verdict's details.transport.connections, and
the most established TCP sockets `ss` saw at once for its pid), Gloo payload
bytes in and out (details.transport: what the collectives moved), the bytes
its sockets moved (tcp_info bytes_received / bytes_sent sampled by `ss`: a
lower bound), its peak RSS (rusage of the reaped process), and the machine's
memory.
Beside each figure the cost model of lib/session/README.md ("Observer session: cost
model"), and the ratio measured / model.

    sudo /usr/bin/python3 bench/observer_scale_run.py [--nodes 256] [--ranks 2] [--group-size 0]
        [--timeout 600] [--threshold 10] [--stagger-ms 40] [--seed S]

Needs root (unshare --mount --uts, mount -t tmpfs) and a built tree (build/bin/scout,
build/bench/observer_scale_writer). Leaves nothing behind: the namespaces' tmpfs go with
their last process; the run directory is removed unless --keep.
"""
import argparse
import json
import math
import os
import random
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE_DIR = os.environ.get("SCOUT_SOURCE_DIR", os.path.abspath(os.path.join(HERE, "..")))
BUILD_DIR = os.environ.get("SCOUT_BUILD_DIR", os.path.join(SOURCE_DIR, "build"))
SCOUT = os.environ.get("SCOUT_BIN", os.path.join(BUILD_DIR, "bin", "scout"))
WRITER = os.environ.get("SCOUT_SCALE_WRITER", os.path.join(BUILD_DIR, "bench", "observer_scale_writer"))

# Compact sizes of what probe-hang moves (lib/session/README.md "What probe-hang runs today", "A stall").
POSITION = 64        # one node's position (p per node)
COMPACT_RANK = 240   # a rank's compact evidence, ring by digest (c)
FULL_RANK = 2048     # a rank's full evidence with a 64-call ring (e)
OVERHEAD = 40        # per contribution received: its HMAC signature (32) and size word (8)


def mem_available_kib():
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1])
    return 0


def rss_kib(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


OBSERVERS = set()  # observer pids not yet reaped


class Node:
    """A mount + UTS namespace with its own tmpfs /dev/shm, held by a sleeping process."""

    def __init__(self, index):
        self.index = index
        self.host = f"node-{index}"
        script = (f"mount -t tmpfs -o size=32m,mode=1777 tmpfs /dev/shm && hostname {self.host} && echo up && "
                  "exec sleep 86400")
        self.holder = subprocess.Popen(["unshare", "--mount", "--uts", "--propagation", "private", "--", "sh", "-c",
                                        script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                       stdin=subprocess.DEVNULL)
        line = self.holder.stdout.readline()
        if line.strip() != "up":
            raise RuntimeError(f"node {index}: namespace failed: {line} {self.holder.stderr.read()[-500:]}")
        self.writers = []

    def enter(self):
        return ["nsenter", "-t", str(self.holder.pid), "-m", "-u", "--"]


class SocketSampler(threading.Thread):
    """Samples `ss -ti` while a probe runs: per observer pid, the most established TCP sockets
    seen at once (its Gloo pairs: the FileStore has none), and per socket the largest
    bytes_sent / bytes_received seen (tcp_info), summed per pid: a lower bound of what went
    through its sockets (bytes after the last sample before a socket closed are missed)."""

    def __init__(self, pids):
        super().__init__(daemon=True)
        self.pids = set(pids)
        self.most = {}
        self.sock_bytes = {}  # (pid, local, peer) -> [sent, received]
        self.stop = threading.Event()
        self.samples = 0

    def run(self):
        while not self.stop.is_set():
            try:
                out = subprocess.run(["ss", "-tinpH", "state", "established"], capture_output=True, text=True,
                                     timeout=30).stdout
            except (OSError, subprocess.TimeoutExpired):
                out = ""
            count = {}
            key = None
            for line in out.splitlines():
                if not line.startswith((" ", "\t")):
                    key = None
                    parts = line.split()
                    pid = int(line.split("pid=")[1].split(",")[0]) if "pid=" in line else None
                    if pid in self.pids and len(parts) >= 4:
                        count[pid] = count.get(pid, 0) + 1
                        key = (pid, parts[2], parts[3])
                elif key is not None:
                    b = self.sock_bytes.setdefault(key, [0, 0])
                    for field in line.split():
                        if field.startswith("bytes_sent:"):
                            b[0] = max(b[0], int(field.split(":")[1]))
                        elif field.startswith("bytes_received:"):
                            b[1] = max(b[1], int(field.split(":")[1]))
            for pid, c in count.items():
                self.most[pid] = max(self.most.get(pid, 0), c)
            self.samples += 1
            self.stop.wait(0.3)

    def bytes_of(self, pid):
        sent = sum(v[0] for k, v in self.sock_bytes.items() if k[0] == pid)
        received = sum(v[1] for k, v in self.sock_bytes.items() if k[0] == pid)
        return sent, received


def run_probe(name, nodes, a, store, token, rundir):
    """Starts one observer per node (staggered), reaps them, and returns a row per observer."""
    env = dict(os.environ, SCOUT_JOB_TOKEN=token)
    n = len(nodes)
    procs = {}
    started = {}
    t_first = time.monotonic()
    mem_before = mem_available_kib()
    for node in nodes:
        out = open(os.path.join(rundir, f"{name}-{node.index}.json"), "w")
        err = open(os.path.join(rundir, f"{name}-{node.index}.err"), "w")
        cmd = node.enter() + [SCOUT, "probe-hang", "--job", a.job, "--nodes", str(n), "--node-index", str(node.index),
                              "--store", f"file://{store}", "--listen", "127.0.0.1", "--timeout", str(a.timeout),
                              "--threshold", str(a.threshold), "--format", "json"]
        if a.group_size:
            cmd += ["--observer-group-size", str(a.group_size)]
        p = subprocess.Popen(cmd, stdout=out, stderr=err, stdin=subprocess.DEVNULL, env=env)
        out.close()
        err.close()
        procs[p.pid] = (node, p)
        OBSERVERS.add(p.pid)
        started[p.pid] = time.monotonic()
        time.sleep(a.stagger_ms / 1000)
    t_started = time.monotonic()
    sampler = SocketSampler(procs.keys())
    sampler.start()
    rows = {}
    mem_low = mem_available_kib()
    deadline = time.monotonic() + a.timeout + 120
    while len(rows) < len(procs):
        mem_low = min(mem_low, mem_available_kib())
        exited = []
        for pid in procs:
            if pid in rows:
                continue
            info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT | os.WNOHANG)  # reaped below, with its rusage
            if info is not None:
                exited.append(pid)
        if not exited:
            if time.monotonic() > deadline:
                for pid, (node, p) in procs.items():
                    if pid not in rows:
                        p.kill()
                deadline = float("inf")
            time.sleep(0.05)
            continue
        for pid in exited:
            _, status, usage = os.wait4(pid, 0)
            OBSERVERS.discard(pid)
            node, p = procs[pid]
            p.returncode = os.waitstatus_to_exitcode(status)
            rows[pid] = {"node": node.index, "rc": p.returncode, "wall_s": time.monotonic() - started[pid],
                         "maxrss_kib": usage.ru_maxrss}
    t_last = time.monotonic()
    sampler.stop.set()
    sampler.join()
    out = []
    for pid, (node, p) in procs.items():
        r = rows.get(pid, {"node": node.index, "rc": None, "wall_s": None})
        r["sockets_seen"] = sampler.most.get(pid, 0)
        r["sock_sent"], r["sock_received"] = sampler.bytes_of(pid)
        with open(os.path.join(rundir, f"{name}-{node.index}.json")) as f:
            text = f.read()
        try:
            r["doc"] = json.loads(text)
        except ValueError:
            r["doc"] = None
            with open(os.path.join(rundir, f"{name}-{node.index}.err")) as f:
                r["stderr"] = f.read()[-1500:]
        out.append(r)
    out.sort(key=lambda r: r["node"])
    summary = {"first_to_last_s": t_last - t_first, "start_spread_s": t_started - t_first,
               "last_start_to_last_s": t_last - t_started,
               "mem_drop_mib": (mem_before - mem_low) / 1024, "ss_samples": sampler.samples}
    return out, summary


def strip(doc):
    """A verdict without what differs per observer (its transport details, its time)."""
    d = {k: v for k, v in doc.items() if k not in ("created_at",)}
    d["details"] = {k: v for k, v in doc.get("details", {}).items() if k != "transport"}
    return json.dumps(d, sort_keys=True)


def model(n, g, k_ranks, stall, verdict_bytes):
    """Per the lib/session/README.md cost model (two levels, two-phase), member and leader, with
    probe-hang's sizes: p = 64 bytes per node, c = 240 and e = 2048 bytes per rank, and OVERHEAD
    bytes on every contribution received (its 32-byte signature, its 8-byte size word), 16 more
    per entry of a group's block the leaders exchange. The decision (the verdict's JSON, as
    measured) comes down to every member."""
    groups = math.ceil(n / g)
    steps = 6 * (g - 1) + 2 * math.ceil(math.log2(max(g, 2))) + 4 * (groups - 1)
    o = OVERHEAD
    pos, compact, full = POSITION, k_ranks * COMPACT_RANK, k_ranks * FULL_RANK
    member_in = (g - 1) * (pos + o) + verdict_bytes
    leader_in = (g - 1) * (pos + o) + (n - g) * (pos + o + 16)
    if stall:
        # Then every node's compact evidence (a member receives its group's), and a second
        # two-phase gather: 1-byte positions, the full evidence of the k nodes holding a distinct
        # ring (here 2: the majority's and the culprit's node), "next" and then the verdict.
        k = 2
        member_in += (g - 1) * (compact + o) + (g - 1) * (1 + o)
        leader_in += (g - 1) * (compact + o) + (n - g) * (compact + o + 16) + (n - 1) * (1 + o + 16) + \
            k * (full + o + 16)
        steps *= 2
    return {"member_pairs": g - 1, "leader_pairs": (g - 1) + (groups - 1), "member_in": member_in,
            "leader_in": leader_in, "steps": steps, "groups": groups}


def fmt_ratio(measured, predicted):
    return f"{measured / predicted:.2f}" if predicted else "-"


def report(name, rows, summary, a, n, expect_rc, check):
    docs = [r["doc"] for r in rows]
    failed = [r for r in rows if r["rc"] != expect_rc or r["doc"] is None]
    same = len({strip(d) for d in docs if d is not None}) == 1 and not failed
    print(f"\n== probe {name}: {n} observers, expected exit {expect_rc}")
    print(f"   exit codes: { {rc: sum(1 for r in rows if r['rc'] == rc) for rc in sorted({r['rc'] for r in rows}, key=str)} }")
    for r in failed[:5]:
        print(f"   node {r['node']}: rc {r['rc']} {r.get('stderr', '')[-600:]}")
    print(f"   every observer printed the same verdict: {same}")
    ok = same and check(docs[0]) if docs[0] else False
    t = [d["details"]["transport"] for d in docs if d]
    g = t[0].get("observer_group_size", n) if t else 0
    verdict_bytes = len(strip(docs[0]).encode()) if docs[0] else 0
    m = model(n, g, a.ranks, name == "stall", verdict_bytes)
    leaders = [r for r in rows if r["doc"] and r["doc"]["details"]["transport"].get("leads")]
    members = [r for r in rows if r["doc"] and not r["doc"]["details"]["transport"].get("leads")]
    walls = sorted(r["wall_s"] for r in rows if r["wall_s"] is not None)
    print(f"   time to verdict: {summary['first_to_last_s']:.1f} s from the first observer's start to the last verdict "
          f"(starts spread over {summary['start_spread_s']:.1f} s; the last start to the last verdict "
          f"{summary['last_start_to_last_s']:.1f} s); per observer median {walls[len(walls) // 2]:.1f} s, "
          f"max {walls[-1]:.1f} s; model steps {m['steps']} -> {summary['first_to_last_s'] / m['steps'] * 1000:.1f} ms "
          f"per step here (first start to last verdict / steps)")
    print(f"   groups of {g}: {m['groups']} groups, {len(leaders)} leaders, {len(members)} members; "
          f"memory: {summary['mem_drop_mib']:.0f} MiB less available at the peak; ss samples {summary['ss_samples']}")
    print(f"   {'who':>7} {'figure':>22} {'min':>10} {'median':>10} {'max':>10} {'model':>10} {'max/model':>9}")

    def line(who, rs, label, f, predicted):
        vals = sorted(f(r) for r in rs)
        if not vals:
            return
        print(f"   {who:>7} {label:>22} {vals[0]:>10} {vals[len(vals) // 2]:>10} {vals[-1]:>10} "
              f"{predicted if predicted is not None else '-':>10} "
              f"{fmt_ratio(vals[-1], predicted) if predicted else '-':>9}")

    for who, rs, pairs, bin_ in (("member", members, m["member_pairs"], m["member_in"]),
                                 ("leader", leaders, m["leader_pairs"], m["leader_in"])):
        tr = lambda r: r["doc"]["details"]["transport"]
        line(who, rs, "Gloo pairs (verdict)", lambda r: tr(r).get("connections", -1), pairs)
        line(who, rs, "TCP sockets (ss)", lambda r: r["sockets_seen"], pairs)
        line(who, rs, "Gloo bytes in", lambda r: tr(r).get("bytes_in", -1), bin_)
        line(who, rs, "Gloo bytes out", lambda r: tr(r).get("bytes_out", -1), None)
        line(who, rs, "socket bytes in (ss)", lambda r: r["sock_received"], None)
        line(who, rs, "socket bytes out (ss)", lambda r: r["sock_sent"], None)
        line(who, rs, "peak RSS KiB", lambda r: r["maxrss_kib"], None)
    print(f"   verdict (as every observer printed it): status {docs[0]['status'] if docs[0] else None}, "
          f"summary: {docs[0]['summary'] if docs[0] else None}")
    return ok, m


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=256)
    ap.add_argument("--ranks", type=int, default=2, help="ranks (writer processes) per node")
    ap.add_argument("--group-size", type=int, default=0, help="--observer-group-size (0: scout's automatic choice)")
    ap.add_argument("--timeout", type=float, default=600, help="scout's --timeout per probe (seconds)")
    ap.add_argument("--threshold", type=float, default=10)
    ap.add_argument("--period-ms", type=int, default=500, help="the writers' step period")
    ap.add_argument("--stagger-ms", type=float, default=40, help="between two observers' starts")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--keep", action="store_true", help="keep the run directory (verdicts, logs)")
    a = ap.parse_args()
    seed = a.seed if a.seed is not None else random.SystemRandom().randrange(1 << 31)
    rng = random.Random(seed)
    n, k = a.nodes, a.ranks
    world = n * k
    culprit = rng.randrange(world)
    a.job = f"scale-{seed}"
    print(f"observer scale run: seed {seed} (--seed {seed} repeats it); {n} nodes x {k} ranks = {world} ranks; "
          f"culprit rank {culprit} on node-{culprit // k}; --timeout {a.timeout:g} --threshold {a.threshold:g}; "
          f"stagger {a.stagger_ms:g} ms; load {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    for path in (SCOUT, WRITER):
        if not os.path.exists(path):
            sys.exit(f"{path} is missing: build scout and the observer_scale_writer target first")
    if os.geteuid() != 0:
        sys.exit("needs root: every node is a mount + UTS namespace with its own tmpfs /dev/shm")
    rundir = tempfile.mkdtemp(prefix="scout-scale-run-", dir="/tmp")
    store = os.path.join(rundir, "store")
    os.mkdir(store, 0o700)
    stall_file = os.path.join(rundir, "stall")
    token = secrets.token_hex(16)
    nodes = []
    ok_all = True
    mem0 = mem_available_kib()
    try:
        t = time.monotonic()
        for i in range(n):
            nodes.append(Node(i))
        start_ns = time.time_ns() + 1_000_000_000
        for node in nodes:
            for r in range(node.index * k, node.index * k + k):
                p = subprocess.Popen(node.enter() + [WRITER, "--job", a.job, "--rank", str(r), "--world", str(world),
                                                     "--start-ns", str(start_ns), "--period-ms", str(a.period_ms),
                                                     "--stall-file", stall_file, "--culprit", str(culprit),
                                                     "--host", node.host],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     stdin=subprocess.DEVNULL)
                node.writers.append(p)
        for node in nodes:
            for p in node.writers:
                line = p.stdout.readline()
                if line.strip() != "ready":
                    raise RuntimeError(f"{node.host}: a writer failed: {p.stderr.read()[-500:]}")
        writers_rss = sum(rss_kib(p.pid) for node in nodes for p in node.writers)
        print(f"set up {n} namespaces and {world} writers in {time.monotonic() - t:.1f} s; writers' RSS "
              f"{writers_rss / 1024:.0f} MiB in all; {(mem0 - mem_available_kib()) / 1024:.0f} MiB less available")
        time.sleep(3 * a.period_ms / 1000 + 1)

        rows, summary = run_probe("healthy", nodes, a, store, token, rundir)
        ok, _ = report("healthy", rows, summary, a, n, 0,
                       lambda d: d["status"] == "healthy" and d["details"].get("ranks_listed") == "positions")
        print(f"   right: {ok}")
        ok_all &= ok

        step_now = (time.time_ns() - start_ns) // (a.period_ms * 1_000_000)
        stall_step = step_now + 4
        with open(stall_file + ".tmp", "w") as f:
            f.write(f"{stall_step}\n")
        os.rename(stall_file + ".tmp", stall_file)
        stall_at = start_ns / 1e9 + stall_step * a.period_ms / 1000 + 0.75 * a.period_ms / 1000
        time.sleep(max(0.0, stall_at - time.time()) + a.threshold + 2)
        t_stall_probe = time.time()
        rows, summary = run_probe("stall", nodes, a, store, token, rundir)

        def names_culprit(d):
            s = d.get("suspects", [])
            return d["status"] == "attributed" and [x["rank"] for x in s] == [culprit] and \
                s[0].get("node") == f"node-{culprit // k}"
        ok, _ = report("stall", rows, summary, a, n, 1, names_culprit)
        print(f"   stall began {t_stall_probe - stall_at:.1f} s before the first observer started "
              f"(--threshold {a.threshold:g} s); the last verdict {t_stall_probe - stall_at + summary['first_to_last_s']:.1f} s "
              f"after the stall; names rank {culprit} on node-{culprit // k}: {ok}")
        ok_all &= ok
    finally:
        for pid in list(OBSERVERS):
            try:
                os.kill(pid, signal.SIGKILL)  # only where a probe was cut short (an exception above)
            except OSError:
                pass
        for node in nodes:
            for p in node.writers:
                p.kill()
            node.holder.kill()
        for node in nodes:
            for p in node.writers:
                p.wait()
            node.holder.wait()
        if a.keep:
            print(f"run directory kept: {rundir}")
        else:
            shutil.rmtree(rundir, ignore_errors=True)
    print(f"\nresult: {'every check passed' if ok_all else 'FAILED'} (seed {seed})")
    return 0 if ok_all else 1


if __name__ == "__main__":
    sys.exit(main())
