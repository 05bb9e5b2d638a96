#!/usr/bin/env python3
"""Python-side cost of scout_publisher per collective, measured in one run
against the same collective without the publisher (the reference).

A one-rank gloo group (real ProcessGroupGloo, CPU) runs N all_reduce calls of
a 1-element tensor, first plain, then with scout_publisher enabled (wrapper,
fingerprint, ctypes enter/exit into shared memory); also the bare ctypes
enter+exit pair. Prints microseconds per call and the overhead ratio.

    .venv/bin/python bench/publisher_python_bench.py [N]     (a python with torch 2.x)
Needs the build (build/lib/libscout_publisher.so or SCOUT_PUBLISHER_LIB).
"""
import os
import socket
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integrations", "python"))


def per_call(fn, n):
    fn()
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - t0) / n * 1e6


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 3000
    import torch
    import torch.distributed as dist
    import scout_publisher
    from scout_publisher import _lib

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=0, world_size=1)
    t = torch.ones(1)
    job = f"bench-python-{os.getpid()}"
    pub = scout_publisher.enable(job=job, rank=0, world_size=1, heartbeat_s=0)
    wrapped = dist.all_reduce
    original = wrapped.__scout_wrapped__
    rec = pub.record

    def pair():
        rec.exit(rec.enter(1, 1, 2, 1, 0, 1))

    # Interleaved rounds, best of each: the machine may be shared.
    plain, published, ctypes_pair = [], [], []
    try:
        for _ in range(5):
            plain.append(per_call(lambda: original(t), n))
            published.append(per_call(lambda: wrapped(t), n))
            ctypes_pair.append(per_call(pair, n))
    finally:
        scout_publisher.disable(unlink=True)
        dist.destroy_process_group()
    plain, published, ctypes_pair = min(plain), min(published), min(ctypes_pair)
    print(f"all_reduce(1 element, gloo, 1 rank), {n} calls, best of 5 interleaved rounds:")
    print(f"  plain                 {plain:8.2f} us/call   (reference)")
    print(f"  with scout_publisher  {published:8.2f} us/call   = {published / plain:.2f}x, "
          f"overhead {published - plain:.2f} us per collective")
    print(f"  ctypes enter+exit     {ctypes_pair:8.2f} us/pair   ({ctypes_pair / plain:.2f}x the plain collective)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
