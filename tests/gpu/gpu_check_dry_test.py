"""scripts/gpu-check.sh in dry mode (ctest gpu_check.dry, label gpu): it runs
its CPU references over the real build (the CPU hash against the committed
vectors, the catalog model's counts, every GPU program present and loadable,
the flags it passes parsed by each command's --help, the GPU paths' errors
where no GPU is), says for every GPU check that it was skipped and why, and
writes a summary valid against schemas/gpu-check.schema.json. Without a GPU
the auto-detected mode is dry too. The seed is random and printed; the
summary records it."""
import json
import os
import random
import subprocess
import sys
import tempfile
import unittest

SRC = os.environ.get("SCOUT_SOURCE_DIR") or os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(SRC, "tests", "integration"))
import scoutlib  # noqa: E402

BUILD = os.environ.get("SCOUT_BUILD_DIR") or os.path.join(SRC, "build")
SCRIPT = os.path.join(SRC, "scripts", "gpu-check.sh")
GPU_CHECKS = ["tensor_hash_exact", "tensor_hash_throughput", "catalog_kernel", "replay_cuda", "replay_cuda_inject",
              "nccl_world1", "nccl_world2", "gpu_errors"]
CPU_CHECKS = ["build", "cli_flags", "cpu_hash_vectors", "catalog_model", "no_gpu_errors"]


def has_gpu():
    return any(n.startswith("nvidia") for n in os.listdir("/dev"))


class GpuCheckDry(unittest.TestCase):
    def run_check(self, *args, timeout=300):
        out = tempfile.mkdtemp(prefix="scout-gpu-check-test-")
        env = dict(os.environ, SCOUT_BUILD_DIR=BUILD)
        env.pop("OUT", None)
        p = subprocess.run([SCRIPT, "--out", out, "--build", BUILD, *args], capture_output=True, text=True,
                           timeout=timeout, env=env)
        return p, out

    def summary(self, out):
        with open(os.path.join(out, "gpu-check.json")) as f:
            doc = json.load(f)
        scoutlib.validate(doc, "gpu-check.schema.json")
        return doc

    def assert_dry(self, p, out, seed, why):
        msg = f"seed {seed}\n{p.stdout}\n{p.stderr}"
        doc = self.summary(out)
        self.assertEqual(doc["mode"], "dry", msg)
        self.assertEqual(doc["seed"], seed, msg)
        by = {c["name"]: c for c in doc["checks"]}
        self.assertEqual(sorted(by), sorted(CPU_CHECKS + GPU_CHECKS), msg)
        for name in GPU_CHECKS:
            self.assertEqual(by[name]["status"], "skip", msg)
            self.assertIn(why, by[name]["reason"], msg)
        for name in CPU_CHECKS:
            self.assertEqual(by[name]["status"], "pass", f"{name}: {by[name]['reason']}\n{msg}")
        self.assertEqual(p.returncode, 0, msg)
        self.assertEqual(doc["exit_code"], 0, msg)
        self.assertEqual(doc["counts"], {"pass": len(CPU_CHECKS), "fail": 0, "skip": len(GPU_CHECKS)}, msg)
        # The CPU references measured what they say.
        self.assertEqual(by["cpu_hash_vectors"]["figures"]["wrong"], [], msg)
        self.assertEqual(by["cpu_hash_vectors"]["figures"]["hashed"], by["cpu_hash_vectors"]["figures"]["vectors"])
        self.assertEqual(by["catalog_model"]["figures"]["representatives"], 16, msg)
        errs = by["no_gpu_errors"]["figures"]
        self.assertRegex(errs["replay_cuda_error"], r"^scout replay: error: --device cuda: [^;]+; [^;]+; .+$", msg)
        self.assertGreaterEqual(errs["gpu_tests_skipped"], 5, msg)
        self.assertEqual(sorted(os.listdir(out)), ["gpu-check-work.tar.gz", "gpu-check.json", "gpu-check.log",
                                                   "gpu-check.txt"])
        with open(os.path.join(out, "gpu-check.txt")) as f:
            text = f.read()
        for name in CPU_CHECKS + GPU_CHECKS:
            self.assertIn(name, text)
        self.assertIn(f"seed {seed}", text)
        print(text)
        return doc

    def test_dry_flag(self):
        seed = random.randrange(1, 2**31)
        print(f"seed {seed}")
        p, out = self.run_check("--dry", "--seed", str(seed))
        self.assert_dry(p, out, seed, "--dry given")

    def test_auto_detected_without_a_gpu(self):
        if has_gpu():
            self.skipTest("this machine has /dev/nvidia*: the auto-detected mode is the full GPU check")
        seed = random.randrange(1, 2**31)
        print(f"seed {seed}")
        p, out = self.run_check("--seed", str(seed))
        self.assert_dry(p, out, seed, "no /dev/nvidia*")

    def test_bad_input(self):
        p, _ = self.run_check("--budget", "5")
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("--budget", p.stderr)
        # A build directory without the programs: the build check fails with the reason, the run goes on.
        empty = tempfile.mkdtemp(prefix="scout-gpu-check-nobuild-")
        out = tempfile.mkdtemp(prefix="scout-gpu-check-test-")
        p = subprocess.run([SCRIPT, "--dry", "--out", out, "--build", empty], capture_output=True, text=True, timeout=300)
        self.assertEqual(p.returncode, 1, p.stderr)
        doc = self.summary(out)
        build = next(c for c in doc["checks"] if c["name"] == "build")
        self.assertEqual(build["status"], "fail")
        self.assertIn("not built: bin/scout", build["reason"])
        self.assertNotIn("Traceback", p.stderr)


if __name__ == "__main__":
    unittest.main()
