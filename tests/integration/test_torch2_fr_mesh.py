"""Flight Recorder dumps alone, on a (dp=2, tp=2) gloo job of torch 2.x run
without scout's publisher (tests/integration/trainers/fr_mesh_job.py): ranks
are compared only with their true equivalents. The dp all_reduce's size
depends on the tp coordinate (an uneven shard), so a decision that took every
rank for a replica would name innocent ranks. Both layouts: plain new_group
pgs (gloo's pg_config names none of them: members come from which dumps call
each pg) and a DeviceMesh (its pgs' descriptions name the dims).

A clean job's dumps (every rank's last call the closing barrier, which gloo
shows retired but untimed) read healthy. A faulted rank and step are drawn from
a printed seed (SCOUT_TEST_SEED repeats one); the faulted rank is named and no
other rank ever is. Both dump forms (pickle, JSON) must give one verdict.

Skips with the reason when the torch 2.x venv is absent.
"""
import json
import os
import random
import shutil
import signal
import subprocess
import tempfile
import time
import unittest

from scoutlib import EXIT, ScoutTestCase, run
import trainer_harness as th

JOB = os.path.join(th.HERE, "trainers", "fr_mesh_job.py")
WORLD = 4


class FlightRecorderMesh(ScoutTestCase):
    @classmethod
    def setUpClass(cls):
        cls.py = th.require_python()

    def job(self, fault, layout, fault_rank=None):
        """Runs the job; returns (dump dir, fault rank, seed, message). `fault_rank`: the rank faulted,
        else one drawn from the seed."""
        seed = int(os.environ.get("SCOUT_TEST_SEED", random.randrange(1 << 31)))
        rng = random.Random(seed)
        drawn = rng.randrange(WORLD) if fault != "none" else -1
        fault_rank = drawn if fault_rank is None else fault_rank
        fault_step = rng.randrange(1, 4) if fault != "none" else -1
        msg = f"seed {seed} layout {layout} fault {fault} rank {fault_rank} step {fault_step}"
        print(f"== {msg}")
        d = tempfile.mkdtemp(prefix="scout-frm-")
        self.addCleanup(shutil.rmtree, d, True)
        port = str(th.free_port())
        # OMP_NUM_THREADS=1: the torch zygote's (torch_zygote.py), whose forked ranks keep the thread count it
        # imported torch with; a fresh rank is given the same.
        env = dict(os.environ, TORCH_FR_BUFFER_SIZE="2000", OMP_NUM_THREADS="1")
        # Forked by the torch zygote (th.start_rank, issue 38), each in its own session.
        procs = [th.start_rank(self.py, [JOB, str(r), str(WORLD), d, port, fault, str(fault_rank), str(fault_step),
                                         layout], env, subprocess.DEVNULL, stderr=subprocess.PIPE)
                 for r in range(WORLD)]
        survivors = WORLD - 1 if fault == "stop" else WORLD
        deadline = time.monotonic() + 90
        try:
            # Every rank but a stopped one ends: it finished, failed and dumped, or (gloo, a peer's
            # mismatched size) aborted without a dump.
            while time.monotonic() < deadline:
                if sum(p.poll() is not None for p in procs) >= survivors:
                    break
                time.sleep(0.2)
            else:
                raise AssertionError(f"{msg}: the job did not end: {os.listdir(d)}")
        finally:
            for p in procs:
                if p.poll() is None:
                    p.send_signal(signal.SIGKILL)
                p.wait()
                p.stderr.close()
        return d, fault_rank, msg

    def verdict(self, d, msg, extra=()):
        """scout on the JSON dumps, checked equal to its verdict on the pickled twins; `extra`: more flags."""
        res = run(["probe-hang", "--job", "j", "--flight-recorder", os.path.join(d, "json"), "--threshold", "1",
                   *extra], timeout=60)
        pres = run(["probe-hang", "--job", "j", "--flight-recorder", os.path.join(d, "pickle"), "--threshold", "1",
                    *extra], timeout=60)
        doc, pdoc = res.json(), pres.json()
        print(f"-- scout (exit {res.rc}): {doc['status']} kind {doc['details'].get('kind')} "
              f"suspects {[s['rank'] for s in doc['suspects']]}")
        self.assertEqual(pres.rc, res.rc, f"{msg}\njson: {res}\npickle: {pres}")
        self.assertEqual([s["rank"] for s in pdoc["suspects"]], [s["rank"] for s in doc["suspects"]], msg)
        return res, doc

    def clean(self, layout):
        d, _, msg = self.job("none", layout)
        res, doc = self.verdict(d, msg)
        self.assertExit(res, "healthy")
        self.assertEqual(doc["suspects"], [], f"{msg}\n{res}")

    def faulted(self, fault, layout):
        d, fault_rank, msg = self.job(fault, layout)
        res, doc = self.verdict(d, msg)
        named = sorted(s["rank"] for s in doc["suspects"])
        # Never an innocent: the faulted rank, or nobody with an inconclusive verdict.
        self.assertIn(named, ([], [fault_rank]), f"{msg}\n{res}")
        if fault in ("exit", "stop"):
            # gloo's dumps name no world size (pg_config holds one pg, keyed by ""): the last rank's
            # absence may not show.
            missing = doc["details"]["missing_ranks"]
            self.assertIn(missing, ([fault_rank], [] if fault_rank == WORLD - 1 else [fault_rank]), f"{msg}\n{res}")
            if missing == [fault_rank]:
                # Every other rank waits inside the world all-reduce it never entered: it is named.
                self.assertEqual(named, [fault_rank], f"{msg}\n{res}")
        return res, named, fault_rank, msg

    def test_clean_job_groups(self):
        self.clean("groups")

    def test_clean_job_mesh(self):
        self.clean("mesh")

    def test_wrong_shape_groups(self):
        # gloo aborts a peer that receives the other size (no dump from it: its members cannot be told),
        # so an inconclusive verdict is allowed here; an innocent never is.
        self.faulted("wrong-shape", "groups")

    def test_other_kind_mesh(self):
        res, named, fault_rank, msg = self.faulted("other-kind", "mesh")
        self.assertEqual(named, [fault_rank], f"{msg}\n{res}")

    def test_skip_groups(self):
        res, named, fault_rank, msg = self.faulted("skip", "groups")
        self.assertEqual(named, [fault_rank], f"{msg}\n{res}")

    def test_exit_mesh(self):
        self.faulted("exit", "mesh")

    def test_exit_last_rank_groups_never_healthy(self):
        # The last rank exits without a dump; gloo retires the survivors' failed calls like finished ones, and
        # where each dumped after that, read as 3 ranks they were a job that ended (healthy on torch 2.12 and
        # 2.14, issue 39). Its tp and dp pgs were called by one survivor each, beside pgs of two: never healthy,
        # nobody named without the world; told it, the exited rank is named.
        d, fault_rank, msg = self.job("exit", "groups", fault_rank=WORLD - 1)
        res, doc = self.verdict(d, msg)
        self.assertNotEqual(doc["status"], "healthy", f"{msg}\n{res}")
        self.assertIn(sorted(s["rank"] for s in doc["suspects"]), ([], [fault_rank]), f"{msg}\n{res}")
        if not doc["suspects"]:
            self.assertExit(res, "inconclusive")
        res, doc = self.verdict(d, msg, ["--world", str(WORLD)])
        self.assertEqual([s["rank"] for s in doc["suspects"]], [fault_rank], f"{msg}\n{res}")

    def test_stop_last_rank_world(self):
        # The last rank stops without a dump: gloo's dumps name no world size, so alone they cannot show it
        # (nobody named, never an innocent); told the world (--world, or --mesh), it is missing and named.
        d, fault_rank, msg = self.job("stop", "groups", fault_rank=WORLD - 1)
        res, doc = self.verdict(d, msg)
        self.assertIn(sorted(s["rank"] for s in doc["suspects"]), ([], [fault_rank]), f"{msg}\n{res}")
        self.assertNotEqual(doc["status"], "healthy", f"{msg}\n{res}")
        for extra in (["--world", str(WORLD)], ["--mesh", "dp=2,tp=2"]):
            res, doc = self.verdict(d, msg, extra)
            self.assertEqual(doc["details"]["missing_ranks"], [fault_rank], f"{msg} {extra}\n{res}")
            self.assertEqual([s["rank"] for s in doc["suspects"]], [fault_rank], f"{msg} {extra}\n{res}")
        # A world too small for the dumps is an error naming the dump beyond it, not a verdict.
        res = run(["probe-hang", "--job", "j", "--flight-recorder", os.path.join(d, "json"), "--world", "2"],
                  timeout=60)
        self.assertCleanError(res, "bad_input", "probe-hang")
        self.assertIn("beyond the world of 2 ranks", res.stderr, str(res))
        res = run(["probe-hang", "--job", "j", "--flight-recorder", os.path.join(d, "json"), "--world", "3", "--mesh",
                   "dp=2,tp=2"], timeout=60)
        self.assertCleanError(res, "usage", "probe-hang")


if __name__ == "__main__":
    unittest.main()
