"""PyTorch hooks of scout_publisher: no change to the training loop.

Collectives, two ways (chosen at install, SCOUT_PUBLISHER_HOOKS=auto|native|python|wrappers):

- torch with ProcessGroup pre/post hooks (2.15+): _hooks.py. Every collective
  of every group (eager calls in all argument forms, point-to-point,
  _coalescing_manager, DDP's Reducer, FSDP2, functional collectives /
  DTensor, pipelining, torch.compile'd graphs) is published from the c10d
  dispatcher kernels, natively (libscout_torch_hooks.so) or by Python hooks;
  exit at completion. No torch function is replaced, DDP is left alone.
- older torch (Debian's 1.13): torch.distributed collectives and
  point-to-point calls (both `torch.distributed.X` and `distributed_c10d.X`,
  so helpers such as all_gather_object are seen too) are wrapped: enter is
  published before the call, exit when it returns, or, with async_op=True,
  when its Work's future completes. A collective that raises, or whose
  Work/future completes with an error (what wait() raises), is published as
  failed (see _finish), not done, and its exception goes to the caller
  unchanged; a wrapper never changes what the call does. Calls
  nested in a wrapped call on the same thread (e.g. _all_gather_base ->
  all_gather_into_tensor) are published once. Names bound before enable()
  (`from torch.distributed import all_reduce`) are not wrapped. DDP's
  built-in gradient all-reduce runs in C++ and is invisible on such a torch:
  a comm hook the user registers is wrapped, and without one the default
  all-reduce hook is registered at the first forward (1.13 only; 2.15+
  never replaces DDP's C++ communication).

- Phases: global module forward pre/post hooks mark `forward` at the
  outermost module call; a gradient hook on its outputs marks `backward`;
  every optimizer's step marks `optimizer` and then begins the next step;
  DataLoader iterators mark `dataloader` while fetching, `idle` after.

Fingerprint: process group id = scout_group_id(global ranks in group order),
collective type, scout dtype code, element count of the rank's tensor
argument (list inputs: the sum), root (global rank) for rooted collectives,
the reduce op code otherwise (wrappers only; the hooks do not see the op:
-1), and a per-group sequence number counted here. Point-to-point ops use
the pair's own id, scout_group_id([lo, hi, -2]), with a per-pair sequence, so
that ranks outside the pair keep one sequence per process group.

The sequence is counted per group id (_next_seq), not per process group
object: process groups over the same members ("twins", e.g. a new_group over
the whole world beside the default group) have one id and count their calls
together, so (id, seq) names one call on every member provided the members
issue their calls on the twins in the same order (blocking calls must). The
torch 2.x hooks count the same way (_hooks._next_seq, the native library's
g_counters).
"""
import functools
import inspect
import os
import threading

import torch
import torch.distributed as dist
from torch.distributed import distributed_c10d as c10d

from . import _lib

after_enter_hook = None  # testing: called with the collective's name after enter is published

_DTYPES = {torch.float64: 1, torch.float32: 2, torch.float16: 3, torch.bfloat16: 4, torch.int64: 5, torch.int32: 6,
           torch.int16: 7, torch.int8: 8, torch.uint8: 9, torch.bool: 10}
_OP_NAMES = (("SUM", 0), ("PRODUCT", 1), ("MIN", 2), ("MAX", 3), ("BAND", 4), ("BOR", 5), ("BXOR", 6), ("AVG", 7),
             ("PREMUL_SUM", 8))
_OPS = [(getattr(dist.ReduceOp, n), code) for n, code in _OP_NAMES if hasattr(dist.ReduceOp, n)]

# name -> (scout type, tensor parameter, "numel" | "list", root parameter, op parameter)
_SPECS = {
    "all_reduce": ("all_reduce", "tensor", "numel", None, "op"),
    "all_gather": ("all_gather", "tensor", "numel", None, None),
    "all_gather_into_tensor": ("all_gather_into_tensor", "input_tensor", "numel", None, None),
    "_all_gather_base": ("all_gather_into_tensor", "input_tensor", "numel", None, None),
    "reduce_scatter": ("reduce_scatter", "output", "numel", None, "op"),
    "reduce_scatter_tensor": ("reduce_scatter_tensor", "input", "numel", None, "op"),
    "_reduce_scatter_base": ("reduce_scatter_tensor", "input", "numel", None, "op"),
    "all_to_all": ("all_to_all", "input_tensor_list", "list", None, None),
    "all_to_all_single": ("all_to_all_single", "input", "numel", None, None),
    "broadcast": ("broadcast", "tensor", "numel", "src", None),
    "reduce": ("reduce", "tensor", "numel", "dst", None),
    "gather": ("gather", "tensor", "numel", "dst", None),
    "scatter": ("scatter", "tensor", "numel", "src", None),
    "barrier": ("barrier", None, None, None, None),
    "send": ("send", "tensor", "numel", "dst", None),
    "recv": ("recv", "tensor", "numel", "src", None),
    "isend": ("send", "tensor", "numel", "dst", None),
    "irecv": ("recv", "tensor", "numel", "src", None),
}
_P2P = ("send", "recv")
P2P_MARK = -2

