"""A DDP trainer (gloo, CPU) with the scout publisher for scout's straggler
tests: it trains until killed, and can slow itself down.

Launch one process per rank with RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT
and SCOUT_JOB set (tests/integration/test_straggler.py does). Each step:

  compute   --work matrix products of 96x96 (the step's fixed computation;
            the rank's "forward"), then forward/backward of a small DDP model
            (DDP's gradient all-reduce over the world, published by the
            publisher's comm hook), optimizer step;
  tp        with --tp T > 1: one all_reduce in the rank's tensor-parallel
            group (ranks r - r % T .. + T - 1) and one in its data-parallel
            group (ranks with the same r % T); SCOUT_MESH is dp=W/T,tp=T;
            (--group-numel N: N floats each, default 4; a slow link shows on large ones)
  world     an all_reduce of the loss over the world.

Slowdowns (as degraded hardware would):
  --slow-rank R --slow-factor F   rank R's whole computation takes F times its CPU (F may be fractional)
  --slow-all-file P --slow-all-factor F   every rank's, while file P exists
                                  A degraded device slows every kernel, not one loop: after each stretch
                                  of computation between collectives (the fixed work and forward; backward
                                  and the optimizer step) a slowed rank does more products of the same
                                  kind until its main thread used (F - 1) x the CPU that stretch used.
                                  Scaling the fixed work alone diluted the factor by the rest of the
                                  step: F = 1.42 used 1.19-1.23x its partner's CPU (world 2, no load).
  --slow-at end                   ... all of it after the optimizer step instead, before the step's last
                                  collectives: a host-side stall (a slow data loader or optimizer) that
                                  lands in one gap of the step
  --slow-kind sleep               ... sleeping (F - 1) x the stretch's wall time instead of computing: a
                                  rank blocked off its CPU (I/O, a lock), using no more CPU than its peers
  --slow-group-ranks a,b --slow-group-delay D  the ranks of that group (a tp or dp group)
                                  sleep D seconds inside each of that group's collectives,
                                  after the publisher recorded the enter (a slow link)
Data:
  --read-dir D --read-mb N        a data loader: the rank writes its shard D/shard-RANK (4 N MB) once, then
                                  reads the next N MB of it every step, before the step's computation (from
                                  the page cache, or from disk where its memory cgroup cannot hold the shard:
                                  StragglerJob.memory_limit)
Prints "ready" after the first step.
"""
import argparse
import os
import sys
import time
from datetime import timedelta


