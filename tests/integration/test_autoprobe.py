"""The publisher's automatic probe (integrations/python/scout_publisher/_autoprobe.py):
real 4-rank gloo jobs with the publisher and SCOUT_AUTOPROBE=1, nobody running
scout by hand. One rank, drawn from a printed seed (SCOUT_TEST_SEED reproduces
it), stops before a collective:

- with a short collective timeout the other ranks' collectives time out
  (torch 2.x: the hooks publish "failed"; torch 1.13: the wrappers do), and
  exactly one verdict per node appears beside the Flight Recorder dumps
  (TORCH_FR_DUMP_TEMP_FILE's directory), naming that rank; with root and ip
  netns the ranks run on two namespace "nodes" (LOCAL_WORLD_SIZE=2) whose
  probes meet over a store on node 0 (MASTER_PORT + 1);
- with a long timeout and SCOUT_AUTOPROBE_SILENCE, the silence triggers it;
- a healthy job writes nothing (no verdict, no log, no lock).
"""
import glob
import json
import os
import random
import shutil
import subprocess
import tempfile
import time
import unittest

from scoutlib import ScoutTestCase, validate
import trainer_harness as th

TRAINER2 = os.path.join(th.HERE, "trainers", "torch2_trainer.py")


def read(path):
    with open(path) as f:
        return f.read()


def seed_of(test):
    seed = int(os.environ.get("SCOUT_TEST_SEED") or random.SystemRandom().randrange(1 << 31))
    print(f"test_autoprobe: {test}: seed={seed}", flush=True)
    return seed


