#!/usr/bin/python3
"""verify-ckpt hashing throughput against a raw sequential read of the same files.

Writes a multi-GB checkpoint (SCOUT_BENCH_GB, default 3) as 3 safetensors
replicas in a temporary directory, then, in the same run and for each page
cache state, times `cat FILES > /dev/null` and `scout verify-ckpt --replicas
FILES`:
  cold: every file's pages are dropped first (posix_fadvise DONTNEED, which
        needs no root; --drop-caches uses /proc/sys/vm/drop_caches instead);
  warm: the files were just read, so both read from the page cache.
Prints MiB/s for both and the ratio scout/cat (target >= 0.80). Repeats
SCOUT_BENCH_REPEAT times (default 3) and reports the median.

Usage: bench/verify_ckpt_bench.py [--gb N] [--repeat N] [--dir DIR] [--keep] [--drop-caches]
"""
import argparse
import json
import os
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SCOUT = os.environ.get("SCOUT_BIN", os.path.join(HERE, "..", "build", "bin", "scout"))


def write_replicas(directory, total_bytes, replicas=3):
    per_file = total_bytes // replicas
    tensor_bytes = 64 << 20
    count = max(1, per_file // tensor_bytes)
    header, off = {}, 0
    for i in range(count):
        header[f"layers.{i}.weight"] = {"dtype": "BF16", "shape": [tensor_bytes // 2 // 4096, 4096], "data_offsets": [off, off + tensor_bytes]}
        off += tensor_bytes
    h = json.dumps(header).encode()
    block = os.urandom(tensor_bytes)
    paths = []
    for r in range(replicas):
        p = os.path.join(directory, f"replica{r}.safetensors")
        with open(p, "wb") as f:
            f.write(struct.pack("<Q", len(h)))
            f.write(h)
            for i in range(count):
                f.write(block[i % 7:] + block[: i % 7])  # tensors differ from each other
            f.flush()
            os.fsync(f.fileno())
        paths.append(p)
    return paths


def drop_cache(paths, system_wide=False):
    """Evicts the files' pages: per file with posix_fadvise (no root needed, and
    nothing else on the machine is disturbed), or system-wide when asked."""
    if system_wide:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("1\n")
        return "drop_caches"
    for p in paths:
        fd = os.open(p, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)
    return "fadvise"


def timed(cmd, to_null=False):
    t = time.perf_counter()
    proc = subprocess.run(cmd, stdout=subprocess.DEVNULL if to_null else subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    elapsed = time.perf_counter() - t
    return elapsed, proc


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gb", type=float, default=float(os.environ.get("SCOUT_BENCH_GB", "3")))
    ap.add_argument("--dir", default=None)
    ap.add_argument("--repeat", type=int, default=int(os.environ.get("SCOUT_BENCH_REPEAT", "3")))
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--drop-caches", action="store_true", help="drop the whole page cache (root) instead of the files' pages")
    args = ap.parse_args()
    directory = args.dir or tempfile.mkdtemp(prefix="scout_ckpt_bench_", dir="/var/tmp")
    os.makedirs(directory, exist_ok=True)
    try:
        paths = write_replicas(directory, int(args.gb * (1 << 30)))
        total = sum(os.path.getsize(p) for p in paths)
        mib = total / (1 << 20)
        print(f"checkpoint: {len(paths)} safetensors replicas, {mib:.0f} MiB in {directory}; scout {SCOUT}; {os.cpu_count()} cpus")
        results = {}
        for mode in ("cold", "warm"):
            cat_s, scout_s = [], []
            for _ in range(args.repeat):
                method = drop_cache(paths, args.drop_caches) if mode == "cold" else "warm"
                t, p = timed(["cat"] + paths, to_null=True)
                if p.returncode != 0:
                    sys.exit(f"cat failed: {p.stderr}")
                cat_s.append(t)
                if mode == "cold":
                    drop_cache(paths, args.drop_caches)
                t, p = timed([SCOUT, "verify-ckpt", "--replicas"] + paths + ["--quiet", "--format", "json"])
                if p.returncode != 0:
                    sys.exit(f"scout failed rc={p.returncode}: {p.stderr}")
                scout_s.append(t)
            c, s = statistics.median(cat_s), statistics.median(scout_s)
            results[mode] = (mib / c, mib / s)
            print(f"{mode:5s} ({method}): cat {mib / c:8.0f} MiB/s   scout verify-ckpt {mib / s:8.0f} MiB/s   "
                  f"ratio {c / s:5.2f}  (target >= 0.80; median of {args.repeat})")
        print("note: cat writes to /dev/null; scout reads, hashes every tensor and runs C3 per tensor")
    finally:
        if not args.keep and not args.dir:
            shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    main()