_pub = None
_tls = threading.local()
_seq_lock = threading.Lock()
_group_seq = {}
_group_ids = {}
_originals = []  # (module, name, original)
_module_hooks = []
_installed = False
_mode = None  # "native" | "python" (ProcessGroup hooks, _hooks.py) | "wrappers"


def wrapped_names():
    """The torch.distributed functions this torch has and the publisher wraps."""
    return sorted(n for n in _SPECS if hasattr(c10d, n))


def _op_code(op):
    for value, code in _OPS:
        if op is value:
            return code
    for value, code in _OPS:
        try:
            if op == value:
                return code
        except Exception:
            pass
    return 15


def _group_ranks(group):
    if group is None or group is c10d.GroupMember.WORLD:
        return list(range(dist.get_world_size()))
    try:
        return list(dist.get_process_group_ranks(group))
    except Exception:
        mapping = c10d._pg_group_ranks.get(group, {})
        return [g for g, _ in sorted(mapping.items(), key=lambda kv: kv[1])]


def _group_id(group):
    key = id(group) if group is not None else 0
    gid = _group_ids.get(key)
    if gid is None:
        gid = _lib.group_id(_pub.lib, _group_ranks(group))
        _group_ids[key] = gid
    return gid


def _pair_id(a, b):
    key = ("p2p", min(a, b), max(a, b))
    gid = _group_ids.get(key)
    if gid is None:
        gid = _lib.group_id(_pub.lib, [min(a, b), max(a, b), P2P_MARK])
        _group_ids[key] = gid
    return gid


def _next_seq(gid):
    with _seq_lock:
        seq = _group_seq.get(gid, 0) + 1
        _group_seq[gid] = seq
        return seq


def _numel(t):
    try:
        return int(t.numel())
    except Exception:
        return 0


def _dtype(t):
    return _DTYPES.get(getattr(t, "dtype", None), 0)


def _finish(record, token, fut=None, failed=False):
    """Publishes the end of the collective entered with `token`: failed when
    the call raised (`failed`) or its future `fut` completed with an error
    (its Work's wait() raises), done otherwise. Returns nothing; never raises."""
    if fut is not None and not failed:
        try:
            fut.value()
        except BaseException:
            failed = True
    if failed:
        record.fail(token)
    else:
        record.exit(token, "completed" if fut is not None else None)


def _exit_when_done(work, token):
    """Publishes the end of an async collective when its Work completes."""
    record = _pub.record
    try:
        fut = work.get_future()
        fut.then(lambda f: _finish(record, token, f))
    except Exception:
        record.exit(token)  # no future on this backend: completion cannot be observed


def _wrap_collective(name, fn):
    ctype_name, tensor_param, count_kind, root_param, op_param = _SPECS[name]
    ctype = _lib.COLLECTIVES[ctype_name]
    sig = inspect.signature(fn)
    params = list(sig.parameters)
    defaults = {k: p.default for k, p in sig.parameters.items()}

    position = {p: i for i, p in enumerate(params)}
    empty = inspect.Parameter.empty

    def arg(args, kwargs, pname):
        if kwargs and pname in kwargs:
            return kwargs[pname]
        i = position.get(pname, -1)
        if 0 <= i < len(args):
            return args[i]
        d = defaults.get(pname)
        return None if d is empty else d

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        pub = _pub
        if pub is None or getattr(_tls, "inside", False):
            return fn(*args, **kwargs)
        try:
            group = arg(args, kwargs, "group")
            skip = group is not None and c10d._rank_not_in_group(group)
        except Exception:
            skip = True
        if skip:
            return fn(*args, **kwargs)
        try:
            count, dtype = 0, 0
            if tensor_param is not None:
                t = arg(args, kwargs, tensor_param)
                if count_kind == "list":
                    count = sum(_numel(x) for x in (t or []))
                    dtype = _dtype(t[0]) if t else 0
                else:
                    count, dtype = _numel(t), _dtype(t)
            root_or_op = -1
            if root_param is not None:
                root = arg(args, kwargs, root_param)
                if root is None and ("group_" + root_param) in position:
                    # 2.x forms: group_src / group_dst name the root by its rank in `group`.
                    local = arg(args, kwargs, "group_" + root_param)
                    if local is not None:
                        root = c10d.get_global_rank(group if group is not None else c10d.GroupMember.WORLD, int(local))
                root_or_op = int(root) if root is not None else -1
            elif op_param is not None:
                root_or_op = _op_code(arg(args, kwargs, op_param))
            if ctype_name in _P2P:
                me = dist.get_rank()
                peer = root_or_op if root_or_op >= 0 else me
                gid = _pair_id(me, peer)
            else:
                gid = _group_id(group)
            token = pub.record.enter(gid, ctype, dtype, count, root_or_op, _next_seq(gid))
            async_op = bool(arg(args, kwargs, "async_op")) or name in ("isend", "irecv")
        except Exception:  # a malformed call: let torch report it, publish nothing
            return fn(*args, **kwargs)
        if after_enter_hook is not None:
            after_enter_hook(name)
        _tls.inside = True
        try:
            result = fn(*args, **kwargs)
        except BaseException:
            _finish(pub.record, token, failed=True)
            raise
        finally:
            _tls.inside = False
        if async_op and result is not None and hasattr(result, "get_future"):
            _exit_when_done(result, token)
        else:
            pub.record.exit(token)
        return result

    wrapper.__scout_wrapped__ = fn
    return wrapper


