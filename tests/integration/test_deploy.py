"""The deployment examples in docs/deploy stay in step with the CLI: the
systemd unit passes `systemd-analyze verify`, the Kubernetes sidecar parses
as YAML and holds what scout needs (shared /dev/shm, one process namespace,
the same job id as the trainer), and the command line of each, with its paths
moved under a temporary directory, runs with the real binary (for a moment:
--duration) and writes its textfile."""
import configparser
import os
import shlex
import shutil
import subprocess
import tempfile
import unittest

from scoutlib import SCOUT_BIN, SOURCE_DIR, ScoutTestCase

DEPLOY = os.path.join(SOURCE_DIR, "docs", "deploy")
UNIT = os.path.join(DEPLOY, "scout-observe@.service")
SIDECAR = os.path.join(DEPLOY, "k8s-sidecar.yaml")
INSTALLED = "/usr/local/bin/scout"


def unit_service():
    p = configparser.ConfigParser(strict=False, interpolation=None, delimiters=("=",))
    p.optionxform = str
    with open(UNIT) as f:
        p.read_file(f)
    return p["Service"]


class Deploy(ScoutTestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="scout-deploy-")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def run_briefly(self, argv, prom):
        """Runs scout's command line `argv` (argv[0] the installed path) for a moment."""
        self.assertEqual(argv[0], INSTALLED)
        proc = subprocess.run([SCOUT_BIN, *argv[1:], "--duration", "0.5"], capture_output=True, text=True,
                              timeout=60, stdin=subprocess.DEVNULL)
        self.assertEqual(proc.returncode, 0, f"{argv}: {proc.stderr}")
        with open(prom) as f:
            text = f.read()
        self.assertIn("scout_observe_up{", text)
        self.assertIn("} 0\n", text.split("scout_observe_up{", 1)[1])

    def test_systemd_unit_command_line_runs(self):
        svc = unit_service()
        job = "train42"
        moved = lambda w: w.replace("%i", job).replace("/var/lib/", os.path.join(self.tmp, "var", "lib") + "/")
        for word in shlex.split(svc["ExecStartPre"])[2:]:  # /usr/bin/mkdir -p DIRS
            os.makedirs(moved(word))
        argv = [moved(w) for w in shlex.split(svc["ExecStart"]) if w != "$SCOUT_OBSERVE_ARGS"]
        self.assertIn("$SCOUT_OBSERVE_ARGS", svc["ExecStart"])
        self.run_briefly(argv, argv[argv.index("--prometheus") + 1])
        # The exit codes it will not restart on are the documented usage and unavailable codes.
        self.assertEqual(svc["RestartPreventExitStatus"].split(), ["2", "5"])

    @unittest.skipUnless(shutil.which("systemd-analyze"), "systemd-analyze not installed (Debian package systemd)")
    def test_systemd_analyze_verify(self):
        # The installed binary's path replaced by the built one (verify checks that it is executable).
        with open(UNIT) as f:
            text = f.read().replace(INSTALLED, os.path.abspath(SCOUT_BIN))
        path = os.path.join(self.tmp, "scout-observe@.service")
        with open(path, "w") as f:
            f.write(text)
        os.symlink(path, os.path.join(self.tmp, "scout-observe@train42.service"))
        proc = subprocess.run(["systemd-analyze", "verify", "--man=no",
                               os.path.join(self.tmp, "scout-observe@train42.service")],
                              capture_output=True, text=True, timeout=120)
        problems = [l for l in (proc.stdout + proc.stderr).splitlines() if "scout-observe@" in l]
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        self.assertEqual(problems, [], proc.stdout + proc.stderr)

    def test_k8s_sidecar(self):
        try:
            import yaml
        except ImportError:
            self.skipTest("python3-yaml not installed (scripts/install-deps.sh)")
        with open(SIDECAR) as f:
            docs = [d for d in yaml.safe_load_all(f) if d]
        self.assertEqual(len(docs), 1)
        pod = docs[0]
        self.assertEqual(pod["kind"], "Pod")
        spec = pod["spec"]
        self.assertIs(spec["shareProcessNamespace"], True, "scout reads the trainer's /proc entries")
        shm = [v["name"] for v in spec["volumes"] if v.get("emptyDir", {}).get("medium") == "Memory"]
        self.assertEqual(len(shm), 1)
        sidecar = [c for c in spec["initContainers"] if c["name"] == "scout-observe"][0]
        self.assertEqual(sidecar["restartPolicy"], "Always", "a native sidecar")
        trainer = spec["containers"][0]
        for c in (sidecar, trainer):
            self.assertIn({"name": shm[0], "mountPath": "/dev/shm"}, c["volumeMounts"], c["name"])
        env = {c["name"]: {e["name"]: e.get("value") for e in c.get("env", [])} for c in (sidecar, trainer)}
        self.assertEqual(env["scout-observe"]["SCOUT_JOB"], env["trainer"]["SCOUT_JOB"])
        self.assertEqual(env["trainer"]["SCOUT_PUBLISH"], "1")
        # The trainer's PYTHONPATH names the installed package (integrations/python/CMakeLists.txt).
        for p in env["trainer"]["PYTHONPATH"].split(":"):
            self.assertTrue(p.startswith("/usr/local/share/scout/python"), p)
        self.assertTrue(os.path.isdir(os.path.join(SOURCE_DIR, "integrations", "python", "autoload")))
        # Kubernetes expands $(VAR) from the container's env; the paths move under the test's directory.
        scout_dir = os.path.join(self.tmp, "scout")
        os.makedirs(scout_dir)

        def moved(w):
            for k, v in env["scout-observe"].items():
                w = w.replace(f"$({k})", v)
            return w.replace("/scout/", scout_dir + "/")

        argv = [moved(w) for w in sidecar["command"] + sidecar["args"]]
        self.run_briefly(argv, argv[argv.index("--prometheus") + 1])
        self.assertTrue(os.path.isdir(argv[argv.index("--verdict-dir") + 1]))


if __name__ == "__main__":
    unittest.main()
