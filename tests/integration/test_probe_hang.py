"""End-to-end hang localization: real PyTorch DDP trainers (gloo, the scout
publisher), real shared-memory records, real observers over a FileStore or a
c10d TCPStore and Gloo TCP. Each injected fault hits a random rank at a random
step (the harness prints the seed); the verdict must name that rank, or call
the stall group-scoped, and never come from which rank died first.

Runs under /usr/bin/python3 via ctest (SCOUT_BIN etc. set there).
"""
import contextlib
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest
import zlib

from scoutlib import EXIT, SCOUT_BIN, ScoutTestCase, run, validate
from trainer_harness import TrainerJob, assert_still_stalled, free_port, group_stalled_job, have_netns, start_stall

HERE = os.path.dirname(os.path.abspath(__file__))
WORLD = 4
STEPS = 5
THRESHOLD = "1"   # the harness waits for 1.5 s of silence before probing
SEED = int(os.environ.get("SCOUT_TEST_SEED", random.SystemRandom().randrange(1 << 30)))
print(f"test_probe_hang seed {SEED} (rerun with SCOUT_TEST_SEED={SEED})", file=sys.stderr)


class SeededCase(ScoutTestCase):
    """self.rng: every draw of a test, reproduced by SCOUT_TEST_SEED (per test, in any order)."""

    def setUp(self):
        self.rng = random.Random(SEED ^ zlib.crc32(self._testMethodName.encode()))

    def job(self, **kw):
        return TrainerJob(seed=self.rng.randrange(1 << 31), **kw)

    @contextlib.contextmanager
    def stalled_job(self, fault_ranks=range(WORLD)):
        """A 4-rank job whose fault rank (one of `fault_ranks`) stopped itself before a collective while its peers
        wait inside it. One such job serves every test of the module that probes such a stall (a 4-rank job costs
        ~13 s of CPU to start, measured, and ~20 s to start and settle on 2 loaded cores): started on first use,
        torn down with the module (tearDownModule), its peers held by a 1800 s gloo timeout (ctest's limit for the
        file). Probes only read its records and /proc; each use first checks that the job is still the stall it
        was (every rank alive, the fault rank stopped)."""
        job = next((j for j in _STALLS if j.fault_rank in fault_ranks), None)
        if job is None:
            # Named after the class that first held these jobs, so that a seed draws the jobs it drew before.
            rng = random.Random(SEED ^ zlib.crc32(f"TwoObservers stall {len(_STALLS)}".encode()))
            job = start_stall(world=WORLD, steps=STEPS, seed=rng.randrange(1 << 31),
                              fault_rank=rng.choice(list(fault_ranks)), pg_timeout=1800)
            _STALLS.append(job)
        assert_still_stalled(self, job)
        yield job


_STALLS = []  # SeededCase.stalled_job's jobs


def tearDownModule():
    for job in _STALLS:
        job.teardown()
    _STALLS.clear()


def probe(job, *extra, timeout_s=10, env=None):
    """Runs probe-hang on `job`; fails the test (TimeoutExpired) if it outlives its own timeout by far."""
    return run(["probe-hang", "--job", job, "--threshold", THRESHOLD, "--timeout", str(timeout_s), *extra],
               timeout=timeout_s + 30, env=env)


def start_probe(job, *extra, timeout_s=10, env=None, log_level=None, threshold=THRESHOLD):
    cmd = [SCOUT_BIN, "probe-hang", "--job", job, "--threshold", threshold, "--timeout", str(timeout_s), "--format", "json",
           *extra]
    if log_level:
        cmd += ["--log-level", log_level]
    full_env = dict(os.environ)
    full_env.update(env or {})
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=full_env,
                            stdin=subprocess.DEVNULL)


def suspects(doc):
    return sorted(s["rank"] for s in doc["suspects"])


