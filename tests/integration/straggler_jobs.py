"""Real DDP jobs for the straggler tests and campaign (trainers/straggler_trainer.py,
gloo on 127.0.0.1, with the scout publisher), with slowdowns injected by the
trainer itself or from outside the process.

    with StragglerJob(world=4, seed=None) as job:      # seed printed
        job.start(slow_rank=2, slow_factor=1.7)         # the trainer slows itself
        job.wait_steps(5)
        job.duty_cycle(rank, factor)                    # SIGSTOP/SIGCONT from outside
        job.cpu_quota(rank, factor)                     # a cgroup v1 or v2 CPU quota (removed at teardown)
        job.cpu_hogs(rank, hogs)                        # rank and hogs pinned to one CPU (contention)
        job.slow_all()                                  # every rank slower from now on

The trainers run under the torch 2.x of $SCOUT_VENV (default <repo>/.venv; require_python() skips the test
when it is absent); python_for("1.13") is Debian's /usr/bin/python3, for rerunning
the held-out batches recorded on torch 1.13 (bench/heldout).
"""
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time

from trainer_harness import PUBLISHER_LIB, PYTHON_DIR, TrainerJob, free_port, python_for, require_python, scout_records  # noqa: F401

HERE = os.path.dirname(os.path.abspath(__file__))
TRAINER = os.path.join(HERE, "trainers", "straggler_trainer.py")


CPU_CGROUP_V1 = "/sys/fs/cgroup/cpu"
MEMORY_CGROUP_V1 = "/sys/fs/cgroup/memory"


def cpu_hierarchy():
    """(version, root) of the hierarchy the CPU controller is on: (1, CPU_CGROUP_V1) where a v1 cpu hierarchy
    is mounted there, else (2, mount point) of a cgroup2 mount whose root offers the cpu controller (a v2-only
    host's /sys/fs/cgroup, or a hybrid host's /sys/fs/cgroup/unified once no v1 hierarchy holds cpu); None."""
    if os.path.exists(os.path.join(CPU_CGROUP_V1, "cpu.cfs_quota_us")):
        return 1, CPU_CGROUP_V1
    try:
        with open("/proc/mounts") as f:
            mounts = [line.split() for line in f]
    except OSError:
        return None
    for fields in mounts:
        if len(fields) > 2 and fields[2] == "cgroup2":
            try:
                with open(os.path.join(fields[1], "cgroup.controllers")) as f:
                    if "cpu" in f.read().split():
                        return 2, fields[1]
            except OSError:
                continue
    return None


def cpu_quota_unavailable():
    """Why a real cgroup CPU quota (v1 or v2) cannot be set here (None: it can)."""
    h = cpu_hierarchy()
    if h is None:
        return f"no cpu controller: neither a cgroup v1 cpu hierarchy at {CPU_CGROUP_V1} nor a cgroup2 mount offering cpu"
    if not os.access(h[1], os.W_OK):
        return f"{h[1]} is not writable (not root)"
    return None


def memory_cgroup_unavailable():
    """Why a cgroup v1 memory limit (StragglerJob.memory_limit) cannot be set here (None: it can)."""
    if os.geteuid() != 0:
        return "a memory cgroup needs root"
    if not os.path.exists(os.path.join(MEMORY_CGROUP_V1, "memory.limit_in_bytes")):
        return f"no cgroup v1 memory controller at {MEMORY_CGROUP_V1}"
    return None


def process_cpu_s(pid):
    """CPU seconds of every thread of `pid` (utime + stime)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _write(path, value):
    with open(path, "w") as f:
        f.write(f"{value}\n")


def remove_cgroup(path, timeout_s=10):
    """Moves whatever is still in cgroup `path` back to the root and removes it (retried while its killed
    tasks leave)."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with open(os.path.join(path, "cgroup.procs")) as f:
                for pid in f.read().split():
                    try:
                        _write(os.path.join(os.path.dirname(path), "cgroup.procs"), pid)
                    except OSError:
                        pass
            os.rmdir(path)
            return
        except FileNotFoundError:
            return
        except OSError as e:
            if time.monotonic() > deadline:
                print(f"straggler_jobs: could not remove cgroup {path}: {e}", file=sys.stderr)
                return
            time.sleep(0.1)


