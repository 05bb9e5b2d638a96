"""`scout observe --prometheus FILE` on a real stall: a 3-rank torch 2.x gloo
job in which one rank (from a printed seed) stops before a collective; the
daemon writes one verdict and its node_exporter textfile says so (stalls
seen, the last verdict's command/status/exit code, the job's silence and each
rank's), and says up 0 once it stopped. An unwritable file is refused at start (exit 5)."""
import os
import re
import shutil
import subprocess
import tempfile
import unittest

from scoutlib import EXIT, SCOUT_BIN, ScoutTestCase, run
import trainer_harness as th


def samples(text):
    """{(name, frozenset(labels)): value} of a textfile, checking its HELP/TYPE lines."""
    out, typed = {}, set()
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split()
            assert kind in ("gauge", "counter"), line
            assert name not in typed, f"two TYPE lines for {name}"
            typed.add(name)
            continue
        if line.startswith("#") or not line:
            continue
        m = re.fullmatch(r'([a-z_]+)(?:\{(.*)\})? (\S+)', line)
        assert m, f"not a sample: {line!r}"
        labels = frozenset(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(2) or ""))
        assert m.group(1) in typed, f"{m.group(1)} has no TYPE line"
        out[(m.group(1), labels)] = float(m.group(3))
    return out


class ObservePrometheus(ScoutTestCase):
    def test_stall_shows_in_the_textfile(self):
        tmp = tempfile.mkdtemp(prefix="scout-observe-prom-")
        try:
            with th.TrainerJob(world=3, steps=6, fault="stop-before-collective",
                               pg_timeout=300) as job:
                prom = os.path.join(tmp, "scout_observe.prom")
                job.start()
                proc = subprocess.run([SCOUT_BIN, "observe", "--job", job.job, "--threshold", "2", "--interval", "0.2",
                                       "--verdict-dir", os.path.join(tmp, "v"), "--prometheus", prom,
                                       "--max-verdicts", "1", "--duration", "150", "--format", "json"],
                                      capture_output=True, text=True, timeout=180)
                self.assertEqual(proc.returncode, 0, proc.stderr)
                with open(prom) as f:
                    text = f.read()
                print(f"seed {job.seed} rank {job.fault_rank}:\n{text}")
                s = samples(text)
                j = ("job", job.job)
                self.assertEqual(s[("scout_observe_up", frozenset([j]))], 0, text)
                self.assertGreaterEqual(s[("scout_observe_stalls_seen_total", frozenset([j]))], 1, text)
                self.assertEqual(s[("scout_observe_verdicts_total", frozenset([j]))], 1, text)
                self.assertEqual(s[("scout_observe_records", frozenset([j]))], 3, text)
                key = ("scout_observe_last_verdict",
                       frozenset([j, ("command", "observe"), ("status", "attributed"), ("exit_code", "1")]))
                self.assertEqual(s.get(key), 1, f"seed {job.seed}: {text}")
                self.assertGreater(s[("scout_observe_last_verdict_timestamp_seconds", frozenset([j]))], 0)
                silence = s[("scout_observe_silence_seconds", frozenset([j]))]
                self.assertGreater(silence, 0, text)
                ranks = {dict(labels)["rank"]: v for (name, labels), v in s.items()
                         if name == "scout_observe_rank_silence_seconds"}
                self.assertEqual(sorted(ranks), ["0", "1", "2"], text)
                # The job's silence is its least silent rank's (the stop probed at once: a stopped
                # rank is a stall without waiting for --threshold).
                self.assertAlmostEqual(min(ranks.values()), silence, places=6, msg=text)
                self.assertEqual([f for f in os.listdir(tmp) if f.startswith(".")], [], "no temporary file left")
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def test_unwritable_textfile_is_refused_at_start(self):
        res = run(["observe", "--job", "j", "--prometheus", "/nonexistent-dir-for-scout/x.prom", "--duration", "1"])
        self.assertCleanError(res, "unavailable", "observe")


if __name__ == "__main__":
    unittest.main()
