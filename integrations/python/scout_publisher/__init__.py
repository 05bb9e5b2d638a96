"""scout trainer-side publisher for PyTorch.

One call, no change to the training loop::

    import scout_publisher
    scout_publisher.enable()          # job, rank, world size from the environment

or no code change at all::

    python3 -m scout_publisher train.py ARGS...
    SCOUT_PUBLISH=1 PYTHONPATH=<scout>/integrations/python/autoload:<scout>/integrations/python python3 train.py

(the second form imports this package from a `usercustomize` hook; it needs
the user site enabled, i.e. not `python3 -s` / `-I`).

It creates this rank's shared-memory progress record through
libscout_publisher.so (never Python's multiprocessing.shared_memory, whose
resource tracker unlinks segments at exit: records must outlive their writers
so that `scout probe-hang` works post mortem), then captures every collective
(torch 2.15+: ProcessGroup hooks from the c10d dispatcher, natively through
libscout_torch_hooks.so; older torch: wrapped torch.distributed functions),
and marks the forward/backward/optimizer/dataloader phases and the step (see
_torch.py, _hooks.py). `capture()` says which way was chosen.

Environment (arguments win): RANK, WORLD_SIZE (LOCAL_RANK is not the rank);
job id from SCOUT_JOB, TORCHELASTIC_RUN_ID or SLURM_JOB_ID; attempt from
SCOUT_ATTEMPT, TORCHELASTIC_RESTART_COUNT or SLURM_RESTART_COUNT; mesh from
SCOUT_MESH (e.g. "dp=4,tp=2", last dim fastest: coordinates of RANK; when
unset, found from the job's DeviceMesh, or Megatron-Core's parallel_state /
DeepSpeed's groups polled at optimizer steps (tested with megatron-core 0.16.1
and deepspeed 0.19.8: tests/integration/test_torch2_frameworks.py), see
_mesh.py; pub.coords_source says where they came from); host from
SCOUT_HOST (default gethostname); heartbeat period SCOUT_HEARTBEAT_S (1.0, 0 off);
SIGTERM (a launcher tearing the workers down) marks the record's phase
terminated before the process ends (SCOUT_WATCH_SIGTERM=0 leaves SIGTERM alone);
capture SCOUT_PUBLISHER_HOOKS=auto|native|python|wrappers (auto: native hooks
when libscout_torch_hooks.so built for this torch is found, SCOUT_TORCH_HOOKS_LIB
names it; Python hooks on other torch >= 2.15; wrappers on older torch).

Automatic probe (on unless SCOUT_AUTOPROBE=0; needs the scout binary, SCOUT_BIN
or PATH): a collective that fails or times out, an abort hook (NCCL's
watchdog), a Flight Recorder dump of this rank, or SCOUT_AUTOPROBE_SILENCE
seconds without progress make one rank per node run `scout probe-hang` in a
detached child and write the verdict beside the Flight Recorder dumps; see
_autoprobe.py.
"""
import atexit
import os
import sys
import threading

from . import _lib

__all__ = ["enable", "disable", "publisher", "step", "phase", "PublisherError", "ConfigError", "set_after_enter_hook",
           "capture", "collective_counts"]

PublisherError = _lib.PublisherError


class ConfigError(ValueError):
    """enable() could not tell the job, rank, world size or mesh. `what` says
    what is wrong, `fix_call` how to fix it in an enable() call, `fix_env` how
    to fix it in the environment (for `python3 -m scout_publisher`)."""

    def __init__(self, what, fix_call, fix_env):
        super().__init__(f"{what}: {fix_call}" if fix_call else what)
        self.what, self.fix_call, self.fix_env = what, fix_call, fix_env
_DIMS = {"dp": 0, "fsdp": 1, "tp": 2, "pp": 3, "cp": 4, "ep": 5}

_lock = threading.Lock()
_state = {"publisher": None}

# What a communication failure looks like when it reaches Python: torch's
# DistError family (torch >= 2.1), or the text gloo and NCCL put in a
# RuntimeError (torch 1.13 raises those).
_COMM_ERROR_TYPES = ("DistError", "DistBackendError", "DistNetworkError", "DistStoreError")
_COMM_ERROR_TEXT = ("gloo/transport", "Connection closed by peer", "Connection reset by peer", "NCCL error",
                    "NCCL communicator", "ProcessGroupNCCL", "ProcessGroupGloo")


def is_comm_error(exc):
    """Whether `exc` (or an exception it was raised from) is a communication failure."""
    seen = 0
    while exc is not None and seen < 8:
        if any(t.__name__ in _COMM_ERROR_TYPES for t in type(exc).__mro__):
            return True
        text = str(exc)[:4096]
        if any(m in text for m in _COMM_ERROR_TEXT):
            return True
        exc = exc.__cause__ or exc.__context__
        seen += 1
    return False


