"""Timeline traces (--trace-out, scout records trace): a real 4-rank PyTorch DDP job (gloo, the
scout publisher) hung at a random rank (the seed printed), probed with `probe-hang --trace-out`,
`observe --trace-out` and `records trace`; straggler rounds recorded by real runs decided again
with `straggler --trace-out`. Every trace is checked against schemas/trace.schema.json (the trace
event format as scout writes it: no trace processor can be fetched here) and structurally: every
rank has its track, slices on a track nest, open calls end at the probe's time, the slices are
the records' ring calls at their times, and the suspect marked is the injected rank.

Runs under /usr/bin/python3 via ctest (SCOUT_BIN etc. set there).
"""
import glob
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import unittest

import scoutlib
from scoutlib import EXIT, SCOUT_BIN, ScoutTestCase, run, validate
from trainer_harness import TrainerJob

WORLD = 4
STEPS = 5
SEED = int(os.environ.get("SCOUT_TEST_SEED", random.SystemRandom().randrange(1 << 30)))
print(f"test_trace seed {SEED} (rerun with SCOUT_TEST_SEED={SEED})", file=sys.stderr)
LANE_BASE, MAX_LANES = 1000000, 64


def rank_of_tid(tid):
    return tid if tid < LANE_BASE else (tid - LANE_BASE) // MAX_LANES


def load_trace(path):
    with open(path) as f:
        doc = json.load(f)
    validate(doc, "trace.schema.json")
    return doc


class TraceChecks(ScoutTestCase):
    def check_structure(self, doc, ranks, msg=""):
        """Every rank in `ranks` has a named track; slices lie on named tracks, nest, and end by end_us."""
        events = doc["traceEvents"]
        named = {}
        for e in events:
            if e["ph"] == "M" and e["name"] == "thread_name":
                named[(e["pid"], e["tid"])] = e["args"]["name"]
        own = {rank_of_tid(t): name for (_, t), name in named.items() if t < LANE_BASE}
        for r in ranks:
            self.assertIn(r, own, f"rank {r} has no track\n{msg}")
            self.assertRegex(own[r], rf"^rank {r} \(.+\)$", msg)
        end_us = doc["otherData"]["end_us"]
        per_track = {}
        for e in events:
            if e["ph"] != "X":
                continue
            self.assertIn((e["pid"], e["tid"]), named, f"slice on an unnamed track: {e}\n{msg}")
            self.assertEqual(rank_of_tid(e["tid"]), e["args"]["rank"], msg)
            self.assertLessEqual(e["ts"] + e["dur"], end_us + 0.002, f"slice past the end: {e}\n{msg}")
            if e["args"].get("open"):
                self.assertAlmostEqual(e["ts"] + e["dur"], end_us, delta=0.002, msg=f"open call not at the end: {e}")
            per_track.setdefault((e["pid"], e["tid"]), []).append((e["ts"], e["ts"] + e["dur"]))
        for track, slices in per_track.items():
            slices.sort(key=lambda s: (s[0], -s[1]))
            stack = []
            for s, t in slices:
                while stack and stack[-1] <= s:
                    stack.pop()
                self.assertTrue(not stack or stack[-1] >= t, f"slices overlap without nesting on {track} at {s}\n{msg}")
                stack.append(t)
        return events

    def check_suspect(self, doc, rank, msg=""):
        events = doc["traceEvents"]
        marks = [e for e in events if e["ph"] == "i" and e["cat"] == "suspect"]
        self.assertTrue(marks, f"no suspect mark\n{msg}")
        self.assertEqual({rank_of_tid(e["tid"]) for e in marks}, {rank}, msg)
        self.assertTrue(all(e["s"] == "t" and e["args"]["suspect"] is True for e in marks), msg)
        stalled = [e for e in events if e["ph"] == "X" and e["args"].get("suspect")]
        self.assertEqual(len(stalled), 1, f"one stalled call of the suspect\n{msg}")
        self.assertEqual(rank_of_tid(stalled[0]["tid"]), rank, msg)
        self.assertEqual(stalled[0]["cname"], "terrible", msg)
        self.assertTrue(stalled[0]["args"].get("open"), f"the stalled call runs to the probe's time\n{msg}")
        self.assertEqual(doc["otherData"]["suspect_ranks"], [rank], msg)


