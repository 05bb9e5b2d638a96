"""torch 2.x Flight Recorder dumps as evidence: `scout probe-hang
--flight-recorder DIR` on the dumps of a real 4-rank job that ran WITHOUT
scout's publisher (both forms: the pickled dump-on-timeout files and their
JSON twins, which must give the same verdict), for the hang scenarios of the suite (a random rank and
step from a printed seed). Each surviving rank dumps its recorder when its
collective fails, as NCCL's dump-on-timeout does (gloo does not dump by
itself); the faulty rank's dump is missing when it stopped or exited, and
then scout must list it as the rank without evidence and blame no other.
torch's own analyzer (python -m torch.distributed.flight_recorder.fr_trace)
runs on the same dumps and its output is printed beside scout's verdict.

Skips with the reason when the torch 2.x venv is absent.
"""
import json
import os
import shutil
import subprocess
import tempfile
import time
import unittest

from scoutlib import EXIT, ScoutTestCase, run
import trainer_harness as th

TRAINER2 = os.path.join(th.HERE, "trainers", "torch2_trainer.py")


def torch_analyzer(py, pickle_dir):
    """torch's verdict on the dumps: (exit code, last lines of its output)."""
    p = subprocess.run([py, "-m", "torch.distributed.flight_recorder.fr_trace", pickle_dir, "--allow-incomplete-ranks",
                        "-p", "rank_"], capture_output=True, text=True, timeout=300)
    return p.returncode, (p.stdout + p.stderr).strip()


