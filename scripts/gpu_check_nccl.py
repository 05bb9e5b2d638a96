"""One rank of scripts/gpu-check.sh's NCCL job, run as
`python3 -m scout_publisher scripts/gpu_check_nccl.py OUT_DIR ITERS` with
RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT and SCOUT_JOB set.

Each iteration queues a GPU sleep of ~20 ms on the current stream, then an
all_reduce (sync, then async_op=True + wait()) whose completion is measured by
a CUDA event recorded after it on the current stream: `done_ns` is the
CLOCK_REALTIME (time.time_ns) when that event completed, `ret_ns` when the call
returned. A publisher whose exit stamps are completion times stamps near
done_ns; one that stamps returns stamps near ret_ns, ~20 ms earlier. Writes
OUT_DIR/rank_<R>.json (the timings, the publisher's capture mode) and the
rank's Flight Recorder dump, pickled (OUT_DIR/fr/pickle/rank_<R>) and JSON
(OUT_DIR/fr/json/rank_<R>.json)."""
import json
import os
import sys
import time

import torch
import torch.distributed as dist


def dump_flight_recorder(out, rank):
    c10d = torch._C._distributed_c10d
    forms = []
    for pick_name, json_name in (("_dump_nccl_trace", "_dump_nccl_trace_json"), ("_dump_fr_trace", "_dump_fr_trace_json")):
        if hasattr(c10d, pick_name) and hasattr(c10d, json_name):
            forms = [("pickle", f"rank_{rank}", getattr(c10d, pick_name)(includeCollectives=True, includeStackTraces=False)),
                     ("json", f"rank_{rank}.json", getattr(c10d, json_name)(includeCollectives=True))]
            break
    for sub, name, data in forms:
        d = os.path.join(out, "fr", sub)
        os.makedirs(d, exist_ok=True)
        if isinstance(data, str):
            data = data.encode()
        tmp = os.path.join(d, f".{name}.tmp")
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, os.path.join(d, name))
    return [f[0] for f in forms]


def main():
    out, iters = sys.argv[1], int(sys.argv[2])
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    torch.cuda.set_device(rank % torch.cuda.device_count())
    dist.init_process_group("nccl", rank=rank, world_size=world, device_id=torch.device("cuda", rank % torch.cuda.device_count()))
    x = torch.ones(1 << 20, device="cuda")
    sleep_cycles = int(os.environ.get("SCOUT_GPU_CHECK_SLEEP_CYCLES", str(40_000_000)))
    dist.all_reduce(x)  # warm-up (NCCL communicator set-up)
    torch.cuda.synchronize()
    calls = []
    for i in range(2 * iters):
        mode = "sync" if i < iters else "async"
        before, after = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(sleep_cycles)
        before.record()
        call_ns = time.time_ns()
        if mode == "sync":
            dist.all_reduce(x)
            ret_ns = time.time_ns()
        else:
            work = dist.all_reduce(x, async_op=True)
            ret_ns = time.time_ns()
            work.wait()
        after.record()
        after.synchronize()
        done_ns = time.time_ns()
        calls.append({"mode": mode, "call_ns": call_ns, "ret_ns": ret_ns, "done_ns": done_ns,
                      "gpu_ms": before.elapsed_time(after)})
    torch.cuda.synchronize()
    time.sleep(0.2)  # let completion callbacks publish the last exits
    fr = dump_flight_recorder(out, rank)
    import scout_publisher
    doc = {"rank": rank, "world": world, "torch": torch.__version__, "cuda": torch.version.cuda,
           "nccl": str(torch.cuda.nccl.version()), "device": torch.cuda.get_device_name(),
           "capture": scout_publisher.capture(), "sleep_cycles": sleep_cycles, "calls": calls,
           "flight_recorder_forms": fr}
    tmp = os.path.join(out, f".rank_{rank}.json.tmp")
    with open(tmp, "w") as f:
        json.dump(doc, f)
    os.replace(tmp, os.path.join(out, f"rank_{rank}.json"))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