def main(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("--work", type=int, default=60)
    p.add_argument("--work-ms", type=float, default=0.0,
                   help="calibrate --work on rank 0 to about this many ms (broadcast to every rank), so the fixed work "
                        "dominates the step on any torch")
    p.add_argument("--tp", type=int, default=1)
    p.add_argument("--group-numel", type=int, default=4)
    p.add_argument("--slow-rank", type=int, default=-1)
    p.add_argument("--slow-factor", type=float, default=1.0)
    p.add_argument("--slow-at", choices=("each", "end"), default="each")
    p.add_argument("--slow-kind", choices=("cpu", "sleep"), default="cpu")
    p.add_argument("--slow-all-file", default="")
    p.add_argument("--slow-all-factor", type=float, default=1.0)
    p.add_argument("--slow-group-ranks", default="")
    p.add_argument("--slow-group-delay", type=float, default=0.0)
    p.add_argument("--steps", type=int, default=1000000)
    p.add_argument("--pg-timeout", type=float, default=300.0)
    p.add_argument("--read-dir", default="")
    p.add_argument("--read-mb", type=int, default=0)
    a = p.parse_args(argv)

    rank = int(os.environ["RANK"])
    world = int(os.environ["WORLD_SIZE"])
    if a.tp > 1:
        os.environ["SCOUT_MESH"] = f"dp={world // a.tp},tp={a.tp}"
    import scout_publisher
    scout_publisher.enable()
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    torch.manual_seed(1234)
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world, timeout=timedelta(seconds=a.pg_timeout))
    tp_group = dp_group = None
    if a.tp > 1:
        for start in range(0, world, a.tp):  # every rank creates every group, in the same order
            g = dist.new_group(list(range(start, start + a.tp)))
            if start <= rank < start + a.tp:
                tp_group = g
        for t in range(a.tp):
            g = dist.new_group(list(range(t, world, a.tp)))
            if rank % a.tp == t:
                dp_group = g
    # One intra-op thread per rank, as torchrun sets (OMP_NUM_THREADS=1) for several ranks per host: torch 2.x
    # wheels otherwise start a thread per CPU in every rank, and 4 ranks' spinning pools on 2 CPUs time nothing.
    torch.set_num_threads(1)
    m = torch.randn(96, 96) / 10
    if a.work_ms > 0:
        n = torch.zeros(1, dtype=torch.int64)
        if rank == 0:
            # Warm up first and keep the fastest of several batches: torch 2.x's first products are 20x slower
            # than its steady ones (measured 377 us against 18 us), which calibrated 60 ms of work to 3 ms, and
            # torch's own per-step work then diluted a 2.35x straggler to 1.13x (CI fresh clone, seed 2064653550).
            acc = m
            for _ in range(20):
                acc = torch.tanh(acc @ m)
            batches = []
            for _ in range(5):
                t0 = time.perf_counter()
                for _ in range(20):
                    acc = torch.tanh(acc @ m)
                batches.append((time.perf_counter() - t0) / 20)
            per = min(batches)
            n[0] = max(1, int(a.work_ms / 1000 / per))
        dist.broadcast(n, src=0)
        a.work = int(n[0])
    slow_group = [int(x) for x in a.slow_group_ranks.split(",") if x.strip()]
    in_slow_group = rank in slow_group

    def delay_inside(name):
        time.sleep(a.slow_group_delay)

    def clock():
        return time.perf_counter() if a.slow_kind == "sleep" else time.thread_time()

    def burn(factor, since):
        """Products until the main thread used (factor - 1) x its CPU since `since` on top (--slow-kind sleep:
        a sleep of (factor - 1) x the wall time since `since`)."""
        if factor == 1.0:
            return
        extra, start = (factor - 1) * (clock() - since), clock()
        if a.slow_kind == "sleep":
            time.sleep(extra)
            return
        b = m
        while time.thread_time() - start < extra:
            b = torch.tanh(b @ m)

    shard, shard_size, shard_at, chunk = None, 0, 0, a.read_mb << 20
    if a.read_dir and a.read_mb > 0:
        path = os.path.join(a.read_dir, f"shard-{rank}")
        block = os.urandom(1 << 20)
        with open(path, "wb") as f:
            for _ in range(4 * a.read_mb):
                f.write(block)
            f.flush()
            os.fsync(f.fileno())
        shard, shard_size = os.open(path, os.O_RDONLY), 4 * chunk

    def read_batch():
        nonlocal shard_at
        left = chunk
        while left > 0:
            got = os.pread(shard, min(left, 1 << 20), shard_at)
            shard_at = (shard_at + len(got)) % shard_size
            left -= len(got)

    model = DDP(torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 2)))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(8, 16)
    y = torch.randn(8, 2)
    for step in range(1, a.steps + 1):
        factor = 1.0
        if rank == a.slow_rank:
            factor *= a.slow_factor
        if a.slow_all_file and os.path.exists(a.slow_all_file):
            factor *= a.slow_all_factor
        started = clock()
        if shard is not None:
            read_batch()
        acc = m
        for _ in range(a.work):
            acc = torch.tanh(acc @ m)
        loss = torch.nn.functional.mse_loss(model(x + acc[:8, :16].mean()), y)
        if a.slow_at == "each":
            burn(factor, started)  # before backward starts DDP's all-reduce
            started = clock()
        loss.backward()
        opt.step()
        opt.zero_grad()
        burn(factor, started)
        if tp_group is not None:
            t = torch.ones(a.group_numel)
            if in_slow_group and slow_group == list(range(rank - rank % a.tp, rank - rank % a.tp + a.tp)):
                scout_publisher.set_after_enter_hook(delay_inside)
            dist.all_reduce(t, group=tp_group)
            scout_publisher.set_after_enter_hook(None)
            if in_slow_group and slow_group == list(range(rank % a.tp, world, a.tp)):
                scout_publisher.set_after_enter_hook(delay_inside)
            dist.all_reduce(t, group=dp_group)
            scout_publisher.set_after_enter_hook(None)
        metric = loss.detach().reshape(1).clone()
        dist.all_reduce(metric)
        if step == 1:
            print(f"straggler_trainer: rank {rank} ready (work {a.work})", flush=True)
    dist.barrier()
    print(f"straggler_trainer: rank {rank} done", flush=True)
    return 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    os._exit(code)