class FlightRecorderEvidence(ScoutTestCase):
    @classmethod
    def setUpClass(cls):
        cls.py = th.require_python()

    def scenario(self, fault):
        d = tempfile.mkdtemp(prefix="scout-fr-")
        try:
            with th.TrainerJob(world=4, steps=5, fault=fault, trainer=TRAINER2, publisher="off",
                               pg_timeout=8, trainer_args=["--mode", "ddp"],
                               # torch 2.8 to 2.14 record nothing without it (2.15 records 2000 by default).
                               extra_env={"SCOUT_TEST_FR_DIR": d, "TORCH_FR_BUFFER_SIZE": "2000"}) as job:
                job.start()
                survivors = 3 if fault in ("stop-before-collective", "exit") else 4
                deadline = time.monotonic() + 240
                jdir = os.path.join(d, "json")
                while time.monotonic() < deadline:
                    n = len([f for f in os.listdir(jdir) if f.endswith(".json")]) if os.path.isdir(jdir) else 0
                    if n >= survivors and sum(rc is not None for rc in job.returncodes()) >= survivors:
                        break
                    time.sleep(0.2)
                else:
                    raise AssertionError(f"seed {job.seed}: dumps did not appear: {os.listdir(d)}")
                res = run(["probe-hang", "--job", job.job, "--flight-recorder", jdir, "--threshold", "1"], timeout=60)
                rc, text = torch_analyzer(self.py, os.path.join(d, "pickle"))
                msg = f"seed {job.seed} fault {fault} rank {job.fault_rank} step {job.fault_step}\n{res}"
                print(f"== {fault}: injected rank {job.fault_rank} step {job.fault_step}")
                print(f"-- scout (exit {res.rc}): suspects {[s['rank'] for s in json.loads(res.stdout)['suspects']] if res.stdout else None}")
                print(f"-- torch fr_trace (exit {rc}):\n{text[-3000:]}")
                doc = res.json()
                # The pickled dump-on-timeout files (what torch's analyzer reads) give the same verdict, also without
                # --job (a job that ran without scout's publisher has no scout job id: the directory names it).
                pres = run(["probe-hang", "--flight-recorder", os.path.join(d, "pickle"), "--threshold", "1"], timeout=60)
                self.assertEqual(pres.rc, res.rc, f"{msg}\npickled dumps: {pres}")
                pdoc = pres.json()
                self.assertEqual(pdoc["job"], "pickle", msg)
                self.assertEqual(pdoc["status"], doc["status"], msg)
                self.assertEqual([s["rank"] for s in pdoc["suspects"]], [s["rank"] for s in doc["suspects"]], msg)
                self.assertEqual(pdoc["details"].get("missing_ranks"), doc["details"].get("missing_ranks"), msg)
                if fault in ("stop-before-collective", "exit"):
                    # The faulty rank could not dump: it has no evidence, and no other rank is blamed.
                    self.assertEqual(doc["details"]["missing_ranks"], [job.fault_rank], msg)
                    self.assertIn(res.rc, (EXIT["attributed"], EXIT["inconclusive"]), msg)
                    self.assertIn(sorted(s["rank"] for s in doc["suspects"]), ([], [job.fault_rank]), msg)
                else:
                    self.assertExit(res, "attributed")
                    self.assertEqual(sorted(s["rank"] for s in doc["suspects"]), [job.fault_rank], msg)
                return doc
        finally:
            shutil.rmtree(d, ignore_errors=True)

    def test_wrong_shape(self):
        self.scenario("wrong-shape")

    def test_skip_collective(self):
        self.scenario("skip-collective")

    def test_exit(self):
        self.scenario("exit")

    def test_stop_before_collective(self):
        self.scenario("stop-before-collective")

    def test_bad_dump_directory_is_a_clear_error(self):
        d = tempfile.mkdtemp(prefix="scout-fr-bad-")
        try:
            res = run(["probe-hang", "--job", "j", "--flight-recorder", d])
            self.assertCleanError(res, "bad_input", "probe-hang")
            with open(os.path.join(d, "rank_0.json"), "w") as f:
                f.write("{not json")
            res = run(["probe-hang", "--job", "j", "--flight-recorder", d])
            self.assertCleanError(res, "bad_input", "probe-hang")
            res = run(["probe-hang", "--job", "j", "--flight-recorder", os.path.join(d, "absent")])
            self.assertCleanError(res, "bad_input", "probe-hang")
            # A pickle that names a class (torch's dumps never do) is refused by name, never executed.
            os.remove(os.path.join(d, "rank_0.json"))
            with open(os.path.join(d, "rank_0"), "wb") as f:
                f.write(b"\x80\x02cos\nsystem\nq\x00X\x04\x00\x00\x00trueq\x01\x85q\x02Rq\x03.")
            res = run(["probe-hang", "--job", "j", "--flight-recorder", d])
            self.assertCleanError(res, "bad_input", "probe-hang")
            self.assertIn("os.system", res.stderr)
            with open(os.path.join(d, "rank_0"), "wb") as f:
                f.write(b"\x80\x02}q\x00(X\x07\x00\x00\x00entries")  # truncated
            res = run(["probe-hang", "--job", "j", "--flight-recorder", d])
            self.assertCleanError(res, "bad_input", "probe-hang")
        finally:
            shutil.rmtree(d, ignore_errors=True)


DUMPS = os.path.join(th.SOURCE_DIR, "tests", "unit", "hang", "flight_recorder_dumps")


