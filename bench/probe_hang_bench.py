#!/usr/bin/env python3
"""Time-to-verdict of `scout probe-hang` once the records are silent, against
the cost of `scout --version` measured in the same run.

Synthetic job per size N: N records written through libscout_publisher.so
(the trainer-side C library) by this process, every rank inside collective 20
of one group except one random rank (seed printed) that never entered it.
The timed command is the whole user-visible probe: start scout, read and
validate N shared-memory records, check N processes in /proc, run C3 over
every peer and process group, print the verdict. The DESIGN target is < 1 s
for 16 and for 64 local ranks.

    /usr/bin/python3 bench/probe_hang_bench.py [--sizes 4,8,16,32,64] [--repeat 7] [--seed S]
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
BUILD_DIR = os.environ.get("SCOUT_BUILD_DIR", os.path.join(SOURCE_DIR, "build"))
SCOUT_BIN = os.environ.get("SCOUT_BIN", os.path.join(BUILD_DIR, "bin", "scout"))
os.environ.setdefault("SCOUT_PUBLISHER_LIB", os.path.join(BUILD_DIR, "lib", "libscout_publisher.so"))
sys.path.insert(0, os.path.join(SOURCE_DIR, "integrations", "python"))

from scout_publisher import _lib  # noqa: E402


def timed(cmd):
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    return time.perf_counter() - t0, proc


def bench_size(lib, n, repeat, rng):
    job = f"bench-{os.getpid()}-{n}"
    bad = rng.randrange(n)
    records = []
    group = 0x5C0
    try:
        for r in range(n):
            rec = _lib.Record(lib, job, r, n, coords=[r, 0, 0, 0, 0, 0], attempt="0")
            rec.step_begin(5)
            rec.phase("forward")
            for seq in range(1, 20):
                rec.exit(rec.enter(group, _lib.COLLECTIVES["all_reduce"], 2, 1024, 0, seq))
            if r != bad:
                rec.enter(group, _lib.COLLECTIVES["all_reduce"], 2, 1024, 0, 20)
            records.append(rec)
        times = []
        for _ in range(repeat):
            dt, proc = timed([SCOUT_BIN, "probe-hang", "--job", job, "--threshold", "0", "--format", "json"])
            doc = json.loads(proc.stdout)
            suspects = [s["rank"] for s in doc["suspects"]]
            if proc.returncode != 1 or suspects != [bad]:
                raise SystemExit(f"N={n}: expected rank {bad} attributed, got rc={proc.returncode} {suspects}: {proc.stderr}")
            times.append(dt)
        return statistics.median(times), min(times)
    finally:
        for rec in records:
            rec.close(unlink=True)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", default="4,8,16,32,64")
    p.add_argument("--repeat", type=int, default=7)
    p.add_argument("--seed", type=int)
    a = p.parse_args()
    seed = a.seed if a.seed is not None else random.SystemRandom().randrange(1 << 31)
    print(f"seed {seed}")
    rng = random.Random(seed)
    lib = _lib.load()
    ref = statistics.median(timed([SCOUT_BIN, "--version"])[0] for _ in range(a.repeat))
    print(f"reference: scout --version {ref * 1e3:.1f} ms (median of {a.repeat})")
    print(f"{'ranks':>6} {'median ms':>10} {'min ms':>8} {'x --version':>12} {'target':>8}")
    worst16 = None
    for n in [int(x) for x in a.sizes.split(",")]:
        med, best = bench_size(lib, n, a.repeat, rng)
        ok = "ok" if med < 1.0 else "MISSED"
        print(f"{n:>6} {med * 1e3:>10.1f} {best * 1e3:>8.1f} {med / ref:>12.1f} {ok:>8}")
        if n == 16:
            worst16 = med
    if worst16 is not None:
        print(f"16 local ranks: time-to-verdict {worst16 * 1e3:.1f} ms (target < 1000 ms)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
