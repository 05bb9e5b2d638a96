"""A small torch 2.x trainer (gloo, CPU) for scout's tests: the parallelisms
torch 2.x users run, with the scout publisher and optional fault injection.

Launch one process per rank (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT,
SCOUT_JOB set; tests/integration/trainer_harness.py does) or with torchrun.
SCOUT_MESH is never needed: the publisher finds coordinates from the mesh.

--mode
  eager    every eager form: all_reduce, broadcast(group_src=), all_gather,
           reduce_scatter_tensor, all_to_all_single, send/recv, isend/irecv,
           batch_isend_irecv, a _coalescing_manager batch, barrier
  ddp      DistributedDataParallel (built-in C++ all-reduce, buffer broadcast)
  fsdp2    fully_shard on a 1-D mesh of all ranks
  hsdp     fully_shard on a 2-D mesh (dp_replicate, dp_shard)
  tp       DTensor tensor parallel on a (dp, tp) mesh, FSDP2 over dp
  pp       a 2-stage pipeline (ScheduleGPipe) on a (dp, pp) mesh, gradients
           all-reduced over dp
  compile  a torch.compile'd model whose forward calls a functional
           all-reduce (in the graph), trained with DDP-free gradient sync

Each iteration: the mode's step, then "the step's collective": one
dist.all_reduce of the loss over --step-group (world, or dim0: this rank's
group along the mesh's first dim). A fault at --fault-rank R, iteration
--fault-step S happens at that collective (as in ddp_trainer.py):
stop-before-collective, exit, skip-collective, wrong-shape, none.

SCOUT_TEST_FR_DIR=DIR: a rank whose training fails (a collective timed out,
a peer is gone) dumps its Flight Recorder there first (dump_flight_recorder).

--out PREFIX writes PREFIX.<rank>.json at the end of a run that finished:
scout's published counts per kind, the Flight Recorder's counts per kind
(torch's own record of the same run), the capture mode, the coordinates and
where they came from, and for compile the dynamo graph and break counts.
"""
import argparse
import json
import os
import signal
import sys
import time
from datetime import timedelta

FAULTS = ("none", "stop-before-collective", "exit", "skip-collective", "wrong-shape")
MODES = ("eager", "ddp", "fsdp2", "hsdp", "tp", "pp", "compile")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--mode", choices=MODES, default="ddp")
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--fault", choices=FAULTS, default="none")
    p.add_argument("--fault-rank", type=int, default=-1)
    p.add_argument("--fault-step", type=int, default=-1)
    p.add_argument("--publisher", choices=("call", "env", "off"), default="call")
    p.add_argument("--pg-timeout", type=float, default=60.0)
    p.add_argument("--step-delay", type=float, default=0.0)
    p.add_argument("--step-group", choices=("world", "dim0"), default="world")
    p.add_argument("--out", default="")
    p.add_argument("--seed", type=int, default=1234)
    return p.parse_args(argv)


KIND_OF_FR = {  # Flight Recorder profiling names (after "gloo:" / "nccl:") -> scout kinds
    "all_reduce": "all_reduce", "allreduce": "all_reduce", "all_reduce_coalesced": "all_reduce",
    "allreduce_coalesced": "all_reduce", "broadcast": "broadcast", "all_gather": "all_gather",
    "allgather": "all_gather", "all_gather_into_tensor": "all_gather_into_tensor",
    "_allgather_base": "all_gather_into_tensor", "allgather_into_tensor_coalesced": "all_gather_into_tensor",
    "all_gather_into_tensor_coalesced": "all_gather_into_tensor", "reduce_scatter": "reduce_scatter",
    "reduce_scatter_tensor": "reduce_scatter_tensor", "_reduce_scatter_base": "reduce_scatter_tensor",
    "reduce_scatter_tensor_coalesced": "reduce_scatter_tensor", "all_to_all": "all_to_all", "alltoall": "all_to_all",
    "all_to_all_single": "all_to_all_single", "alltoall_base": "all_to_all_single", "barrier": "barrier",
    "send": "send", "recv": "recv", "reduce": "reduce", "gather": "gather", "scatter": "scatter",
}