def remove_stale_cgroups():
    """Removes the empty cgroups an earlier, killed test run left (rmdir fails on any that is in use)."""
    h = cpu_hierarchy()
    for root in ([h[1]] if h else []) + [MEMORY_CGROUP_V1]:
        try:
            names = os.listdir(root)
        except OSError:
            continue
        for name in names:
            if name.startswith("scout-straggler-"):
                try:
                    os.rmdir(os.path.join(root, name))
                except OSError:
                    pass


def busy_s(pid):
    """Seconds the main thread of `pid` was on a CPU or waiting for one (schedstat: run time, run-queue wait)."""
    with open(f"/proc/{pid}/task/{pid}/schedstat") as f:
        on, waited = f.read().split()[:2]
    return (int(on) + int(waited)) / 1e9


def busy_ratio(pids, victim, wait_s):
    """The victim's busy time (busy_s) over `wait_s` seconds divided by its peers' median (`pids`: every
    rank's, in rank order). The job is synchronous: every rank completes the same steps in the window, so
    this is the victim's busy time per step against its peers'. Busy time, not wait per CPU second: a rank
    that waits longest per CPU second may still use less CPU per step (seed 8000: the victim at 0.81-0.91x
    its peers' CPU per call and 1.51x their wait per CPU second before the rounds; in them its compute time
    was 1.18-1.19x theirs in two rounds of three, and it was not named)."""
    before = [busy_s(p) for p in pids]
    time.sleep(wait_s)
    return _ratio([busy_s(p) - b for p, b in zip(pids, before)], victim)