def _install_excepthook(pub):
    """Marks the record (phase comm_error) when the process ends on an uncaught
    communication error: it is dying of a peer's failure, maybe in a call the
    hooks do not record (DDP's bucket rebuild broadcast, a raw ProcessGroup
    call), so `scout probe-hang` counts it a victim, not where the hang began.
    The previous hook still runs."""
    previous = sys.excepthook

    def hook(exc_type, exc, tb):
        try:
            if _state["publisher"] is pub and is_comm_error(exc):
                pub.record.phase("comm_error")
                from . import _autoprobe
                _autoprobe.on_comm_error()
        except Exception:  # never hide the user's traceback
            pass
        previous(exc_type, exc, tb)

    sys.excepthook = hook


def _first_env(*names):
    for n in names:
        v = os.environ.get(n)
        if v:
            return v
    return None


def mesh_coords(mesh, rank):
    """Coordinates (d, s, t, p, c, e) of `rank` in `mesh` ("dp=4,tp=2"; the
    last written dim varies fastest). Raises ValueError on a bad spec."""
    dims = []
    for part in mesh.split(","):
        name, _, size = part.strip().partition("=")
        if name not in _DIMS or not size.isdigit() or int(size) < 1:
            raise ConfigError(f"bad mesh {mesh!r}", f"expected dims {sorted(_DIMS)} as name=size",
                              f"set SCOUT_MESH to name=size pairs of {sorted(_DIMS)}, e.g. dp=4,tp=2")
        dims.append((_DIMS[name], int(size)))
    total = 1
    for _, size in dims:
        total *= size
    if not 0 <= rank < total:
        raise ConfigError(f"rank {rank} is outside mesh {mesh!r} of {total} ranks", "",
                          "make SCOUT_MESH's sizes multiply to WORLD_SIZE")
    coords = [0] * 6
    rest = rank
    for index, size in reversed(dims):
        coords[index] = rest % size
        rest //= size
    return coords


class Publisher:
    """The enabled publisher of this process: its record and step counter."""

    def __init__(self, record, heartbeat_s):
        self.record = record
        self.step = 0
        self._stop = threading.Event()
        self._thread = None
        if heartbeat_s > 0:
            self._thread = threading.Thread(target=self._beat, args=(heartbeat_s,), name="scout-heartbeat", daemon=True)
            self._thread.start()

    def _beat(self, period):
        while not self._stop.wait(period):
            self.record.heartbeat()

    def begin_step(self, step=None):
        self.step = self.step + 1 if step is None else int(step)
        self.record.step_begin(self.step)

    def close(self, unlink=False):
        self._stop.set()
        self.record.close(unlink)


