#!/usr/bin/env python3
"""A small data-parallel CPU training loop (gloo, DDP) with scout's in-job
replay and recipe export (scout_publisher.replay), used by
bench/replay_overhead.py and tests/integration/test_replay.py.

Every rank: a stack of L residual MLP blocks, AdamW, random batches; at the
cadence the in-job replay runs V sampled layers (evidence under --replay-dir)
and/or the exporter saves one (under --export-dir); every --ckpt-every steps
each rank writes its replica as ckpt-dir/step_N/model_rank<r>.safetensors.
--inject-rank R --inject-from S: from step S on, rank R's replay results get
a bit flip (a drill of a node that went bad at step S). Prints one JSON line
per rank with step, replay and export times.
"""
import argparse
import json
import os
import struct
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integrations", "python"))


class Block:
    pass


def build(torch, dim, layers):
    nn = torch.nn

    class MLPBlock(nn.Module):
        def __init__(self):
            super().__init__()
            self.norm = nn.LayerNorm(dim)
            self.fc1 = nn.Linear(dim, 4 * dim)
            self.fc2 = nn.Linear(4 * dim, dim)
            self.drop = nn.Dropout(0.1)

        def forward(self, x):
            return x + self.drop(self.fc2(torch.nn.functional.gelu(self.fc1(self.norm(x)))))

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = nn.ModuleList([MLPBlock() for _ in range(layers)])
            self.head = nn.Linear(dim, 1)

        def forward(self, x):
            for b in self.blocks:
                x = b(x)
            return self.head(x)

    return Net()


def save_safetensors(path, tensors):
    header, data, off = {}, bytearray(), 0
    for name, t in tensors.items():
        raw = t.detach().contiguous().numpy().tobytes()
        header[name] = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [off, off + len(raw)]}
        off += len(raw)
        data += raw
    h = json.dumps(header).encode()
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def worker(rank, a):
    import torch
    import torch.distributed as dist
    from scout_publisher import replay

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{a.init_file}", rank=rank, world_size=a.world)
    torch.manual_seed(0)
    model = build(torch, a.dim, a.layers)
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    rep = exp = None
    layers = list(model.blocks)
    if a.replay_dir:
        rep = replay.InJobReplay(model, every=a.every, variants=a.variants, out_dir=a.replay_dir, job=a.job, layers=layers)
    if a.export_dir:
        exp = replay.RecipeExporter(model, a.export_dir, every=a.every, layers=layers)
    gen = torch.Generator().manual_seed(1000 + rank)
    times = []
    replay_s = export_s = 0.0
    for step in range(a.steps):
        t0 = time.perf_counter()
        if rep:
            rep.before_step(step)
            if a.inject_rank == rank and step >= a.inject_from >= 0:
                rep.inject = [replay.parse_inject(f"sdc:peer={rank},tensor=param_grad,word={step * 7919},bit={step % 64}")]
        if exp:
            exp.before_step(step)
        x = torch.randn(a.batch, a.dim, generator=gen)
        y = torch.randn(a.batch, 1, generator=gen)
        loss = torch.nn.functional.mse_loss(ddp(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        r0 = time.perf_counter()
        if rep:
            rep.after_step(step)
        r1 = time.perf_counter()
        if exp:
            exp.after_step(step)
        replay_s += r1 - r0
        export_s += time.perf_counter() - r1
        if a.ckpt_dir and a.ckpt_every and (step + 1) % a.ckpt_every == 0:
            d = os.path.join(a.ckpt_dir, f"step_{step + 1:05d}")
            os.makedirs(d, exist_ok=True)
            save_safetensors(os.path.join(d, f"model_rank{rank}.safetensors"), model.state_dict())
            dist.barrier()
        times.append(time.perf_counter() - t0)
    dist.barrier()
    print(json.dumps({"rank": rank, "steps": a.steps, "total_s": sum(times), "replay_s": replay_s, "export_s": export_s,
                      "replay_cycles": rep.cycles if rep else 0, "exported": len(exp.exported) if exp else 0}), flush=True)
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--world", type=int, default=2)
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--dim", type=int, default=64)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--every", type=int, default=20)
    ap.add_argument("--variants", type=int, default=3)
    ap.add_argument("--replay-dir")
    ap.add_argument("--export-dir")
    ap.add_argument("--ckpt-dir")
    ap.add_argument("--ckpt-every", type=int, default=0)
    ap.add_argument("--job", default="job")
    ap.add_argument("--inject-rank", type=int, default=-1)
    ap.add_argument("--inject-from", type=int, default=-1)
    ap.add_argument("--init-file", required=True)
    a = ap.parse_args()
    import torch.multiprocessing as mp
    mp.start_processes(worker, args=(a,), nprocs=a.world, start_method="fork")


if __name__ == "__main__":
    main()
