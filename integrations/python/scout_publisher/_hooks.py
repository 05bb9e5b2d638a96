"""Collective capture through torch's ProcessGroup pre/post hooks (torch >= 2.15).

torch 2.15 fires ProcessGroup pre/post hooks from the c10d dispatcher kernels,
so every collective issued through a group is seen, whoever issued it: eager
calls in every argument form, point-to-point ops, _coalescing_manager batches,
DDP's C++ Reducer, FSDP2, functional collectives / DTensor, pipelining
schedules and torch.compile'd graphs. Nothing of torch is replaced: no
function wrapper, no DDP comm hook, no graph break.

Two implementations of the same hooks:
- "native": libscout_torch_hooks.so (lib/torch_module/hooks/), built against
  this very torch, registers C++ hooks that call libscout_publisher.so
  directly; no GIL, no Python per event.
- "python": Python callables registered with ProcessGroup.register_pre_hook /
  register_post_hook (when the native library is missing or was built for
  another torch).

Exit is published when the operation completes (the Work's future on gloo;
backend completion hooks where the backend has them, e.g. NCCL), never at
issue; a failed operation publishes no exit.

Every group this rank belongs to is attached when it is registered
(distributed_c10d._register_pg_in_world, the one place torch 2.15 records a
new group) and by a sweep of the groups torch knows (at install, after
init_process_group, at each optimizer step).
"""
import ctypes
import os
import threading

import torch
import torch.distributed as dist
from torch.distributed import distributed_c10d as c10d

from . import _lib

HOOK_ID = 0x5C0         # the native library's id (hooks fire in id order)
PY_HOOK_ID = 0x5C1      # the Python implementation's
TEST_HOOK_ID = 0x5C2    # set_after_enter_hook's (after the enter is published)

_state = {"mode": None, "native": None, "pub": None, "after_enter": None}
_attached = set()
_attach_lock = threading.Lock()
_originals = []
_py_counts = [0] * 16
P2P_MARK = -2
# One call counter per scout group id, shared by the process groups with that id (as the native
# library's g_counters and 1.13's _torch._next_seq): groups over the same members ("twins", e.g.
# DeepSpeed's model group over the whole world beside the default group) have one id, so they
# count their calls together and (gid, seq) names one call on every member. Point-to-point pairs
# alike (a pair's id is the same in every group holding both ranks).
_seqs = {}
_seqs_lock = threading.Lock()


def _next_seq(gid):
    with _seqs_lock:
        seq = _seqs.get(gid, 0) + 1
        _seqs[gid] = seq
        return seq


def supported():
    """Whether this torch fires ProcessGroup pre/post hooks."""
    return hasattr(dist.ProcessGroup, "register_pre_hook") and hasattr(dist.ProcessGroup, "register_post_hook")


def hooks_library_candidates():
    out = []
    if os.environ.get("SCOUT_TORCH_HOOKS_LIB"):
        out.append(os.environ["SCOUT_TORCH_HOOKS_LIB"])
    pub = os.environ.get("SCOUT_PUBLISHER_LIB")
    if pub:
        out.append(os.path.join(os.path.dirname(pub), "libscout_torch_hooks.so"))
    here = os.path.dirname(os.path.abspath(__file__))
    out.append(os.path.join(here, "libscout_torch_hooks.so"))
    if os.environ.get("SCOUT_BUILD_DIR"):
        out.append(os.path.join(os.environ["SCOUT_BUILD_DIR"], "lib", "libscout_torch_hooks.so"))
    out.append(os.path.normpath(os.path.join(here, "..", "..", "..", "build", "lib", "libscout_torch_hooks.so")))
    out.append(os.path.normpath(os.path.join(here, "..", "..", "..", "..", "lib", "libscout_torch_hooks.so")))
    return out


def _load_native():
    """The native hooks library if one built for this torch is found, else (None, why)."""
    want = torch.__version__.split("+")[0]
    why = []
    for path in hooks_library_candidates():
        if not os.path.exists(path):
            continue
        try:
            lib = ctypes.CDLL(path)
        except OSError as e:
            why.append(f"{path}: {e}")
            continue
        lib.scout_hooks_torch_version.restype = ctypes.c_char_p
        built = lib.scout_hooks_torch_version().decode().split("+")[0]
        if built != want:
            why.append(f"{path} was built for torch {built}, this is {want}")
            continue
        lib.scout_hooks_set_sink.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
        if hasattr(lib, "scout_hooks_set_fail"):
            lib.scout_hooks_set_fail.argtypes = [ctypes.c_void_p]
        if hasattr(lib, "scout_hooks_set_exit_kind"):
            lib.scout_hooks_set_exit_kind.argtypes = [ctypes.c_void_p]
        lib.scout_hooks_attach.argtypes = [ctypes.c_char_p, ctypes.c_uint64, ctypes.POINTER(ctypes.c_int64),
                                           ctypes.c_size_t, ctypes.c_char_p, ctypes.c_size_t]
        lib.scout_hooks_stats.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.c_size_t]
        lib.scout_hooks_stats.restype = ctypes.c_size_t
        lib.scout_hooks_bench.argtypes = [ctypes.c_uint64]
        lib.scout_hooks_bench.restype = ctypes.c_double
        return lib, ""
    return None, "; ".join(why) or "libscout_torch_hooks.so not found (set SCOUT_TORCH_HOOKS_LIB)"


