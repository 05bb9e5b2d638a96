"""Launches a real multi-rank PyTorch DDP job (trainers/ddp_trainer.py, gloo
on 127.0.0.1; one process per rank, or torchrun with launcher="torchrun")
with the scout publisher, and cleans everything up: processes (also
SIGSTOPped ones) and their records.

The trainers run under the torch 2.x of the project venv ($SCOUT_VENV,
default <repo>/.venv, made by scripts/install-deps.sh; another torch 2.x:
scripts/test-torch-version.sh). Without that venv a job raises
unittest.SkipTest with the reason.

    with TrainerJob(world=4, fault="exit", seed=None) as job:   # seed printed
        job.start()
        records = job.wait_silent()          # `scout records list` JSON records
        ... job.fault_rank, job.fault_step, job.returncodes(), job.state(rank)

Each rank is forked by the torch zygote of this process (torch_zygote.py, class Zygote): an interpreter that
imported torch once, so that a rank does not spend ~2.4 s of CPU importing it (issue 38); it starts as
subprocess.Popen would start it, in its own session. Plain subprocess.Popen with SCOUT_TEST_ZYGOTE=0, and for
torchrun, rank_prefix and publisher="env" (its sitecustomize must run before torch is imported).

Ranks can run inside network namespaces ("nodes"): pass
rank_prefix=lambda rank: ["ip", "netns", "exec", f"ns{rank // 2}"] and a
master_addr reachable from every namespace. `ip netns exec` execs the trainer,
so the pid the harness holds is the trainer's.

Command line (prints the seed, the job and the records, then cleans up):
    python3 trainer_harness.py --world 4 --fault exit [--seed N]
"""
import argparse
import contextlib
import json
import os
import random
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE_DIR = os.environ.get("SCOUT_SOURCE_DIR", os.path.abspath(os.path.join(HERE, "..", "..")))
BUILD_DIR = os.environ.get("SCOUT_BUILD_DIR", os.path.join(SOURCE_DIR, "build"))
SCOUT_BIN = os.environ.get("SCOUT_BIN", os.path.join(BUILD_DIR, "bin", "scout"))
PUBLISHER_LIB = os.environ.get("SCOUT_PUBLISHER_LIB", os.path.join(BUILD_DIR, "lib", "libscout_publisher.so"))
PYTHON_DIR = os.path.join(SOURCE_DIR, "integrations", "python")
TRAINER = os.path.join(HERE, "trainers", "ddp_trainer.py")
VENV = os.environ.get("SCOUT_VENV") or os.path.join(SOURCE_DIR, ".venv")
VENV_PYTHON = os.path.join(VENV, "bin", "python")


def require_python():
    """The trainers' interpreter (the venv's, with its torch 2.x); raises unittest.SkipTest (with the reason)
    when the venv is absent."""
    if not os.access(VENV_PYTHON, os.X_OK):
        import unittest
        raise unittest.SkipTest(f"no torch 2.x venv at {VENV} (run scripts/install-deps.sh or set SCOUT_VENV)")
    return VENV_PYTHON


def python_for(torch_version):
    """The interpreter of `torch_version` ("2": the venv's, or None when absent; "1.13": Debian's
    /usr/bin/python3, for the straggler campaign's held-out batches recorded on it, bench/heldout)."""
    if torch_version == "2":
        return VENV_PYTHON if os.access(VENV_PYTHON, os.X_OK) else None
    return "/usr/bin/python3"


PYTHON = VENV_PYTHON  # the trainers' interpreter


def torch_version(python):
    """The torch version (major, minor) installed for `python`, read from its metadata (no import), or None."""
    try:
        out = subprocess.run([python, "-c", "import importlib.metadata as m; print(m.version('torch'))"],
                             capture_output=True, text=True, timeout=60).stdout.strip()
        return tuple(int(x) for x in out.split("+")[0].split(".")[:2])
    except (OSError, ValueError, subprocess.TimeoutExpired):
        return None


# How the publisher captures this run's collectives: ProcessGroup hooks on torch 2.15 and later (every
# collective, exit at the backend's completion), else wrapped torch.distributed functions (2.x before 2.15:
# SCOUT_VENV naming such a torch's venv).
HOOKS = (torch_version(PYTHON) or (0, 0)) >= (2, 15)

