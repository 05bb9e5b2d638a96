"""Progress records end to end: real PyTorch DDP trainers (gloo) with the scout
publisher, real shared memory, the real `scout records` command.

Fault ranks and steps are drawn from a seed the harness prints
("trainer_harness: seed=..."); rerun one with SCOUT_TEST_SEED=N.
"""
import ctypes
import json
import atexit
import os
import random
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
import unittest

import scoutlib
import trainer_harness as th

WRITER = os.path.join(th.HERE, "trainers", "record_writer.py")
SEED = int(os.environ["SCOUT_TEST_SEED"]) if os.environ.get("SCOUT_TEST_SEED") else None


def seg_path(job, rank):
    return f"/dev/shm/scout.{job}.{rank}"


# Every writer process started, so that none outlives the tests: a leftover
# looping writer would hold ctest's output pipe open and stall the whole run.
_WRITERS = []


def _kill_writers():
    for p in _WRITERS:
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass


atexit.register(_kill_writers)


def tearDownModule():
    _kill_writers()


def writer(job, rank, world, mode, env=None):
    full = dict(os.environ, SCOUT_PUBLISHER_LIB=th.PUBLISHER_LIB, **(env or {}))
    p = subprocess.Popen([th.PYTHON, WRITER, job, str(rank), str(world), mode], stdout=subprocess.PIPE, text=True,
                         env=full, start_new_session=True)
    _WRITERS.append(p)
    if mode != "once":
        line = p.stdout.readline()
        assert line.strip() == "ready", line
        p.stdout.close()
    else:
        p.communicate(timeout=30)
        assert p.returncode == 0
    return p


def remove_job(job):
    for name in os.listdir("/dev/shm"):
        if name.startswith(f"scout.{job}."):
            os.unlink(os.path.join("/dev/shm", name))


def list_records(job, *extra):
    r = scoutlib.run(["records", "list", "--job", job, *extra])
    assert r.rc == 0, repr(r)
    return r.json()["details"]["records"]


def by_rank(records):
    return {r["record"]["rank"]: r for r in records if r["record"] is not None}


class CleanJob(scoutlib.ScoutTestCase):
    def test_records_outlive_their_writers_and_agree(self):
        with th.TrainerJob(world=3, steps=4, seed=SEED) as job:
            job.start()
            codes = job.wait_exit(120)
            self.assertEqual(codes, [0, 0, 0], "\n".join(job.log(r) for r in range(3)))
            for rank in range(3):
                st = os.stat(seg_path(job.job, rank))
                self.assertEqual(stat.S_IMODE(st.st_mode), 0o600)
                self.assertEqual(st.st_uid, os.geteuid())
            recs = by_rank(list_records(job.job))
            self.assertEqual(sorted(recs), [0, 1, 2])
            first = recs[0]["record"]
            for rank, r in recs.items():
                self.assertEqual(r["problem"], "none")
                self.assertFalse(r["writer_alive"], "writers exited: records are post mortem")
                self.assertFalse(r["stale"])
                rec = r["record"]
                self.assertEqual(rec["job"], job.job)
                self.assertEqual(rec["world_size"], 3)
                self.assertEqual(rec["coords"][0], rank)
                self.assertEqual(rec["step"], 4)
                self.assertEqual(rec["collective_state"], "done")
                self.assertEqual(rec["pending"]["type"], "barrier")
                # Every rank ran the same program: same event count, same collectives.
                self.assertEqual(rec["op_seq"], first["op_seq"])
                self.assertEqual(rec["pending"], first["pending"])
                self.assertEqual([(e["type"], e["count"], e["group_seq"], e["group"]) for e in rec["recent"]],
                                 [(e["type"], e["count"], e["group_seq"], e["group"]) for e in first["recent"]])
                types = {e["type"] for e in rec["recent"]}
                # DDP buckets (2.x: ProcessGroup hooks; 1.13: the default comm hook), loss, final barrier;
                # (DDP's constructor also broadcasts the parameters and all-gathers their shapes.)
                self.assertEqual(types - {"broadcast", "all_gather"} if th.HOOKS else types, {"all_reduce", "barrier"})
                for e in rec["recent"]:
                    self.assertIsNotNone(e["exit_ns"])
                    self.assertGreaterEqual(e["exit_ns"], e["enter_ns"])
                    # What the exit time is: 2.15's hooks take it from the backend's completion; the
                    # wrappers (1.13, 2.x before 2.15) when the call returned, or from the async call's
                    # future (DDP's buckets).
                    self.assertIn(e["exit_kind"], ("completed",) if th.HOOKS else ("returned", "completed"), e)
            # DDP buckets: float32 all_reduce of the model's 178 parameters (op SUM on 1.13's comm
            # hook; the 2.x hooks do not see the reduce op: -1).
            buckets = [e for e in first["recent"] if e["type"] == "all_reduce" and e["count"] == 178]
            self.assertEqual(len(buckets), 4)
            self.assertEqual({(e["dtype"], e["root_or_op"]) for e in buckets}, {("F32", -1 if th.HOOKS else 0)})
            text = scoutlib.run(["records", "list", "--job", job.job], fmt="text")
            self.assertEqual(text.rc, 0)
            self.assertIn(f"scout.{job.job}.2", text.stdout)
            self.assertIn("barrier", text.stdout)
            gc = scoutlib.run(["records", "gc", "--job", job.job]).json()
            self.assertEqual(sorted(s["segment"] for s in gc["details"]["segments"] if s["removed"]),
                             [f"scout.{job.job}.{r}" for r in range(3)])
            self.assertEqual(list_records(job.job), [])

    def test_enabled_by_environment_without_code_change(self):
        with th.TrainerJob(world=2, steps=2, publisher="env", seed=SEED) as job:
            job.start()
            self.assertEqual(job.wait_exit(120), [0, 0], job.log(0) + job.log(1))
            recs = by_rank(list_records(job.job))
            self.assertEqual(sorted(recs), [0, 1])
            self.assertEqual(recs[1]["record"]["step"], 2)


