"""The torch zygote (torch_zygote.py, trainer_harness.start_rank) starts a trainer rank as subprocess.Popen would
(issue 38): the same process, session and group, environment (Python's and the C library's), argv, sys.path,
stdin, signal dispositions and exit statuses, with no zombie left once a rank ended. Each check runs one small
script both ways and compares what it reports."""
import json
import os
import shutil
import signal
import sys
import tempfile
import textwrap
import time
import unittest

import trainer_harness as th

PROBE = textwrap.dedent('''
    import ctypes, json, os, signal, sys
    libc = ctypes.CDLL(None)
    libc.getenv.restype = ctypes.c_char_p
    mode = sys.argv[1]
    doc = {
        "session_leader": os.getsid(0) == os.getpid(), "group_leader": os.getpgid(0) == os.getpid(),
        "argv": sys.argv, "path": sys.path, "path_has": os.environ["ZYG_DIR"] in sys.path,
        "env": os.environ.get("ZYG_VALUE"), "c_env": (libc.getenv(b"ZYG_VALUE") or b"").decode(),
        "no_home": "ZYG_ABSENT" not in os.environ and libc.getenv(b"ZYG_ABSENT") is None,
        "stdin": os.readlink("/proc/self/fd/0"), "threads": len(os.listdir("/proc/self/task")),
        "signals": {s.name: str(signal.getsignal(s)) for s in (signal.SIGINT, signal.SIGPIPE, signal.SIGXFSZ,
                                                               signal.SIGCHLD, signal.SIGTERM, signal.SIGHUP)},
        "main": __name__, "file": os.path.basename(__file__), "cwd": os.getcwd(),
        "unbuffered": os.environ.get("PYTHONUNBUFFERED"),
    }
    print(json.dumps(doc), flush=True)
    if mode == "exit3":
        sys.exit(3)
    if mode == "exitstr":
        sys.exit("a message")
    if mode == "raise":
        raise ValueError("boom")
    if mode == "os_exit":
        os._exit(5)
    if mode == "abort":
        os.abort()
    if mode == "stop":
        os.kill(os.getpid(), signal.SIGSTOP)
    ''')


class ZygoteStartsLikePopen(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.python = th.require_python()
        if os.environ.get("SCOUT_TEST_ZYGOTE") == "0":
            raise unittest.SkipTest("SCOUT_TEST_ZYGOTE=0: ranks start without the zygote")
        os.environ["ZYG_ABSENT"] = "in the zygote's environment, not in the ranks'"
        if th.Zygote.get(cls.python) is None:
            raise AssertionError(f"the torch zygote did not start: {th.Zygote._state['failed']}")
        cls.dir = tempfile.mkdtemp(prefix="scout-zygote-test-")
        cls.script = os.path.join(cls.dir, "probe.py")
        with open(cls.script, "w") as f:
            f.write(PROBE)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, ignore_errors=True)

    def start(self, mode, zygote):
        env = {k: v for k, v in os.environ.items() if k != "ZYG_ABSENT"}
        env.update({"ZYG_VALUE": f"v-{mode}", "ZYG_DIR": self.dir, "PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": "1",
                    "PYTHONPATH": os.pathsep.join([self.dir, th.PYTHON_DIR])})
        log = open(os.path.join(self.dir, f"{mode}-{zygote}.log"), "w")
        self.addCleanup(log.close)
        p = th.start_rank(self.python, [self.script, mode], env, log, zygote=zygote)
        self.addCleanup(lambda: p.poll() is None and (os.killpg(p.pid, signal.SIGKILL), p.wait(10)))
        self.assertEqual(isinstance(p, th.ZygoteProcess), zygote)
        return p, log.name

    def run_both(self, mode):
        out = []
        for zygote in (False, True):
            p, log = self.start(mode, zygote)
            rc = p.wait(timeout=60)
            with open(log) as f:
                text = f.read()
            out.append((rc, json.loads(text.splitlines()[0]), text, p.pid))
        return out

    def test_process_and_exit_statuses(self):
        want = {"ok": 0, "exit3": 3, "exitstr": 1, "raise": 1, "os_exit": 5, "abort": -signal.SIGABRT}
        for mode, code in want.items():
            with self.subTest(mode=mode):
                (prc, pdoc, ptext, _), (zrc, zdoc, ztext, zpid) = self.run_both(mode)
                self.assertEqual((prc, zrc), (code, code))
                self.assertEqual(zdoc, pdoc)
                self.assertTrue(zdoc["session_leader"] and zdoc["group_leader"] and zdoc["no_home"], zdoc)
                self.assertEqual(zdoc["c_env"], f"v-{mode}")
                self.assertEqual(zdoc["threads"], 1)
                self.assertEqual(zdoc["stdin"], "/dev/null")
                self.assertIsNone(th.process_state(zpid), "reaped by the zygote: no zombie")
                for needle in ("a message", "ValueError: boom"):
                    self.assertEqual(needle in ztext, needle in ptext, (mode, needle, ztext))

    def test_signals_and_state(self):
        p, _ = self.start("stop", True)
        deadline = time.monotonic() + 60
        while th.process_state(p.pid) != "T" and time.monotonic() < deadline:
            time.sleep(0.05)
        self.assertEqual(th.process_state(p.pid), "T")
        self.assertIsNone(p.poll(), "a stopped rank still runs")
        os.killpg(p.pid, signal.SIGCONT)
        p.wait(timeout=30)
        self.assertEqual(p.returncode, 0)
        p, _ = self.start("stop", True)
        while th.process_state(p.pid) != "T" and time.monotonic() < deadline:
            time.sleep(0.05)
        os.killpg(p.pid, signal.SIGKILL)
        self.assertEqual(p.wait(timeout=30), -signal.SIGKILL)
        self.assertIsNone(th.process_state(p.pid))


if __name__ == "__main__":
    sys.exit(unittest.main())
