"""In-job replay and recipe export for scout (man scout-replay, IN-JOB REPLAY).

The decision stays in scout: the trainer only re-executes, hashes with
scout's tensor hash (libscout_hash.so through ctypes) and publishes evidence;
`scout replay --job J --evidence DIR --cycle C` gathers and decides::

    from scout_publisher import replay
    rep = replay.InJobReplay(model, every=20, variants=3, out_dir="/shared/replay")
    for step, batch in enumerate(loader):
        loss = model(batch).sum(); loss.backward(); opt.step(); opt.zero_grad()
        rep.after_step(step)        # every 20th step: 3 sampled layers replayed

Algorithm 2 on the live model: at the cadence the sampled layers' inputs of
the step's forward are captured (a forward pre-hook that copies only while
armed), the source peer's input and an RNG seed are broadcast in the peer
group (torch.distributed, the job's own backend), each peer re-runs the layer
functionally on detached copies of its live parameters (no `.grad` touched;
RNG state saved and restored; deterministic algorithms on for the replay
only), times the broadcast, the forward and the backward, and hashes the
output, input gradient, parameter gradients and the live parameters.

Recipe export (RecipeExporter) saves, at a cadence, a sampled layer rotating
through the repeated layers as TorchScript with its captured input, RNG seed
and parameters (SRP1 tensor packs, lib/replay/pack.hpp) and a manifest.

Environment switch: SCOUT_REPLAY_DIR (evidence directory; enables
from_env()), SCOUT_REPLAY_EVERY (I, 20), SCOUT_REPLAY_VARIANTS (V, 3),
SCOUT_REPLAY_EXPORT (recipe directory), SCOUT_REPLAY_INJECT (drills, the
`scout replay --inject` grammar: sdc:peer=P,tensor=Q,word=W,bit=B and
slow:peer=P,factor=F), SCOUT_HASH_LIB (path of libscout_hash.so).
"""
import ctypes
import json
import os
import struct
import tempfile
import time

import torch

_HERE = os.path.dirname(os.path.abspath(__file__))
_DTYPE = {torch.float64: 1, torch.float32: 2, torch.float16: 3, torch.bfloat16: 4, torch.int64: 5, torch.int32: 6,
          torch.int16: 7, torch.int8: 8, torch.uint8: 9, torch.bool: 10}
QUANTITIES = ("output", "input_grad", "param_grad", "param")


class ReplayError(RuntimeError):
    pass


def _candidates():
    out = []
    if os.environ.get("SCOUT_HASH_LIB"):
        out.append(os.environ["SCOUT_HASH_LIB"])
    out.append(os.path.join(_HERE, "libscout_hash.so"))
    if os.environ.get("SCOUT_BUILD_DIR"):
        out.append(os.path.join(os.environ["SCOUT_BUILD_DIR"], "lib", "libscout_hash.so"))
    out.append(os.path.normpath(os.path.join(_HERE, "..", "..", "..", "build", "lib", "libscout_hash.so")))
    out.append(os.path.normpath(os.path.join(_HERE, "..", "..", "..", "..", "lib", "scout", "libscout_hash.so")))
    return out


_lib = None


def hash_library():
    """libscout_hash.so, loaded once (ReplayError naming what was tried)."""
    global _lib
    if _lib is None:
        errors = []
        for p in _candidates():
            if not os.path.exists(p):
                errors.append(f"{p}: absent")
                continue
            try:
                lib = ctypes.CDLL(p)
            except OSError as e:
                errors.append(f"{p}: {e}")
                continue
            lib.scout_hash_tensor.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_int64), ctypes.c_int, ctypes.c_void_p,
                                              ctypes.c_uint64, ctypes.c_uint, ctypes.POINTER(ctypes.c_uint64)]
            lib.scout_hash_tensor.restype = ctypes.c_int
            _lib = lib
            break
        if _lib is None:
            raise ReplayError("cannot load libscout_hash.so (set SCOUT_HASH_LIB); tried " + "; ".join(errors))
    return _lib


