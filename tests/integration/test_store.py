"""The default rendezvous store (no --store, --nodes > 1): a per-user, per-job
directory under /dev/shm that observers on one host share. Nothing of it may
stay after the commands that used it exit, whether they reached a verdict,
timed out waiting for a peer or were kept out of the session.

Real probes over real records in /dev/shm; /dev/shm is listed before and after.
"""
import os
import random
import re
import subprocess
import sys
import unittest

from scoutlib import EXIT, SCOUT_BIN, ScoutTestCase, validate

HERE = os.path.dirname(os.path.abspath(__file__))
WORLD = 4
SHM = "/dev/shm" if os.path.isdir("/dev/shm") else "/tmp"


def store_dir(job):
    """default_store_uri's directory for `job` (lib/transport/store.cpp)."""
    safe = re.sub(r"[^A-Za-z0-9_-]", "_", job[:100])
    return os.path.join(SHM, f"scout-store-{os.getuid()}-{safe}")


def leftovers(job):
    return sorted(n for n in os.listdir(SHM) if n.startswith("scout-store-") and n.endswith(job))


def start_probe(job, *extra, timeout_s=6, env=None):
    cmd = [SCOUT_BIN, "probe-hang", "--job", job, "--threshold", "1", "--timeout", str(timeout_s), "--format", "json",
           "--log-level", "info", *extra]
    full_env = dict(os.environ)
    full_env.update(env or {})
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=full_env,
                            stdin=subprocess.DEVNULL)


class DefaultStoreLeavesNothing(ScoutTestCase):
    def setUp(self):
        seed = random.randrange(1 << 30)
        print(f"store leftover seed {seed}", file=sys.stderr)
        self.job = f"store-left-{os.getpid()}-{seed}"
        self.before = sorted(n for n in os.listdir(SHM) if n.startswith("scout-store-"))
        writer = os.path.join(HERE, "trainers", "record_writer.py")
        for r in range(WORLD):
            subprocess.run(["/usr/bin/python3", writer, self.job, str(r), str(WORLD), "once"], check=True, timeout=60,
                           env=dict(os.environ, SCOUT_ATTEMPT="0"))

    def tearDown(self):
        for name in os.listdir("/dev/shm"):
            if name.startswith(f"scout.{self.job}."):
                os.unlink(os.path.join("/dev/shm", name))
        d = store_dir(self.job)
        if os.path.isdir(d):  # a failed test must not leave it for the next one
            import shutil
            shutil.rmtree(d, ignore_errors=True)

    def finish(self, procs):
        outs = [p.communicate(timeout=90) for p in procs]
        docs = []
        for p, (out, err) in zip(procs, outs):
            self.assertIn(p.returncode, EXIT.values(), err)
            self.assertNotEqual(p.returncode, EXIT["internal"], err)
            self.assertTrue(out, err)
            doc = __import__("json").loads(out)
            validate(doc)
            self.assertEqual(doc["details"]["transport"]["store"], "file://" + store_dir(self.job))
            docs.append((p.returncode, doc, err))
        after = sorted(n for n in os.listdir(SHM) if n.startswith("scout-store-"))
        self.assertEqual(leftovers(self.job), [], f"before: {self.before}\nafter: {after}")
        self.assertFalse(os.path.exists(store_dir(self.job)))
        return docs

    def test_two_observers_reach_a_verdict_and_leave_nothing(self):
        procs = [start_probe(self.job, "--nodes", "2", "--node-index", str(i), "--local-ranks", f"{2 * i}-{2 * i + 1}")
                 for i in range(2)]
        docs = self.finish(procs)
        for rc, doc, err in docs:
            self.assertEqual(doc["details"]["observers"]["reached"], [0, 1], err)

    def test_observer_whose_peer_never_comes_times_out_and_leaves_nothing(self):
        docs = self.finish([start_probe(self.job, "--nodes", "2", "--node-index", "0", "--local-ranks", "0-1",
                                        timeout_s=3)])
        rc, doc, err = docs[0]
        self.assertEqual(doc["details"]["unreachable"], ["node1"], err)

    def test_observer_kept_out_by_its_token_leaves_nothing(self):
        # Node 1 holds another job's token: neither observer meets the other, so each ends in the
        # error that says so (test_observer_errors.py), and the last one out removes the directory.
        first = start_probe(self.job, "--nodes", "2", "--node-index", "0", "--local-ranks", "0-1", timeout_s=4,
                            env={"SCOUT_JOB_TOKEN": "right"})
        stray = start_probe(self.job, "--nodes", "2", "--node-index", "1", "--local-ranks", "2-3", timeout_s=4,
                            env={"SCOUT_JOB_TOKEN": "wrong"})
        for p in (first, stray):
            out, err = p.communicate(timeout=90)
            self.assertEqual(p.returncode, EXIT["bad_input"], err)
            self.assertEqual(out, "", err)
            self.assertIn("another job token", err)
        self.assertEqual(leftovers(self.job), [])
        self.assertFalse(os.path.exists(store_dir(self.job)))

    def test_consecutive_probes_each_leave_nothing(self):
        for _ in range(2):
            self.finish([start_probe(self.job, "--nodes", "2", "--node-index", str(i), "--local-ranks",
                                     f"{2 * i}-{2 * i + 1}") for i in range(2)])


if __name__ == "__main__":
    unittest.main()
