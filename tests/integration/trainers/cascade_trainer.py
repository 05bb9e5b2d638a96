"""A PyTorch trainer (gloo, CPU, the scout publisher on) for scout's cascade
and hybrid-mesh campaigns: a real DDP job when the mesh is data-parallel
only, hand-made process groups for dp x tp / dp x pp / dp x tp x pp meshes.

Launch one process per rank with RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT,
SCOUT_JOB and SCOUT_MESH set (tests/integration/hang_campaign.py does).

Each step k = 1..--steps:
  dp only:  forward, backward (DDP's bucket all-reduce through the comm hook),
            optimizer step, then the "world" all-reduce of the loss.
  hybrid:   forward, then for each model-parallel dim of the mesh (tp, pp, cp,
            ep, in that order) an all-reduce in the rank's group of that dim,
            backward, the "dp" all-reduce of the gradients in the rank's dp
            group, optimizer step, then the "world" all-reduce of the loss.

--faults RANK:STEP:KIND:WHERE[,...] injects faults. WHERE names the call the
fault is placed before: ddp (the DDP backward), tp, pp, cp, ep, dp, world, or
raw: when any fault names it, every rank makes a broadcast from rank 0 on the
world group straight through the ProcessGroup object each step, before the
world all-reduce; the publisher does not record it (as DDP's bucket-rebuild
broadcast), so ranks waiting in it when a peer dies fail outside any call
their records show.
KIND:
  exit    os._exit(3) before the call          segv   SIGSEGV itself before it
  abort   abort() (SIGABRT) before it          stop   SIGSTOP itself before it
  skip    skip that call (go on to the next)   extra  make that call twice
What gloo then does to the other ranks (torch 1.13): the peers of a dead rank
fail in their pending or next call within milliseconds ("Connection closed by
peer"), publish it as failed, and exit 1 or abort in teardown.
"""
import argparse
import os
import signal
import sys
import time
from datetime import timedelta

KINDS = ("exit", "segv", "abort", "stop", "skip", "extra")
WHERE = ("ddp", "tp", "pp", "cp", "ep", "dp", "world", "raw")
_DIMS = ("dp", "fsdp", "tp", "pp", "cp", "ep")


def parse_mesh(spec, world):
    dims = []
    for part in spec.split(","):
        name, _, size = part.strip().partition("=")
        if name not in _DIMS or not size.isdigit() or int(size) < 1:
            raise SystemExit(f"cascade_trainer: bad mesh {spec!r}")
        dims.append((name, int(size)))
    total = 1
    for _, n in dims:
        total *= n
    if total != world:
        raise SystemExit(f"cascade_trainer: mesh {spec!r} has {total} ranks, WORLD_SIZE is {world}")
    return dims


def coords_of(dims, rank):
    out = {}
    rest = rank
    for name, size in reversed(dims):
        out[name] = rest % size
        rest //= size
    return out


def rank_of(dims, coords):
    r = 0
    for name, size in dims:
        r = r * size + coords[name]
    return r


def group_ranks(dims, dim, rank):
    """The ranks differing from `rank` only in `dim`, ascending."""
    c = coords_of(dims, rank)
    size = dict(dims)[dim]
    return sorted(rank_of(dims, {**c, dim: i}) for i in range(size))


def parse_faults(text):
    faults = {}
    for item in filter(None, (text or "").split(",")):
        rank, step, kind, where = item.split(":")
        if kind not in KINDS or where not in WHERE:
            raise SystemExit(f"cascade_trainer: bad fault {item!r}")
        faults[(int(rank), int(step), where)] = kind
    return faults


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--faults", default="")
    p.add_argument("--pg-timeout", type=float, default=60.0)
    p.add_argument("--step-delay", type=float, default=0.0)
    p.add_argument("--seed", type=int, default=1234)
    args = p.parse_args()

    import scout_publisher
    scout_publisher.enable()
    import torch
    import torch.distributed as dist

    rank = int(os.environ["RANK"])
    world = int(os.environ["WORLD_SIZE"])
    dims = parse_mesh(os.environ.get("SCOUT_MESH") or f"dp={world}", world)
    faults = parse_faults(args.faults)
    torch.manual_seed(args.seed)
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world, timeout=timedelta(seconds=args.pg_timeout))

    # Every rank creates every group, in the same order (torch requires it).
    groups = {}
    for name, size in dims:
        if size <= 1:
            continue
        made = {}
        for r in range(world):
            members = tuple(group_ranks(dims, name, r))
            if members not in made:
                made[members] = dist.new_group(list(members))
        groups[name] = made[tuple(group_ranks(dims, name, rank))]
    model_dims = [d for d in ("tp", "pp", "cp", "ep") if d in groups]
    raw = any(where == "raw" for (_, _, where) in faults)
    world_pg = dist.distributed_c10d._get_default_group()
    hybrid = bool(model_dims)

    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))
    if not hybrid:
        from torch.nn.parallel import DistributedDataParallel as DDP
        model = DDP(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    gen = torch.Generator().manual_seed(args.seed + rank)

    def fault_at(step, where):
        kind = faults.get((rank, step, where))
        if kind is None:
            return None
        print(f"cascade_trainer: rank {rank} injects {kind} before {where} at step {step}", flush=True)
        if kind == "exit":
            sys.stdout.flush()
            os._exit(3)
        if kind == "segv":
            os.kill(os.getpid(), signal.SIGSEGV)
            time.sleep(5)
        if kind == "abort":
            os.abort()
        if kind == "stop":
            os.kill(os.getpid(), signal.SIGSTOP)
        return kind  # skip / extra: the caller acts

    def call(step, where, tensor, group=None):
        kind = fault_at(step, where)
        if kind == "skip":
            return
        dist.all_reduce(tensor, group=group)
        if kind == "extra":
            dist.all_reduce(tensor, group=group)

    for step in range(1, args.steps + 1):
        x = torch.randn(4, 8, generator=gen)
        y = torch.randn(4, 2, generator=gen)
        out = model(x)
        for d in model_dims:
            act = out.detach().sum().reshape(1).clone()
            call(step, d, act, groups[d])
        loss = torch.nn.functional.mse_loss(out, y)
        kind = fault_at(step, "ddp") if not hybrid else None
        if kind != "skip":
            loss.backward()
        if hybrid:
            flat = torch.cat([q.grad.reshape(-1) for q in model.parameters()])
            call(step, "dp", flat, groups.get("dp"))
        opt.step()
        opt.zero_grad()
        if raw:
            fault_at(step, "raw")
            world_pg.broadcast(torch.ones(1024), 0).wait()  # not through torch.distributed: unrecorded
        metric = loss.detach().reshape(1).clone()
        call(step, "world", metric)
        print(f"cascade_trainer: rank {rank} step {step}", flush=True)
        if args.step_delay > 0:
            time.sleep(args.step_delay)

    dist.barrier()
    print(f"cascade_trainer: rank {rank} done", flush=True)
    return 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # skip gloo teardown aborts after a clean run (see ddp_trainer.py)