FAULTS = ("none", "stop-before-collective", "stop-inside-collective", "exit", "crash", "skip-collective", "wrong-shape")

_counter = [0]


_port_rng = random.SystemRandom()


def _ephemeral_range():
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            lo, hi = (int(x) for x in f.read().split())
            return lo, hi
    except (OSError, ValueError):
        return 32768, 60999


def free_port():
    """A TCP port that is free now and that the kernel does not hand out by itself: drawn
    below the ephemeral range. A port from bind(0) is an ephemeral one, and before the
    trainers bound it a client socket or gloo's own listener could take it (fresh clone:
    test_records, 'Address already in use', then the ranks met another job's store)."""
    lo, hi = _ephemeral_range()
    base, top = (10000, lo) if lo > 16000 else (hi + 1, 65536)
    for _ in range(200):
        port = _port_rng.randrange(base, top)
        try:
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
                s.bind(("0.0.0.0", port))
            if socket.has_ipv6:
                try:
                    s6 = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
                except OSError:
                    return port  # no IPv6 here: the IPv4 check is the whole check
                with s6:
                    s6.bind(("::", port))
            return port
        except OSError:
            continue
    raise RuntimeError(f"no free TCP port found in [{base}, {top})")


@contextlib.contextmanager
def torch_store_host(port, then):
    """A torch 2.x TCPStore server (what torchrun's agent runs: libuv) on 127.0.0.1:`port`, in a process of its own
    that then runs the Python `then` (the store is `s`; `base` its key count before any observer). Yields the
    process once the store is up; kills it on leaving if it is still running."""
    host = subprocess.Popen([require_python(), "-c", (
        "import os, sys, time, datetime, torch.distributed as d\n"
        f"s = d.TCPStore('127.0.0.1', {port}, is_master=True, wait_for_workers=False, "
        "timeout=datetime.timedelta(seconds=900))\n"
        "base = s.num_keys()\n"
        "print('up', flush=True)\n" + then)], stdout=subprocess.PIPE, text=True)
    try:
        line = host.stdout.readline().strip()
        if line != "up":
            raise AssertionError(f"the torch TCPStore host did not start: {line!r}")
        yield host
    finally:
        if host.poll() is None:
            host.kill()
            host.wait(timeout=10)
        host.stdout.close()


def observers_across_a_lost_store(test, port, keys, args, seed):
    """Two observers (scout `args(i)`, --nodes 2 --node-index i --format json) on a torch 2.x TCPStore at
    127.0.0.1:`port` whose host exits, the store with it, once observer 0 wrote `keys` keys: observer 0 is then
    inside its first gather; observer 1 starts after the store went away. Returns (returncode, stdout, stderr) per
    observer."""
    with torch_store_host(port, "end = time.monotonic() + 90\n"
                                f"while s.num_keys() < base + {keys} and time.monotonic() < end: time.sleep(0.02)\n"
                                f"print('going' if s.num_keys() >= base + {keys} else 'no observer wrote', flush=True)\n"
                                "os._exit(0)\n") as host:
        env = dict(os.environ)
        env.pop("SCOUT_TORCH_MODULE", None)  # the module that speaks torch 2.x's store

        def observer(i):
            return subprocess.Popen([SCOUT_BIN, *args(i), "--format", "json", "--nodes", "2", "--node-index", str(i),
                                     "--store", f"tcp://127.0.0.1:{port}"], env=env, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True)
        first = observer(0)
        test.assertEqual(host.stdout.readline().strip(), "going", f"seed {seed}")
        test.assertEqual(host.wait(timeout=60), 0)
        procs = [first, observer(1)]
        outs = [p.communicate(timeout=120) for p in procs]
    return [(p.returncode, out, err) for p, (out, err) in zip(procs, outs)]


def scout_records(job, extra=(), timeout=30):
    """`scout records list --job JOB` as parsed JSON (the verdict envelope)."""
    proc = subprocess.run([SCOUT_BIN, "records", "list", "--job", job, "--format", "json", *extra],
                          capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"scout records list failed ({proc.returncode}): {proc.stderr}")
    return json.loads(proc.stdout)