class HangTrace(TraceChecks):
    def test_a_hung_jobs_traces_mark_the_injected_rank(self):
        rng = random.Random(SEED)
        fault = rng.choice(["stop-before-collective", "stop-inside-collective"])
        tmp = tempfile.mkdtemp(prefix="scout-trace-test-")
        self.addCleanup(shutil.rmtree, tmp, True)
        with TrainerJob(world=WORLD, steps=STEPS, fault=fault, seed=rng.randrange(1 << 31)) as job:
            msg = f"test seed {SEED} harness seed {job.seed} fault {fault} rank {job.fault_rank}"
            job.start()
            job.settle()

            # probe-hang: the verdict names the rank, the trace marks it.
            path = os.path.join(tmp, "hang.trace.json")
            res = run(["probe-hang", "--job", job.job, "--threshold", "1", "--timeout", "10", "--trace-out", path],
                      timeout=60)
            doc = res.json()
            self.assertExit(res, "attributed")
            self.assertEqual([s["rank"] for s in doc["suspects"]], [job.fault_rank], f"{msg}\n{res}")
            self.assertEqual(doc["details"]["trace"]["path"], path)
            self.assertTrue(doc["details"]["trace"]["written"])
            trace = load_trace(path)
            events = self.check_structure(trace, range(WORLD), msg)
            self.check_suspect(trace, job.fault_rank, msg)
            peers_open = {e["args"]["rank"] for e in events if e["ph"] == "X" and e["args"].get("open")}
            self.assertTrue(peers_open - {job.fault_rank}, f"no peer inside a call at the probe's time\n{msg}")
            probe = [e for e in events if e["ph"] == "i" and e["cat"] == "probe"]
            self.assertEqual(len(probe), 1, msg)
            self.assertEqual(probe[0]["args"]["verdict_status"], "attributed")
            for e in events:
                if e["ph"] == "X" and e["cat"].startswith("collective"):
                    self.assertRegex(e["args"]["group"], r"^0x[0-9a-f]{16}$")

            # records trace: the slices are the rings' calls, at their times.
            rec_path = os.path.join(tmp, "records.trace.json")
            res = run(["records", "trace", "--job", job.job, "--out", rec_path])
            self.assertExit(res, "healthy")
            rdoc = res.json()
            self.assertEqual(rdoc["details"]["action"], "trace")
            self.assertEqual(rdoc["details"]["trace"]["ranks"], WORLD)
            rtrace = load_trace(rec_path)
            self.check_structure(rtrace, range(WORLD), msg)
            base = int(rtrace["otherData"]["base_ns"])
            got = {}
            for e in rtrace["traceEvents"]:
                if e["ph"] == "X":
                    got.setdefault(e["args"]["rank"], []).append((base + round(e["ts"] * 1000), e["args"]["op_seq"]))
            listed = run(["records", "list", "--job", job.job]).json()
            for r in listed["details"]["records"]:
                rec = r["record"]
                want = sorted((c["enter_ns"], c["op_seq"]) for c in rec["recent"] if c["enter_ns"] > 0)
                have = sorted(got.get(rec["rank"], []))
                self.assertEqual([s for _, s in have], [s for _, s in want], f"rank {rec['rank']}\n{msg}")
                for (t1, _), (t2, _) in zip(have, want):
                    self.assertLessEqual(abs(t1 - t2), 1000, f"rank {rec['rank']}: {t1} vs {t2}")

            # observe: a trace per verdict beside the verdict file.
            vdir, tdir = os.path.join(tmp, "verdicts"), os.path.join(tmp, "traces")
            res = run(["observe", "--job", job.job, "--threshold", "1", "--timeout", "10", "--interval", "0.2",
                       "--max-verdicts", "1", "--duration", "60", "--verdict-dir", vdir, "--trace-out", tdir],
                      timeout=120)
            self.assertEqual(res.rc, 0, res)
            traces = glob.glob(os.path.join(tdir, "trace-*-1.json"))
            verdicts = glob.glob(os.path.join(vdir, "verdict-*-1.json"))
            self.assertEqual((len(traces), len(verdicts)), (1, 1), res)
            self.assertEqual(os.path.basename(traces[0])[len("trace-"):], os.path.basename(verdicts[0])[len("verdict-"):])
            with open(verdicts[0]) as f:
                vdoc = json.load(f)
            validate(vdoc)
            self.assertEqual(vdoc["details"]["trace"]["path"], traces[0])
            otrace = load_trace(traces[0])
            self.check_structure(otrace, range(WORLD), msg)
            self.check_suspect(otrace, job.fault_rank, msg)

            # A trace that cannot be written: the verdict is still printed, exit 5.
            bad = os.path.join(tmp, "no-such-dir", "x.json")
            res = run(["probe-hang", "--job", job.job, "--threshold", "1", "--timeout", "10", "--trace-out", bad],
                      timeout=60)
            self.assertExit(res, "unavailable")
            doc = json.loads(res.stdout)
            validate(doc)
            self.assertEqual([s["rank"] for s in doc["suspects"]], [job.fault_rank], msg)
            self.assertFalse(doc["details"]["trace"]["written"])
            self.assertIn("scout probe-hang: error: cannot write the trace", res.stderr)
            self.assertFalse(os.path.exists(bad))
            res = run(["records", "trace", "--job", job.job, "--out", bad])
            self.assertExit(res, "unavailable")
            self.assertFalse(json.loads(res.stdout)["details"]["trace"]["written"])


