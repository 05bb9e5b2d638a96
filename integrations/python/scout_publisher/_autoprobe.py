"""Automatic probe: when this job hangs, run `scout probe-hang` once per node
and write its verdict beside torch's Flight Recorder dumps, with no operator.

Triggers, watched in every rank (`install(pub)`, called by enable()):
  failed     a collective of this rank failed: the record's collective state
             reads "failed" (gloo's timeout and a peer's disconnect surface so
             on torch 2.15, through the hooks' Work futures, and on torch 1.13,
             through the wrappers' exceptions), or the process ends on a
             communication error (the excepthook, `on_comm_error`);
  abort      a backend's abort hook ran (ProcessGroup.register_abort_hook,
             torch 2.15: NCCL's watchdog calls them before it aborts the
             process on a timeout; gloo has none);
  fr_dump    this rank's Flight Recorder dump file <TORCH_FR_DUMP_TEMP_FILE><rank>
             appeared after start-up (NCCL's dump on timeout);
  silence    SCOUT_AUTOPROBE_SILENCE=S: this rank's record made no progress
             for S seconds (after its first event).

One rank per node runs the probe, once per incident: the first local rank to
see a trigger creates /dev/shm/scout-autoprobe.<job>.<attempt>.n<node>.<k>
with O_EXCL; the others find it and do nothing. A rank moves to incident k+1
only when its own step advanced by 2 since it saw lock k (the job recovered
from a false alarm: a silence longer than S); a hung or failed job never does.

The probe runs out of the trainer's way: a detached child (its own session,
stdlib only, `python -I`) sleeps SCOUT_AUTOPROBE_DELAY seconds (default 2: the
other local ranks reach their failure), runs `scout probe-hang` with
--timeout SCOUT_AUTOPROBE_TIMEOUT (default 30) and kills it 30 s after that,
then writes the verdict atomically. The trainer only forks it.

Configuration (environment):
  SCOUT_AUTOPROBE        0/off: never; default on (when scout is found)
  SCOUT_AUTOPROBE_SILENCE  seconds of silence that trigger a probe (default: none)
  SCOUT_BIN              the scout binary (default: `scout` on PATH)
  SCOUT_AUTOPROBE_DIR    where verdicts and logs go (default: the directory of
                         TORCH_FR_DUMP_TEMP_FILE or TORCH_NCCL_DEBUG_INFO_TEMP_FILE,
                         else /tmp)
  SCOUT_AUTOPROBE_STORE  the observers' store with several nodes (default
                         tcp://$MASTER_ADDR:$((MASTER_PORT+1)), hosted by node 0's probe)
  SCOUT_AUTOPROBE_ARGS   more probe-hang arguments (shell words, e.g. --mesh dp=4,tp=2)
Nodes: LOCAL_WORLD_SIZE (torchrun) gives nodes = WORLD_SIZE / LOCAL_WORLD_SIZE,
node = GROUP_RANK or RANK // LOCAL_WORLD_SIZE, local ranks node*L..node*L+L-1;
else SLURM_NNODES / SLURM_NODEID; else one node.
Files, in that directory: scout-verdict.<job>.<attempt>.node<n>.<k>.json (the
verdict), scout-autoprobe.<job>.<attempt>.node<n>.<k>.log (what was run, when,
why, its exit code and stderr).
"""
import atexit
import json
import mmap
import os
import re
import shlex
import shutil
import struct
import subprocess
import sys
import threading
import time

_CHILD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_probe_child.py")
_POLL_S = 0.25
_ABORT_HOOK_ID = 0x5C0A7

# Record layout (lib/records/layout.hpp, version 1-2): word offsets of the
# header's magic/version, the progress latch and its two copies, and inside a
# copy the step, op_seq, small (state in bits 8-15) and progress_ns words.
_MAGIC, _W_MAGIC, _W_VERSION, _W_LATCH, _W_PROGRESS, _PROGRESS_WORDS = 0x43455254554f4353, 0, 1, 57, 58, 12
_P_STEP, _P_OP_SEQ, _P_SMALL, _P_PROGRESS_NS = 0, 1, 2, 9
_STATE_FAILED = 4