def _wrap_comm_hook(hook, ddp):
    """A DDP comm hook that publishes each bucket's all-reduce around `hook`."""

    @functools.wraps(hook)
    def wrapped(state, bucket):
        pub = _pub
        if pub is None:
            return hook(state, bucket)
        buf = bucket.buffer()
        gid = _group_id(ddp.process_group)
        token = pub.record.enter(gid, _lib.COLLECTIVES["all_reduce"], _dtype(buf), _numel(buf), 0, _next_seq(gid))
        _tls.inside = True  # the hook's own dist.all_reduce is this same collective
        try:
            fut = hook(state, bucket)
        finally:
            _tls.inside = False

        def done(f):
            _finish(pub.record, token, f)
            return f.value()

        return fut.then(done)

    return wrapped


def _patch(module, name, new):
    _originals.append((module, name, getattr(module, name)))
    setattr(module, name, new)


def _install_ddp():
    """Wrappers mode only (torch without ProcessGroup hooks, e.g. 1.13): DDP's
    all-reduce runs in C++ and is invisible there, so a comm hook publishes
    each bucket. A hook the user registers is wrapped. If none is registered
    by the first forward, scout registers one dispatching hook whose target is
    the default all-reduce (DDP's arithmetic); a hook the user registers later
    (Python or built-in) replaces that target instead of failing, as DDP allows
    one registration. A built-in hook registered before the first forward is
    left to DDP's C++ (its buckets are not published). On torch 2.15+ none of
    this runs: the ProcessGroup hooks see DDP's C++ Reducer."""
    DDP = torch.nn.parallel.DistributedDataParallel
    orig_register = DDP.register_comm_hook
    orig_forward = DDP.forward
    builtin_names = [n for n in ("register_builtin_comm_hook", "_register_builtin_comm_hook") if hasattr(DDP, n)]

    def register_comm_hook(self, state, hook):
        slot = getattr(self, "_scout_slot", None)
        if slot is not None:
            # scout's dispatching hook holds DDP's one registration: the user's hook becomes its target.
            check = getattr(self, "_check_comm_hook", None)
            if check is not None:
                check(hook)
            slot["state"], slot["hook"] = state, hook
            return None
        self._scout_hooked = True
        return orig_register(self, state, _wrap_comm_hook(hook, self))

    def builtin_hook(self, comm_hook_type, orig):
        slot = getattr(self, "_scout_slot", None)
        if slot is None:
            self._scout_hooked = True
            return orig(self, comm_hook_type)
        # Already dispatching: the built-in's Python twin (same arithmetic) becomes the target.
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
        twins = {"ALLREDUCE": default_hooks.allreduce_hook, "FP16_COMPRESS": default_hooks.fp16_compress_hook}
        twin = twins.get(getattr(comm_hook_type, "name", str(comm_hook_type)).split(".")[-1])
        if twin is None:
            raise RuntimeError(f"scout_publisher: built-in comm hook {comm_hook_type} registered after the first "
                               "forward has no Python equivalent; register it before the first forward")
        slot["state"], slot["hook"] = self.process_group, twin
        return None

    def forward(self, *args, **kwargs):
        if _pub is not None and not getattr(self, "_scout_hooked", False):
            from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
            slot = {"state": self.process_group, "hook": default_hooks.allreduce_hook}

            def dispatch(state, bucket):
                return slot["hook"](slot["state"], bucket)

            dispatch.__qualname__ = "scout_publisher.dispatch"
            try:
                orig_register(self, None, _wrap_comm_hook(dispatch, self))
                self._scout_slot = slot
            except RuntimeError:
                pass  # a hook was registered past our patches (dist._register_comm_hook): leave DDP as it is
            self._scout_hooked = True
        return orig_forward(self, *args, **kwargs)

    functools.update_wrapper(register_comm_hook, orig_register)
    functools.update_wrapper(forward, orig_forward)
    _patch(DDP, "register_comm_hook", register_comm_hook)
    _patch(DDP, "forward", forward)
    for name in builtin_names:
        orig = getattr(DDP, name)

        def patched(self, comm_hook_type, _orig=orig):
            return builtin_hook(self, comm_hook_type, _orig)

        functools.update_wrapper(patched, orig)
        _patch(DDP, name, patched)