class AutoProbe(ScoutTestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="scout-autoprobe-")
        self.dumps = os.path.join(self.dir, "pickle")  # where the trainer's Flight Recorder dumps go
        os.makedirs(self.dumps)
        self.jobs = []

    def tearDown(self):
        for job in self.jobs:
            for lock in glob.glob(f"/dev/shm/scout-autoprobe.{job}.*"):
                os.unlink(lock)
        shutil.rmtree(self.dir, ignore_errors=True)

    def env(self, **more):
        env = {"SCOUT_AUTOPROBE": "1", "SCOUT_BIN": th.SCOUT_BIN, "SCOUT_TEST_FR_DIR": self.dir,
               "TORCH_FR_DUMP_TEMP_FILE": os.path.join(self.dumps, "rank_"), "SCOUT_AUTOPROBE_TIMEOUT": "30"}
        env.update(more)
        return env

    def verdicts(self):
        return sorted(glob.glob(os.path.join(self.dumps, "scout-verdict.*.json")))

    def logs(self):
        return sorted(glob.glob(os.path.join(self.dumps, "scout-autoprobe.*.log")))

    def wait_verdicts(self, job, nodes, timeout=240):
        """Waits until `nodes` probe logs say scout exited (or were killed), then a little
        more (a second probe of the same incident would show by then); returns the verdicts."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            done = [p for p in self.logs() if "scout exited" in read(p) or "killed" in read(p)]
            if len(done) >= nodes and all(rc is not None or st == "T" for rc, st in
                                          zip(job.returncodes(), (job.state(r) for r in range(job.world)))):
                time.sleep(3)
                return self.verdicts()
            time.sleep(0.3)
        logs = {p: read(p) for p in self.logs()}
        raise AssertionError(f"seed {job.seed}: {nodes} probe(s) did not finish: files {os.listdir(self.dumps)}, "
                             f"logs {logs}, trainer logs in {job.logdir}")

    def check(self, job, verdicts, nodes, triggers):
        msg = f"seed {job.seed} rank {job.fault_rank} step {job.fault_step}"
        logs = {os.path.basename(p): read(p) for p in self.logs()}
        print(f"test_autoprobe: {msg}: files {sorted(os.listdir(self.dumps))}")
        for name, text in logs.items():
            print(f"-- {name}\n{text}")
        names = [os.path.basename(v) for v in verdicts]
        self.assertEqual(len(verdicts), nodes, f"{msg}: one verdict per node: {names}\n{logs}")
        for n in range(nodes):
            self.assertEqual(len([x for x in names if f".node{n}." in x]), 1, f"{msg}: node {n}: {names}")
        for v in verdicts:
            with open(v) as f:
                doc = json.load(f)
            validate(doc)
            print(f"-- {os.path.basename(v)}: status {doc['status']}, suspects "
                  f"{[s['rank'] for s in doc['suspects']]}: {doc['summary']}")
            self.assertEqual(doc["command"], "probe-hang", msg)
            self.assertEqual(doc["status"], "attributed", f"{msg}\n{json.dumps(doc)[:3000]}")
            self.assertEqual([s["rank"] for s in doc["suspects"]], [job.fault_rank], msg)
        for name, text in logs.items():
            self.assertTrue(any(f"trigger {t} " in text for t in triggers), f"{msg}: {name}: {text}")
        self.assertEqual(len(glob.glob(f"/dev/shm/scout-autoprobe.{job.job}.*")), nodes, msg)

    def timeout_case(self, name, trainer, pg_timeout, trainer_args=()):
        seed = seed_of(f"timeout {name}")
        kw, nodes = {}, 1
        netns = th.TwoNetnsNodes() if th.have_netns() else None
        try:
            if netns is not None:
                netns.__enter__()
                kw = netns.job_args(4)
                kw["extra_env"]["LOCAL_WORLD_SIZE"] = "2"
                nodes = 2
            env = self.env(**kw.pop("extra_env", {}))
            with th.TrainerJob(world=4, steps=6, fault="stop-before-collective", seed=seed, trainer=trainer,
                               pg_timeout=pg_timeout, trainer_args=list(trainer_args), extra_env=env,
                               **kw) as job:
                self.jobs.append(job.job)
                job.start()
                verdicts = self.wait_verdicts(job, nodes)
                # Whichever the prober saw first: its record's failed collective, its Flight
                # Recorder dump, or the excepthook of the process ending on the timeout.
                self.check(job, verdicts, nodes, ("failed", "fr_dump", "comm_error"))
        finally:
            if netns is not None:
                netns.__exit__()

    def test_timeout_torch2(self):
        th.require_python()
        self.timeout_case("torch 2", TRAINER2, 8, ["--mode", "ddp"])

    def test_timeout_ddp_trainer(self):
        th.require_python()
        self.timeout_case("ddp trainer", th.TRAINER, 15)

    def test_silence(self):
        th.require_python()
        seed = seed_of("silence")
        with th.TrainerJob(world=4, steps=6, fault="stop-before-collective", seed=seed,
                           trainer=TRAINER2, pg_timeout=300, trainer_args=["--mode", "ddp"],
                           extra_env=self.env(SCOUT_AUTOPROBE_SILENCE="4")) as job:
            self.jobs.append(job.job)
            job.start()
            deadline = time.monotonic() + 240
            while time.monotonic() < deadline and not any("scout exited" in read(p) for p in self.logs()):
                time.sleep(0.3)
            time.sleep(3)
            # Every rank is still alive: the verdict came from the silence, long before the timeout.
            self.assertEqual(job.returncodes(), [None] * 4, f"seed {seed}")
            self.check(job, self.verdicts(), 1, ("silence",))

    def test_healthy_job_writes_nothing(self):
        th.require_python()
        seed = seed_of("healthy")
        with th.TrainerJob(world=4, steps=8, fault="none", seed=seed, trainer=TRAINER2,
                           pg_timeout=8, step_delay=0.3, trainer_args=["--mode", "ddp"],
                           extra_env=self.env(SCOUT_AUTOPROBE_SILENCE="4")) as job:
            self.jobs.append(job.job)
            job.start()
            self.assertEqual(job.wait_exit(timeout=240), [0] * 4, f"seed {seed}: logs in {job.logdir}")
            time.sleep(3)
            self.assertEqual(os.listdir(self.dumps), [], f"seed {seed}")
            self.assertEqual(glob.glob(f"/dev/shm/scout-autoprobe.{job.job}.*"), [], f"seed {seed}")

    def test_monitor_reads_its_failed_collective_and_elects_once(self):
        # The monitor's view of its own record (the layout of lib/records/layout.hpp read from
        # Python) sees a failed collective; two ranks of one node that both see it probe once.
        script = r"""