def _group_ranks(pg, rank_mapping=None):
    if rank_mapping:
        return [g for g, _ in sorted(rank_mapping.items(), key=lambda kv: kv[1])]
    return list(dist.get_process_group_ranks(pg))


_TYPES = {"SEND": 13, "RECV": 14, "BROADCAST": 8, "ALLREDUCE": 1, "REDUCE": 9, "ALLGATHER": 2,
          "REDUCE_SCATTER": 4, "ALLTOALL": 6, "BARRIER": 12, "SCATTER": 11, "GATHER": 10,
          "ALLREDUCE_COALESCED": 1, "ALLGATHER_BASE": 3, "ALLGATHER_COALESCED": 2,
          "ALLGATHER_INTO_TENSOR_COALESCED": 3, "REDUCE_SCATTER_BASE": 5, "REDUCE_SCATTER_TENSOR_COALESCED": 5,
          "ALLTOALL_BASE": 7, "UNKNOWN": 15}
_DTYPES = {torch.float64: 1, torch.float32: 2, torch.float16: 3, torch.bfloat16: 4, torch.int64: 5, torch.int32: 6,
           torch.int16: 7, torch.int8: 8, torch.uint8: 9, torch.bool: 10}


class _PyGroup:
    """The Python implementation of scout's hooks for one group."""

    def __init__(self, pub, gid, ranks, me):
        self.pub, self.gid, self.ranks = pub, gid, ranks
        self.p2p_gid = [_lib.group_id(pub.lib, [min(me, r), max(me, r), P2P_MARK]) for r in ranks]
        self.open = {}

    def pre(self, a):
        pub = _state["pub"]
        if pub is None:
            return
        name = a.name.name
        ctype = _TYPES.get(name, 15)
        if name in ("SPLIT", "NEW_WINDOW"):
            return
        ts = a.input_tensors or a.output_tensors
        count = sum(int(t.numel()) for t in ts)
        dtype = _DTYPES.get(ts[0].dtype, 0) if ts else 0
        root = a.root
        gid = self.p2p_gid[root] if ctype in (13, 14) and 0 <= root < len(self.ranks) else self.gid
        seq = _next_seq(gid)
        glob = self.ranks[root] if 0 <= root < len(self.ranks) else -1
        token = pub.record.enter(gid, ctype, dtype, count, glob, seq)
        _py_counts[ctype] += 1
        self.open[(threading.get_ident(), a.op_id)] = token

    def post(self, a):
        token = self.open.pop((threading.get_ident(), a.op_id), 0)
        pub = _state["pub"]
        if not token or pub is None:
            return
        record = pub.record
        if a.work is None:
            record.exit(token)
            return
        try:
            fut = a.work.get_future()
        except Exception:
            record.exit(token)
            return

        def done(f):
            try:
                f.value()
            except Exception:
                record.fail(token)  # completed with an error: "failed", distinct from done
                return
            record.exit(token)

        try:
            fut.add_done_callback(done)
        except Exception:
            record.exit(token)


def _after_enter(a):
    fn = _state["after_enter"]
    if fn is not None and a.name.name not in ("SPLIT", "NEW_WINDOW"):
        fn(a.name.name.lower())


def attach(pg, rank_mapping=None):
    """Attaches scout's hooks to `pg` once. Returns True when attached now."""
    pub = _state["pub"]
    if pub is None or pg is None or pg is c10d.GroupMember.NON_GROUP_MEMBER:
        return False
    try:
        name = pg.group_name
    except Exception:
        return False
    with _attach_lock:
        if name in _attached:
            return False
        try:
            ranks = _group_ranks(pg, rank_mapping)
        except Exception:
            return False  # not fully registered yet: a later sweep attaches it
        gid = _lib.group_id(pub.lib, ranks)
        if _state["mode"] == "native":
            lib = _state["native"]
            arr = (ctypes.c_int64 * len(ranks))(*ranks)
            err = ctypes.create_string_buffer(512)
            rc = lib.scout_hooks_attach(name.encode(), gid, arr, len(ranks), err, 512)
            if rc < 0:
                return False
        else:
            me = ranks[pg.rank()] if 0 <= pg.rank() < len(ranks) else -1
            g = _PyGroup(pub, gid, ranks, me)
            pg.register_pre_hook(PY_HOOK_ID, g.pre)
            pg.register_post_hook(PY_HOOK_ID, g.post)
        if _state["after_enter"] is not None:
            pg.register_pre_hook(TEST_HOOK_ID, _after_enter)
        _attached.add(name)
        return True


def sweep():
    """Attaches every group torch knows that is not attached yet."""
    if _state["pub"] is None or not dist.is_initialized():
        return
    for pg in list(c10d._world.pg_map.keys()):
        try:
            attach(pg, c10d._world.pg_group_ranks.get(pg))
        except Exception:
            pass


