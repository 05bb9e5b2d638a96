"""Costs of scout's collective capture on torch 2.x (run with the venv's python
or any python: it starts the venv's; prints ratios against references
measured in the same run, never absolute thresholds).

1. native: scout's own work per event in libscout_torch_hooks.so (pre + post
   hook bodies into a real record, no torch dispatch), ns per event pair.
2. per collective, a 2-rank gloo all_reduce of 4 floats, 2000 calls per rank:
   no publisher (reference) vs SCOUT_PUBLISHER_HOOKS=native vs =python (the
   hook mechanism's cost included: torch copies the tensor lists into the
   hook arguments only when a hook is registered).
3. step time of a small DDP training loop (2 ranks, 200 steps) without and
   with the publisher (native), alternating rounds: the median ratio.

    python3 bench/publisher_torch2_bench.py [--venv DIR] [--build DIR]
"""
import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

WORKER = r'''
import json, os, sys, time
from datetime import timedelta
what, mode, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
if mode != "off":
    os.environ["SCOUT_PUBLISHER_HOOKS"] = mode
    import scout_publisher
    pub = scout_publisher.enable()
import torch, torch.distributed as dist
torch.set_num_threads(1)
dist.init_process_group("gloo", timeout=timedelta(seconds=120))
rank = dist.get_rank()
out = {"mode": mode}
if what == "native":
    from scout_publisher import _hooks
    lib = _hooks._state["native"]
    out["ns_per_event"] = lib.scout_hooks_bench(n) if lib is not None else None
elif what == "collective":
    t = torch.ones(4)
    for _ in range(200):
        dist.all_reduce(t)
    dist.barrier()
    t0 = time.perf_counter()
    for _ in range(n):
        dist.all_reduce(t)
    dist.barrier()
    out["us_per_call"] = (time.perf_counter() - t0) / n * 1e6
else:  # step
    from torch.nn.parallel import DistributedDataParallel as DDP
    model = DDP(torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8)))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(16, 32), torch.randn(16, 8)
    def step():
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward(); opt.step(); opt.zero_grad()
    for _ in range(20):
        step()
    dist.barrier()
    t0 = time.perf_counter()
    for _ in range(n):
        step()
    dist.barrier()
    out["ms_per_step"] = (time.perf_counter() - t0) / n * 1e3
if mode != "off":
    out["capture"] = scout_publisher.capture()
if rank == 0:
    print(json.dumps(out), flush=True)
dist.destroy_process_group()
os._exit(0)
'''


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(python, build, what, mode, n, world=2):
    job = f"bench-torch2-{os.getpid()}-{what}-{mode}"
    port = free_port()
    procs = []
    for r in range(world):
        env = dict(os.environ, RANK=str(r), WORLD_SIZE=str(world), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
                   SCOUT_JOB=job, SCOUT_HEARTBEAT_S="0", OMP_NUM_THREADS="1",
                   SCOUT_PUBLISHER_LIB=os.path.join(build, "lib", "libscout_publisher.so"),
                   PYTHONPATH=os.path.join(ROOT, "integrations", "python"))
        procs.append(subprocess.Popen([python, "-c", WORKER, what, mode, str(n)], env=env, stdout=subprocess.PIPE,
                                      text=True))
    out = None
    for p in procs:
        o, _ = p.communicate(timeout=600)
        if o.strip():
            out = json.loads(o.strip().splitlines()[-1])
    for name in os.listdir("/dev/shm"):
        if name.startswith(f"scout.{job}"):
            os.unlink(os.path.join("/dev/shm", name))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--venv", default=os.environ.get("SCOUT_VENV") or os.path.join(ROOT, ".venv"))
    ap.add_argument("--build", default=os.environ.get("SCOUT_BUILD_DIR") or os.path.join(ROOT, "build"))
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    py = os.path.join(a.venv, "bin", "python")
    if not os.path.exists(py):
        print(f"publisher_torch2_bench: no torch 2.x venv at {a.venv}; run scripts/install-deps.sh", file=sys.stderr)
        return 5
    nat = run(py, a.build, "native", "native", 1000000, world=1)
    print(f"native hook bodies: {nat['ns_per_event']:.1f} ns per event (enter + exit), capture={nat.get('capture')}")
    ref = run(py, a.build, "collective", "off", a.calls)
    res = {m: run(py, a.build, "collective", m, a.calls) for m in ("native", "python")}
    print(f"gloo all_reduce, 2 ranks: no publisher {ref['us_per_call']:.1f} us/call (reference)")
    for m, r in res.items():
        extra = r["us_per_call"] - ref["us_per_call"]
        print(f"  {m:6s} (capture={r.get('capture')}): {r['us_per_call']:.1f} us/call, ratio "
              f"{r['us_per_call'] / ref['us_per_call']:.3f}, +{extra:.1f} us per event")
    # Alternating rounds, the median of the per-round ratios: a loaded machine's
    # drift between two runs is not taken for the publisher's cost.
    ratios = []
    for i in range(a.rounds):
        s_ref = run(py, a.build, "step", "off", a.steps)
        s_pub = run(py, a.build, "step", "native", a.steps)
        ratios.append(s_pub["ms_per_step"] / s_ref["ms_per_step"])
        print(f"DDP training step, 2 ranks, round {i + 1}: without {s_ref['ms_per_step']:.3f} ms, with publisher "
              f"{s_pub['ms_per_step']:.3f} ms (capture={s_pub.get('capture')}): ratio {ratios[-1]:.3f}")
    ratios.sort()
    print(f"step-time ratio with/without the publisher (median of {a.rounds} rounds): {ratios[len(ratios) // 2]:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
