"""Clear errors of the observers' session (probe-hang across nodes): a store
nobody listens on, a store that accepts connections but never answers, a job
token that differs between observers, and an observer of another --attempt.
Without a store the observer says so in one line and prints what its own node
shows (never a verdict that would call the other nodes unreachable); the others
end in one line `scout probe-hang: error: what; why; what to do` with the
documented exit code (4 bad input: token or attempt), all within the command's
own --timeout (the subprocess bound here only guards against a hang).

Real records (tests/integration/trainers/record_writer.py over
libscout_publisher.so), a real Gloo FileStore directory or TCP sockets, real
observer processes. Runs under /usr/bin/python3 via ctest.
"""
import json
import os
import random
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import unittest

from scoutlib import EXIT, SCOUT_BIN, ScoutTestCase
from trainer_harness import free_port

HERE = os.path.dirname(os.path.abspath(__file__))
WORLD = 4
TIMEOUT_S = 4
HANG_GUARD_S = TIMEOUT_S + 40  # far beyond --timeout: only a hang reaches it
ERROR_LINE = re.compile(r"^scout probe-hang: error: [^;]+; [^;]+; \S.*$")


def write_records(job):
    writer = os.path.join(HERE, "trainers", "record_writer.py")
    for r in range(WORLD):
        subprocess.run(["/usr/bin/python3", writer, job, str(r), str(WORLD), "once"], check=True, timeout=60,
                       env=dict(os.environ, SCOUT_ATTEMPT="0"))


def remove_records(job):
    for name in os.listdir("/dev/shm"):
        if name.startswith(f"scout.{job}."):
            os.unlink(os.path.join("/dev/shm", name))


def start(job, node, nodes, local_ranks, *extra, env=None):
    cmd = [SCOUT_BIN, "probe-hang", "--job", job, "--nodes", str(nodes), "--node-index", str(node), "--local-ranks",
           local_ranks, "--threshold", "1", "--timeout", str(TIMEOUT_S), "--format", "json", *extra]
    full = dict(os.environ)
    full.pop("SCOUT_JOB_TOKEN", None)
    full.update(env or {})
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=full,
                            stdin=subprocess.DEVNULL)


def finish(proc):
    out, err = proc.communicate(timeout=HANG_GUARD_S)
    return proc.returncode, out, err


class BlackHole(threading.Thread):
    """A TCP listener that accepts every connection and never reads or writes."""

    def __init__(self):
        super().__init__(daemon=True)
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.held = []
        self.done = threading.Event()

    def run(self):
        while not self.done.is_set():
            try:
                conn, _ = self.sock.accept()
                self.held.append(conn)
            except OSError:
                pass

    def close(self):
        self.done.set()
        self.join(timeout=5)
        for c in self.held:
            c.close()
        self.sock.close()