_state = {"monitor": None}


def _truthy_off(value):
    return value is not None and value.strip().lower() in ("0", "off", "no", "false")


def _float_env(name, default):
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        v = float(raw)
    except ValueError:
        v = -1
    if not 0 <= v <= 86400:
        print(f"scout_publisher: autoprobe: {name}={raw!r} is not seconds in [0, 86400]; using {default}",
              file=sys.stderr)
        return default
    return v


def find_scout():
    """The scout binary: $SCOUT_BIN, else `scout` on PATH; None when neither is executable."""
    b = os.environ.get("SCOUT_BIN")
    if b:
        return b if os.access(b, os.X_OK) else None
    return shutil.which("scout")


def verdict_dir():
    """Where verdicts go: $SCOUT_AUTOPROBE_DIR, else the Flight Recorder dumps' directory, else /tmp."""
    d = os.environ.get("SCOUT_AUTOPROBE_DIR")
    if d:
        return d
    for var in ("TORCH_FR_DUMP_TEMP_FILE", "TORCH_NCCL_DEBUG_INFO_TEMP_FILE"):
        prefix = os.environ.get(var)
        if prefix:
            return os.path.dirname(os.path.abspath(prefix))
    return "/tmp"


def _fr_dump_file(rank):
    for var in ("TORCH_FR_DUMP_TEMP_FILE", "TORCH_NCCL_DEBUG_INFO_TEMP_FILE"):
        prefix = os.environ.get(var)
        if prefix:
            return f"{prefix}{rank}"
    return None


def node_layout(rank, world):
    """(nodes, node index, local ranks "lo-hi" or None) from torchrun's or SLURM's environment."""
    lws = os.environ.get("LOCAL_WORLD_SIZE")
    if lws and lws.isdigit() and int(lws) > 0 and world % int(lws) == 0:
        local = int(lws)
        nodes = world // local
        gr = os.environ.get("GROUP_RANK")
        node = int(gr) if gr and gr.isdigit() and int(gr) < nodes else rank // local
        return nodes, node, f"{node * local}-{node * local + local - 1}"
    nn, nid = os.environ.get("SLURM_NNODES"), os.environ.get("SLURM_NODEID")
    if nn and nid and nn.isdigit() and nid.isdigit() and int(nid) < int(nn):
        return int(nn), int(nid), None
    return 1, 0, None


def _safe(text):
    return re.sub(r"[^A-Za-z0-9_-]", "_", str(text))[:120]


class _RecordView:
    """Read-only view of this rank's own record (/dev/shm/<segment>)."""

    def __init__(self, segment):
        fd = os.open(os.path.join("/dev/shm", segment), os.O_RDONLY)
        try:
            self._map = mmap.mmap(fd, 0, prot=mmap.PROT_READ)
        finally:
            os.close(fd)

    def _word(self, w):
        return struct.unpack_from("<Q", self._map, w * 8)[0]

    def progress(self):
        """(step, op_seq, collective state, progress_ns), or None while torn / unknown."""
        if self._word(_W_MAGIC) != _MAGIC or self._word(_W_VERSION) not in (1, 2):
            return None
        for _ in range(8):
            latch = self._word(_W_LATCH)
            base = _W_PROGRESS + (latch & 1) * _PROGRESS_WORDS
            vals = struct.unpack_from("<12Q", self._map, base * 8)
            if self._word(_W_LATCH) == latch:
                return vals[_P_STEP], vals[_P_OP_SEQ], (vals[_P_SMALL] >> 8) & 0xFF, vals[_P_PROGRESS_NS]
        return None