def process_state(pid):
    """The state letter of /proc/<pid>/stat (R, S, T, Z, ...) or None when gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None


class ZygoteProcess:
    """A trainer rank forked by the torch zygote (torch_zygote.py), with the part of Popen's interface the tests use:
    pid, returncode, poll(), wait(timeout), send_signal(), terminate(), kill(), and for stdout/stderr=PIPE the
    stdout/stderr file objects and communicate(timeout). Once the rank ended the zygote keeps it a zombie (scout
    reads its exit code or signal there, as from a Popen child's) until poll() or wait() read its status and closed
    the connection, then reaps it; it reports the exit status (Popen's convention: -SIG for a signal) over the request's connection."""

    def __init__(self, args, conn, pid, stdout=None, stderr=None, text=False):
        self.args, self._conn, self.pid, self.returncode = args, conn, pid, None
        self.stdin, self.stdout, self.stderr, self.text = None, stdout, stderr, text
        self._buf = b""
        self._chunks = {}  # pipe -> bytes read by communicate() so far (kept across a timeout, as Popen does)

    def _read(self, timeout):
        """Reads the zygote's report for up to `timeout` seconds; sets returncode when it came."""
        import select
        if self._conn is None:
            return
        if not select.select([self._conn], [], [], max(0.0, timeout))[0]:
            return
        try:
            data = self._conn.recv(4096)
        except OSError:
            data = b""
        self._buf += data
        for line in self._buf.split(b"\n")[:-1]:
            msg = json.loads(line)
            if "returncode" in msg:
                self.returncode = msg["returncode"]
        self._buf = self._buf.rsplit(b"\n", 1)[-1]
        if self.returncode is not None or not data:
            self._conn.close()
            self._conn = None
        if self.returncode is None and not data:  # the zygote died: the status is lost, only /proc tells the end
            print(f"trainer_harness: the torch zygote died; pid {self.pid}'s exit status is lost", file=sys.stderr)

    def poll(self):
        if self.returncode is None:
            self._read(0)
            if self._conn is None and self.returncode is None and process_state(self.pid) in (None, "Z"):
                self.returncode = 255
        return self.returncode

    def wait(self, timeout=None):
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            left = 1.0 if deadline is None else deadline - time.monotonic()
            if left <= 0:
                raise subprocess.TimeoutExpired(self.args, timeout)
            if self._conn is None:
                time.sleep(min(0.05, left))
            else:
                self._read(min(1.0, left))
        return self.returncode

    def communicate(self, input=None, timeout=None):
        """Popen.communicate without input: reads stdout and stderr (the pipes among them) to their end, then waits
        for the exit; (out, err), None for what is not a pipe, str with text=True (the locale's encoding, universal
        newlines, as Popen decodes). On TimeoutExpired what was read is kept, and a later call goes on from it."""
        import selectors
        if input is not None:
            raise ValueError("ZygoteProcess has no stdin pipe")
        deadline = None if timeout is None else time.monotonic() + timeout
        pipes = [f for f in (self.stdout, self.stderr) if f is not None and not f.closed]
        with selectors.DefaultSelector() as sel:
            for f in pipes:
                self._chunks.setdefault(f, b"")
                sel.register(f.fileno(), selectors.EVENT_READ, f)
            while sel.get_map():
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise subprocess.TimeoutExpired(self.args, timeout)
                for key, _ in sel.select(left):
                    data = os.read(key.fd, 65536)
                    if data:
                        self._chunks[key.data] += data
                    else:
                        sel.unregister(key.fd)
                        key.data.close()
        left = None if deadline is None else max(0.0, deadline - time.monotonic())
        try:
            self.wait(left)
        except subprocess.TimeoutExpired:
            raise subprocess.TimeoutExpired(self.args, timeout) from None
        out = []
        for f in (self.stdout, self.stderr):
            data = self._chunks.get(f) if f is not None else None
            if data is not None and self.text:
                import locale
                data = data.decode(locale.getpreferredencoding(False)).replace("\r\n", "\n").replace("\r", "\n")
            out.append(data)
        return tuple(out)

    def send_signal(self, sig):
        if self.poll() is None:
            os.kill(self.pid, sig)

    def terminate(self):
        self.send_signal(signal.SIGTERM)

    def kill(self):
        self.send_signal(signal.SIGKILL)


class Zygote:
    """The torch zygote of this test process (torch_zygote.py under the venv's python), started at the first rank
    that asks for it: it forks trainer ranks from an interpreter that has imported torch once, which saves each
    rank the ~2.4 s of CPU of `import torch` (issue 38). SCOUT_TEST_ZYGOTE=0 turns it off; when it cannot start,
    ranks start as before (subprocess.Popen) and the reason is printed once. Start it from the main thread: it
    dies with the thread that started it (PR_SET_PDEATHSIG), and at this process's exit (atexit: stop()).

    What a forked rank shares with its siblings, unlike fresh interpreters: the str hash seed (PYTHONHASHSEED) and
    the state of generators seeded at import (numpy's global one; `random` is reseeded at fork, torch's default
    generator has a fixed seed anyway)."""

    _state = {"zygote": None, "failed": None}
    SCRIPT = os.path.join(HERE, "torch_zygote.py")

    def __init__(self, python):
        self.dir = tempfile.mkdtemp(prefix="scout-zygote-")
        self.path = os.path.join(self.dir, "sock")
        env = {k: v for k, v in os.environ.items() if k != "SCOUT_PUBLISH"}
        # As every rank has them (TrainerJob.env): one thread per process, and no scout sitecustomize (autoload)
        # on the path: the publisher is imported by the ranks, in their own environment.
        env.update({"OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"})
        autoload = os.path.join(PYTHON_DIR, "autoload")
        paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep)
                 if p and os.path.abspath(p) != os.path.abspath(autoload)]
        if paths:
            env["PYTHONPATH"] = os.pathsep.join(paths)
        else:
            env.pop("PYTHONPATH", None)
        self.proc = subprocess.Popen([python, self.SCRIPT, self.path, str(os.getpid())], env=env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=HERE)
        import select
        line = b""
        if select.select([self.proc.stdout], [], [], 120)[0]:
            line = self.proc.stdout.readline()
        if line.strip() != b"ready":
            self.stop()
            why = line.decode(errors="replace").strip() or "no answer in 120 s"
            raise RuntimeError(f"the torch zygote did not start ({why})")
        self.python = python

    @classmethod
    def get(cls, python):
        """The running zygote for `python`, or None (off, or it could not start: said once on stderr)."""
        if os.environ.get("SCOUT_TEST_ZYGOTE", "1") == "0" or cls._state["failed"]:
            return None
        z = cls._state["zygote"]
        if z is not None and z.python == python and z.proc.poll() is None:
            return z
        if z is not None:
            z.stop()
            cls._state["zygote"] = None
        try:
            z = cls(python)
        except (OSError, RuntimeError) as e:
            cls._state["failed"] = str(e)
            print(f"trainer_harness: ranks start without the torch zygote: {e}", file=sys.stderr, flush=True)
            return None
        cls._state["zygote"] = z
        import atexit
        atexit.register(z.stop)
        return z

    def spawn(self, argv, env, stdout, stderr=subprocess.STDOUT, text=False):
        """Forks `python argv...` with env, stdin /dev/null, in a new session (as Popen(start_new_session=True));
        stdout: a file, subprocess.PIPE or DEVNULL; stderr: the same or subprocess.STDOUT (onto stdout, as Popen's).
        Returns its ZygoteProcess (with stdout/stderr file objects for the pipes: text ones with `text`)."""
        data = json.dumps({"argv": list(argv), "env": dict(env), "cwd": os.getcwd()}).encode()
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        conn.settimeout(30)
        mine, theirs = [], []  # descriptors opened here: closed once sent, and the pipes' read ends
        try:
            def target(how):
                if how == subprocess.PIPE:
                    r, w = os.pipe2(os.O_CLOEXEC)
                    mine.append(r)
                    theirs.append(w)
                    return w, r
                if how == subprocess.DEVNULL:
                    fd = os.open(os.devnull, os.O_WRONLY | os.O_CLOEXEC)
                    theirs.append(fd)
                    return fd, None
                return how.fileno(), None

            out_fd, out_r = target(stdout)
            err_fd, err_r = (out_fd, None) if stderr == subprocess.STDOUT else target(stderr)
            devnull = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
            theirs.append(devnull)
            conn.connect(self.path)
            socket.send_fds(conn, [struct.pack(">Q", len(data))], [devnull, out_fd, err_fd])
            conn.sendall(data)
            line = b""
            while not line.endswith(b"\n"):
                chunk = conn.recv(4096)
                if not chunk:
                    raise RuntimeError("the torch zygote closed the connection without a pid")
                line += chunk
        except BaseException:
            conn.close()
            for fd in mine:
                os.close(fd)
            raise
        finally:
            for fd in theirs:
                os.close(fd)
        first, _, rest = line.partition(b"\n")
        pipes = [open(r, "r" if text else "rb") if r is not None else None
                 for r in (out_r, err_r)]
        proc = ZygoteProcess([self.python, *argv], conn, json.loads(first)["pid"], *pipes, text=text)
        proc._buf = rest
        return proc

    def stop(self):
        """Closes the zygote's stdin (it reaps its last children and exits) and reaps it here, so that its CPU
        time and its children's count in this process's."""
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc.stdout.close()
        shutil.rmtree(self.dir, ignore_errors=True)


