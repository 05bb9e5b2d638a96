"""Reads its own record (through `scout records list`) from inside a dataset,
a model's forward, a gradient hook and an optimizer's step of a one-rank DDP
job, and prints what phase/step the record showed at each as JSON lines.

    phase_probe.py JOB SCOUT_BIN   (env: SCOUT_PUBLISHER_LIB, PYTHONPATH)
"""
import json
import os
import socket
import subprocess
import sys

import scout_publisher


def main():
    job, scout = sys.argv[1], sys.argv[2]
    scout_publisher.enable(job=job, rank=0, world_size=1, heartbeat_s=0)
    import torch
    import torch.distributed as dist

    def look(where):
        out = subprocess.run([scout, "records", "list", "--job", job, "--format", "json"], capture_output=True,
                             text=True, timeout=30).stdout
        rec = json.loads(out)["details"]["records"][0]["record"]
        print(json.dumps({"where": where, "phase": rec["phase"], "step": rec["step"]}), flush=True)

    class Data(torch.utils.data.Dataset):
        def __len__(self):
            return 4

        def __getitem__(self, i):
            look("dataset")
            return torch.ones(2)

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(2, 1)

        def forward(self, x):
            look("forward")
            return self.lin(x)

    class Opt(torch.optim.SGD):
        def step(self, *a, **k):
            look("optimizer")
            return super().step(*a, **k)

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=0, world_size=1)
    model = torch.nn.parallel.DistributedDataParallel(Model())
    model.module.lin.weight.register_hook(lambda g: look("backward"))
    opt = Opt(model.parameters(), lr=0.1)
    for x in torch.utils.data.DataLoader(Data(), batch_size=2):
        model(x).sum().backward()
        opt.step()
    look("end")
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
