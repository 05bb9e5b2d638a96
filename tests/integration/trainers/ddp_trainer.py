"""A small deterministic PyTorch DDP trainer (gloo, CPU) with the scout
publisher enabled and optional fault injection, for scout's hang tests.

Launch one process per rank with RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT
and SCOUT_JOB set (tests/integration/trainer_harness.py does), never torchrun.

Each iteration k = 1..--steps: fetch a batch (DataLoader), forward, backward
(DDP's all-reduce, published through the comm hook), optimizer step (the
publisher's step becomes k), then one explicit dist.all_reduce of the loss:
"the step's collective". A fault at --fault-rank R, iteration --fault-step S
happens at that collective:

  stop-before-collective  SIGSTOP itself before calling it (records: R's last
                          collective is done, the others are inside the next)
  stop-inside-collective  SIGSTOP itself after the publisher recorded its
                          enter, before gloo saw it (records: every rank inside
                          the same collective; only process state names R)
  exit                    os._exit(3) before it
  crash                   abort() (SIGABRT) before it
  skip-collective         skip it and go on to iteration S+1
  wrong-shape             call it with 2 elements instead of 1
  none                    no fault

What gloo does next (observed with Debian's torch 1.13, 3 ranks on one host):
when a rank exits or crashes, the others' pending or next collective raises
"RuntimeError: [./gloo/transport/tcp/pair.cc:598] Connection closed by peer"
at once and they exit 1 (all gone within ~2 s, interpreter teardown
included), so a probe usually runs after every trainer is gone: records
outlive their writers for that. When a rank calls an all_reduce with another
size, the ranks do not fail fast: they wait until --pg-timeout ("Timed out
waiting ... for recv/send operation"); when a rank skips a collective, its
next collective meets the others' skipped one, and whichever peer first
receives mismatched data may be the first to fail (a bystander). A stopped
rank makes the others wait until --pg-timeout.
"""
import argparse
import os
import signal
import sys
import time
from datetime import timedelta

FAULTS = ("none", "stop-before-collective", "stop-inside-collective", "exit", "crash", "skip-collective", "wrong-shape")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=int(os.environ.get("SCOUT_TRAINER_STEPS", "6")))
    p.add_argument("--fault", choices=FAULTS, default=os.environ.get("SCOUT_FAULT", "none"))
    p.add_argument("--fault-rank", type=int, default=int(os.environ.get("SCOUT_FAULT_RANK", "-1")))
    p.add_argument("--fault-step", type=int, default=int(os.environ.get("SCOUT_FAULT_STEP", "-1")))
    p.add_argument("--publisher", choices=("call", "env", "off"), default="call",
                   help="call: scout_publisher.enable() here; env: enabled by SCOUT_PUBLISH=1 at start-up; off")
    p.add_argument("--pg-timeout", type=float, default=60.0, help="gloo timeout in seconds")
    p.add_argument("--step-delay", type=float, default=0.0, help="seconds to sleep per iteration")
    p.add_argument("--seed", type=int, default=1234)
    return p.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    import scout_publisher

    if args.publisher == "call":
        scout_publisher.enable()
    elif args.publisher == "env" and scout_publisher.publisher() is None:
        print("ddp_trainer: --publisher env but the publisher is not enabled", file=sys.stderr)
        return 2

    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP
    from torch.utils.data import DataLoader, TensorDataset
    from torch.utils.data.distributed import DistributedSampler

    rank = int(os.environ["RANK"])
    world = int(os.environ["WORLD_SIZE"])
    torch.manual_seed(args.seed)
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world, timeout=timedelta(seconds=args.pg_timeout))

    gen = torch.Generator().manual_seed(args.seed)
    xs = torch.randn(16 * world, 8, generator=gen)
    ys = torch.randn(16 * world, 2, generator=gen)
    loader = DataLoader(TensorDataset(xs, ys), batch_size=4,
                        sampler=DistributedSampler(TensorDataset(xs, ys), num_replicas=world, rank=rank, shuffle=False))
    model = DDP(torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2)))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    loss_fn = torch.nn.MSELoss()
    batches = iter(loader)

    for step in range(1, args.steps + 1):
        try:
            x, y = next(batches)
        except StopIteration:
            batches = iter(loader)
            x, y = next(batches)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        metric = loss.detach().reshape(1).clone()
        fault = args.fault if (rank == args.fault_rank and step == args.fault_step) else "none"
        if fault != "none":
            print(f"ddp_trainer: rank {rank} injects {fault} at step {step}", flush=True)
        if fault == "stop-before-collective":
            os.kill(os.getpid(), signal.SIGSTOP)
        elif fault == "exit":
            sys.stdout.flush()
            os._exit(3)
        elif fault == "crash":
            os.abort()
        elif fault == "skip-collective":
            continue
        elif fault == "wrong-shape":
            metric = torch.zeros(2)
        elif fault == "stop-inside-collective":
            def stop_once(name):
                scout_publisher.set_after_enter_hook(None)
                os.kill(os.getpid(), signal.SIGSTOP)
            scout_publisher.set_after_enter_hook(stop_once)
        dist.all_reduce(metric)
        print(f"ddp_trainer: rank {rank} step {step} loss {float(metric[0]) / world:.6f}", flush=True)
        if args.step_delay > 0:
            time.sleep(args.step_delay)

    dist.barrier()
    dist.destroy_process_group()
    print(f"ddp_trainer: rank {rank} done", flush=True)
    return 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    # The run is over and reported. Skip interpreter teardown: torch 1.13's gloo
    # process group can still abort in C++ destructors at exit ("terminate called
    # without an active exception", seen here under load) even after
    # destroy_process_group(), which would turn a clean run into exit -6.
    os._exit(code)