def _mark_backward(grad):
    if _pub is not None:
        _pub.record.phase(2)
    return None


def _install_phases():
    from torch.nn.modules import module as nn_module

    def pre(module, inputs):
        depth = getattr(_tls, "depth", 0)
        _tls.depth = depth + 1
        if depth == 0 and _pub is not None:
            _pub.record.phase(1)

    def post(module, inputs, output):
        _tls.depth = max(getattr(_tls, "depth", 1) - 1, 0)
        if _tls.depth == 0 and _pub is not None and torch.is_grad_enabled():
            outs = output if isinstance(output, (tuple, list)) else (output,)
            for t in outs:
                if isinstance(t, torch.Tensor) and t.requires_grad:
                    t.register_hook(_mark_backward)
                    break

    if hasattr(nn_module, "register_module_forward_pre_hook"):
        _module_hooks.append(nn_module.register_module_forward_pre_hook(pre))
        _module_hooks.append(nn_module.register_module_forward_hook(post))

    orig_init = torch.optim.Optimizer.__init__

    def opt_init(self, *args, **kwargs):
        orig_init(self, *args, **kwargs)
        bound = self.step

        @functools.wraps(bound)
        def step(*a, **k):
            pub = _pub
            if pub is not None:
                pub.record.phase(3)
            result = bound(*a, **k)
            if pub is not None:
                pub.begin_step()
                if _mode in ("native", "python"):
                    from . import _hooks
                    _hooks.sweep()
                if getattr(pub, "coords_source", "") in ("default", "megatron_core", "deepspeed"):
                    from . import _mesh
                    _mesh.observe_frameworks()
            return result

        self.step = step

    functools.update_wrapper(opt_init, orig_init)
    _patch(torch.optim.Optimizer, "__init__", opt_init)

    from torch.utils.data import dataloader
    orig_next = dataloader._BaseDataLoaderIter.__next__

    def next_(self):
        pub = _pub
        if pub is not None:
            pub.record.phase(4)
        try:
            return orig_next(self)
        finally:  # also at StopIteration: the loader is no longer what the rank waits for
            if pub is not None:
                pub.record.phase(7)

    functools.update_wrapper(next_, orig_next)
    _patch(dataloader._BaseDataLoaderIter, "__next__", next_)


def _forget_in_child():
    # A forked child (e.g. a DataLoader worker) is not the rank: it must not
    # write the parent's record through the inherited mapping.
    global _pub
    _pub = None
    if _mode in ("native", "python"):
        from . import _hooks
        _hooks.uninstall()


def install(pub):
    """Installs every hook (once) and publishes to `pub`."""
    global _pub, _installed, _mode
    _pub = pub
    if _installed:
        if _mode in ("native", "python"):
            from . import _hooks
            _hooks.install(pub)
        return
    _installed = True
    os.register_at_fork(after_in_child=_forget_in_child)
    want = os.environ.get("SCOUT_PUBLISHER_HOOKS", "auto")
    if want not in ("auto", "native", "python", "wrappers"):
        want = "auto"
    _mode = None
    if want != "wrappers":
        from . import _hooks
        _mode = _hooks.install(pub, want)
    if _mode is None:
        _mode = "wrappers"
        for name in wrapped_names():
            original = getattr(c10d, name)
            wrapper = _wrap_collective(name, original)
            _patch(c10d, name, wrapper)
            if getattr(dist, name, None) is original:
                _patch(dist, name, wrapper)
        _install_ddp()
    _install_phases()


def mode():
    """How collectives are captured: "native", "python" or "wrappers" (None before install)."""
    return _mode


def uninstall():
    """Stops publishing; the wrappers stay in place and call straight through."""
    global _pub
    _pub = None
    if _mode in ("native", "python"):
        from . import _hooks
        _hooks.uninstall()
