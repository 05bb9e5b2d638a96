"""Real DDP jobs for the straggler tests and campaign (trainers/straggler_trainer.py,
gloo on 127.0.0.1, with the scout publisher), with slowdowns injected by the
trainer itself or from outside the process.

    with StragglerJob(world=4, seed=None) as job:      # seed printed
        job.start(slow_rank=2, slow_factor=1.7)         # the trainer slows itself
        job.wait_steps(5)
        job.duty_cycle(rank, factor)                    # SIGSTOP/SIGCONT from outside
        job.slow_all()                                  # every rank slower from now on

Interpreters: Debian's /usr/bin/python3 (torch 1.13), or torch 2.x from
$SCOUT_VENV (default <repo>/.venv): python_for("2") is None when it is absent.
"""
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time

from trainer_harness import PUBLISHER_LIB, PYTHON_DIR, TrainerJob, free_port, python_for, scout_records  # noqa: F401

HERE = os.path.dirname(os.path.abspath(__file__))
TRAINER = os.path.join(HERE, "trainers", "straggler_trainer.py")


class StragglerJob:
    def __init__(self, world=4, tp=1, seed=None, python="/usr/bin/python3", work_ms=25, ranks_per_host=None):
        self.seed = seed if seed is not None else random.SystemRandom().randrange(1 << 31)
        self.rng = random.Random(self.seed)
        self.world, self.tp, self.python, self.work_ms = world, tp, python, work_ms
        self.ranks_per_host = ranks_per_host
        self.job = f"straggler-{os.getpid()}-{self.seed}-{random.SystemRandom().randrange(1 << 20)}"
        self.logdir = tempfile.mkdtemp(prefix="scout-straggler-")
        self.slow_file = os.path.join(self.logdir, "slow-all")
        self.procs, self._logs, self._threads = [], [], []
        self._stop = threading.Event()
        print(f"straggler_jobs: seed={self.seed} job={self.job} world={world} tp={tp} python={python}",
              file=sys.stderr, flush=True)

    def host_of(self, rank):
        return f"host{rank // self.ranks_per_host}" if self.ranks_per_host else None

    def start(self, slow_rank=-1, slow_factor=1.0, slow_group=(), slow_group_delay=0.0, slow_all_factor=1.0):
        port = free_port()
        for rank in range(self.world):
            env = dict(os.environ)
            env.update({"RANK": str(rank), "WORLD_SIZE": str(self.world), "LOCAL_RANK": str(rank),
                        "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "SCOUT_JOB": self.job,
                        "SCOUT_PUBLISHER_LIB": PUBLISHER_LIB, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1",
                        "PYTHONPATH": PYTHON_DIR})
            if self.ranks_per_host:
                env["SCOUT_HOST"] = self.host_of(rank)
            cmd = [self.python, TRAINER, "--work-ms", str(self.work_ms), "--tp", str(self.tp), "--slow-rank", str(slow_rank),
                   "--slow-factor", str(slow_factor), "--slow-group-ranks", ",".join(map(str, slow_group)),
                   "--slow-group-delay", str(slow_group_delay), "--slow-all-file", self.slow_file,
                   "--slow-all-factor", str(slow_all_factor)]
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
        """Every rank does slow_all_factor times the work from its next step on."""
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

    def teardown(self):
        """Ends the duty cycles, then the harness's teardown: every rank killed (stopped ones continued
        first) and reaped with a timeout, the job's records and logs removed."""
        self._stop.set()
        for t in self._threads:
            t.join(timeout=5)
        TrainerJob.teardown(self)  # it needs only procs, _logs, job and logdir, which this class keeps alike

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.teardown()
        return False
