"""Writes N replicas of a small training state as users save it, one replica
with one flipped bit (SDC in that replica before the save), and prints what was
flipped as JSON on stdout.

Forms: state_dict   torch.save(model.state_dict(), f)          (an OrderedDict)
       nested       torch.save({'model': ..., 'optimizer': opt.state_dict(), 'step': n, ...}, f)
       dcp          torch.distributed.checkpoint.save({'model':..., 'optimizer':...}) into a directory (torch 2.x)
       hf           Hugging Face sharded safetensors: model.safetensors.index.json + shards (written by hand)

Usage: ckpt_writer.py FORM OUT_DIR REPLICAS SEED BAD_REPLICA   (BAD_REPLICA -1: all clean)
Runs under torch 2.x."""
import json
import os
import random
import struct
import sys
import warnings

import torch

warnings.filterwarnings("ignore")
form, out, n, seed, bad = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
rng = random.Random(seed)
torch.manual_seed(seed)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.LayerNorm(16), torch.nn.Linear(16, 4))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
for _ in range(2):
    opt.zero_grad()
    model(torch.randn(4, 8)).pow(2).sum().backward()
    opt.step()


def state():
    sd = {k: v.detach().clone() for k, v in model.state_dict().items()}
    osd = opt.state_dict()
    osd = {"state": {k: {kk: (vv.clone() if torch.is_tensor(vv) else vv) for kk, vv in st.items()} for k, st in osd["state"].items()},
           "param_groups": osd["param_groups"]}
    return sd, osd


def tensors_of(tree, prefix=""):
    """(dotted name, tensor) of every tensor in a nested dict."""
    if torch.is_tensor(tree):
        yield prefix, tree
    elif isinstance(tree, dict):
        for k, v in tree.items():
            yield from tensors_of(v, f"{prefix}.{k}" if prefix else str(k))


def flip_bit(t):
    """Flips one random bit of tensor t in place; returns (word, bit)."""
    raw = t.view(-1).view(torch.uint8)
    byte = rng.randrange(raw.numel())
    bit = rng.randrange(8)
    raw[byte] ^= 1 << bit
    return byte // 8, byte % 8 * 8 + bit


def write_safetensors(path, tensors):
    names = {torch.float32: "F32", torch.bfloat16: "BF16", torch.float16: "F16", torch.int64: "I64"}
    header, blobs, off = {}, [], 0
    for name, t in tensors.items():
        raw = t.contiguous().view(-1).view(torch.uint8).numpy().tobytes()
        header[name] = {"dtype": names[t.dtype], "shape": list(t.shape), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    h = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


# Which tensor is flipped is chosen once, so every form can name it.
sd0, osd0 = state()
if form == "state_dict":
    candidates = sorted(name for name, _ in tensors_of(sd0))
elif form == "hf":
    candidates = sorted(sd0)
else:
    candidates = sorted(["model." + k for k in sd0] +
                        [f"optimizer.state.{k}.{kk}" for k, st in osd0["state"].items() for kk, vv in st.items()
                         if torch.is_tensor(vv) and vv.numel() > 1])
target = rng.choice(candidates)
result = {"form": form, "tensor": target, "replica": bad, "paths": []}
for r in range(n):
    sd, osd = state()
    # A view and a bf16 tensor ride along in the nested form (shared storage, strides).
    if form == "state_dict":
        tree = torch.nn.Module.state_dict(model)  # an OrderedDict, as users save it
        tree = type(tree)((k, v.detach().clone()) for k, v in tree.items())
    elif form == "nested":
        tree = {"model": sd, "optimizer": osd, "step": 2, "epoch": 0, "lr": 1e-3,
                "extra": {"view": sd["0.weight"].t(), "bf16": sd["2.weight"].to(torch.bfloat16)}}
    elif form == "dcp":
        tree = {"model": sd, "optimizer": osd}
    else:
        tree = sd
    if r == bad:
        t = dict(tensors_of(tree))[target] if form != "hf" else tree[target]
        result["word"], result["bit"] = flip_bit(t)
    if form in ("state_dict", "nested"):
        path = os.path.join(out, f"replica{r}.pt")
        torch.save(tree, path)
    elif form == "dcp":
        import torch.distributed.checkpoint as dcp
        path = os.path.join(out, f"replica{r}")
        dcp.save(tree, checkpoint_id=path)
    else:
        path = os.path.join(out, f"replica{r}")
        os.makedirs(path, exist_ok=True)
        names = sorted(tree)
        shards = [names[: len(names) // 2], names[len(names) // 2:]]
        weight_map = {}
        for i, part in enumerate(shards):
            fname = f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors"
            write_safetensors(os.path.join(path, fname), {k: tree[k] for k in part})
            weight_map.update({k: fname for k in part})
        with open(os.path.join(path, "model.safetensors.index.json"), "w") as f:
            json.dump({"metadata": {"total_size": 0}, "weight_map": weight_map}, f)
        if r == bad:
            result["file"] = weight_map[target]
    result["paths"].append(path)
print(json.dumps(result))