class FaultLocalization(SeededCase):
    """One job per fault, 4 ranks, fault at a random rank and step."""

    def localize(self, fault, kinds):
        # A rank stopped before a collective: the module's shared stall (stalled_job), which the two-observer
        # tests probe too; every other fault its own job.
        with self.stalled_job() if fault == "stop-before-collective" else self.job(world=WORLD, steps=STEPS, fault=fault) as job:
            if fault != "stop-before-collective":
                job.start()
                job.settle()
            res = probe(job.job)
            doc = res.json()
            msg = f"seed {job.seed} fault {fault} rank {job.fault_rank} step {job.fault_step}\n{res}"
            self.assertExit(res, "attributed")
            self.assertEqual(suspects(doc), [job.fault_rank], msg)
            self.assertIn(doc["details"]["kind"], kinds, msg)
            self.assertTrue(doc["details"]["stalled"], msg)
            s = doc["suspects"][0]
            for key in ("step", "op_seq", "pending", "process", "silent_s"):
                self.assertIn(key, s["evidence"], msg)
            self.assertTrue(doc["groups"], msg)
            row = doc["details"]["ranks"][job.fault_rank]
            self.assertEqual(row["rank"], job.fault_rank)
            return doc, job

    def test_stop_before_collective(self):
        # stopped_rank: the stopped rank named from its process state where its position alone
        # does not set it apart (seen on torch 2.x, seed 1168261885) is the right culprit too.
        doc, job = self.localize("stop-before-collective", ["rank_local_divergence", "stopped_rank"])
        self.assertEqual(doc["action"], "restart_in_place")
        self.assertEqual(doc["suspects"][0]["evidence"]["process"]["state"], "stopped")

    def test_exit(self):
        # dead_rank: on torch 2.x the exiting rank's last call can still read "inside" (its
        # completion is published from the Work's future, after the loop moved on), so it is
        # named as a rank that died behind its peers rather than as a local divergence.
        doc, _ = self.localize("exit", ["rank_local_divergence", "dead_rank"])
        self.assertEqual(doc["action"], "restart_in_place")

    def test_crash(self):
        self.localize("crash", ["rank_local_divergence", "dead_rank"])

    def test_skip_collective(self):
        doc, _ = self.localize("skip-collective", ["control_flow_divergence", "argument_divergence"])
        self.assertEqual(doc["action"], "escalate")

    def test_wrong_shape(self):
        doc, _ = self.localize("wrong-shape", ["argument_divergence"])
        self.assertEqual(doc["suspects"][0]["reason"], "collective_arguments_differ")

    def test_stop_inside_collective(self):
        # The records alone look like a group stall; only process state names the rank.
        doc, _ = self.localize("stop-inside-collective", ["stopped_rank"])
        self.assertEqual(doc["suspects"][0]["reason"], "process_stopped")

    def test_clean_job_is_healthy_while_running_and_after_it_ends(self):
        with self.job(world=WORLD, steps=40, fault="none", step_delay=0.1) as job:
            job.start()
            job.wait_training(min_step=2)
            res = run(["probe-hang", "--job", job.job, "--threshold", "5", "--timeout", "10"], timeout=60)
            doc = res.json()
            self.assertExit(res, "healthy")
            self.assertEqual(doc["status"], "healthy", res)
            self.assertEqual(doc["suspects"], [])
            codes = job.wait_exit(timeout=120)
            self.assertEqual(codes, [0] * WORLD, f"seed {job.seed}")
            res = probe(job.job)
            self.assertExit(res, "healthy")
            self.assertIn("ended", res.json()["summary"])


class GroupStall(SeededCase):
    @unittest.skipUnless(have_netns(), "needs root and ip netns for two namespace 'nodes'")
    def test_link_down_mid_collective_is_a_group_stall(self):
        rng = self.rng
        seed = rng.randrange(1 << 31)
        rng.seed(seed)
        print(f"group stall seed {seed}", file=sys.stderr)
        with group_stalled_job(WORLD, rng) as job:
            self.assertEqual(job.returncodes(), [None] * WORLD, "every rank must still be alive")
            res = probe(job.job)
            doc = res.json()
            self.assertExit(res, "inconclusive")
            self.assertEqual(doc["status"], "group_stall", res)
            self.assertEqual(doc["scope"], "group")
            self.assertEqual(doc["action"], "fabric_diagnostics")
            self.assertEqual(doc["suspects"], [])