class Monitor:
    """The triggers of one rank and the election of its node's prober."""

    def __init__(self, pub, scout):
        rec = pub.record
        self.pub, self.scout = pub, scout
        self.job, self.rank, self.world = rec.job, rec.rank, rec.world_size
        self.attempt = os.environ.get("SCOUT_ATTEMPT") or os.environ.get("TORCHELASTIC_RESTART_COUNT") or \
            os.environ.get("SLURM_RESTART_COUNT") or "0"
        self.nodes, self.node, self.local_ranks = node_layout(self.rank, self.world)
        self.silence_s = _float_env("SCOUT_AUTOPROBE_SILENCE", 0.0)
        self.dir = verdict_dir()
        self.incident = 0
        self.seen_lock_step = None  # this rank's step when it first saw the current incident's lock
        self.started_ns = time.time_ns()
        self.fr_dump = _fr_dump_file(self.rank)
        self._lock = threading.Lock()
        self._fired = set()  # incidents this process already handled
        self._abort_pgs = set()
        self._stop = threading.Event()
        try:
            self.view = _RecordView(rec.segment)
        except OSError as e:
            self.view = None
            self.log(f"cannot read this rank's record ({e}): the failed and silence triggers are off")
        self._thread = threading.Thread(target=self._run, name="scout-autoprobe", daemon=True)
        self._thread.start()

    def log(self, text):
        print(f"scout_publisher: autoprobe: rank {self.rank}: {text}", file=sys.stderr, flush=True)

    def lock_path(self, k):
        return f"/dev/shm/scout-autoprobe.{_safe(self.job)}.{_safe(self.attempt)}.n{self.node}.{k}"

    def files(self, k):
        base = f"{_safe(self.job)}.{_safe(self.attempt)}.node{self.node}.{k}"
        return (os.path.join(self.dir, f"scout-verdict.{base}.json"), os.path.join(self.dir, f"scout-autoprobe.{base}.log"))

    def trigger(self, why):
        """Runs the node's probe for the current incident unless a local rank already did. Blocks only for
        the fork (abort hooks must not return before the child exists: the process may die next)."""
        with self._lock:
            k = self.incident
            if k in self._fired:
                return False
            self._fired.add(k)
            path = self.lock_path(k)
            try:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            except FileExistsError:
                self.log(f"{why}: incident {k} of node {self.node} is already being probed ({path})")
                return False
            except OSError as e:
                self.log(f"{why}: cannot create {path} ({e}): not probing")
                return False
            verdict, logfile = self.files(k)
            with os.fdopen(fd, "w") as f:
                json.dump({"rank": self.rank, "pid": os.getpid(), "trigger": why, "time_ns": time.time_ns(),
                           "verdict": verdict}, f)
            return self._spawn(why, k, verdict, logfile)

    def _command(self):
        cmd = [self.scout, "probe-hang", "--job", self.job, "--attempt", self.attempt, "--format", "json",
               "--threshold", str(_float_env("SCOUT_AUTOPROBE_THRESHOLD", 1.0)),
               "--timeout", str(_float_env("SCOUT_AUTOPROBE_TIMEOUT", 30.0))]
        if self.nodes > 1:
            store = os.environ.get("SCOUT_AUTOPROBE_STORE")
            if not store:
                addr, port = os.environ.get("MASTER_ADDR"), os.environ.get("MASTER_PORT")
                if addr and port and port.isdigit():
                    store = f"tcp://{addr}:{int(port) + 1}"
            cmd += ["--nodes", str(self.nodes), "--node-index", str(self.node)]
            if store:
                cmd += ["--store", store]
            if self.local_ranks:
                cmd += ["--local-ranks", self.local_ranks]
        extra = os.environ.get("SCOUT_AUTOPROBE_ARGS")
        if extra:
            cmd += shlex.split(extra)
        return cmd

    def _spawn(self, why, k, verdict, logfile):
        plan = {"command": self._command(), "verdict": verdict, "log": logfile, "trigger": why, "rank": self.rank,
                "trainer_pid": os.getpid(), "incident": k, "delay_s": _float_env("SCOUT_AUTOPROBE_DELAY", 2.0),
                "kill_after_s": _float_env("SCOUT_AUTOPROBE_TIMEOUT", 30.0) + 30.0}
        env = {key: v for key, v in os.environ.items() if not key.startswith("SCOUT_PUBLISH")}
        try:
            os.makedirs(self.dir, exist_ok=True)
            child = subprocess.Popen([sys.executable, "-I", _CHILD, json.dumps(plan)], env=env,
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                     start_new_session=True, close_fds=True)
        except OSError as e:
            self.log(f"{why}: cannot start the probe ({e})")
            return False
        self.log(f"{why}: probing incident {k} of node {self.node} (pid {child.pid}): verdict -> {verdict}")
        try:  # reap it if the trainer outlives it; at interpreter exit init does
            threading.Thread(target=child.wait, name="scout-autoprobe-reap", daemon=True).start()
        except RuntimeError:
            pass
        return True

    def _attach_abort_hooks(self):
        c10d = sys.modules.get("torch.distributed.distributed_c10d")
        if c10d is None:
            return
        try:
            groups = list(c10d._world.pg_map.keys())
        except Exception:
            return
        for pg in groups:
            key = id(pg)
            if key in self._abort_pgs:
                continue
            self._abort_pgs.add(key)
            try:
                supports = getattr(pg, "supports_abort_hooks", False)  # a property on torch 2.15
                if callable(supports):
                    supports = supports()
                if supports:
                    pg.register_abort_hook(_ABORT_HOOK_ID, lambda: self.trigger("abort"))
            except Exception:  # gloo: none ("does not support registerAbortHook")
                pass

    def _check_incident_over(self, step):
        if not os.path.exists(self.lock_path(self.incident)):
            return
        if self.seen_lock_step is None:
            self.seen_lock_step = step
        elif step >= self.seen_lock_step + 2:
            self.log(f"progress resumed after incident {self.incident} (step {step}): armed again")
            self.incident += 1
            self.seen_lock_step = None

    def poll(self):
        """One look at every trigger (the thread's loop body)."""
        self._attach_abort_hooks()
        if self.fr_dump:
            try:
                if os.stat(self.fr_dump).st_mtime_ns >= self.started_ns:
                    self.trigger("fr_dump")
            except OSError:
                pass
        if self.view is None:
            return
        p = self.view.progress()
        if p is None:
            return
        step, op_seq, state, progress_ns = p
        self._check_incident_over(step)
        if state == _STATE_FAILED:
            self.trigger("failed")
        elif self.silence_s > 0 and op_seq > 0 and time.time_ns() - progress_ns >= self.silence_s * 1e9:
            self.trigger("silence")

    def final_check(self):
        """At interpreter exit: a failed collective the thread had no time to see."""
        try:
            p = self.view.progress() if self.view is not None else None
            if p is not None and p[2] == _STATE_FAILED:
                self.trigger("failed")
        except Exception:
            pass

    def _run(self):
        while not self._stop.wait(_POLL_S):
            try:
                if self.pub is not _pub_now():
                    return
                self.poll()
            except Exception as e:  # never disturb the trainer
                self.log(f"monitor stopped: {e}")
                return

    def stop(self):
        self._stop.set()


def _pub_now():
    from . import publisher
    return publisher()


def install(pub):
    """Starts the monitor of `pub` unless SCOUT_AUTOPROBE is off or scout cannot be found (logged)."""
    if _truthy_off(os.environ.get("SCOUT_AUTOPROBE")) or _state["monitor"] is not None:
        return _state["monitor"]
    scout = find_scout()
    if scout is None:
        if os.environ.get("SCOUT_AUTOPROBE") or os.environ.get("SCOUT_AUTOPROBE_SILENCE"):
            print("scout_publisher: autoprobe: off: no scout binary (set SCOUT_BIN or put scout on PATH)",
                  file=sys.stderr)
        return None
    m = _state["monitor"] = Monitor(pub, scout)
    atexit.register(m.final_check)
    os.register_at_fork(after_in_child=forget_in_child)
    return m


def monitor():
    """The running Monitor, or None."""
    return _state["monitor"]


def on_comm_error():
    """The process is ending on a communication error (the excepthook)."""
    m = _state["monitor"]
    if m is not None:
        m.trigger("comm_error")


def forget_in_child():
    _state["monitor"] = None
