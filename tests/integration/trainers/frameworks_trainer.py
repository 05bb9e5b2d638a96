"""A small torch 2.x trainer (gloo, CPU) whose parallel groups come from
Megatron-Core's parallel_state or DeepSpeed, for scout's tests: the publisher
must find each rank's coordinates from them (no SCOUT_MESH).

--mode
  megatron-tp-pp  parallel_state.initialize_model_parallel(tp=2, pp=2): a
                  tensor-parallel MLP (Megatron's copy-to / reduce-from tp
                  region mappings: tp all-reduces in forward and backward)
                  split into 2 pipeline stages (activations and their
                  gradients sent between the stages' ranks that parallel_state
                  names), gradients all-reduced over its data-parallel group
  megatron-tp-dp  the same with tp=2, pp=1 (dp = world / 2)
  deepspeed-pp-tp deepspeed.initialize of a deepspeed.pipe PipelineModule on a
                  PipeModelDataParallelTopology(pp=2, mp=2, dp=world / 4),
                  trained by engine.train_batch (DeepSpeed's pipeline engine)
  deepspeed-pp-dp the same with pp=2, mp=1, dp=world / 2

Each iteration: the mode's step, then "the step's collective": one
dist.all_reduce of the loss over the world. A fault at --fault-rank R,
iteration --fault-step S happens at that collective (as in torch2_trainer.py):
stop-before-collective, exit, skip-collective, wrong-shape, none.

--out PREFIX writes PREFIX.<rank>.json at the end of a run that finished:
the coordinates the publisher holds and their source, and the ones the
framework itself reports (its group ranks).
"""
import argparse
import json
import os
import signal
import sys
import time
from datetime import timedelta

FAULTS = ("none", "stop-before-collective", "exit", "skip-collective", "wrong-shape")
MODES = ("megatron-tp-pp", "megatron-tp-dp", "deepspeed-pp-tp", "deepspeed-pp-dp")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--mode", choices=MODES, default="megatron-tp-pp")
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--fault", choices=FAULTS, default="none")
    p.add_argument("--fault-rank", type=int, default=-1)
    p.add_argument("--fault-step", type=int, default=-1)
    p.add_argument("--publisher", choices=("call", "env", "off"), default="call")
    p.add_argument("--pg-timeout", type=float, default=60.0)
    p.add_argument("--step-delay", type=float, default=0.0)
    p.add_argument("--out", default="")
    p.add_argument("--seed", type=int, default=1234)
    return p.parse_args(argv)


class MegatronJob:
    """A tensor-parallel 2-layer MLP per pipeline stage, on parallel_state's groups."""

    def __init__(self, tp, pp, seed):
        import torch
        import torch.distributed as dist
        from megatron.core import parallel_state as ps
        ps.initialize_model_parallel(tensor_model_parallel_size=tp, pipeline_model_parallel_size=pp)
        self.ps, self.torch, self.dist = ps, torch, dist
        self.stage, self.stages = ps.get_pipeline_model_parallel_rank(), pp
        gen = torch.Generator().manual_seed(seed + 17 * self.stage + ps.get_tensor_model_parallel_rank())
        hidden = 16 // tp
        # column-parallel then row-parallel: each tp rank holds its slice of the hidden dim
        self.w1 = torch.nn.Parameter(torch.randn(8, hidden, generator=gen) * 0.3)
        self.w2 = torch.nn.Parameter(torch.randn(hidden, 8, generator=gen) * 0.3)
        self.params = [self.w1, self.w2]
        self.frame = {"dp": ps.get_data_parallel_rank(), "tp": ps.get_tensor_model_parallel_rank(),
                      "pp": self.stage, "cp": ps.get_context_parallel_rank()}

    def block(self, x):
        from megatron.core.tensor_parallel import mappings
        h = mappings.copy_to_tensor_model_parallel_region(x)  # backward: tp all-reduce
        h = self.torch.relu(h @ self.w1)
        return mappings.reduce_from_tensor_model_parallel_region(h @ self.w2)  # forward: tp all-reduce

    def step(self, x, y):
        torch, dist, ps = self.torch, self.dist, self.ps
        loss = torch.zeros(())
        if self.stage > 0:
            x = torch.zeros(8, 8)
            dist.recv(x, ps.get_pipeline_model_parallel_prev_rank())
            x.requires_grad_(True)
        out = self.block(x)
        if self.stage < self.stages - 1:
            dist.send(out.detach(), ps.get_pipeline_model_parallel_next_rank())
            grad = torch.zeros_like(out)
            dist.recv(grad, ps.get_pipeline_model_parallel_next_rank())
            out.backward(grad)
        else:
            loss = torch.nn.functional.mse_loss(out, torch.cat([y, y, y, y], dim=1))
            loss.backward()
            if self.stage > 0:
                dist.send(x.grad, ps.get_pipeline_model_parallel_prev_rank())
        for p in self.params:  # Megatron's DDP all-reduces gradients over this group
            dist.all_reduce(p.grad, op=dist.ReduceOp.AVG, group=ps.get_data_parallel_group())
        return loss