class ObserverErrors(ScoutTestCase):
    def setUp(self):
        self.job = f"obs-err-{os.getpid()}-{random.SystemRandom().randrange(1 << 30)}"
        write_records(self.job)
        self.store = tempfile.mkdtemp(prefix="scout-store-")

    def tearDown(self):
        remove_records(self.job)
        shutil.rmtree(self.store, ignore_errors=True)

    def assertOneLineError(self, rc, out, err, code, *words):
        msg = f"rc={rc}\nstdout:\n{out}\nstderr:\n{err}"
        self.assertEqual(rc, EXIT[code], msg)
        self.assertEqual(out, "", "no verdict, not even a partial one: " + msg)
        lines = [line for line in err.splitlines() if line.strip()]
        self.assertEqual(len(lines), 1, msg)
        self.assertRegex(lines[0], ERROR_LINE)
        for w in words:
            self.assertIn(w, lines[0], msg)
        print(lines[0], file=sys.stderr)

    def assertAloneWithoutStore(self, rc, out, err, *words):
        """No store (its host dead, frozen or cut off): one line on stderr saying so, and a verdict on this
        node's evidence alone that names nothing on another node (the other nodes' ranks are missing, never
        unreachable: a lost store looks like every other node lost)."""
        msg = f"rc={rc}\nstdout:\n{out}\nstderr:\n{err}"
        self.assertIn(rc, (EXIT["healthy"], EXIT["attributed"], EXIT["inconclusive"]), msg)
        lines = [line for line in err.splitlines() if line.strip()]
        self.assertEqual(len(lines), 1, msg)
        for w in words:
            self.assertIn(w, lines[0], msg)
        doc = json.loads(out)
        transport = doc["details"]["transport"]
        self.assertTrue(transport["store_unreachable"], msg)
        self.assertTrue(any("this node's evidence alone" in n for n in transport["notes"]), msg)
        self.assertEqual(doc["details"].get("unreachable", []), [], msg)
        for sus in doc["suspects"]:
            self.assertIn(sus.get("rank"), (2, 3), msg)  # this node's ranks only, never another node

    def test_store_with_nothing_listening(self):
        port = free_port()
        p = start(self.job, 1, 2, "2-3", "--store", f"tcp://127.0.0.1:{port}", "--no-store-host")
        self.assertAloneWithoutStore(*finish(p), f"cannot reach the store tcp://127.0.0.1:{port}",
                                     "connection refused", "--store-host")

    def test_store_that_accepts_and_never_answers(self):
        hole = BlackHole()
        hole.start()
        try:
            p = start(self.job, 1, 2, "2-3", "--store", f"tcp://127.0.0.1:{hole.port}")
            self.assertAloneWithoutStore(*finish(p), "accepted a connection but never answered", "check --store")
        finally:
            hole.close()

    def test_observers_with_different_tokens(self):
        """Two observers of one job, tokens differ (one from $SCOUT_JOB_TOKEN, one from
        --token-file): neither can meet the other, and each says why."""
        token_file = os.path.join(self.store, "..", os.path.basename(self.store) + ".token")
        with open(os.open(token_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as f:
            f.write("token-b\n")
        try:
            a = start(self.job, 0, 2, "0-1", "--store", f"file://{self.store}", env={"SCOUT_JOB_TOKEN": "token-a"})
            b = start(self.job, 1, 2, "2-3", "--store", f"file://{self.store}", "--token-file", token_file)
            for proc, other in ((a, 1), (b, 0)):
                self.assertOneLineError(*finish(proc), "bad_input", "met no other observer", f"observer {other} on",
                                        "another job token", "$SCOUT_JOB_TOKEN or --token-file")
        finally:
            os.unlink(token_file)

    def test_stray_token_beside_the_job(self):
        """Observers 0 and 1 share the job's token and decide together (the stray reported in
        details.rejected); observer 2 holds another token and gets the error."""
        env = {"SCOUT_JOB_TOKEN": "the-job"}
        procs = [start(self.job, 0, 3, "0-1", "--store", f"file://{self.store}", env=env),
                 start(self.job, 1, 3, "2", "--store", f"file://{self.store}", env=env),
                 start(self.job, 2, 3, "3", "--store", f"file://{self.store}", env={"SCOUT_JOB_TOKEN": "a-stray"})]
        stray_pid = procs[2].pid
        results = [finish(p) for p in procs]
        self.assertOneLineError(*results[2], "bad_input", "met no other observer", "another job token")
        import json
        for rc, out, err in results[:2]:
            self.assertNotIn(rc, (EXIT["bad_input"], EXIT["unavailable"], EXIT["internal"]), err)
            doc = json.loads(out)
            self.assertEqual(doc["details"]["observers"]["reached"], [0, 1], out)
            rejected = [r for r in doc["details"]["rejected"] if r["source"] == "presence"]
            self.assertEqual([(r["observer"], r["pid"]) for r in rejected], [(2, stray_pid)], doc["details"])

    def test_observer_of_another_attempt(self):
        env = {"SCOUT_JOB_TOKEN": "the-job"}
        a = start(self.job, 0, 2, "0-1", "--store", f"file://{self.store}", env=env)
        b = start(self.job, 1, 2, "2-3", "--store", f"file://{self.store}", "--attempt", "restart-7", env=env)
        self.assertOneLineError(*finish(b), "bad_input", "met no other observer",
                                "it probes attempt '', this probe attempt 'restart-7'", "same --attempt")
        self.assertOneLineError(*finish(a), "bad_input", "met no other observer",
                                "it probes attempt 'restart-7', this probe attempt ''", "same --attempt")


if __name__ == "__main__":
    unittest.main()
