"""The GPU paths on a machine without a GPU (this CI's, with the CUDA toolkit
installed and no driver): each ends in a clear error with exit 5
(unavailable), `what; why; what to do`, or a skip with the reason, never a
crash. Skips where a GPU exists (scripts/gpu-check.sh checks the GPU side)."""
import os
import re
import subprocess
import unittest

from scoutlib import BUILD_DIR, EXIT, ScoutTestCase, run


def has_gpu():
    return any(n.startswith("nvidia") for n in os.listdir("/dev"))


@unittest.skipIf(has_gpu(), "this machine has a GPU: scripts/gpu-check.sh checks the GPU paths there")
class NoGpu(ScoutTestCase):
    def replay_error(self, env, extra=()):
        res = run(["replay", "--battery", "standard", "--device", "cuda", "--peers", "2", "--size", "tiny", *extra],
                  env=env)
        self.assertCleanError(res, "unavailable", "replay")
        line = [ln for ln in res.stderr.splitlines() if ln.startswith("scout replay: error:")][0]
        self.assertRegex(line, r"^scout replay: error: --device cuda: replay cannot compute on a GPU here; "
                               r"the LibTorch module cannot set up cuda:0: [^;]+, and /dev/nvidiactl is absent "
                               r"\(no NVIDIA driver\); use --device cpu")
        print(line)
        return line

    def test_replay_on_cuda_is_unavailable(self):
        # The venv's wheel: the CUDA wheel has CUDA but finds no driver here; the CPU wheel has no libtorch_cuda.
        env = dict(os.environ)
        env.pop("SCOUT_TORCH_MODULE", None)
        for extra in ([], ["--recipes", "adamw_step", "--inject", "sdc:random"]):
            line = self.replay_error(env, extra)
            self.assertRegex(line, r"LibTorch's CUDA finds no usable GPU|is a CPU-only build, with no libtorch_cuda.so")
        # The text format says the same.
        res = run(["replay", "--battery", "standard", "--device", "cuda"], fmt="text")
        self.assertCleanError(res, "unavailable", "replay")

    def test_gpu_bench_is_unavailable_with_the_reason(self):
        bench = os.path.join(BUILD_DIR, "bench", "tensor_hash_bench")
        if not os.path.exists(bench):
            self.skipTest(f"{bench} is not built")
        p = subprocess.run([bench, "--gpu"], capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, EXIT["unavailable"], p.stderr)
        self.assertEqual(p.stdout, "")
        # CUDA built in: the runtime's reason and scout's advice; CUDA off: "built without CUDA".
        self.assertRegex(p.stderr, r"^tensor_hash_bench --gpu: error: no (usable CUDA device|GPU support in this "
                                   r"build); [^;]+; .+\n$")
        if "cudaError" in p.stderr:
            self.assertRegex(p.stderr, r"\(cudaError\w+\): [a-z]")  # the advice follows the runtime's name
        p = subprocess.run([bench, "--gpu", "--bytes", "x"], capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, EXIT["usage"], p.stderr)

    def test_gpu_tests_skip_with_the_reason(self):
        tests = os.path.join(BUILD_DIR, "tests", "scout_gpu_tests")
        if not os.path.exists(tests):
            self.skipTest(f"{tests} is not built")
        p = subprocess.run([tests], capture_output=True, text=True, timeout=120)
        self.assertEqual(p.returncode, 0, p.stdout[-2000:])
        skipped = set(re.findall(r"^\[  SKIPPED \] (\w+\.\w+)", p.stdout, re.M))
        listed = subprocess.run([tests, "--gtest_list_tests"], capture_output=True, text=True, timeout=60).stdout
        cases = [ln for ln in listed.splitlines() if ln.startswith("  ")]
        self.assertEqual(len(skipped), len(cases), p.stdout[-2000:])
        reasons = set(re.findall(r"Skipped\s*\n(.+)", p.stdout))
        self.assertTrue(reasons, p.stdout[-2000:])
        for reason in reasons:
            self.assertRegex(reason, r"no (CUDA )?GPU: .{10,}", p.stdout[-2000:])
        print(sorted(reasons))


if __name__ == "__main__":
    unittest.main()