class FlightRecorderVersions(ScoutTestCase):
    """Real dumps of other torch 2.x releases, committed (tests/unit/hang/flight_recorder_dumps/torch-<version>/
    <case>/{json,pickle}, made by bench/fr_vs_frtrace.py under that torch: bench/fr_versions_result.txt), decided
    with no torch installed: a case "clean_<layout>" reads healthy, "<fault>_rank<N>_<layout>" names rank N and no
    other, in both forms alike. Each version's dumps cut short, and one stripped of a field the reader needs (a
    partial dump), are a clean error naming the file and saying so; a format that is not 2.x is refused by name."""

    def versions(self):
        out = sorted(d for d in os.listdir(DUMPS) if d.startswith("torch-"))
        self.assertTrue(out, f"no torch-<version> dumps in {DUMPS}")
        return out

    def test_each_versions_dumps_name_the_culprit(self):
        for version in self.versions():
            for case in sorted(os.listdir(os.path.join(DUMPS, version))):
                verdicts = []
                for form in ("json", "pickle"):
                    d = os.path.join(DUMPS, version, case, form)
                    if not os.path.isdir(d):
                        continue
                    res = run(["probe-hang", "--flight-recorder", d, "--threshold", "1"], timeout=60)
                    msg = f"{version}/{case}/{form}\n{res}"
                    doc = res.json()
                    suspects = sorted(s["rank"] for s in doc["suspects"])
                    if case.startswith("clean_"):
                        self.assertExit(res, "healthy")
                        self.assertEqual(suspects, [], msg)
                    else:
                        culprit = int(case.split("_rank", 1)[1].split("_", 1)[0])
                        self.assertExit(res, "attributed")
                        self.assertEqual(suspects, [culprit], msg)
                    verdicts.append((doc["status"], suspects, doc["details"].get("missing_ranks")))
                self.assertTrue(verdicts, f"{version}/{case}: no json or pickle dumps")
                self.assertEqual(len(set(map(repr, verdicts))), 1, f"{version}/{case}: the forms disagree: {verdicts}")

    def test_empty_dumps_are_refused_saying_why(self):
        # torch 2.7.1's recorder is NCCL's alone: a gloo job's dumps (its _dump_nccl_trace, format 2.4) hold no
        # entry (the JSON form not even the key); torch 2.8.0's hold none without TORCH_FR_BUFFER_SIZE (default 0).
        # Not read as a job that has not started (healthy): refused, saying why.
        for case, says in (("empty_torch-2.7.1", ("format version 2.4", "torch 2.8 or later")),
                           ("empty_torch-2.8.0-buffer-off", ("format version 2.9", "TORCH_FR_BUFFER_SIZE"))):
            for form in ("json", "pickle"):
                res = run(["probe-hang", "--flight-recorder", os.path.join(DUMPS, case, form)], timeout=60)
                self.assertCleanError(res, "bad_input", "probe-hang")
                for text in says:
                    self.assertIn(text, res.stderr, f"{case}/{form}")

    def test_truncated_and_partial_dumps_are_clear_errors(self):
        for version in self.versions():
            for case in sorted(os.listdir(os.path.join(DUMPS, version))):
                for form in ("json", "pickle"):
                    src = os.path.join(DUMPS, version, case, form)
                    if not os.path.isdir(src):
                        continue
                    name = sorted(os.listdir(src))[0]
                    with open(os.path.join(src, name), "rb") as f:
                        whole = f.read()
                    for cut in (0, 1, len(whole) // 2, len(whole) - 1):
                        d = tempfile.mkdtemp(prefix="scout-fr-cut-")
                        try:
                            shutil.copytree(src, d, dirs_exist_ok=True)
                            with open(os.path.join(d, name), "wb") as f:
                                f.write(whole[:cut])
                            res = run(["probe-hang", "--flight-recorder", d], timeout=60)
                            msg = f"{version}/{case}/{form}/{name} cut at {cut}\n{res}"
                            self.assertCleanError(res, "bad_input", "probe-hang")
                            self.assertIn(name, res.stderr, msg)
                            self.assertRegex(res.stderr, "empty|truncated", msg)
                        finally:
                            shutil.rmtree(d, ignore_errors=True)
                    if form != "json":
                        continue
                    # A partial dump (an entry without its sequence number) and another format: refused by name.
                    doc = json.loads(whole)
                    for key, edit, expect in (("collective_seq_id", lambda x: x["entries"][-1].pop("collective_seq_id"),
                                               "collective_seq_id"),
                                              ("version", lambda x: x.__setitem__("version", "3.0"), '"3.0"')):
                        d = tempfile.mkdtemp(prefix="scout-fr-part-")
                        try:
                            shutil.copytree(src, d, dirs_exist_ok=True)
                            bad = json.loads(json.dumps(doc))
                            edit(bad)
                            with open(os.path.join(d, name), "w") as f:
                                json.dump(bad, f)
                            res = run(["probe-hang", "--flight-recorder", d], timeout=60)
                            self.assertCleanError(res, "bad_input", "probe-hang")
                            self.assertIn(expect, res.stderr, f"{version}/{case} {key}\n{res}")
                            self.assertIn(name, res.stderr, f"{version}/{case} {key}\n{res}")
                        finally:
                            shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    unittest.main()