class FourObservers:
    """four_observers_in_two_groups, for a stalled job (SeededCase.stalled_job) or a clean one
    (CleanJobObservers.running_job)."""

    def four_observers_in_two_groups(self, fault, extra=(), expect=None):
        """One observer per rank, in two groups of two (--observer-group-size 2): the groups' leaders
        (observers 0 and 2) decide and send the verdict down; every observer prints the same one."""
        store = tempfile.mkdtemp(prefix="scout-store-")
        try:
            clean = fault == "none"
            with self.running_job() if clean else self.stalled_job() as job:
                procs = [start_probe(job.job, "--nodes", str(WORLD), "--node-index", str(i), "--local-ranks", str(i),
                                     "--store", f"file://{store}", "--observer-group-size", "2", *extra,
                                     "--trace-out", os.path.join(store, f"trace-{i}.json"),
                                     timeout_s=30, threshold="10" if fault == "none" else THRESHOLD)
                         for i in range(WORLD)]
                outs = [p.communicate(timeout=90) for p in procs]
                if expect is not None:
                    for p, (out, err) in zip(procs, outs):
                        self.assertEqual(p.returncode, expect, f"seed {job.seed}\n{out}\n{err}")
                    return job, outs
                expect = EXIT["healthy"] if fault == "none" else EXIT["attributed"]
                docs = []
                for p, (out, err) in zip(procs, outs):
                    self.assertEqual(p.returncode, expect, f"seed {job.seed}\n{out}\n{err}")
                    doc = json.loads(out)
                    validate(doc)
                    docs.append(doc)
                for i, doc in enumerate(docs):
                    t = doc["details"]["transport"]
                    self.assertEqual((t["observer"], t["group"], t["leads"], t["observer_group_size"]),
                                     (i, i // 2, i % 2 == 0, 2), t)
                    self.assertEqual(doc["details"]["observers"]["reached"], list(range(WORLD)))
                    print(f"observer {i} ({'leader' if t['leads'] else 'member'}): {t['connections']} connections, "
                          f"bytes in {t['bytes_in']}", file=sys.stderr)
                strip = lambda d: json.dumps({k: v for k, v in d.items() if k not in ("created_at",)} | {
                    "details": {k: v for k, v in d["details"].items() if k not in ("transport", "trace")}}, sort_keys=True)
                for doc in docs[1:]:
                    self.assertEqual(strip(doc), strip(docs[0]))
                # Every observer's trace (--trace-out) holds a track for every rank, each from its own observer's
                # evidence, not only its own rank's: a leader's from its group, a member's from the verdict's
                # leaders.
                for i in range(WORLD):
                    with open(os.path.join(store, f"trace-{i}.json")) as f:
                        trace = json.load(f)
                    tracks = {t["rank"] for t in trace["otherData"]["tracks"]}
                    self.assertEqual(tracks, set(range(WORLD)), f"observer {i}, seed {job.seed}")
                    if fault != "none":
                        # Overlapping calls (torch 2.x's async bucket all-reduces) go to a rank's further lanes,
                        # tid 1000000 + 64 rank + lane (lib/trace/trace.cpp).
                        with_slices = {e["tid"] if e["tid"] < 1000000 else (e["tid"] - 1000000) // 64
                                       for e in trace["traceEvents"] if e["ph"] == "X"}
                        self.assertEqual(with_slices, set(range(WORLD)), f"observer {i}: empty tracks, seed {job.seed}")
                return job, docs
        finally:
            shutil.rmtree(store, ignore_errors=True)


class TwoObservers(FourObservers, SeededCase):
    """Ranks split over two observers ("nodes") that share this host's /dev/shm."""

    def two_node_probe(self, store_args, env=None, timeout_s=10):
        with self.stalled_job() as job:
            self.last_job = job.job
            procs = [start_probe(job.job, "--nodes", "2", "--node-index", str(i), "--local-ranks", f"{2 * i}-{2 * i + 1}",
                                 *store_args, env=env, timeout_s=timeout_s) for i in range(2)]
            outs = [p.communicate(timeout=60) for p in procs]
            docs = []
            for p, (out, err) in zip(procs, outs):
                self.assertEqual(p.returncode, EXIT["attributed"], f"seed {job.seed}\n{out}\n{err}")
                doc = json.loads(out)
                validate(doc)
                docs.append(doc)
            for doc in docs:
                self.assertEqual(suspects(doc), [job.fault_rank], f"seed {job.seed}")
                self.assertEqual(doc["details"]["unreachable"], [])
                self.assertEqual(doc["details"]["observers"]["reached"], [0, 1])
                # A stall: the positions do not prove the job healthy, so every node sent its compact
                # evidence, and the nodes holding one of each distinct ring sent their rings.
                self.assertEqual(doc["details"]["transport"]["evidence_from"], [0, 1])
                rings_from = doc["details"]["transport"]["rings_from"]
                self.assertTrue(rings_from and set(rings_from) <= {0, 1}, rings_from)
                self.assertEqual(doc["details"]["transport"]["rings_restored"]["lost"], 0)
                self.assertEqual(doc["details"]["ranks_listed"], "all")
                print(f"observer {doc['details']['transport']['observer']} (a stall): bytes in "
                      f"{doc['details']['transport']['bytes_in']}", file=sys.stderr)
            # Every observer computed the same verdict.
            strip = lambda d: json.dumps({k: v for k, v in d.items() if k not in ("created_at",)} | {
                "details": {k: v for k, v in d["details"].items() if k not in ("transport", "trace")}}, sort_keys=True)
            self.assertEqual(strip(docs[0]), strip(docs[1]))
            return docs

    def test_two_level_gather_names_the_rank(self):
        job, docs = self.four_observers_in_two_groups("stop-before-collective")
        self.assertEqual(suspects(docs[0]), [job.fault_rank], f"seed {job.seed}")
        self.assertEqual(docs[0]["details"]["transport"]["evidence_from"], list(range(WORLD)))
        rings_from = docs[0]["details"]["transport"]["rings_from"]
        self.assertTrue(rings_from and set(rings_from) <= set(range(WORLD)), rings_from)

    def test_file_store(self):
        store = tempfile.mkdtemp(prefix="scout-store-")
        try:
            docs = self.two_node_probe(["--store", f"file://{store}"], env={"SCOUT_JOB_TOKEN": "t0k3n-" + str(os.getpid())})
            self.assertTrue(all(d["details"]["transport"]["authenticated"] for d in docs))
            # Each observer removed every key it wrote but its "closed" marker for this generation
            # and its presence entry (kept, marked ended, for observers that meet nobody); the
            # job's presence counter stays too (it only ever counts up).
            self.assertEqual(len(os.listdir(store)), 5, os.listdir(store))
        finally:
            shutil.rmtree(store, ignore_errors=True)

    def test_tcp_store_hosted_by_observer_0(self):
        port = free_port()
        # Loading LibTorch for the TCPStore takes seconds on a loaded 2-core machine.
        docs = self.two_node_probe(["--store", f"tcp://127.0.0.1:{port}"], timeout_s=30)
        self.assertTrue(docs[0]["details"]["transport"]["store_hosted_here"])
        self.assertFalse(docs[1]["details"]["transport"]["store_hosted_here"])

    def test_default_store_needs_no_setup(self):
        # The default store is a per-user, per-job directory under /dev/shm
        # (default_store_uri, lib/transport/store.cpp); remove this job's only:
        # a test file running alongside has stores of its own there.
        self.last_job = None
        try:
            self.two_node_probe([])
        finally:
            if self.last_job:
                safe = re.sub(r"[^A-Za-z0-9_-]", "_", self.last_job[:100])
                shutil.rmtree(os.path.join("/dev/shm", f"scout-store-{os.getuid()}-{safe}"), ignore_errors=True)

    def test_observer_killed_mid_probe_is_unreachable_and_survivor_decides(self):
        with self.stalled_job(fault_ranks=range(2)) as job:
            store = tempfile.mkdtemp(prefix="scout-store-")
            try:
                victim = start_probe(job.job, "--nodes", "2", "--node-index", "1", "--local-ranks", "2-3",
                                     "--store", f"file://{store}", timeout_s=30, log_level="info")
                # Kill it once it has registered with the store: it is then part of the probe.
                self.wait_registered(victim)
                victim.send_signal(signal.SIGKILL)
                victim.communicate(timeout=10)
                res = probe(job.job, "--nodes", "2", "--node-index", "0", "--local-ranks", "0-1", "--store", f"file://{store}",
                            timeout_s=6)
                doc = res.json()
                self.assertEqual(doc["details"]["unreachable"], ["node1"], res)
                self.assertEqual(suspects(doc), [job.fault_rank], f"seed {job.seed}\n{res}")
                self.assertExit(res, "attributed")
            finally:
                shutil.rmtree(store, ignore_errors=True)

    def wait_registered(self, proc):
        """Reads proc's log until its gather registered (its presence is announced by then)."""
        deadline = time.monotonic() + 60
        seen = ""
        while "registered" not in seen and time.monotonic() < deadline:
            line = proc.stderr.readline()
            if not line:
                break
            seen += line
        self.assertIn("registered", seen)

    def assert_stray_rejected(self, doc, stray, observer, why):
        rejected = [r for r in doc["details"]["rejected"] if r["source"] == "presence"]
        self.assertEqual([(r["observer"], r["pid"]) for r in rejected], [(observer, stray.pid)], doc["details"])
        self.assertIn(why, rejected[0]["reason"])
        self.assertEqual(rejected[0]["host"], socket.gethostname())
        self.assertIn("rejected", doc["summary"])

    def test_observer_of_another_job_token_is_rejected_and_reported(self):
        """The only process claiming node 1 holds another token: it never joins, so observer 0
        meets nobody. Not a verdict calling node 1 unreachable: both observers end in the
        error that names the other one and the mismatch (exit 4; test_observer_errors.py)."""
        with self.stalled_job(fault_ranks=range(2)) as job:
            store = tempfile.mkdtemp(prefix="scout-store-")
            try:
                stray = start_probe(job.job, "--nodes", "2", "--node-index", "1", "--local-ranks", "2-3",
                                    "--store", f"file://{store}", timeout_s=8, env={"SCOUT_JOB_TOKEN": "token-of-another-job"},
                                    log_level="info")
                self.wait_registered(stray)
                res = probe(job.job, "--nodes", "2", "--node-index", "0", "--local-ranks", "0-1", "--store", f"file://{store}",
                            timeout_s=4, env={"SCOUT_JOB_TOKEN": "token-of-this-job"})
                _, stray_err = stray.communicate(timeout=60)
                self.assertCleanError(res, "bad_input", "probe-hang")
                self.assertIn(f"observer 1 on {socket.gethostname()} (pid {stray.pid})", res.stderr)
                self.assertIn("another job token", res.stderr)
                self.assertEqual(stray.returncode, EXIT["bad_input"], stray_err)
                self.assertIn("met no other observer", stray_err)
            finally:
                shutil.rmtree(store, ignore_errors=True)

    def stray_beside_two_observers(self, store_args, timeout_s, stray_env, why, env=None, stray_args=()):
        """A stray claims node 1 while both real observers run: they still decide
        together, and both report the stray."""
        with self.stalled_job() as job:
            first = start_probe(job.job, "--nodes", "2", "--node-index", "0", "--local-ranks", "0-1", *store_args, env=env,
                                timeout_s=timeout_s)
            stray = start_probe(job.job, "--nodes", "2", "--node-index", "1", "--local-ranks", "2-3", *store_args, *stray_args,
                                env=stray_env, timeout_s=timeout_s, log_level="info")
            self.wait_registered(stray)
            second = start_probe(job.job, "--nodes", "2", "--node-index", "1", "--local-ranks", "2-3", *store_args, env=env,
                                 timeout_s=timeout_s)
            docs = []
            for p in (first, second):
                out, err = p.communicate(timeout=timeout_s + 60)
                self.assertEqual(p.returncode, EXIT["attributed"], f"seed {job.seed}\n{out}\n{err}")
                doc = json.loads(out)
                validate(doc)
                docs.append(doc)
            # The stray meets no one of its token or attempt: it would wait out its whole --timeout (30 s on the
            # TCP store) before giving up. Nothing here reads its own outcome (test_observer_of_another_job_token_
            # is_rejected_and_reported does), so it is ended once both real observers have decided.
            stray.kill()
            stray.communicate(timeout=60)
            for doc in docs:
                self.assertEqual(doc["details"]["observers"]["reached"], [0, 1])
                self.assertEqual(suspects(doc), [job.fault_rank], f"seed {job.seed}")
                self.assert_stray_rejected(doc, stray, 1, why)

    def test_stray_beside_two_observers_file_store(self):
        store = tempfile.mkdtemp(prefix="scout-store-")
        try:
            self.stray_beside_two_observers(["--store", f"file://{store}"], 8, {"SCOUT_JOB_TOKEN": "stray"},
                                            "another job token", env={"SCOUT_JOB_TOKEN": "real"})
        finally:
            shutil.rmtree(store, ignore_errors=True)

    def test_stray_of_another_attempt_beside_two_observers_tcp_store(self):
        # Observer 0 hosts the TCPStore; the stray joins it, as does observer 1.
        port = free_port()
        self.stray_beside_two_observers(["--store", f"tcp://127.0.0.1:{port}"], 30, {"SCOUT_JOB_TOKEN": "real"},
                                        "it probes attempt 'restart-7'", env={"SCOUT_JOB_TOKEN": "real"},
                                        stray_args=("--attempt", "restart-7"))

    def test_forged_blob_is_rejected_and_reported_not_believed(self):
        """An adversary that knows the probe's namespace but not the token's key
        joins the real gather as observer 1 (tests/tools/forge_observer.cpp) and
        offers evidence that frames one of its ranks as stopped."""
        forge = os.path.join(os.environ["SCOUT_BUILD_DIR"], "tests", "scout_test_forge_observer")
        with self.stalled_job(fault_ranks=range(2)) as job:
            store = tempfile.mkdtemp(prefix="scout-store-")
            token = f"secret-{random.SystemRandom().randrange(1 << 62)}"
            try:
                forger = subprocess.Popen([forge, job.job, token, store, "/dev/shm", "2", "3", "20000"], stdout=subprocess.PIPE,
                                          stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
                self.assertIn("forged rank 2", forger.stdout.readline())
                res = probe(job.job, "--nodes", "2", "--node-index", "0", "--local-ranks", "0-1", "--store", f"file://{store}",
                            timeout_s=8, env={"SCOUT_JOB_TOKEN": token})
                out, err = forger.communicate(timeout=60)
                self.assertIn("received 2 blobs", out, err)  # it did join the gather
                doc = res.json()
                rejected = doc["details"]["rejected"]
                self.assertEqual([(r["observer"], r["source"]) for r in rejected], [(1, "evidence")], res)
                self.assertIn("failed authentication", rejected[0]["reason"])
                self.assertIn("rejected", doc["summary"])
                # Not believed: rank 2 is not named, and ranks 2 and 3 count as unseen.
                self.assertEqual(suspects(doc), [job.fault_rank], f"seed {job.seed}\n{res}")
                self.assertEqual(doc["details"]["unreachable"], ["node1"])
                self.assertEqual({r["rank"]: r.get("record_problem") for r in doc["details"]["ranks"] if r["rank"] >= 2},
                                 {2: "unreachable", 3: "unreachable"})
            finally:
                shutil.rmtree(store, ignore_errors=True)

    def test_store_directory_does_not_reveal_the_namespace(self):
        """The forged blob above needed the namespace: the probe's Gloo group meets
        under scout/<job>/<attempt>/<digest of the token>. The FileStore names each
        key's file by a hash of the key, so a process that can read the store
        directory but lacks the token learns neither the namespace nor the keys
        (presence entries carry a key id under another label, no namespace)."""
        job = f"ns-hidden-{os.getpid()}"
        token = f"secret-{random.SystemRandom().randrange(1 << 62)}"
        store = tempfile.mkdtemp(prefix="scout-store-")
        try:
            proc = start_probe(job, "--nodes", "2", "--node-index", "1", "--store", f"file://{store}", timeout_s=4,
                               env={"SCOUT_JOB_TOKEN": token}, log_level="info")
            self.wait_registered(proc)
            names = os.listdir(store)
            contents = b""
            for n in names:
                if os.path.isfile(os.path.join(store, n)):
                    with open(os.path.join(store, n), "rb") as f:
                        contents += f.read()
            proc.communicate(timeout=40)
            self.assertTrue(names)
            for n in names:
                self.assertRegex(n, r"^[0-9]+$", "key files are named by a hash of the key")
            for secret in (job.encode(), b"scout/", token.encode()):
                self.assertNotIn(secret, contents)
                self.assertFalse(any(secret.decode() in n for n in names))
        finally:
            shutil.rmtree(store, ignore_errors=True)


class CleanJobObservers(FourObservers, SeededCase):
    """Observers of a clean job that keeps training: the positions prove it healthy.

    One such job serves every test of the class (each only probes it; a 4-rank job costs ~13 s of CPU to start,
    measured): started on first use, torn down with the class; each use first checks that it still trains."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.clean = None

    @classmethod
    def tearDownClass(cls):
        if cls.clean is not None:
            cls.clean.teardown()
        super().tearDownClass()

    @contextlib.contextmanager
    def running_job(self):
        """A 4-rank clean job, 0.05 s between steps (each test's probes take seconds to tens of seconds on a
        loaded host; 20000 steps outlast the class by far, and tearDownClass ends it)."""
        cls = type(self)
        if cls.clean is None:
            rng = random.Random(SEED ^ zlib.crc32(f"{cls.__name__} clean".encode()))
            job = TrainerJob(world=WORLD, steps=20000, fault="none", step_delay=0.05, seed=rng.randrange(1 << 31))
            try:
                job.start()
            except BaseException:
                job.teardown()
                raise
            cls.clean = job
        job = cls.clean
        self.assertEqual(job.returncodes(), [None] * WORLD, f"seed {job.seed}: every rank still trains")
        recs = job.records()
        step = min(r["record"]["step"] for r in recs.values()) if len(recs) == WORLD else 0
        job.wait_training(min_step=max(2, step + 1))  # started, or still advancing
        self.assertEqual(job.returncodes(), [None] * WORLD, f"seed {job.seed}: every rank still trains")
        yield job

    def test_clean_job_is_decided_on_positions_alone(self):
        """Two observers of a job that makes progress: the 64-byte positions prove it healthy, and no
        rank's record crosses the network (the two-phase gather's first phase only)."""
        store = tempfile.mkdtemp(prefix="scout-store-")
        try:
            with self.running_job() as job:
                procs = [start_probe(job.job, "--nodes", "2", "--node-index", str(i), "--local-ranks",
                                     f"{2 * i}-{2 * i + 1}", "--store", f"file://{store}",
                                     timeout_s=20, threshold="10") for i in range(2)]
                outs = [p.communicate(timeout=60) for p in procs]
                for p, (out, err) in zip(procs, outs):
                    self.assertEqual(p.returncode, EXIT["healthy"], f"seed {job.seed}\n{out}\n{err}")
                    doc = json.loads(out)
                    validate(doc)
                    d = doc["details"]
                    self.assertEqual(d["ranks_listed"], "positions", out)
                    self.assertEqual(d["ranks"], [])
                    self.assertEqual(d["world_size"], WORLD)
                    self.assertEqual(d["observers"]["reached"], [0, 1])
                    self.assertEqual(d["transport"]["evidence_from"], [])
                    self.assertGreaterEqual(d["transport"]["connections"], 1)  # its pair (more if it re-formed)
                    print(f"observer {d['transport']['observer']}: bytes in {d['transport']['bytes_in']}, "
                          f"out {d['transport']['bytes_out']}", file=sys.stderr)
        finally:
            shutil.rmtree(store, ignore_errors=True)

    def test_two_level_gather_of_a_clean_job_moves_positions_only(self):
        job, docs = self.four_observers_in_two_groups("none")
        self.assertEqual(docs[0]["details"]["ranks_listed"], "positions")
        self.assertEqual(docs[0]["details"]["transport"]["evidence_from"], [])

    def test_two_level_gather_refuses_a_mesh_of_another_world(self):
        """A clean job decided on positions alone still checks --mesh: its leaders hold no records, and
        the positions carry the world size (4), which dp=3 does not cover. Every observer says so."""
        job, outs = self.four_observers_in_two_groups("none", extra=("--mesh", "dp=3"), expect=EXIT["usage"])
        for out, err in outs:
            self.assertIn("--mesh dp=3 has 3 ranks", err, f"seed {job.seed}\n{out}\n{err}")
            self.assertIn("world of 4", err, f"seed {job.seed}\n{err}")


class ScoutPathFaults(SeededCase):
    """Faults in scout's own path end in a verdict or a clear error within the timeout."""

    def write_records(self, job, world=WORLD):
        writer = os.path.join(HERE, "trainers", "record_writer.py")
        for r in range(world):
            subprocess.run(["/usr/bin/python3", writer, job, str(r), str(world), "once"], check=True, timeout=60,
                           env=dict(os.environ, SCOUT_ATTEMPT="0"))

    def cleanup_records(self, job):
        for name in os.listdir("/dev/shm"):
            if name.startswith(f"scout.{job}."):
                os.unlink(os.path.join("/dev/shm", name))

    def test_store_down(self):
        job = f"storedown-{os.getpid()}"
        self.write_records(job)
        try:
            port = free_port()
            res = probe(job, "--nodes", "2", "--node-index", "0", "--store", f"tcp://127.0.0.1:{port}", "--no-store-host",
                        timeout_s=3)
            # One line saying so, and this node's verdict alone: never one calling node 1 unreachable, when it is
            # the store that is (test_observer_errors.py).
            self.assertIn(res.rc, (EXIT["healthy"], EXIT["attributed"], EXIT["inconclusive"]), repr(res))
            self.assertEqual(len([line for line in res.stderr.splitlines() if line.strip()]), 1, repr(res))
            self.assertIn("cannot reach the store", res.stderr)
            doc = res.json()
            self.assertTrue(doc["details"]["transport"]["store_unreachable"], repr(res))
            self.assertEqual(doc["details"].get("unreachable", []), [], repr(res))
            self.assertTrue(all(s.get("rank") is not None for s in doc["suspects"]), repr(res))
        finally:
            self.cleanup_records(job)

    def test_corrupted_and_wrong_version_records_are_reported(self):
        job = f"corrupt-{os.getpid()}"
        self.write_records(job)
        try:
            bad_magic, bad_version = self.rng.sample(range(WORLD), 2)
            print(f"bad magic rank {bad_magic}, bad version rank {bad_version}", file=sys.stderr)
            with open(f"/dev/shm/scout.{job}.{bad_magic}", "r+b") as f:
                f.write(b"GARBAGE!")
            with open(f"/dev/shm/scout.{job}.{bad_version}", "r+b") as f:
                f.seek(8)
                f.write((99).to_bytes(8, "little"))
            res = probe(job)
            doc = res.json()
            self.assertNotEqual(res.rc, EXIT["internal"], res)
            problems = {i["rank"]: i["problem"] for i in doc["details"]["record_issues"]}
            self.assertEqual(problems.get(bad_magic), "bad_magic", res)
            self.assertEqual(problems.get(bad_version), "unknown_version", res)
            self.assertNotIn(bad_magic, suspects(doc))
        finally:
            self.cleanup_records(job)

    def test_unknown_job_is_a_clear_error(self):
        res = probe(f"no-such-job-{os.getpid()}")
        self.assertCleanError(res, "unavailable", "probe-hang")

    def test_bad_flags_are_usage_errors(self):
        for args in (["--store", "redis://x:1"], ["--timeout", "0"], ["--nodes", "2", "--node-index", "2"],
                     ["--store-host"], ["--mesh", "dp=0"]):
            res = run(["probe-hang", "--job", "j", *args])
            self.assertCleanError(res, "usage", "probe-hang")

    def test_trainer_killed_mid_write(self):
        with self.job(world=WORLD, steps=5000, fault="none") as job:
            job.start()
            job.wait_training(min_step=2)
            victim = self.rng.randrange(WORLD)
            print(f"killing rank {victim} mid-write", file=sys.stderr)
            os.kill(job.pids()[victim], signal.SIGKILL)
            job.wait_silent()
            res = probe(job.job)
            doc = res.json()
            self.assertIn(res.rc, (EXIT["attributed"], EXIT["inconclusive"]), res)
            self.assertIn(doc["details"]["ranks"][victim]["process"]["state"], ("gone", "exited"), res)
            if doc["status"] == "attributed":
                self.assertEqual(suspects(doc), [victim], res)


class Observe(SeededCase):
    def test_daemon_writes_one_verdict_per_stall(self):
        with self.job(world=WORLD, steps=STEPS, fault="stop-before-collective") as job:
            vdir = tempfile.mkdtemp(prefix="scout-verdicts-")
            try:
                job.start()
                proc = subprocess.Popen([SCOUT_BIN, "observe", "--job", job.job, "--threshold", "2", "--interval", "0.2",
                                         "--verdict-dir", vdir, "--max-verdicts", "1", "--duration", "120", "--format", "json"],
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                out, err = proc.communicate(timeout=150)
                self.assertEqual(proc.returncode, 0, err)
                files = [f for f in os.listdir(vdir) if f.endswith(".json")]
                self.assertEqual(len(files), 1, files)
                self.assertEqual([f for f in os.listdir(vdir) if f.startswith(".")], [], "no temporary file left")
                with open(os.path.join(vdir, files[0])) as f:
                    doc = json.load(f)
                validate(doc)
                self.assertEqual(doc["command"], "observe")
                self.assertEqual(suspects(doc), [job.fault_rank], f"seed {job.seed}")
                self.assertEqual(json.loads(out)["suspects"], doc["suspects"])
            finally:
                shutil.rmtree(vdir, ignore_errors=True)

    def test_two_daemons_split_the_ranks_and_each_write_one_verdict_file_store(self):
        self.two_daemons(lambda tmp: f"file://{os.path.join(tmp, 'store')}")

    def test_two_daemons_split_the_ranks_and_each_write_one_verdict_tcp_store(self):
        # Daemon 0 hosts the TCPStore for the length of each probe it runs; daemon 1 joins it.
        port = free_port()
        self.two_daemons(lambda tmp: f"tcp://127.0.0.1:{port}")

    def two_daemons(self, store_of):
        """Two `scout observe` daemons ("nodes"), each owning half the ranks of a
        real 4-rank DDP job, meet over a store with a token file; one rank
        (random, seed printed) stops before a collective. Each daemon writes
        exactly one verdict naming it, and both stop cleanly on SIGTERM."""
        tmp = tempfile.mkdtemp(prefix="scout-observe2-")
        store, vdirs = store_of(tmp), [os.path.join(tmp, f"verdicts{i}") for i in range(2)]
        token_file = os.path.join(tmp, "token")
        with open(os.open(token_file, os.O_WRONLY | os.O_CREAT, 0o600), "w") as f:
            f.write(f"token-{random.SystemRandom().randrange(1 << 62)}\n")
        daemons = []
        try:
            with self.job(world=WORLD, steps=STEPS, fault="stop-before-collective") as job:
                job.start()
                for i in range(2):
                    if i:
                        time.sleep(3)  # the nodes' daemons do not start together
                    daemons.append(subprocess.Popen(
                        [SCOUT_BIN, "observe", "--job", job.job, "--nodes", "2", "--node-index", str(i),
                         "--local-ranks", f"{2 * i}-{2 * i + 1}", "--store", store, "--token-file",
                         token_file, "--threshold", "2", "--interval", "0.2", "--timeout", "10",
                         "--verdict-dir", vdirs[i], "--duration", "150", "--format", "json"],
                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL))
                # Wait (bounded) until both wrote a verdict, then a little longer: no second one may follow.
                deadline = time.monotonic() + 120
                def verdicts(d):
                    return sorted(f for f in os.listdir(d) if f.endswith(".json")) if os.path.isdir(d) else []
                while time.monotonic() < deadline and not all(verdicts(d) for d in vdirs):
                    self.assertTrue(all(p.poll() is None for p in daemons), "a daemon exited early")
                    time.sleep(0.2)
                time.sleep(3)
                for p in daemons:
                    p.send_signal(signal.SIGTERM)
                outs = [p.communicate(timeout=30) for p in daemons]
                docs = []
                for i, (p, (out, err)) in enumerate(zip(daemons, outs)):
                    self.assertEqual(p.returncode, 0, f"seed {job.seed}\n{err}")
                    files = verdicts(vdirs[i])
                    self.assertEqual(len(files), 1, f"seed {job.seed} observer {i}: {files}\n{err}")
                    self.assertEqual([f for f in os.listdir(vdirs[i]) if f.startswith(".")], [], "no temporary file left")
                    with open(os.path.join(vdirs[i], files[0])) as f:
                        doc = json.load(f)
                    validate(doc)
                    self.assertEqual(doc["command"], "observe")
                    self.assertEqual(suspects(doc), [job.fault_rank],
                                     f"seed {job.seed} observer {i}: {doc['status']}: {doc.get('summary')}\n"
                                     f"{json.dumps(doc.get('details'), indent=1)[:4000]}\n{err}")
                    self.assertEqual(doc["details"]["observers"]["reached"], [0, 1],
                                     f"seed {job.seed} observer {i}\n{outs[0][1]}\n{outs[1][1]}")
                    self.assertTrue(doc["details"]["transport"]["authenticated"])
                    docs.append(doc)
                self.assertEqual(docs[0]["suspects"], docs[1]["suspects"])
        finally:
            for p in daemons:
                if p.poll() is None:
                    p.kill()
                    p.communicate(timeout=10)
            shutil.rmtree(tmp, ignore_errors=True)

    def test_sigterm_stops_it_cleanly(self):
        job = f"observe-idle-{os.getpid()}"
        proc = subprocess.Popen([SCOUT_BIN, "observe", "--job", job, "--interval", "0.2", "--duration", "60"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        # Signal only once its SIGTERM handler is installed (SigCgt in /proc).
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and proc.poll() is None:
            with open(f"/proc/{proc.pid}/status") as f:
                caught = int(next(l for l in f if l.startswith("SigCgt:")).split()[1], 16)
            if caught & (1 << (signal.SIGTERM - 1)):
                break
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=10)
        self.assertEqual(proc.returncode, 0, err)
        self.assertEqual(out, "")


if __name__ == "__main__":
    unittest.main()