class DeepSpeedJob:
    """deepspeed.pipe: a PipelineModule trained by DeepSpeed's pipeline engine."""

    def __init__(self, pp, mp, world, seed):
        import deepspeed
        import torch
        import torch.nn as nn
        from deepspeed.pipe import PipelineModule
        from deepspeed.runtime.pipe.topology import PipeModelDataParallelTopology
        from deepspeed.utils import groups
        topo = PipeModelDataParallelTopology(num_pp=pp, num_mp=mp, num_dp=world // (pp * mp))
        torch.manual_seed(seed)
        model = PipelineModule(layers=[nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2)], topology=topo,
                               loss_fn=nn.MSELoss())
        cfg = {"train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 2,
               "optimizer": {"type": "SGD", "params": {"lr": 0.05}}, "steps_per_print": 1 << 30}
        self.engine, _, _, _ = deepspeed.initialize(model=model, model_parameters=list(model.parameters()),
                                                    config=cfg)
        grid = groups.mpu
        self.frame = {"dp": grid.get_data_parallel_rank(), "tp": grid.get_slice_parallel_rank(),
                      "pp": grid.get_pipe_parallel_rank(), "cp": 0}
        self.torch = torch

    def step(self, x, y):
        batches = iter([(x[:4], y[:4]), (x[4:], y[4:])])
        return self.engine.train_batch(batches).detach().reshape(())


def main(argv=None):
    args = parse_args(argv)
    import scout_publisher

    if args.publisher == "call":
        scout_publisher.enable()
    elif args.publisher == "env" and scout_publisher.publisher() is None:
        print("frameworks_trainer: --publisher env but the publisher is not enabled", file=sys.stderr)
        return 2

    import torch
    import torch.distributed as dist

    rank = int(os.environ["RANK"])
    world = int(os.environ["WORLD_SIZE"])
    torch.manual_seed(args.seed)
    torch.set_num_threads(1)
    timeout = timedelta(seconds=max(args.pg_timeout, 60))
    if args.mode.startswith("deepspeed"):
        import importlib
        import deepspeed
        # (`import deepspeed.comm.torch as m` would bind deepspeed.comm's attribute `torch`: the torch package.)
        ds_comm = importlib.import_module("deepspeed.comm.torch")
        # With DS_ACCELERATOR=cpu, init_distributed JIT-compiles DeepSpeed's shared-memory comm op with g++ (~90 s of
        # CPU, again for every new venv path: each fresh clone). Only inference_all_reduce uses it; the pipeline
        # engine's training never calls that, and on GPUs, where users run DeepSpeed, the op is never built. So it is
        # not built here: every collective these jobs make goes through torch.distributed, as before (issue 38).
        if hasattr(ds_comm, "build_shm_op"):
            ds_comm.build_shm_op = lambda: None
        deepspeed.init_distributed(dist_backend="gloo", timeout=timeout)
    else:
        dist.init_process_group("gloo", timeout=timeout)
    if args.pg_timeout < 60 and hasattr(dist, "set_timeout"):
        dist.set_timeout(timedelta(seconds=args.pg_timeout))

    if args.mode == "megatron-tp-pp":
        job = MegatronJob(tp=2, pp=2, seed=args.seed)
    elif args.mode == "megatron-tp-dp":
        job = MegatronJob(tp=2, pp=1, seed=args.seed)
    elif args.mode == "deepspeed-pp-tp":
        job = DeepSpeedJob(pp=2, mp=2, world=world, seed=args.seed)
    else:
        job = DeepSpeedJob(pp=2, mp=1, world=world, seed=args.seed)
    opt = None
    if isinstance(job, MegatronJob):
        opt = torch.optim.SGD(job.params, lr=0.05)
    gen = torch.Generator().manual_seed(args.seed)  # same data on every rank
    print(f"frameworks_trainer: rank {rank} {args.mode} groups {job.frame}", flush=True)

    for step in range(1, args.steps + 1):
        x = torch.randn(8, 8, generator=gen)
        y = torch.randn(8, 2, generator=gen)
        loss = job.step(x, y)
        if opt is not None:
            opt.step()
            opt.zero_grad()
        metric = loss.detach().reshape(1).clone().float()
        fault = args.fault if (rank == args.fault_rank and step == args.fault_step) else "none"
        if fault != "none":
            print(f"frameworks_trainer: rank {rank} injects {fault} at step {step}", flush=True)
        if fault == "stop-before-collective":
            os.kill(os.getpid(), signal.SIGSTOP)
        elif fault == "exit":
            sys.stdout.flush()
            os._exit(3)
        elif fault == "skip-collective":
            continue
        elif fault == "wrong-shape":
            metric = torch.zeros(2)
        dist.all_reduce(metric)
        print(f"frameworks_trainer: rank {rank} step {step} loss {float(metric[0]):.6f}", flush=True)
        if args.step_delay > 0:
            time.sleep(args.step_delay)

    dist.barrier()
    if args.out:
        pub = scout_publisher.publisher()
        doc = {"rank": rank, "mode": args.mode, "frame": job.frame, "torch": torch.__version__}
        if pub is not None:
            doc["coords"], doc["coords_source"] = pub.coords, pub.coords_source
        with open(f"{args.out}.{rank}.json", "w") as f:
            json.dump(doc, f)
    dist.destroy_process_group()
    print(f"frameworks_trainer: rank {rank} done", flush=True)
    return 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