def tensor_hash(t):
    """scout's tensor evidence hash (v2) of a tensor, as an int (CPU copy for device tensors)."""
    t = t.detach()
    if t.dtype not in _DTYPE:
        raise ReplayError(f"dtype {t.dtype} has no tensor-hash code")
    t = t.to("cpu").contiguous()
    shape = (ctypes.c_int64 * max(1, t.dim()))(*t.shape)
    out = ctypes.c_uint64(0)
    nbytes = t.numel() * t.element_size()
    rc = hash_library().scout_hash_tensor(_DTYPE[t.dtype], shape, t.dim(), ctypes.c_void_p(t.data_ptr() if nbytes else 0),
                                          nbytes, 1, ctypes.byref(out))
    if rc != 0:
        raise ReplayError("scout_hash_tensor rejected a tensor")
    return out.value


def hash_list(tensors):
    """Hash of a list of tensors: the hash of the u64 vector of their hashes (as lib/replay/pack.cpp)."""
    hs = [tensor_hash(t) for t in tensors]
    v = torch.tensor([h - (1 << 64) if h >= (1 << 63) else h for h in hs], dtype=torch.int64)
    # u64 (code 15) over the same bytes as the int64 view
    shape = (ctypes.c_int64 * 1)(len(hs))
    out = ctypes.c_uint64(0)
    rc = hash_library().scout_hash_tensor(15, shape, 1, ctypes.c_void_p(v.data_ptr() if hs else 0), 8 * len(hs), 1, ctypes.byref(out))
    if rc != 0:
        raise ReplayError("scout_hash_tensor rejected a hash list")
    return out.value


def hex64(h):
    return "0x%016x" % h


def parse_inject(spec):
    """The --inject grammar for in-job replay: sdc:peer=P,tensor=Q,word=W,bit=B and slow:peer=P,factor=F."""
    kind, _, rest = spec.partition(":")
    fields = {}
    for f in filter(None, rest.split(",")):
        k, eq, v = f.partition("=")
        if not eq or not k or not v or k in fields:
            raise ValueError(f"--inject '{spec}': bad field '{f}'")
        fields[k] = v
    try:
        if kind == "sdc":
            if set(fields) - {"peer", "tensor", "word", "bit"} or fields.get("tensor") not in QUANTITIES:
                raise ValueError
            out = {"kind": "sdc", "peer": int(fields["peer"]), "tensor": fields["tensor"], "word": int(fields["word"]), "bit": int(fields["bit"])}
            if not (0 <= out["bit"] <= 63 and out["peer"] >= 0 and out["word"] >= 0):
                raise ValueError
            return out
        if kind == "slow":
            if set(fields) - {"peer", "factor"}:
                raise ValueError
            out = {"kind": "slow", "peer": int(fields["peer"]), "factor": float(fields["factor"])}
            if not (out["factor"] > 1 and out["peer"] >= 0):
                raise ValueError
            return out
    except (KeyError, ValueError):
        pass
    raise ValueError(f"--inject '{spec}': use sdc:peer=P,tensor=output|input_grad|param_grad|param,word=W,bit=B or slow:peer=P,factor=F")