class PythonPackage(scoutlib.ScoutTestCase):
    def run_module(self, env, unset=()):
        tmp = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, tmp)
        script = os.path.join(tmp, "train.py")
        with open(script, "w") as f:
            f.write("import sys, scout_publisher\n"
                    "pub = scout_publisher.publisher()\n"
                    "print(pub.record.segment if pub else 'none')\n"
                    "print(' '.join(sys.argv[1:]))\n")
        full = dict(os.environ, PYTHONPATH=th.PYTHON_DIR, SCOUT_PUBLISHER_LIB=th.PUBLISHER_LIB, **env)
        for k in ("SCOUT_JOB", "TORCHELASTIC_RUN_ID", "SLURM_JOB_ID", *unset):
            if k not in env:
                full.pop(k, None)
        return subprocess.run([th.PYTHON, "-m", "scout_publisher", script, "--lr", "1"], capture_output=True,
                              text=True, env=full, timeout=120)

    def test_module_runner_reads_rank_and_mesh_from_the_environment(self):
        job = f"module-{os.getpid()}"
        self.addCleanup(remove_job, job)
        p = self.run_module({"TORCHELASTIC_RUN_ID": job, "RANK": "5", "WORLD_SIZE": "8", "SCOUT_MESH": "dp=4,tp=2"})
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout.split("\n")[:2], [f"scout.{job}.5", "--lr 1"])
        rec = by_rank(list_records(job))[5]["record"]
        self.assertEqual(rec["coords"], [2, 0, 1, 0, 0, 0])
        self.assertEqual(rec["world_size"], 8)

    def test_phases_and_steps_are_marked_without_code_change(self):
        job = f"phases-{os.getpid()}"
        self.addCleanup(remove_job, job)
        p = subprocess.run([th.PYTHON, os.path.join(th.HERE, "trainers", "phase_probe.py"), job, th.SCOUT_BIN],
                           capture_output=True, text=True, timeout=120,
                           env=dict(os.environ, PYTHONPATH=th.PYTHON_DIR, SCOUT_PUBLISHER_LIB=th.PUBLISHER_LIB))
        self.assertEqual(p.returncode, 0, p.stderr)
        seen = [json.loads(line) for line in p.stdout.splitlines()]
        seen = [(s["where"], s["phase"], s["step"]) for s in seen]
        # Two batches of two samples: the dataset is read while the iterator fetches.
        self.assertEqual(seen, [("dataset", "dataloader", 0), ("dataset", "dataloader", 0), ("forward", "forward", 0),
                                ("backward", "backward", 0), ("optimizer", "optimizer", 0),
                                ("dataset", "dataloader", 1), ("dataset", "dataloader", 1), ("forward", "forward", 1),
                                ("backward", "backward", 1), ("optimizer", "optimizer", 1), ("end", "idle", 2)])

    def test_forked_children_do_not_write_the_parent_record(self):
        job = f"fork-{os.getpid()}"
        self.addCleanup(remove_job, job)
        code = ("import os, scout_publisher\n"
                f"scout_publisher.enable(job={job!r}, rank=0, world_size=1, heartbeat_s=0)\n"
                "scout_publisher.phase('forward')\n"
                "pid = os.fork()\n"
                "if pid == 0:\n"
                "    scout_publisher.phase('checkpoint')\n"
                "    from scout_publisher import _torch\n"
                "    os._exit(0 if _torch._pub is None and scout_publisher.publisher() is None else 1)\n"
                "_, status = os.waitpid(pid, 0)\n"
                "raise SystemExit(os.waitstatus_to_exitcode(status))\n")
        p = subprocess.run([th.PYTHON, "-c", code], capture_output=True, text=True, timeout=120,
                           env=dict(os.environ, PYTHONPATH=th.PYTHON_DIR, SCOUT_PUBLISHER_LIB=th.PUBLISHER_LIB))
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(by_rank(list_records(job))[0]["record"]["phase"], "forward")

    def test_sigterm_marks_the_record_terminated_and_still_ends_the_process(self):
        # A launcher's SIGTERM (torchrun tearing its workers down after one failed), while the main thread is blocked
        # in C (a collective's wait: here a sleep in libc): the record says terminated and the process still dies of
        # SIGTERM. A forked child's SIGTERM (a DataLoader worker's) leaves the parent's record alone; SIGKILL cannot
        # mark it (that silence is what a node's death leaves).
        for how in ("term", "child", "kill"):
            with self.subTest(how=how):
                job = f"term-{how}-{os.getpid()}"
                self.addCleanup(remove_job, job)
                code = ("import ctypes, os, signal, sys, time, scout_publisher\n"
                        f"scout_publisher.enable(job={job!r}, rank=0, world_size=1, heartbeat_s=0)\n"
                        "scout_publisher.phase('forward')\n"
                        f"if {how == 'child'!r}:\n"
                        "    pid = os.fork()\n"
                        "    if pid == 0:\n"
                        "        time.sleep(60)\n"
                        "        os._exit(0)\n"
                        "    os.kill(pid, signal.SIGTERM)\n"
                        "    os.waitpid(pid, 0)\n"
                        "print('ready', flush=True)\n"
                        "ctypes.CDLL(None).sleep(60)\n")
                p = subprocess.Popen([th.PYTHON, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     env=dict(os.environ, PYTHONPATH=th.PYTHON_DIR, SCOUT_PUBLISHER_LIB=th.PUBLISHER_LIB))
                self.assertEqual(p.stdout.readline().strip(), "ready", p.stderr.read() if p.poll() is not None else "")
                if how == "child":
                    self.assertEqual(by_rank(list_records(job))[0]["record"]["phase"], "forward")
                p.send_signal(signal.SIGKILL if how == "kill" else signal.SIGTERM)
                p.wait(timeout=30)
                p.stdout.close()
                p.stderr.close()
                self.assertEqual(p.returncode, -signal.SIGKILL if how == "kill" else -signal.SIGTERM)
                self.assertEqual(by_rank(list_records(job))[0]["record"]["phase"],
                                 "forward" if how == "kill" else "terminated")

    def assertOneLineError(self, p, *fragments):
        """Exit code 2, nothing on stdout (the script never ran), and exactly one
        line on stderr: `scout_publisher: error: what; what to do`."""
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertEqual(p.stdout, "")
        lines = p.stderr.splitlines()
        self.assertEqual(len(lines), 1, p.stderr)
        self.assertRegex(lines[0], r"^scout_publisher: error: [^;]+; \S.*$")
        self.assertNotIn("Traceback", p.stderr)
        for fragment in fragments:
            self.assertIn(fragment, lines[0])

    def test_missing_job_is_a_clear_error(self):
        p = self.run_module({"RANK": "0", "WORLD_SIZE": "1"})
        self.assertOneLineError(p, "no job id", "SCOUT_JOB")

    def test_rank_outside_the_world_is_a_clear_error(self):
        p = self.run_module({"SCOUT_JOB": "j", "RANK": "4", "WORLD_SIZE": "4"})
        self.assertOneLineError(p, "rank 4 is not in [0, world size 4)", "RANK")
        p = self.run_module({"SCOUT_JOB": "j", "RANK": "one", "WORLD_SIZE": "4"})
        self.assertOneLineError(p, "'one'", "integers")
        p = self.run_module({"SCOUT_JOB": "j", "WORLD_SIZE": "4"}, unset=("RANK", "SLURM_PROCID"))
        self.assertOneLineError(p, "no rank or world size", "RANK and WORLD_SIZE")


class FaultRecords(scoutlib.ScoutTestCase):
    """Each fault leaves the record state the observer needs to localize it."""

    def run_fault(self, fault, wait="silent"):
        job = th.TrainerJob(world=3, steps=5, fault=fault, seed=SEED, pg_timeout=30)
        self.addCleanup(job.teardown)
        job.start()
        if wait == "exit":
            job.wait_exit(90)
        recs = job.wait_silent(quiet_s=1.5, timeout=120)
        logs = "\n".join(f"--- rank {r}\n{job.log(r)}" for r in range(3))
        return job, recs, logs

    # With torch 2.15's hooks a call's exit is written at its completion, by its Work's future callback or by the
    # watcher thread that polls Works every 2 ms (lib/torch_module/hooks/collective_hooks.cpp), not by the thread
    # that waited: a rank that stops itself or exits right after its last call returned can do so before that exit
    # is written (its last call then reads inside; seeds 1585768657 stop, exit in a loaded run). Either way its last
    # call is behind its peers', which is what names it.
    LAST_CALL_STATES = ("done", "inside") if th.HOOKS else ("done",)

    def pending_seq(self, recs, rank):
        return recs[rank]["record"]["pending"]["group_seq"]

    def test_stop_before_collective(self):
        job, recs, logs = self.run_fault("stop-before-collective")
        f = job.fault_rank
        self.assertEqual(job.state(f), "T", logs)
        self.assertEqual(recs[f]["record"]["step"], job.fault_step)
        self.assertIn(recs[f]["record"]["collective_state"], self.LAST_CALL_STATES, logs)
        for r in range(3):
            self.assertTrue(recs[r]["writer_alive"])
            if r == f:
                continue
            self.assertEqual(recs[r]["record"]["collective_state"], "inside", logs)
            self.assertEqual(self.pending_seq(recs, r), self.pending_seq(recs, f) + 1, logs)
            self.assertEqual(recs[r]["record"]["pending"]["count"], 1)
        # Ranks blocked in gloo keep their heartbeat thread beating (gloo waits
        # release the GIL); the stopped rank's heartbeat stops with it.
        time.sleep(2.5)
        later = job.records()
        for r in range(3):
            self.assertEqual(later[r]["record"]["progress_ns"], recs[r]["record"]["progress_ns"])
            beat = later[r]["record"]["heartbeat_ns"] - recs[r]["record"]["heartbeat_ns"]
            if r == f:
                self.assertEqual(beat, 0)
            else:
                self.assertGreater(beat, 0, "heartbeat of a rank blocked in a collective")

    def test_stop_inside_collective_looks_like_a_group_stall(self):
        job, recs, logs = self.run_fault("stop-inside-collective")
        f = job.fault_rank
        self.assertEqual(job.state(f), "T", logs)
        pendings = [recs[r]["record"]["pending"] for r in range(3)]
        self.assertEqual(pendings[0], pendings[1])
        self.assertEqual(pendings[1], pendings[2])
        for r in range(3):
            self.assertEqual(recs[r]["record"]["collective_state"], "inside", logs)
            self.assertEqual(recs[r]["record"]["step"], job.fault_step)
            if r != f:
                self.assertNotEqual(job.state(r), "T")

    def check_death(self, fault, expected_code):
        job, recs, logs = self.run_fault(fault, wait="exit")
        f = job.fault_rank
        codes = job.returncodes()
        self.assertEqual(codes[f], expected_code, logs)
        # gloo: the others fail within milliseconds ("Connection closed by peer").
        for r in range(3):
            self.assertIsNotNone(codes[r], logs)
            self.assertFalse(recs[r]["writer_alive"])
            self.assertEqual(recs[r]["problem"], "none")
        rec = recs[f]["record"]
        self.assertEqual(rec["step"], job.fault_step)
        self.assertIn(rec["collective_state"], self.LAST_CALL_STATES, logs)
        self.assertLessEqual(self.pending_seq(recs, f), min(self.pending_seq(recs, r) for r in range(3)), logs)
        return job, recs, logs

    def test_exit(self):
        self.check_death("exit", 3)

    def test_crash(self):
        self.check_death("crash", -signal.SIGABRT)

    def test_skip_collective(self):
        job, recs, logs = self.run_fault("skip-collective")
        f = job.fault_rank
        # The skipping rank went on to the next step's DDP all-reduce: same
        # group sequence number as the others' loss all_reduce, another
        # fingerprint (178 elements, not 1) and a later step.
        rec = recs[f]["record"]
        self.assertEqual(rec["step"], job.fault_step, logs)
        others = [recs[r]["record"] for r in range(3) if r != f]
        skipped = [e for e in rec["recent"] if e["count"] == 1 and e["type"] == "all_reduce"]
        self.assertEqual(len(skipped), job.fault_step - 1, "one loss all_reduce per step except the skipped one")
        for o in others:
            mine = {e["group_seq"]: e for e in rec["recent"]}
            theirs = {e["group_seq"]: e for e in o["recent"]}
            diverged = sorted(s for s in mine if s in theirs and (mine[s]["count"], mine[s]["type"]) !=
                              (theirs[s]["count"], theirs[s]["type"]))
            self.assertTrue(diverged, logs)
            self.assertEqual(theirs[diverged[0]]["count"], 1)

    def test_wrong_shape(self):
        # On gloo a mismatched all_reduce size does not fail fast: the ranks
        # wait until the gloo timeout, so the records are read while they wait.
        job, recs, logs = self.run_fault("wrong-shape")
        f = job.fault_rank
        mine = {e["group_seq"]: e for e in recs[f]["record"]["recent"]}
        wrong = [s for s, e in mine.items() if e["count"] == 2]
        self.assertEqual(len(wrong), 1, logs)
        for r in range(3):
            if r == f:
                continue
            theirs = {e["group_seq"]: e for e in recs[r]["record"]["recent"]}
            if wrong[0] in theirs:
                self.assertEqual(theirs[wrong[0]]["count"], 1)
                self.assertEqual(theirs[wrong[0]]["type"], "all_reduce")


class RecordIntegrity(scoutlib.ScoutTestCase):
    def setUp(self):
        self.job = f"integrity-{os.getpid()}-{random.randrange(1 << 30)}"
        self.addCleanup(remove_job, self.job)

    def test_writer_killed_mid_write_never_leaves_an_inconsistent_snapshot(self):
        seed = SEED if SEED is not None else random.SystemRandom().randrange(1 << 31)
        print(f"test_records: kill seed={seed}", file=sys.stderr)
        rng = random.Random(seed)
        for round_ in range(12):
            p = writer(self.job, 0, 1, "loop")
            for _ in range(3):  # concurrent reads while it writes
                rec = list_records(self.job)[0]
                self.assertIn(rec["problem"], ("none", "torn"), rec)
                if rec["record"]:
                    self.check_invariant(rec["record"])
            time.sleep(rng.uniform(0, 0.05))
            os.killpg(p.pid, signal.SIGKILL)
            p.wait(timeout=10)
            rec = list_records(self.job)[0]
            self.assertEqual(rec["problem"], "none", rec)  # the latch keeps a complete copy
            self.assertFalse(rec["writer_alive"])
            self.check_invariant(rec["record"])

    def check_invariant(self, rec):
        f = rec["pending"]
        self.assertEqual(f["count"], f["group_seq"])
        self.assertEqual(f["root_or_op"], f["group_seq"])
        self.assertEqual(int(f["group"], 16), f["group_seq"])
        for e in rec["recent"]:
            self.assertEqual(e["count"], e["group_seq"])

    def patch_word(self, index, value):
        with open(seg_path(self.job, 0), "r+b") as f:
            f.seek(8 * index)
            f.write(ctypes.c_uint64(value))

    def test_bad_magic_and_unknown_version_are_refused(self):
        writer(self.job, 0, 1, "once")
        self.patch_word(1, 99)
        rec = list_records(self.job)[0]
        self.assertEqual(rec["problem"], "unknown_version")
        self.assertIn("version 99", rec["message"])
        self.assertIsNone(rec["record"])
        self.patch_word(0, 0x1122334455667788)
        rec = list_records(self.job)[0]
        self.assertEqual(rec["problem"], "bad_magic")
        self.assertIn("not a scout record", rec["message"])
        gc = scoutlib.run(["records", "gc", "--job", self.job]).json()
        self.assertEqual([s["removed"] for s in gc["details"]["segments"]], [False])

    def test_other_job_with_a_colliding_name_is_refused(self):
        writer(self.job + ".x", 0, 1, "once")  # sanitized to the same name as "<job>_x"
        self.addCleanup(remove_job, self.job + "_x")
        rec = list_records(self.job + "_x")[0]
        self.assertEqual(rec["problem"], "other_job")
        self.assertIn(self.job + ".x", rec["message"])

    def test_other_owner_is_refused(self):
        writer(self.job, 0, 1, "once")
        os.chmod(seg_path(self.job, 0), 0o644)
        rec = list_records(self.job)[0]
        self.assertEqual(rec["problem"], "other_owner")
        self.assertIn("0644", rec["message"])
        os.chmod(seg_path(self.job, 0), 0o600)
        if os.geteuid() != 0:
            self.skipTest("chown to another uid needs root")
        os.chown(seg_path(self.job, 0), 65534, 65534)
        rec = list_records(self.job)[0]
        self.assertEqual(rec["problem"], "other_owner")
        self.assertIn("uid 65534", rec["message"])
        self.assertEqual(list_records(self.job, "--allow-other-owner")[0]["problem"], "none")
        gc = scoutlib.run(["records", "gc", "--job", self.job]).json()
        self.assertFalse(gc["details"]["segments"][0]["removed"])

    def test_gc_removes_only_dead_writers(self):
        live = writer(self.job, 0, 2, "hold")
        self.addCleanup(lambda: (os.killpg(live.pid, signal.SIGKILL), live.wait(10)))
        writer(self.job, 1, 2, "once")
        recs = by_rank(list_records(self.job))
        self.assertTrue(recs[0]["writer_alive"])
        self.assertFalse(recs[1]["writer_alive"])
        dry = scoutlib.run(["records", "gc", "--job", self.job, "--dry-run"]).json()
        self.assertEqual({s["segment"]: s["removed"] for s in dry["details"]["segments"]},
                         {f"scout.{self.job}.0": False, f"scout.{self.job}.1": True})
        self.assertTrue(os.path.exists(seg_path(self.job, 1)))
        scoutlib.run(["records", "gc", "--job", self.job]).json()
        self.assertTrue(os.path.exists(seg_path(self.job, 0)))
        self.assertFalse(os.path.exists(seg_path(self.job, 1)))
        # A second live writer of the same rank is refused by the publisher.
        twin = subprocess.run([th.PYTHON, WRITER, self.job, "0", "2", "once"], capture_output=True, text=True,
                              env=dict(os.environ, SCOUT_PUBLISHER_LIB=th.PUBLISHER_LIB), timeout=30)
        self.assertNotEqual(twin.returncode, 0)
        self.assertIn("already publishes", twin.stderr)

    def test_stale_attempt_is_marked(self):
        writer(self.job, 0, 2, "once", env={"SCOUT_ATTEMPT": "0"})
        writer(self.job, 1, 2, "once", env={"SCOUT_ATTEMPT": "0"})
        writer(self.job, 0, 2, "once", env={"SCOUT_ATTEMPT": "1"})  # restart replaced rank 0 only
        recs = by_rank(list_records(self.job))
        self.assertFalse(recs[0]["stale"])
        self.assertEqual(recs[0]["record"]["attempt"], "1")
        self.assertTrue(recs[1]["stale"])


if __name__ == "__main__":
    unittest.main()