import json, os, sys
import scout_publisher
from scout_publisher import _autoprobe, _lib
job, rank = os.environ["SCOUT_JOB"], int(os.environ["RANK"])
pub = scout_publisher.enable(hook_torch=False, heartbeat_s=0)
m = _autoprobe.monitor()
m.stop()  # its thread would trigger too; this script drives the monitor itself
before = m.view.progress()
token = pub.record.enter(_lib.group_id(pub.lib, [0, 1]), 1, 0, 4, -1, 1)
pub.record.fail(token)
after = m.view.progress()
ran = m.trigger("failed")
again = m.trigger("failed")
print(json.dumps({"before": before[2], "after": after[2], "ran": ran, "again": again}))
"""
        job = f"autoprobe-unit-{os.getpid()}-{random.SystemRandom().randrange(1 << 30)}"
        self.jobs.append(job)
        out = []
        try:
            for rank in (0, 1):
                env = dict(os.environ, PYTHONPATH=th.PYTHON_DIR, SCOUT_PUBLISHER_LIB=th.PUBLISHER_LIB, SCOUT_JOB=job,
                           RANK=str(rank), WORLD_SIZE="2", SCOUT_AUTOPROBE_DELAY="0",
                           SCOUT_AUTOPROBE_DIR=self.dumps, SCOUT_BIN=th.SCOUT_BIN)
                p = subprocess.run([th.require_python(), "-c", script], env=env, capture_output=True, text=True,
                                   timeout=60)
                self.assertEqual(p.returncode, 0, p.stderr)
                out.append(json.loads(p.stdout.strip().splitlines()[-1]))
        finally:
            for rank in (0, 1):
                try:
                    os.unlink(f"/dev/shm/scout.{job}.{rank}")
                except OSError:
                    pass
        self.assertEqual([(o["before"], o["after"]) for o in out], [(0, 4), (0, 4)], out)  # none, then failed
        self.assertFalse(out[1]["ran"], out)  # the node's second rank finds the first one's lock
        self.assertEqual([o["again"] for o in out], [False, False], out)  # and nobody probes twice
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not any("scout exited" in read(p) for p in self.logs()):
            time.sleep(0.2)
        self.assertEqual(len(self.logs()), 1, os.listdir(self.dumps))
        self.assertEqual(len(glob.glob(f"/dev/shm/scout-autoprobe.{job}.*")), 1)
        print(read(self.logs()[0]))

    def test_flight_recorder_dump_of_the_rank_triggers(self):
        # NCCL's dump on timeout writes <TORCH_FR_DUMP_TEMP_FILE><rank> before it aborts: the
        # monitor's next poll sees it (a dump older than the process would not count).
        script = r"""
import os
import scout_publisher
from scout_publisher import _autoprobe
pub = scout_publisher.enable(hook_torch=False, heartbeat_s=0)
m = _autoprobe.monitor()
m.stop()
m.poll()
quiet = not os.listdir(os.environ["SCOUT_AUTOPROBE_DIR"])
with open(os.environ["TORCH_FR_DUMP_TEMP_FILE"] + os.environ["RANK"], "wb") as f:
    f.write(b"dump")