def _flip(tensors, word, bit):
    """Flips bit `bit` of 64-bit word `word` (mod the count) of the tensors taken as one word sequence (copies)."""
    tensors = [t.detach().to("cpu").contiguous().clone() for t in tensors]
    views = [t.reshape(-1).view(torch.uint8) for t in tensors]
    words = [(v.numel() + 7) // 8 for v in views]
    total = sum(words)
    if total == 0:
        return tensors, None
    w = word % total
    for i, (v, n) in enumerate(zip(views, words)):
        if w < n:
            byte = w * 8 + bit // 8
            b = bit % 8
            if byte >= v.numel():
                valid = (v.numel() - w * 8) * 8
                bit = bit % valid
                byte, b = w * 8 + bit // 8, bit % 8
            v[byte] ^= (1 << b)
            return tensors, {"tensor": i, "tensor_word": w, "bit": bit}
        w -= n
    return tensors, None


def _atomic_write(path, text, durable=False):
    """Write-then-rename, so a reader never sees a partial file (fsync only when `durable`)."""
    d = os.path.dirname(path)
    os.makedirs(d, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=d, prefix=".tmp-")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
            f.flush()
            if durable:
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def repeated_layers(model):
    """The model's repeated layers: the longest ModuleList/Sequential of same-type children."""
    best = []
    for m in model.modules():
        if isinstance(m, (torch.nn.ModuleList, torch.nn.Sequential)):
            kids = list(m.children())
            if len(kids) >= 2 and len({type(k) for k in kids}) == 1 and len(kids) > len(best):
                best = kids
    if not best:
        best = [model]
    return best


def _functional_call(module, params, args):
    try:
        from torch.func import functional_call  # torch >= 2.0
    except ImportError:
        from torch.nn.utils.stateless import functional_call
    return functional_call(module, params, args)


class _Capture:
    """Forward pre-hooks that copy the sampled layers' first input while armed."""

    def __init__(self, layers):
        self.layers = layers
        self.armed = set()
        self.inputs = {}
        self.handles = [l.register_forward_pre_hook(self._hook(i)) for i, l in enumerate(layers)]

    def _hook(self, i):
        def hook(_module, args):
            if i in self.armed and args and torch.is_tensor(args[0]):
                self.inputs[i] = args[0].detach().clone()
        return hook

    def remove(self):
        for h in self.handles:
            h.remove()


class InJobReplay:
    """V variants every I steps on the live model; evidence for `scout replay --evidence`."""

    def __init__(self, model, every=20, variants=3, out_dir=None, job=None, layers=None, group=None, source=0,
                 inject=None, cycle_offset=0):
        if every < 1 or variants < 1:
            raise ValueError("every and variants must be at least 1")
        import torch.distributed as dist
        self.dist = dist
        self.model = model
        self.every, self.variants = int(every), int(variants)
        self.layers = layers or repeated_layers(model)
        self.group = group
        self.source = source
        self.out_dir = out_dir
        self.job = job or os.environ.get("SCOUT_JOB") or "job"
        self.inject = [parse_inject(s) for s in (inject or [])]
        self.cycle = cycle_offset
        self.capture = _Capture(self.layers)
        self.names = {id(m): n for n, m in model.named_modules()}
        self.peer = dist.get_rank(group) if dist.is_initialized() else 0
        self.peers = dist.get_world_size(group) if dist.is_initialized() else 1
        self.rank = dist.get_rank() if dist.is_initialized() else 0
        self.seconds = 0.0   # time spent replaying (for overhead figures)
        self.cycles = 0

    def _sampled(self, cycle):
        n = len(self.layers)
        return sorted({(cycle * self.variants + v) % n for v in range(min(self.variants, n))})

    def before_step(self, step):
        """Arm the capture for this step's forward when it is a replay step (call before the forward)."""
        self.capture.armed = set(self._sampled(step // self.every)) if step % self.every == 0 else set()
        self.capture.inputs.clear()

    def after_step(self, step):
        """Replay the armed layers (call after the optimizer step); returns the evidence path or None."""
        if step % self.every != 0 or not self.capture.armed:
            return None
        t0 = time.perf_counter()
        cycle = step // self.every + self.cycle
        recipes = []
        for i in sorted(self.capture.armed):
            recipes.append(self._replay_layer(i))
        self.capture.armed = set()
        self.capture.inputs.clear()
        evidence = {"schema": "scout.replay.evidence", "schema_version": "1.0", "peer": self.peer, "rank": self.rank,
                    "node": os.uname().nodename, "recipes": recipes}
        path = None
        if self.out_dir:
            path = os.path.join(self.out_dir, self.job, f"cycle-{cycle}", f"peer-{self.peer}.json")
            _atomic_write(path, json.dumps(evidence))
        self.seconds += time.perf_counter() - t0
        self.cycles += 1
        return path

    def _replay_layer(self, i):
        dist = self.dist
        layer = self.layers[i]
        name = self.names.get(id(layer), f"layer{i}")
        x = self.capture.inputs.get(i)
        rec = {"recipe": f"layer:{name}", "error": "", "injected": [], "gather_s": 0.0, "forward_s": 0.0, "backward_s": 0.0,
               "hashes": {}, "input_hash": hex64(0)}
        params = dict(layer.named_parameters())
        contract = {"recipe": f"layer:{name}", "layer_type": type(layer).__name__, "torch": torch.__version__.split("+")[0],
                    "device": str(next(iter(params.values())).device) if params else "cpu",
                    "deterministic_algorithms": True, "threads": torch.get_num_threads(),
                    "params": [{"name": n, "dtype": str(p.dtype), "shape": list(p.shape)} for n, p in params.items()]}
        if x is None:
            rec["contract"] = contract
            rec["error"] = "the layer's input was not captured (call before_step before the forward)"
            return rec
        contract["inputs"] = [{"name": "x", "dtype": str(x.dtype), "shape": list(x.shape)}]
        rec["contract"] = contract
        # The source's input and RNG seed, broadcast in the peer group.
        seed = torch.tensor([0], dtype=torch.int64)
        if self.peer == self.source:
            seed[0] = int.from_bytes(os.urandom(7), "little")
        x = x.contiguous()
        if dist.is_initialized() and self.peers > 1:
            src = dist.get_global_rank(self.group, self.source) if self.group is not None and hasattr(dist, "get_global_rank") else self.source
            dist.broadcast(seed, src=src, group=self.group)  # also lines the peers up before the timed transfer
            t = time.perf_counter()
            dist.broadcast(x, src=src, group=self.group)
            rec["gather_s"] = time.perf_counter() - t
        rng = torch.tensor([int(seed[0]), 0], dtype=torch.int64)
        rec["input_hash"] = hex64(hash_list([x, rng]))
        slow = max([j["factor"] for j in self.inject if j["kind"] == "slow" and j["peer"] == self.peer] or [1.0])
        det = torch.are_deterministic_algorithms_enabled()
        devices = [x.device] if x.device.type == "cuda" else []
        try:
            torch.use_deterministic_algorithms(True)
            with torch.random.fork_rng(devices=devices):
                torch.manual_seed(int(seed[0]))
                live = {n: p.detach().clone().requires_grad_(p.requires_grad) for n, p in params.items()}
                xin = x.detach().clone().requires_grad_(x.is_floating_point())
                t = time.perf_counter()
                out = _functional_call(layer, live, (xin,))
                if isinstance(out, (tuple, list)):
                    out = out[0]
                if slow > 1:
                    time.sleep((time.perf_counter() - t) * (slow - 1))
                rec["forward_s"] = time.perf_counter() - t
                g = torch.empty_like(out).uniform_(-1, 1)
                t = time.perf_counter()
                wrt = ([xin] if xin.requires_grad else []) + [p for p in live.values() if p.requires_grad]
                grads = torch.autograd.grad((out * g).sum(), wrt, allow_unused=True)
                if slow > 1:
                    time.sleep((time.perf_counter() - t) * (slow - 1))
                rec["backward_s"] = time.perf_counter() - t
        finally:
            torch.use_deterministic_algorithms(det)
        grads = [gr if gr is not None else torch.zeros(0) for gr in grads]
        q = {"output": [out], "input_grad": grads[:1] if xin.requires_grad else [],
             "param_grad": grads[1:] if xin.requires_grad else grads, "param": [p.detach() for p in params.values()]}
        for j in self.inject:
            if j["kind"] == "sdc" and j["peer"] == self.peer and q.get(j["tensor"]):
                q[j["tensor"]], where = _flip(q[j["tensor"]], j["word"], j["bit"])
                if where:
                    rec["injected"].append({"kind": "sdc", "quantity": j["tensor"], **where})
        rec["hashes"] = {k: hex64(hash_list(v)) for k, v in q.items() if v}
        return rec

    def close(self):
        self.capture.remove()


class RecipeExporter:
    """Saves a sampled layer (rotating through the repeated layers) as a replay recipe every `every` steps."""

    def __init__(self, model, directory, every=20, layers=None, exporting_rank=0):
        import torch.distributed as dist
        self.model, self.directory, self.every = model, directory, int(every)
        # One rank exports (replicas hold the same layer); the others only keep the cadence.
        self.active = (dist.get_rank() if dist.is_initialized() else 0) == exporting_rank
        self.layers = layers or repeated_layers(model)
        self.capture = _Capture(self.layers)
        self.names = {id(m): n for n, m in model.named_modules()}
        self.seconds = 0.0
        self.exported = []

    def before_step(self, step):
        self.capture.armed = {(step // self.every) % len(self.layers)} if self.active and step % self.every == 0 else set()
        self.capture.inputs.clear()

    def after_step(self, step):
        if step % self.every != 0 or not self.capture.armed:
            return None
        t0 = time.perf_counter()
        i = next(iter(self.capture.armed))
        x = self.capture.inputs.get(i)
        self.capture.armed = set()
        if x is None:
            return None
        layer = self.layers[i]
        name = self.names.get(id(layer), f"layer{i}")
        out = os.path.join(self.directory, f"step-{step:08d}-{name.replace('.', '_') or 'model'}")
        os.makedirs(out, exist_ok=True)
        seed = int.from_bytes(os.urandom(7), "little")
        devices = [x.device] if x.device.type == "cuda" else []
        with torch.random.fork_rng(devices=devices), torch.no_grad():
            torch.manual_seed(seed)
            import copy
            clone = copy.deepcopy(layer)
            for p in clone.parameters():
                p.requires_grad_(False)
            scripted = torch.jit.trace(clone, (x,), check_trace=False)
        scripted.save(os.path.join(out, "module.pt"))
        params = {n: p.detach() for n, p in layer.named_parameters()}
        _atomic_write_bytes(os.path.join(out, "input.pack"), encode_pack({"x": x, "rng": torch.tensor([seed, 0], dtype=torch.int64)}))
        _atomic_write_bytes(os.path.join(out, "params.pack"), encode_pack(params))
        manifest = {"schema": "scout.replay.recipe", "schema_version": "1.0", "layer": name, "layer_type": type(layer).__name__,
                    "step": step, "torch": torch.__version__.split("+")[0], "rng_seed": str(seed),
                    "inputs": [{"name": "x", "dtype": str(x.dtype), "shape": list(x.shape)}],
                    "params": [{"name": n, "dtype": str(p.dtype), "shape": list(p.shape)} for n, p in params.items()],
                    "quantities": list(QUANTITIES),
                    "hashes": {"input": hex64(tensor_hash(x)), "params": hex64(hash_list(list(params.values())))}}
        _atomic_write(os.path.join(out, "manifest.json"), json.dumps(manifest, indent=1))
        self.capture.inputs.clear()
        self.seconds += time.perf_counter() - t0
        self.exported.append(out)
        return out

    def close(self):
        self.capture.remove()


def encode_pack(tensors):
    """SRP1 tensor pack (lib/replay/pack.hpp) of an ordered name -> tensor mapping."""
    parts = [b"SRP1", struct.pack("<I", len(tensors))]
    for name, t in tensors.items():
        t = t.detach().to("cpu").contiguous()
        nb = name.encode()
        data = t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b""
        parts += [struct.pack("<H", len(nb)), nb, struct.pack("<BB", _DTYPE[t.dtype], t.dim())]
        parts += [struct.pack("<q", d) for d in t.shape]
        parts += [struct.pack("<Q", len(data)), data]
    return b"".join(parts)


def _atomic_write_bytes(path, data):
    d = os.path.dirname(path)
    fd, tmp = tempfile.mkstemp(dir=d, prefix=".tmp-")
    with os.fdopen(fd, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def from_env(model, group=None):
    """InJobReplay / RecipeExporter configured from SCOUT_REPLAY_* (None, None when unset)."""
    rep = exp = None
    every = int(os.environ.get("SCOUT_REPLAY_EVERY", "20"))
    if os.environ.get("SCOUT_REPLAY_DIR"):
        inject = [s for s in os.environ.get("SCOUT_REPLAY_INJECT", "").split(";") if s]
        rep = InJobReplay(model, every=every, variants=int(os.environ.get("SCOUT_REPLAY_VARIANTS", "3")),
                          out_dir=os.environ["SCOUT_REPLAY_DIR"], group=group, inject=inject)
    if os.environ.get("SCOUT_REPLAY_EXPORT"):
        exp = RecipeExporter(model, os.environ["SCOUT_REPLAY_EXPORT"], every=every)
    return rep, exp