class RecordsTraceErrors(ScoutTestCase):
    def test_no_records_is_unavailable_and_out_is_required(self):
        tmp = tempfile.mkdtemp(prefix="scout-trace-test-")
        self.addCleanup(shutil.rmtree, tmp, True)
        path = os.path.join(tmp, "t.json")
        res = run(["records", "trace", "--job", f"no-such-job-{random.randrange(1 << 30)}", "--out", path])
        self.assertCleanError(res, "unavailable", "records")
        self.assertFalse(os.path.exists(path))
        res = run(["records", "trace", "--job", "j"])
        self.assertExit(res, "usage")


class StragglerTrace(TraceChecks):
    """Rounds recorded by real runs (tests/integration/data/straggler), decided again with --trace-out."""

    CASES = {"outside-30299011": 1, "outside-30299019": 2, "contention-30683001": 2, "stall-20418006": 1,
             "pair-quota-20273601": 1, "clean-400": None}

    def test_the_named_ranks_flagged_rounds_are_marked(self):
        data = os.path.join(scoutlib.SOURCE_DIR, "tests", "integration", "data", "straggler")
        tmp = tempfile.mkdtemp(prefix="scout-trace-test-")
        self.addCleanup(shutil.rmtree, tmp, True)
        for name, victim in self.CASES.items():
            with self.subTest(run=name):
                path = os.path.join(data, f"{name}.evidence.json")
                with open(path) as f:
                    ev = json.load(f)
                ranks = sorted({r["rank"] for rd in ev["rounds"] for r in rd["ranks"]})
                out = os.path.join(tmp, f"{name}.trace.json")
                res = run(["straggler", "--job", ev["job"], "--evidence-in", path, "--trace-out", out])
                doc = res.json()
                self.assertExit(res, "healthy" if victim is None else "attributed")
                trace = load_trace(out)
                events = self.check_structure(trace, ranks, name)
                reads = [e for e in events if e["ph"] == "i" and e["cat"] == "round"]
                self.assertEqual(len(reads), len(ev["rounds"]), name)
                flagged = [e for e in events if e["ph"] == "X" and "flagged_round" in e["args"]]
                per_round = doc["details"]["straggler"]["per_round"]
                if victim is None:
                    self.assertEqual(flagged, [], name)
                    continue
                self.assertEqual({e["args"]["rank"] for e in flagged}, {victim}, name)
                want = {i + 1 for i, r in enumerate(per_round) if victim in r["flagged"]}
                self.assertTrue(want, name)
                self.assertEqual({e["args"]["flagged_round"] for e in flagged}, want, name)
                self.assertTrue(all(e["cname"] == "bad" and "straggler" in e["cat"] for e in flagged), name)
                marks = [e for e in events if e["ph"] == "i" and e["cat"] == "suspect"]
                self.assertEqual({e["tid"] for e in marks}, {victim}, name)


if __name__ == "__main__":
    unittest.main()