def fr_counts():
    """Counts per scout kind of this process's Flight Recorder entries (gloo's recorder)."""
    import torch
    raw = torch._C._distributed_c10d._dump_fr_trace_json(includeCollectives=True)
    doc = json.loads(raw)
    out, unknown = {}, {}
    for e in doc.get("entries", []):
        name = str(e.get("profiling_name", "")).split(":", 1)[-1]
        kind = KIND_OF_FR.get(name)
        if kind is None:
            unknown[name] = unknown.get(name, 0) + 1
            continue
        out[kind] = out.get(kind, 0) + 1
    return out, unknown, len(doc.get("entries", []))


def dump_flight_recorder(rank):
    """With SCOUT_TEST_FR_DIR set: this rank's Flight Recorder as torch dumps it
    on timeout (a pickle, DIR/pickle/rank_<rank>, what torch's analyzer reads)
    and as JSON (DIR/json/rank_<rank>.json, what scout reads), from one state."""
    d = os.environ.get("SCOUT_TEST_FR_DIR")
    if not d:
        return
    import torch
    c10d = torch._C._distributed_c10d
    pick = c10d._dump_fr_trace(includeCollectives=True, includeStackTraces=False)
    js = c10d._dump_fr_trace_json(includeCollectives=True)
    for sub, name, data in (("pickle", f"rank_{rank}", pick), ("json", f"rank_{rank}.json", js)):
        os.makedirs(os.path.join(d, sub), exist_ok=True)
        tmp = os.path.join(d, sub, f".{name}.tmp")
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, os.path.join(d, sub, name))


CDM_KINDS = {"allreduce_": "all_reduce", "broadcast_": "broadcast", "_reduce_scatter_base_": "reduce_scatter_tensor",
             "reduce_scatter_tensor_coalesced_": "reduce_scatter_tensor", "reduce_scatter_": "reduce_scatter",
             "_allgather_base_": "all_gather_into_tensor", "allgather_": "all_gather", "send": "send", "recv_": "recv",
             "alltoall_base_": "all_to_all_single", "alltoall_": "all_to_all", "barrier": "barrier",
             "all_reduce": "all_reduce", "all_gather_into_tensor": "all_gather_into_tensor",
             "reduce_scatter_tensor": "reduce_scatter_tensor", "all_to_all_single": "all_to_all_single"}


def cdm_counts(cdm):
    """CommDebugMode's counts of this rank's c10d / functional collectives, by scout kind."""
    out = {}
    for op, n in cdm.get_comm_counts().items():
        name = str(op).split(".", 1)[-1]
        kind = CDM_KINDS.get(name, "other:" + str(op))
        out[kind] = out.get(kind, 0) + int(n)
    return out