def _ratio(busy, victim):
    peers = sorted(x for r, x in enumerate(busy) if r != victim)
    mid = peers[len(peers) // 2] if len(peers) % 2 else (peers[len(peers) // 2 - 1] + peers[len(peers) // 2]) / 2
    return busy[victim] / mid if mid > 0 else float("inf")


def busy_per_round(evidence_path, victim):
    """busy_ratio in each round of recorded evidence (--evidence-out), from the scheduler counters every read
    took (per rank: CPU of all threads, main thread's CPU wait, main thread's CPU), between consecutive reads."""
    with open(evidence_path) as f:
        rounds = json.load(f)["rounds"]
    out, prev = [], None
    for rnd in rounds:
        cur = {r["rank"]: r.get("sched") for r in rnd["ranks"]}
        if prev is not None and all(cur.get(k) and prev.get(k) for k in cur):
            ranks = sorted(cur)
            out.append(_ratio([(cur[k][1] - prev[k][1]) + (cur[k][2] - prev[k][2]) for k in ranks], ranks.index(victim)))
        prev = cur
    return out


class StragglerJob:
    def __init__(self, world=4, tp=1, seed=None, python=None, work_ms=25, ranks_per_host=None):
        self.seed = seed if seed is not None else random.SystemRandom().randrange(1 << 31)
        self.rng = random.Random(self.seed)
        self.world, self.tp, self.python, self.work_ms = world, tp, python or require_python(), work_ms
        self.ranks_per_host = ranks_per_host
        self.job = f"straggler-{os.getpid()}-{self.seed}-{random.SystemRandom().randrange(1 << 20)}"
        self.logdir = tempfile.mkdtemp(prefix="scout-straggler-")
        self.slow_file = os.path.join(self.logdir, "slow-all")
        self.procs, self._logs, self._threads = [], [], []
        self._cgroups, self._hogs = [], []
        self._stop = threading.Event()
        print(f"straggler_jobs: seed={self.seed} job={self.job} world={world} tp={tp} python={python}",
              file=sys.stderr, flush=True)

    def host_of(self, rank):
        return f"host{rank // self.ranks_per_host}" if self.ranks_per_host else None

    def start(self, slow_rank=-1, slow_factor=1.0, slow_group=(), slow_group_delay=0.0, slow_all_factor=1.0,
              slow_at="each", slow_kind="cpu", read_mb=0):
        port = free_port()
        for rank in range(self.world):
            env = dict(os.environ)
            env.update({"RANK": str(rank), "WORLD_SIZE": str(self.world), "LOCAL_RANK": str(rank),
                        "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "SCOUT_JOB": self.job,
                        "SCOUT_PUBLISHER_LIB": PUBLISHER_LIB, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1", "SCOUT_AUTOPROBE": "0",
                        "PYTHONPATH": PYTHON_DIR})
            if self.ranks_per_host:
                env["SCOUT_HOST"] = self.host_of(rank)
            cmd = [self.python, TRAINER, "--work-ms", str(self.work_ms), "--tp", str(self.tp), "--slow-rank", str(slow_rank),
                   "--slow-factor", str(slow_factor), "--slow-at", slow_at, "--slow-kind", slow_kind,
                   "--slow-group-ranks", ",".join(map(str, slow_group)),
                   "--slow-group-delay", str(slow_group_delay), "--slow-all-file", self.slow_file,
                   "--slow-all-factor", str(slow_all_factor)]
            if read_mb > 0:  # a data loader reading its shard (memory_limit makes one rank read it from disk)
                cmd += ["--read-dir", self.logdir, "--read-mb", str(read_mb)]
            log = open(os.path.join(self.logdir, f"rank{rank}.log"), "w")
            self._logs.append(log)
            self.procs.append(subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT,
                                               stdin=subprocess.DEVNULL, start_new_session=True))
        return self

    def log(self, rank):
        with open(os.path.join(self.logdir, f"rank{rank}.log")) as f:
            return f.read()

    def wait_steps(self, steps, timeout=180):
        """Waits until every rank published step >= steps; raises with the logs when a rank died."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for r, p in enumerate(self.procs):
                if p.poll() is not None:
                    raise RuntimeError(f"rank {r} exited {p.returncode}:\n{self.log(r)[-3000:]}")
            try:
                recs = scout_records(self.job)["details"]["records"]
            except RuntimeError:
                recs = []
            steps_now = [r["record"]["step"] for r in recs if r.get("record")]
            if len(steps_now) == self.world and min(steps_now) >= steps:
                return
            time.sleep(0.2)
        raise TimeoutError(f"job {self.job} did not reach step {steps}; logs in {self.logdir}")

    def slow_all(self):
        """Every rank's computation takes slow_all_factor times its CPU from its next step on."""
        with open(self.slow_file, "w") as f:
            f.write("1\n")

    def duty_cycle(self, rank, factor, period_s=0.2):
        """Takes CPU time from `rank` from outside, as degraded hardware would: SIGSTOP for
        (1 - 1/factor) of every period, SIGCONT for the rest, until teardown."""
        pid = self.procs[rank].pid
        run_s = period_s / factor
        stop_s = period_s - run_s

        def loop():
            while not self._stop.is_set():
                try:
                    os.kill(pid, signal.SIGSTOP)
                    time.sleep(stop_s)
                    os.kill(pid, signal.SIGCONT)
                except ProcessLookupError:
                    return
                time.sleep(run_s)
            try:
                os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:
                pass

        t = threading.Thread(target=loop, daemon=True)
        t.start()
        self._threads.append(t)

    def cpu_quota(self, rank, factor, measure_s=1.0):
        """Limits `rank` with a real cgroup CPU quota (scout-straggler-<job> under the cpu controller's hierarchy,
        v1 or v2: cpu_hierarchy()): 1/factor of the CPU it used over `measure_s` before, so that it runs about
        `factor` times slower. Returns the quota in CPUs. Needs root and a cpu controller (cpu_quota_unavailable()
        says why not); the cgroup is removed at teardown, even when the test fails."""
        version, root = cpu_hierarchy()
        pid = self.procs[rank].pid
        before = process_cpu_s(pid)
        time.sleep(measure_s)
        rate = (process_cpu_s(pid) - before) / measure_s
        period = 100000
        quota = max(1000, int(period * rate / factor))
        path = os.path.join(root, f"scout-straggler-{self.job}")
        if version == 2:  # the root offers cpu to its children only once its subtree_control enables it
            with open(os.path.join(root, "cgroup.subtree_control")) as f:
                if "cpu" not in f.read().split():
                    _write(os.path.join(root, "cgroup.subtree_control"), "+cpu")
        os.mkdir(path)
        self._cgroups.append(path)
        if version == 1:
            _write(os.path.join(path, "cpu.cfs_period_us"), period)
            _write(os.path.join(path, "cpu.cfs_quota_us"), quota)
        else:
            _write(os.path.join(path, "cpu.max"), f"{quota} {period}")
        _write(os.path.join(path, "cgroup.procs"), pid)  # every thread of the process moves
        print(f"straggler_jobs: rank {rank} (pid {pid}) used {rate:.2f} CPUs; quota {quota}/{period} us in {path} "
              f"(cgroup v{version})", file=sys.stderr, flush=True)
        return quota / period

    def memory_limit(self, rank, limit_mb):
        """Puts `rank` in a cgroup v1 memory cgroup limited to `limit_mb` (scout-straggler-mem-<job>-<rank>, removed
        at teardown) and drops its shard's cached pages, so that its reads are charged there: with a limit under its
        shard (start(read_mb=N): 4 N MB) the kernel reclaims the shard's pages as it reads them, and every step reads
        its N MB from disk again (a rank under memory pressure). Needs root and the v1 memory controller."""
        path = os.path.join(MEMORY_CGROUP_V1, f"scout-straggler-mem-{self.job}-{rank}")
        os.makedirs(path, exist_ok=True)
        self._cgroups.append(path)
        _write(os.path.join(path, "memory.limit_in_bytes"), limit_mb << 20)
        _write(os.path.join(path, "cgroup.procs"), self.procs[rank].pid)
        fd = os.open(os.path.join(self.logdir, f"shard-{rank}"), os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)
        print(f"straggler_jobs: rank {rank} (pid {self.procs[rank].pid}) in {path}, memory limited to {limit_mb} MB",
              file=sys.stderr, flush=True)

    def cpu_hogs(self, rank, hogs, deadline_s=600):
        """Slows `rank` by contention alone: every thread of it pinned to one CPU with `hogs` busy loops, and
        every other rank pinned to the other CPUs (no quota, no signal; unpinned, the scheduler spread the hogs'
        load over every rank: measured, 4 hogs gave every rank the same CPU wait). The hogs end at teardown
        (or after deadline_s on their own). Needs 2 CPUs."""
        pid = self.procs[rank].pid
        cpus = os.sched_getaffinity(pid)
        cpu = max(cpus)
        rest = cpus - {cpu}
        if not rest:
            raise RuntimeError("cpu_hogs needs 2 CPUs")
        for r, p in enumerate(self.procs):
            for tid in os.listdir(f"/proc/{p.pid}/task"):
                try:
                    os.sched_setaffinity(int(tid), {cpu} if r == rank else rest)
                except (ProcessLookupError, OSError):
                    pass
        code = f"import os, time\nos.sched_setaffinity(0, {{{cpu}}})\nend = time.monotonic() + {deadline_s}\nwhile time.monotonic() < end: pass\n"
        for _ in range(hogs):
            self._hogs.append(subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.DEVNULL,
                                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True))
        print(f"straggler_jobs: rank {rank} (pid {pid}) pinned to CPU {cpu} with {hogs} hog(s)", file=sys.stderr, flush=True)
        return cpu

    def wait_slowdown(self, rank, seconds):
        """How much waiting for a CPU slows `rank` against its peers over `seconds`, from their main threads'
        schedstat: (1 + its wait per CPU second) / (1 + the peers' median wait per CPU second)."""
        def read():
            out = []
            for p in self.procs:
                with open(f"/proc/{p.pid}/task/{p.pid}/schedstat") as f:
                    on, waited = f.read().split()[:2]
                out.append((int(on), int(waited)))
            return out
        a = read()
        time.sleep(seconds)
        b = read()
        per_cpu = [(w1 - w0) / max(c1 - c0, 1) for (c0, w0), (c1, w1) in zip(a, b)]
        peers = sorted(x for r, x in enumerate(per_cpu) if r != rank)
        mid = peers[len(peers) // 2] if len(peers) % 2 else (peers[len(peers) // 2 - 1] + peers[len(peers) // 2]) / 2
        return (1 + per_cpu[rank]) / (1 + mid)

    def teardown(self):
        """Ends the duty cycles and hogs, then the harness's teardown: every rank killed (stopped ones continued
        first) and reaped with a timeout, the job's records and logs removed; then the job's cgroups."""
        self._stop.set()
        for t in self._threads:
            t.join(timeout=5)
        for h in self._hogs:
            h.kill()
        for h in self._hogs:
            try:
                h.wait(timeout=10)
            except subprocess.TimeoutExpired:
                print(f"straggler_jobs: hog {h.pid} did not die", file=sys.stderr)
        try:
            TrainerJob.teardown(self)  # it needs only procs, _logs, job and logdir, which this class keeps alike
        finally:
            for path in self._cgroups:
                remove_cgroup(path)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.teardown()
        return False