def enable(job=None, rank=None, world_size=None, mesh=None, coords=None, host=None, attempt=None,
           library=None, hook_torch=True, heartbeat_s=None):
    """Creates this rank's record and installs the torch hooks; returns the
    Publisher. Idempotent: a second call returns the first publisher.
    job/rank/world_size/mesh/host/attempt default to the environment (module
    docstring); `coords` (6 ints) overrides `mesh`. Raises ValueError when the
    job, rank or world size cannot be found (ConfigError), PublisherError when the record
    cannot be created."""
    with _lock:
        if _state["publisher"] is not None:
            return _state["publisher"]
        job = job or _first_env("SCOUT_JOB", "TORCHELASTIC_RUN_ID", "SLURM_JOB_ID")
        if not job:
            raise ConfigError("no job id", "pass job= or set SCOUT_JOB (or TORCHELASTIC_RUN_ID / SLURM_JOB_ID)",
                              "set SCOUT_JOB (or TORCHELASTIC_RUN_ID / SLURM_JOB_ID) to the job id")
        if rank is None:
            rank = _first_env("RANK", "SLURM_PROCID")
        if world_size is None:
            world_size = _first_env("WORLD_SIZE", "SLURM_NTASKS")
        if rank is None or world_size is None:
            raise ConfigError("no rank or world size", "pass rank=/world_size= or set RANK and WORLD_SIZE",
                              "set RANK and WORLD_SIZE (the launcher usually does)")
        try:
            rank, world_size = int(rank), int(world_size)
        except ValueError:
            raise ConfigError(f"rank {rank!r} or world size {world_size!r} is not an integer", "",
                              "set RANK and WORLD_SIZE to integers") from None
        if world_size < 1 or not 0 <= rank < world_size:
            raise ConfigError(f"rank {rank} is not in [0, world size {world_size})", "",
                              "set RANK to a number from 0 to WORLD_SIZE - 1")
        if len(job.encode()) > 127:
            raise ConfigError(f"job id {job[:40]!r}... is longer than 127 bytes", "", "use a job id of at most 127 bytes")
        coords_source = "argument"
        if coords is None:
            mesh = mesh or os.environ.get("SCOUT_MESH")
            coords_source = "SCOUT_MESH" if mesh else "default"
            coords = mesh_coords(mesh, rank) if mesh else [rank, 0, 0, 0, 0, 0]
        attempt = attempt if attempt is not None else (
            _first_env("SCOUT_ATTEMPT", "TORCHELASTIC_RESTART_COUNT", "SLURM_RESTART_COUNT") or "0")
        host = host or os.environ.get("SCOUT_HOST")
        if heartbeat_s is None:
            try:
                heartbeat_s = float(os.environ.get("SCOUT_HEARTBEAT_S", "1.0"))
            except ValueError:
                raise ConfigError(f"SCOUT_HEARTBEAT_S={os.environ['SCOUT_HEARTBEAT_S']!r} is not a number", "",
                                  "set SCOUT_HEARTBEAT_S to seconds (0 turns the heartbeat off)") from None
        lib = _lib.load(library)
        record = _lib.Record(lib, job, rank, world_size, coords=coords, host=host, attempt=str(attempt))
        pub = Publisher(record, heartbeat_s)
        pub.lib = lib
        pub.coords, pub.coords_source = list(coords), coords_source
        _state["publisher"] = pub
        atexit.register(pub._stop.set)
        _install_excepthook(pub)
        if os.environ.get("SCOUT_WATCH_SIGTERM", "1") != "0":
            # A launcher's SIGTERM (torchrun tearing the workers down after one failed) marks the record
            # terminated: a victim's end, where a rank killed outright leaves its record silent.
            record.watch_termination()
        os.register_at_fork(after_in_child=lambda: _state.update(publisher=None))
    from . import _autoprobe
    _autoprobe.install(pub)  # SCOUT_AUTOPROBE: probe-hang once per node when the job hangs
    if hook_torch:
        from . import _torch
        _torch.install(pub)
        if pub.coords_source == "default":
            # No mesh given: find the coordinates from the job (DeviceMesh,
            # Megatron-Core, DeepSpeed); see _mesh.py.
            from . import _mesh
            _mesh.install(pub)
    return pub


def publisher():
    """The enabled Publisher, or None."""
    return _state["publisher"]


def disable(unlink=False):
    """Stops publishing (hooks stay installed but do nothing) and closes the record."""
    with _lock:
        pub, _state["publisher"] = _state["publisher"], None
    if pub is not None:
        from . import _torch
        _torch.uninstall()
        pub.close(unlink)


def step(n=None):
    """Marks the beginning of step `n` (default: the next one). The optimizer
    hook does this after every optimizer.step(); call it to number steps yourself."""
    pub = _state["publisher"]
    if pub is not None:
        pub.begin_step(n)


def phase(name):
    """Marks a phase by name: forward, backward, optimizer, dataloader, checkpoint, idle
    (comm_error is set by the publisher itself when the process ends on one)."""
    pub = _state["publisher"]
    if pub is not None:
        pub.record.phase(name)


def capture():
    """How collectives are captured: "native" (libscout_torch_hooks.so on
    ProcessGroup hooks), "python" (Python ProcessGroup hooks), "wrappers"
    (wrapped torch.distributed functions, torch without hooks), or None."""
    from . import _torch
    return _torch.mode()


def collective_counts():
    """Collectives this process published through the ProcessGroup hooks, by
    kind ({"all_reduce": n, ...}; native mode adds exits_completed,
    exits_at_issue, failed, hook_errors, and of the completed exits
    exits_waited (a Work with no completion source, seen completed after its
    wait()) and exits_by_order (closed by a later call of its group)). Empty
    in wrappers mode."""
    from . import _torch
    if _torch.mode() in ("native", "python"):
        from . import _hooks
        return _hooks.counts()
    return {}


def set_after_enter_hook(fn):
    """Testing only: fn(name) runs after a wrapped collective's enter is
    published and before the collective itself is called (None removes it)."""
    from . import _torch
    _torch.after_enter_hook = fn
    if _torch.mode() in ("native", "python"):
        from . import _hooks
        _hooks.set_after_enter(fn)


def _autoload():
    """Enables from the environment when SCOUT_PUBLISH=1; reports failures on
    stderr instead of stopping the trainer."""
    if os.environ.get("SCOUT_PUBLISH", "") not in ("1", "true", "yes"):
        return None
    try:
        return enable()
    except Exception as e:  # a trainer must not die because its observer's publisher could not start
        print(f"scout_publisher: not enabled: {e}", file=sys.stderr)
        return None