def main(argv=None):
    args = parse_args(argv)
    import scout_publisher

    if args.publisher == "call":
        scout_publisher.enable()
    elif args.publisher == "env" and scout_publisher.publisher() is None:
        print("torch2_trainer: --publisher env but the publisher is not enabled", file=sys.stderr)
        return 2

    import torch
    import torch.distributed as dist
    import torch.nn as nn

    rank = int(os.environ["RANK"])
    world = int(os.environ["WORLD_SIZE"])
    torch.manual_seed(args.seed)
    torch.set_num_threads(1)
    # Rendezvous gets at least 60 s (four torch imports on a loaded 2-core
    # machine can start the ranks seconds apart); collectives then get
    # --pg-timeout (dist.set_timeout, where this torch has it).
    dist.init_process_group("gloo", timeout=timedelta(seconds=max(args.pg_timeout, 60)))
    if args.pg_timeout < 60 and hasattr(dist, "set_timeout"):
        dist.set_timeout(timedelta(seconds=args.pg_timeout))
    from torch.distributed.device_mesh import init_device_mesh

    mesh = None
    model = None
    stage = schedule = None
    sync_group = None  # gradients all-reduced by hand over this group (pp, compile)
    if args.mode == "ddp":
        from torch.nn.parallel import DistributedDataParallel as DDP
        model = DDP(nn.Sequential(nn.Linear(8, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Linear(16, 2)))
    elif args.mode == "fsdp2":
        from torch.distributed.fsdp import fully_shard
        mesh = init_device_mesh("cpu", (world,))
        model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))
        fully_shard(model[0], mesh=mesh)
        fully_shard(model, mesh=mesh)
    elif args.mode == "hsdp":
        from torch.distributed.fsdp import fully_shard
        mesh = init_device_mesh("cpu", (2, world // 2), mesh_dim_names=("dp_replicate", "dp_shard"))
        model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))
        fully_shard(model, mesh=mesh)
    elif args.mode == "tp":
        from torch.distributed.fsdp import fully_shard
        from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module
        mesh = init_device_mesh("cpu", (world // 2, 2), mesh_dim_names=("dp", "tp"))
        model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))
        parallelize_module(model, mesh["tp"], {"0": ColwiseParallel(), "2": RowwiseParallel()})
        fully_shard(model, mesh=mesh["dp"])
    elif args.mode == "pp":
        from torch.distributed.pipelining import PipelineStage, ScheduleGPipe
        mesh = init_device_mesh("cpu", (world // 2, 2), mesh_dim_names=("dp", "pp"))
        pp_rank = mesh.get_local_rank("pp")
        layers = [nn.Sequential(nn.Linear(8, 16), nn.ReLU()), nn.Linear(16, 2)]
        model = layers[pp_rank]
        stage = PipelineStage(model, pp_rank, 2, torch.device("cpu"), group=mesh.get_group("pp"))
        loss_fn = nn.MSELoss()
        # Every stage gets the loss function: torch runs a stage's backward only where the schedule has
        # one (without it stage 0 skipped the backward, and stage 1 waited for it forever).
        schedule = ScheduleGPipe(stage, n_microbatches=2, loss_fn=loss_fn)
        sync_group = mesh.get_group("dp")
    elif args.mode == "compile":
        import torch.distributed._functional_collectives as funcol
        group = dist.group.WORLD

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.a = nn.Linear(8, 16)
                self.b = nn.Linear(16, 2)

            def forward(self, x):
                h = torch.relu(self.a(x))
                # a collective inside the compiled graph
                h = funcol.all_reduce(h, "avg", group)
                return self.b(h)

        model = torch.compile(Net(), backend="aot_eager", fullgraph=False)
        sync_group = dist.group.WORLD
    else:  # eager
        model = nn.Linear(8, 2)

    params = list(model.parameters()) if model is not None else []
    opt = torch.optim.SGD(params, lr=0.05)
    loss_fn = nn.MSELoss()
    gen = torch.Generator().manual_seed(args.seed + rank)
    step_group = None
    if args.step_group == "dim0" and mesh is not None and mesh.mesh.dim() > 1:
        step_group = mesh.get_group(0)

    def eager_forms(step):
        t = torch.ones(4) * (rank + 1)
        dist.all_reduce(t)
        sub = eager_forms.sub
        if sub is not None:
            dist.broadcast(t, src=None, group_src=1, group=sub)
        out = [torch.zeros(4) for _ in range(world)]
        dist.all_gather(out, t)
        rs = torch.zeros(4 // world if 4 % world == 0 else 1)
        if 4 % world == 0:
            dist.reduce_scatter_tensor(rs, t)
        a2a = torch.zeros(world)
        dist.all_to_all_single(a2a, torch.arange(world, dtype=torch.float32))
        peer = rank ^ 1
        if peer < world:
            if rank % 2 == 0:
                dist.send(t, peer)
                dist.recv(t, peer)
            else:
                dist.recv(t, peer)
                dist.send(t, peer)
            w = dist.isend(t.clone(), peer) if rank % 2 == 0 else dist.irecv(t, peer)
            w.wait()
            issued = eager_forms.issued  # point-to-point ops this rank issued (no torch tool counts them on gloo)
            issued["send"] = issued.get("send", 0) + (3 if rank % 2 == 0 else 2)
            issued["recv"] = issued.get("recv", 0) + (2 if rank % 2 == 0 else 3)
            ops = [dist.P2POp(dist.isend, t.clone(), peer), dist.P2POp(dist.irecv, torch.zeros(4), peer)]
            for w in dist.batch_isend_irecv(ops):
                w.wait()
        with dist._coalescing_manager(async_ops=True) as cm:
            dist.all_reduce(torch.ones(2))
            dist.all_reduce(torch.ones(3))
        cm.wait()
        dist.barrier()

    eager_forms.issued = {}
    eager_forms.sub = dist.new_group([0, 1]) if (args.mode == "eager" and world >= 2) else None

    import contextlib
    cdm = None
    # CommDebugMode's module tracker breaks the pipeline stage's backward (autograd.grad: "a leaf node
    # was passed to _will_engine_execute_node"): pp is counted by Flight Recorder alone.
    if args.out and args.mode not in ("compile", "pp"):
        from torch.distributed.tensor.debug import CommDebugMode
        cdm = CommDebugMode()
    try:
        with cdm if cdm is not None else contextlib.nullcontext():
            train(args, rank, world, mesh, model, schedule, sync_group, params, opt, loss_fn, gen, step_group,
                  eager_forms)
    except RuntimeError:
        dump_flight_recorder(rank)  # as NCCL's dump on timeout does; gloo does not dump by itself
        raise
    dist.barrier()
    if args.out:
        pub = scout_publisher.publisher()
        doc = {"rank": rank, "mode": args.mode, "capture": scout_publisher.capture(),
               "scout": scout_publisher.collective_counts(), "torch": torch.__version__}
        doc["fr"], doc["fr_unknown"], doc["fr_entries"] = fr_counts()
        doc["cdm"] = cdm_counts(cdm) if cdm is not None else {}
        doc["issued"] = dict(eager_forms.issued)
        if pub is not None:
            doc["coords"], doc["coords_source"] = pub.coords, pub.coords_source
        if args.mode == "compile":
            from torch._dynamo.utils import counters
            doc["unique_graphs"] = int(counters["stats"]["unique_graphs"])
            doc["graph_breaks"] = int(sum(counters["graph_break"].values()))
        with open(f"{args.out}.{rank}.json", "w") as f:
            json.dump(doc, f)
    dist.destroy_process_group()
    print(f"torch2_trainer: rank {rank} done", flush=True)
    return 0


def train(args, rank, world, mesh, model, schedule, sync_group, params, opt, loss_fn, gen, step_group, eager_forms):
    import torch
    import torch.distributed as dist
    for step in range(1, args.steps + 1):
        x = torch.randn(8, 8, generator=gen)
        y = torch.randn(8, 2, generator=gen)
        if args.mode == "eager":
            eager_forms(step)
            loss = loss_fn(model(x), y)
            loss.backward()
        elif args.mode == "pp":
            pp_rank = mesh.get_local_rank("pp")
            if pp_rank == 0:
                schedule.step(x)
                loss = torch.zeros(())
            else:
                losses = []
                schedule.step(target=y, losses=losses)
                loss = torch.stack(losses).mean()
        else:
            loss = loss_fn(model(x), y)
            loss.backward()
        if sync_group is not None:
            for p in params:
                if p.grad is not None:
                    dist.all_reduce(p.grad, op=dist.ReduceOp.AVG, group=sync_group)
        opt.step()
        opt.zero_grad()
        metric = loss.detach().reshape(1).clone().float()
        if hasattr(metric, "full_tensor"):
            metric = metric.full_tensor()
        fault = args.fault if (rank == args.fault_rank and step == args.fault_step) else "none"
        if fault != "none":
            print(f"torch2_trainer: rank {rank} injects {fault} at step {step}", flush=True)
        if fault == "stop-before-collective":
            os.kill(os.getpid(), signal.SIGSTOP)
        elif fault == "exit":
            sys.stdout.flush()
            os._exit(3)
        elif fault == "skip-collective":
            continue
        elif fault == "wrong-shape":
            metric = torch.zeros(2)
        dist.all_reduce(metric, group=step_group)
        print(f"torch2_trainer: rank {rank} step {step} loss {float(metric[0]):.6f}", flush=True)
        if args.step_delay > 0:
            time.sleep(args.step_delay)



if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