def start_rank(python, argv, env, log, zygote=True, stderr=subprocess.STDOUT, text=False):
    """Starts `python argv...` (a trainer rank) with env, stdin /dev/null, stdout on `log` (a file, subprocess.PIPE
    or DEVNULL) and stderr on it too (or on `stderr`: PIPE, DEVNULL, a file), in its own session; forked by the
    torch zygote when `zygote` and it runs (ZygoteProcess), else a subprocess.Popen. `text`: pipes read as str."""
    z = Zygote.get(python) if zygote else None
    if z is not None:
        return z.spawn(argv, env, log, stderr, text)
    return subprocess.Popen([python, *argv], env=env, stdout=log, stderr=stderr, text=text,
                            stdin=subprocess.DEVNULL, start_new_session=True)


class TrainerJob:
    """One launched job. Fault rank and step are drawn from `seed` (printed)
    unless given; fault_step is drawn in [2, steps - 1] so that the job has
    completed steps before the fault and would have more after it."""

    def __init__(self, world=3, steps=6, fault="none", fault_rank=None, fault_step=None, seed=None, job=None,
                 publisher="call", rank_prefix=None, master_addr="127.0.0.1", extra_env=None, pg_timeout=60.0,
                 step_delay=0.0, trainer_args=(), trainer=None, launcher=None):
        if fault not in FAULTS:
            raise ValueError(f"unknown fault {fault!r}")
        self.python = require_python()
        self.trainer = trainer or TRAINER
        self.seed = seed if seed is not None else random.SystemRandom().randrange(1 << 31)
        rng = random.Random(self.seed)
        self.world, self.steps, self.fault = world, steps, fault
        self.fault_rank = fault_rank if fault_rank is not None else rng.randrange(world)
        self.fault_step = fault_step if fault_step is not None else rng.randint(2, max(2, steps - 1))
        _counter[0] += 1
        self.job = job or f"harness-{os.getpid()}-{_counter[0]}-{self.seed}"
        self.publisher, self.rank_prefix, self.master_addr = publisher, rank_prefix, master_addr
        self.extra_env = dict(extra_env or {})
        self.pg_timeout, self.step_delay, self.trainer_args = pg_timeout, step_delay, list(trainer_args)
        if launcher not in (None, "torchrun"):
            raise ValueError(f"unknown launcher {launcher!r}")
        if launcher == "torchrun" and rank_prefix:
            raise ValueError("torchrun starts every rank itself: no rank_prefix")
        self.launcher = launcher
        self._rank_pids = {}  # torchrun: rank -> pid, learnt from the records
        self.procs = []
        self.logdir = tempfile.mkdtemp(prefix="scout-trainers-")
        self._logs = []
        print(f"trainer_harness: seed={self.seed} job={self.job} world={world} fault={fault} "
              f"fault_rank={self.fault_rank} fault_step={self.fault_step}", file=sys.stderr, flush=True)

    def env(self, rank, port):
        env = dict(os.environ)
        env.update({"RANK": str(rank), "WORLD_SIZE": str(self.world), "LOCAL_RANK": str(rank),
                    "MASTER_ADDR": self.master_addr, "MASTER_PORT": str(port), "SCOUT_JOB": self.job,
                    "SCOUT_PUBLISHER_LIB": PUBLISHER_LIB, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1",
                    # The publisher's automatic probe stays off unless a test asks for it
                    # (extra_env SCOUT_AUTOPROBE=1, test_autoprobe): tests run scout by hand.
                    "SCOUT_AUTOPROBE": "0"})
        paths = [PYTHON_DIR]
        if self.publisher == "env":
            env["SCOUT_PUBLISH"] = "1"
            paths.insert(0, os.path.join(PYTHON_DIR, "autoload"))
        env["PYTHONPATH"] = os.pathsep.join(paths + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
        env.update(self.extra_env)
        return env

    def trainer_command(self):
        return [self.trainer, "--steps", str(self.steps), "--fault", self.fault, "--fault-rank", str(self.fault_rank),
                "--fault-step", str(self.fault_step), "--publisher", self.publisher, "--pg-timeout", str(self.pg_timeout),
                "--step-delay", str(self.step_delay), *self.trainer_args]

    def start(self):
        port = free_port()
        if self.launcher == "torchrun":
            # torchrun (torch.distributed.run) hosts the rendezvous TCPStore and sets
            # RANK / LOCAL_RANK / WORLD_SIZE for the workers it starts.
            env = self.env(0, port)
            for k in ("RANK", "LOCAL_RANK", "WORLD_SIZE"):
                env.pop(k, None)
            cmd = [self.python, "-m", "torch.distributed.run", "--nnodes", "1", "--nproc-per-node", str(self.world),
                   "--master-addr", self.master_addr, "--master-port", str(port), "--max-restarts", "0",
                   *self.trainer_command()]
            log = open(os.path.join(self.logdir, "torchrun.log"), "w")
            self._logs.append(log)
            self.procs.append(subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT,
                                               stdin=subprocess.DEVNULL, start_new_session=True))
            return self
        for rank in range(self.world):
            log = open(os.path.join(self.logdir, f"rank{rank}.log"), "w")
            self._logs.append(log)
            if self.rank_prefix:
                cmd = list(self.rank_prefix(rank)) + [self.python, *self.trainer_command()]
                self.procs.append(subprocess.Popen(cmd, env=self.env(rank, port), stdout=log, stderr=subprocess.STDOUT,
                                                   stdin=subprocess.DEVNULL, start_new_session=True))
            else:
                # publisher="env": its sitecustomize must run before torch is imported, so no zygote.
                self.procs.append(start_rank(self.python, self.trainer_command(), self.env(rank, port), log,
                                             zygote=self.publisher != "env"))
        return self

    def _learn_pids(self):
        if self.launcher == "torchrun" and len(self._rank_pids) < self.world:
            try:
                for rank, r in self.records().items():
                    self._rank_pids.setdefault(rank, r["record"]["pid"])
            except (RuntimeError, KeyError, subprocess.TimeoutExpired):
                pass

    def pids(self):
        if self.launcher == "torchrun":
            self._learn_pids()
            return [self._rank_pids.get(r) for r in range(self.world)]
        return [p.pid for p in self.procs]

    def log(self, rank):
        name = "torchrun.log" if self.launcher == "torchrun" else f"rank{rank}.log"
        with open(os.path.join(self.logdir, name)) as f:
            return f.read()

    def state(self, rank):
        """Process state letter of `rank` (T: stopped), None when gone or reaped."""
        if self.launcher == "torchrun":
            pid = self.pids()[rank]
            return process_state(pid) if pid else None
        p = self.procs[rank]
        if p.poll() is not None:
            return None
        return process_state(p.pid)

    def returncodes(self):
        """Per rank: None while it runs; its exit status (-1 where torchrun reaped it unseen)."""
        if self.launcher == "torchrun":
            out = []
            for pid in self.pids():
                st = process_state(pid) if pid else "?"
                out.append(None if st not in (None, "Z") else -1)
            return out
        return [p.poll() for p in self.procs]

    def records(self):
        """The job's records by rank (entries of `scout records list` details.records)."""
        doc = scout_records(self.job)
        out = {}
        for r in doc["details"]["records"]:
            if r["record"] is not None:
                out[r["record"]["rank"]] = r
        return out

    def wait_exit(self, timeout=60):
        """Waits until every rank exited; returns the return codes (None: still running at the timeout)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and any(p.poll() is None for p in self.procs):
            time.sleep(0.05)
        return self.returncodes()

    def wait_training(self, min_step=1, timeout=120):
        """Waits until every rank has published step >= min_step (or some rank is gone):
        silence during interpreter start-up is not a hang."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if any(rc is not None for rc in self.returncodes()):
                return
            recs = self.records()
            if len(recs) == self.world and min(r["record"]["step"] for r in recs.values()) >= min_step:
                return
            time.sleep(0.1)
        raise TimeoutError(f"job {self.job} did not start training; logs in {self.logdir}")

    def settle(self):
        """Waits for training to start, then for the records to go silent."""
        self.wait_training()
        return self.wait_silent()

    def wait_silent(self, quiet_s=1.5, timeout=90):
        """Waits until every rank has a record, every running rank has published
        an event (start-up, e.g. importing torch, is not silence), and no record
        advanced (step, op_seq, collective state) and no process changed state
        for quiet_s seconds; returns records() then. Raises TimeoutError past `timeout`."""
        deadline = time.monotonic() + timeout
        last, since = None, time.monotonic()
        while time.monotonic() < deadline:
            recs = self.records()
            sig = (tuple(sorted((k, r["record"]["step"], r["record"]["op_seq"], r["record"]["collective_state"])
                                for k, r in recs.items())),
                   tuple(self.state(r) for r in range(self.world)))
            if sig != last:
                last, since = sig, time.monotonic()
            elif (len(recs) == self.world and time.monotonic() - since >= quiet_s and
                  all(r["record"]["op_seq"] > 0 or self.state(k) in (None, "T", "Z") for k, r in recs.items())):
                return recs
            time.sleep(0.1)
        raise TimeoutError(f"records of job {self.job} did not go silent in {timeout} s; logs in {self.logdir}")

    def teardown(self):
        """Kills every rank (continuing stopped ones), reaps them with a timeout,
        and removes the job's records and logs."""
        if getattr(self, "launcher", None) == "torchrun":  # its workers, whatever session torchrun gave them
            for pid in self.pids():
                for sig in (signal.SIGCONT, signal.SIGKILL):
                    try:
                        if pid:
                            os.kill(pid, sig)
                    except ProcessLookupError:
                        pass
        for p in self.procs:
            if p.poll() is None:
                for sig in (signal.SIGCONT, signal.SIGKILL):
                    try:
                        os.killpg(p.pid, sig)
                    except ProcessLookupError:
                        pass
        for p in self.procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                print(f"trainer_harness: pid {p.pid} did not die", file=sys.stderr)
        for log in self._logs:
            log.close()
        for name in os.listdir("/dev/shm"):
            if name.startswith(f"scout.{self.job}."):
                try:
                    os.unlink(os.path.join("/dev/shm", name))
                except OSError:
                    pass
        shutil.rmtree(self.logdir, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.teardown()
        return False


def start_stall(**kw):
    """A started, settled job of TrainerJob(**kw) whose fault rank stops itself before a collective while its peers
    wait inside it (a stall several tests can probe in turn); torn down if it fails to start or settle."""
    job = TrainerJob(fault="stop-before-collective", **kw)
    try:
        job.start()
        job.settle()
    except BaseException:
        job.teardown()
        raise
    return job


def assert_still_stalled(test, job):
    """Fails `test` unless `job` (start_stall) is still the stall it was: every rank alive, the fault rank stopped."""
    test.assertEqual(job.returncodes(), [None] * job.world, f"seed {job.seed}: every rank still runs")
    test.assertEqual(job.state(job.fault_rank), "T", f"seed {job.seed}: rank {job.fault_rank} still stopped")


def have_netns():
    """Whether this process can make network namespaces (root, iproute2 and
    CAP_SYS_ADMIN: root in a container may lack it, so one is made and removed)."""
    if os.geteuid() != 0 or shutil.which("ip") is None:
        return False
    name = f"scout-probe-{os.getpid()}"
    made = subprocess.run(["ip", "netns", "add", name], capture_output=True, timeout=30).returncode == 0
    if made:
        subprocess.run(["ip", "netns", "delete", name], capture_output=True, timeout=30)
    return made


class TwoNetnsNodes:
    """Two network namespaces ("nodes") joined by a veth link, for a true
    group-scoped stall: take the link down while every rank is alive inside a
    collective. Ranks 0..world/2-1 run in node 0, the rest in node 1.

        with TwoNetnsNodes() as nodes:
            job = TrainerJob(..., **nodes.job_args(world))
            nodes.link_down()
    """

    def __init__(self):
        tag = f"{os.getpid() % 100000}{_counter[0]}"
        _counter[0] += 1
        self.tag = tag
        self.ns = [f"scout{tag}a", f"scout{tag}b"]
        octet = 10 + (os.getpid() + _counter[0]) % 200
        self.addrs = [f"10.{octet}.77.1", f"10.{octet}.77.2"]

    @staticmethod
    def sh(*cmd):
        subprocess.run(cmd, check=True, capture_output=True, timeout=30)

    def __enter__(self):
        try:
            for n in self.ns:
                self.sh("ip", "netns", "add", n)
                self.sh("ip", "netns", "exec", n, "ip", "link", "set", "lo", "up")
            self.sh("ip", "link", "add", f"sv{self.tag}a", "type", "veth", "peer", "name", f"sv{self.tag}b")
            for i, n in enumerate(self.ns):
                end = f"sv{self.tag}{'ab'[i]}"
                self.sh("ip", "link", "set", end, "netns", n)
                self.sh("ip", "netns", "exec", n, "ip", "link", "set", end, "name", "scv0")
                self.sh("ip", "netns", "exec", n, "ip", "addr", "add", f"{self.addrs[i]}/24", "dev", "scv0")
                self.sh("ip", "netns", "exec", n, "ip", "link", "set", "scv0", "up")
        except BaseException:
            self.__exit__()
            raise
        return self

    def job_args(self, world):
        """TrainerJob arguments that place the ranks in the two nodes."""
        half = max(1, world // 2)
        return {"master_addr": self.addrs[0], "extra_env": {"GLOO_SOCKET_IFNAME": "scv0"},
                "rank_prefix": lambda r: ["ip", "netns", "exec", self.ns[min(1, r // half)]]}

    def link_down(self):
        self.sh("ip", "netns", "exec", self.ns[0], "ip", "link", "set", "scv0", "down")

    def __exit__(self, *exc):
        for n in self.ns:  # deleting a namespace removes its end of the veth, and so the pair
            subprocess.run(["ip", "netns", "delete", n], capture_output=True)
        return False


@contextlib.contextmanager
def group_stalled_job(world, rng):
    """A true group-scoped stall: ranks split over two netns nodes train, the
    link between the nodes goes down at a random moment (from rng) mid-run,
    and the job is yielded once its records are silent, every rank still
    alive inside a collective that cannot finish."""
    with TwoNetnsNodes() as nodes, TrainerJob(world=world, steps=400, fault="none", step_delay=0.05, pg_timeout=300,
                                               **nodes.job_args(world)) as job:
        job.start()
        job.wait_training(min_step=2)
        time.sleep(rng.uniform(0, 0.5))
        nodes.link_down()
        job.wait_silent(quiet_s=2.0)
        yield job


def main():
    p = argparse.ArgumentParser(description="Run a faulty DDP job with the scout publisher and show its records.")
    p.add_argument("--world", type=int, default=4)
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--fault", choices=FAULTS, default="none")
    p.add_argument("--fault-rank", type=int)
    p.add_argument("--fault-step", type=int)
    p.add_argument("--seed", type=int)
    p.add_argument("--keep", action="store_true", help="leave the job running/stopped and its records in place")
    a = p.parse_args()
    job = TrainerJob(world=a.world, steps=a.steps, fault=a.fault, fault_rank=a.fault_rank, fault_step=a.fault_step,
                     seed=a.seed)
    try:
        job.start()
        job.wait_silent()
        subprocess.run([SCOUT_BIN, "records", "list", "--job", job.job, "--format", "text"])
        print("return codes:", job.returncodes(), "states:", [job.state(r) for r in range(a.world)])
    finally:
        if not a.keep:
            job.teardown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