def _patch(owner, name, new):
    _originals.append((owner, name, getattr(owner, name)))
    setattr(owner, name, new)


def install(pub, mode="auto"):
    """Installs capture through the hooks; returns the mode used ("native" or
    "python"), or None when this torch has no such hooks."""
    if not supported():
        return None
    _state["pub"] = pub
    if _state["mode"] is not None:
        _set_sink(pub)
        sweep()
        return _state["mode"]
    chosen = "python"
    if mode in ("auto", "native"):
        lib, why = _load_native()
        if lib is not None:
            _state["native"] = lib
            chosen = "native"
        elif mode == "native":
            raise RuntimeError(f"SCOUT_PUBLISHER_HOOKS=native but {why}")
        else:
            _state["why_python"] = why
    _state["mode"] = chosen
    _set_sink(pub)

    orig_register = c10d._register_pg_in_world

    def _register_pg_in_world(pg, *args, **kwargs):
        result = orig_register(pg, *args, **kwargs)
        try:
            attach(pg, kwargs.get("rank_mapping"))
        except Exception:
            pass
        return result

    _patch(c10d, "_register_pg_in_world", _register_pg_in_world)
    # new_group's path registers the group before it records the group's
    # ranks: attach when the helper returns, from the ranks it was given.
    orig_helper = c10d._new_process_group_helper

    def _new_process_group_helper(*args, **kwargs):
        result = orig_helper(*args, **kwargs)
        try:
            size = kwargs.get("group_size", args[0] if args else None)
            ranks = kwargs.get("global_ranks_in_group", args[2] if len(args) > 2 else None)
            ranks = list(ranks) if ranks else list(range(int(size)))
            attach(result[0], {g: i for i, g in enumerate(ranks)})
        except Exception:
            pass
        return result

    _patch(c10d, "_new_process_group_helper", _new_process_group_helper)
    orig_init = c10d.init_process_group

    def init_process_group(*args, **kwargs):
        result = orig_init(*args, **kwargs)
        sweep()
        return result

    import functools
    functools.update_wrapper(init_process_group, orig_init)
    _patch(c10d, "init_process_group", init_process_group)
    if dist.init_process_group is orig_init:
        _patch(dist, "init_process_group", init_process_group)
    sweep()
    return chosen


def _set_sink(pub):
    lib = _state["native"]
    if lib is None:
        return
    if pub is None:
        lib.scout_hooks_set_sink(None, None, None)
        if hasattr(lib, "scout_hooks_set_exit_kind"):
            lib.scout_hooks_set_exit_kind(None)
        return
    plib = pub.lib
    enter = ctypes.cast(plib.scout_collective_enter, ctypes.c_void_p).value
    exit_ = ctypes.cast(plib.scout_collective_exit, ctypes.c_void_p).value
    lib.scout_hooks_set_sink(pub.record._handle.value, enter, exit_)
    if hasattr(lib, "scout_hooks_set_fail"):
        lib.scout_hooks_set_fail(ctypes.cast(plib.scout_collective_fail, ctypes.c_void_p).value)
    if hasattr(lib, "scout_hooks_set_exit_kind") and hasattr(plib, "scout_collective_exit_kind"):
        lib.scout_hooks_set_exit_kind(ctypes.cast(plib.scout_collective_exit_kind, ctypes.c_void_p).value)


def uninstall():
    """Stops publishing; the hooks stay registered and do nothing."""
    _state["pub"] = None
    _set_sink(None)


def set_after_enter(fn):
    """Testing: fn(op name) runs after scout's pre-hook published the enter."""
    first = _state["after_enter"] is None and fn is not None
    _state["after_enter"] = fn
    if first and _state["mode"] is not None:
        for pg in list(c10d._world.pg_map.keys()):
            try:
                if pg.group_name in _attached:
                    pg.register_pre_hook(TEST_HOOK_ID, _after_enter)
            except Exception:
                pass


def mode():
    return _state["mode"]


COUNT_NAMES = ("none", "all_reduce", "all_gather", "all_gather_into_tensor", "reduce_scatter", "reduce_scatter_tensor",
               "all_to_all", "all_to_all_single", "broadcast", "reduce", "gather", "scatter", "barrier", "send", "recv",
               "other")


def counts():
    """Collectives published by the hooks of this process, by scout kind name
    (a coalesced batch is one, as in the record and torch's Flight Recorder),
    plus exits_completed / exits_at_issue / failed / hook_errors / exits_waited / exits_by_order (native only)."""
    out = {}
    if _state["mode"] == "native":
        arr = (ctypes.c_uint64 * 22)()
        got = _state["native"].scout_hooks_stats(arr, 22)
        vals = list(arr)
        for i, n in enumerate(COUNT_NAMES):
            if vals[i]:
                out[n] = vals[i]
        out.update(exits_completed=vals[16], exits_at_issue=vals[17], failed=vals[18], hook_errors=vals[19])
        if got > 21:
            out.update(exits_waited=vals[20], exits_by_order=vals[21])
    else:
        for i, n in enumerate(COUNT_NAMES):
            if _py_counts[i]:
                out[n] = _py_counts[i]
    return out