m.poll()
print("quiet" if quiet else "early")
"""
        job = f"autoprobe-fr-{os.getpid()}-{random.SystemRandom().randrange(1 << 30)}"
        self.jobs.append(job)
        out_dir = os.path.join(self.dir, "out")
        os.makedirs(out_dir)
        env = dict(os.environ, PYTHONPATH=th.PYTHON_DIR, SCOUT_PUBLISHER_LIB=th.PUBLISHER_LIB, SCOUT_JOB=job, RANK="1",
                   WORLD_SIZE="2", SCOUT_AUTOPROBE_DELAY="0", SCOUT_AUTOPROBE_DIR=out_dir, SCOUT_BIN=th.SCOUT_BIN,
                   TORCH_FR_DUMP_TEMP_FILE=os.path.join(self.dumps, "rank_"))
        try:
            p = subprocess.run([th.require_python(), "-c", script], env=env, capture_output=True, text=True, timeout=60)
        finally:
            try:
                os.unlink(f"/dev/shm/scout.{job}.1")
            except OSError:
                pass
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout.strip(), "quiet", p.stderr)
        self.assertIn("fr_dump: probing incident 0", p.stderr)
        deadline = time.monotonic() + 60
        logs = []
        while time.monotonic() < deadline:
            logs = glob.glob(os.path.join(out_dir, "scout-autoprobe.*.log"))
            if logs and "scout exited" in read(logs[0]):
                break
            time.sleep(0.2)
        self.assertEqual(len(logs), 1, os.listdir(out_dir))
        self.assertIn("trigger fr_dump on rank 1", read(logs[0]))

    def test_a_recovered_job_is_armed_again(self):
        # Incident 0 probed (by another local rank: its lock exists); this rank's step then
        # advances twice (the job recovered from a false alarm): the next trigger is incident 1.
        # One step is not enough (a rank that skipped a collective moves one step, then hangs).
        script = r"""
import json
import scout_publisher
from scout_publisher import _autoprobe
pub = scout_publisher.enable(hook_torch=False, heartbeat_s=0)
m = _autoprobe.monitor()
m.stop()
open(m.lock_path(0), "w").close()
out = {"first": m.trigger("silence")}
m.poll()
pub.begin_step()
m.poll()
out["one_step"] = m.incident
pub.begin_step()
m.poll()
out["two_steps"] = m.incident
out["second"] = m.trigger("silence")
print(json.dumps(out))
"""
        job = f"autoprobe-rearm-{os.getpid()}-{random.SystemRandom().randrange(1 << 30)}"
        self.jobs.append(job)
        env = dict(os.environ, PYTHONPATH=th.PYTHON_DIR, SCOUT_PUBLISHER_LIB=th.PUBLISHER_LIB, SCOUT_JOB=job, RANK="0",
                   WORLD_SIZE="1", SCOUT_AUTOPROBE_DELAY="0", SCOUT_AUTOPROBE_DIR=self.dumps, SCOUT_BIN=th.SCOUT_BIN)
        try:
            p = subprocess.run([th.require_python(), "-c", script], env=env, capture_output=True, text=True, timeout=60)
        finally:
            try:
                os.unlink(f"/dev/shm/scout.{job}.0")
            except OSError:
                pass
        self.assertEqual(p.returncode, 0, p.stderr)
        out = json.loads(p.stdout.strip().splitlines()[-1])
        self.assertEqual(out, {"first": False, "one_step": 0, "two_steps": 1, "second": True}, p.stderr)
        self.assertEqual(len(glob.glob(f"/dev/shm/scout-autoprobe.{job}.*")), 2)

    def test_the_monitors_record_offsets_are_the_layouts(self):
        # _autoprobe reads its own record from Python: its word offsets must be layout.hpp's.
        import re
        import sys
        sys.path.insert(0, th.PYTHON_DIR)
        from scout_publisher import _autoprobe as ap
        with open(os.path.join(th.SOURCE_DIR, "lib", "records", "layout.hpp")) as f:
            layout = f.read()
        self.assertIn(f"k_magic = {ap._MAGIC:#x}ull", layout.lower())
        self.assertIn(f"offsetof(Record, latch) == {ap._W_LATCH} * 8", layout)
        self.assertIn(f"offsetof(Record, progress) == {ap._W_PROGRESS} * 8", layout)
        self.assertIn(f"sizeof(Progress) == {ap._PROGRESS_WORDS} * 8", layout)
        progress = re.search(r"struct Progress \{(.*?)\};", layout, re.S).group(1)
        fields = re.findall(r"Word (\w+);", progress)
        self.assertEqual([fields.index(n) for n in ("step", "op_seq", "small", "progress_ns")],
                         [ap._P_STEP, ap._P_OP_SEQ, ap._P_SMALL, ap._P_PROGRESS_NS])
        with open(os.path.join(th.SOURCE_DIR, "lib", "records", "snapshot.hpp")) as f:
            self.assertIn("failed = 4", f.read())
        self.assertEqual(ap._STATE_FAILED, 4)


if __name__ == "__main__":
    unittest.main()
