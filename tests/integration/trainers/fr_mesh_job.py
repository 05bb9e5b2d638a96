"""A 4-rank gloo job on a (dp=2, tp=2) layout for the Flight Recorder tests,
run without scout's publisher: torch's Flight Recorder is all the evidence.

usage: fr_mesh_job.py RANK WORLD OUT_DIR PORT FAULT FAULT_RANK FAULT_STEP LAYOUT

Each step: an all_reduce on the rank's tp group, one on its dp group (8 floats
times (1 + its tp coordinate): an uneven shard, so ranks at different tp
coordinates are never replicas), one on the world; the job ends with a
barrier. LAYOUT: "groups" (dist.new_group, gloo names no pg in pg_config) or
"mesh" (init_device_mesh with dims dp, tp: the pgs' descriptions name them).
At FAULT_RANK, step FAULT_STEP, the world all_reduce is replaced by the fault:
  exit         the process exits (no dump)
  stop         the process stops itself (SIGSTOP; no dump)
  skip         the call is skipped (the rank goes on to the next step)
  wrong-shape  the all_reduce has another element count
  other-kind   a broadcast instead
A rank whose collective fails dumps its recorder (OUT_DIR/json/rank_<r>.json and
OUT_DIR/pickle/rank_<r>), as NCCL's dump-on-timeout does; a rank that finishes
dumps after the closing barrier, once its recorder retired it.
"""
import json
import os
import signal
import sys
import time
from datetime import timedelta

import torch
import torch.distributed as dist


def dump(out, rank):
    c10d = torch._C._distributed_c10d
    pick = c10d._dump_fr_trace(includeCollectives=True, includeStackTraces=False)
    js = c10d._dump_fr_trace_json(includeCollectives=True)
    for sub, name, data in (("pickle", f"rank_{rank}", pick), ("json", f"rank_{rank}.json", js)):
        os.makedirs(os.path.join(out, sub), exist_ok=True)
        tmp = os.path.join(out, sub, f".{name}.tmp")
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, os.path.join(out, sub, name))


def settled_dump(out, rank, wait_s=3.0):
    """The finished rank's dump, once its recorder has retired the closing barrier. gloo's recorder retires a call
    after it returns (measured: 3 of 14 clean jobs at load 10 dumped one rank's barrier still unretired, read as a
    group stall); a dump is taken on a timeout, long after that, never a moment after the call returned."""
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        doc = json.loads(torch._C._distributed_c10d._dump_fr_trace_json(includeCollectives=True))
        entries = doc.get("entries") or []
        if entries and entries[-1].get("retired"):
            break
        time.sleep(0.02)
    dump(out, rank)


def main():
    rank, world, out, port = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
    fault, fault_rank, fault_step, layout = sys.argv[5], int(sys.argv[6]), int(sys.argv[7]), sys.argv[8]
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", port
    dist.init_process_group("gloo", rank=rank, world_size=world, timeout=timedelta(seconds=6))
    tp_size = 2
    if layout == "mesh":
        from torch.distributed.device_mesh import init_device_mesh
        mesh = init_device_mesh("cpu", (world // tp_size, tp_size), mesh_dim_names=("dp", "tp"))
        tp, dp = mesh.get_group("tp"), mesh.get_group("dp")
    else:
        tps = [dist.new_group(list(range(i, i + tp_size))) for i in range(0, world, tp_size)]
        dps = [dist.new_group(list(range(j, world, tp_size))) for j in range(tp_size)]
        tp, dp = tps[rank // tp_size], dps[rank % tp_size]
    tp_coord = rank % tp_size
    try:
        for step in range(4):
            dist.all_reduce(torch.ones(8), group=tp)
            dist.all_reduce(torch.ones(8 * (1 + tp_coord)), group=dp)
            w = torch.ones(16)
            if rank == fault_rank and step == fault_step and fault != "none":
                if fault == "exit":
                    os._exit(3)
                if fault == "stop":
                    os.kill(os.getpid(), signal.SIGSTOP)
                    os._exit(3)
                if fault == "skip":
                    continue
                if fault == "wrong-shape":
                    w = torch.ones(24)
                if fault == "other-kind":
                    dist.broadcast(w, src=0)
                    continue
            dist.all_reduce(w)
        dist.barrier()
    except Exception as e:  # a failed collective: dump as the watchdog would, then fail
        print(f"rank {rank}: {type(e).__name__}: {str(e)[:200]}", file=sys.stderr)
        dump(out, rank)
        os._exit(1)
    settled_dump(out, rank)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
