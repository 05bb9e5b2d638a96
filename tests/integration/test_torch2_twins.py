"""Process groups with the same members ("twins") and scout's call numbers:
(group id, per-group sequence) must name one call, the same one on every
member (issue #11: DeepSpeed's pipeline grid makes a group over the whole
world beside the default one; both have the id of their members, and the
torch 2.x hooks counted each process group's calls apart, so a rank's history
held two calls at one (id, seq) and the hang decision followed no wait to the
rank that had exited).

scout counts calls per group id, not per process group (the native hooks'
g_counters, _hooks._next_seq for the Python hooks, _torch._next_seq for 1.13's
wrappers): twins count their calls together. That is consistent on every
member when the members issue their calls on the twins in the same order,
which blocking calls force and the test's async calls keep.

A real 4-rank gloo job (trainers/twins_trainer.py): the default group, two
more groups over the whole world, two over ranks [0, 1] (and one over
[2, 3]), and a plan of 40 calls drawn from a printed seed (SCOUT_TEST_SEED
reproduces it), the same on every rank: each on one of those groups, or a send
from rank 0 to rank 1 on the world or a [0, 1] group, blocking or async,
with call index + 1 elements. After the job, `scout records list --format
json` gives every rank's ring; the test checks that no rank has two calls at
one (id, seq), that every call of the plan is in its members' rings in plan
order, and that at each (id, seq) every member holds the same call (the same
plan index) and no other rank holds one. Torch 2.x with the native hooks and
with the Python hooks; Debian's torch 1.13 with the wrappers.

With the Flight Recorder (torch 2.x, test_flight_recorder_skip): a plan on the
world twins only, and a rank (drawn from the seed) that skips a blocking call,
so that the others time out and dump their recorders (gloo's pg_config
completed with every pg's members, as NCCL's recorder writes it). scout reads
the dumps (`probe-hang --flight-recorder`), renumbering twins' entries per id
as the publisher counts, and names that rank; so does `probe-hang` on the
records (native hooks); and every rank's pending call is the same call at the
same (id, seq) in both (with per-pg numbers, as before, the dumps gave seq 12
where the records gave 21: seed 1506807277).

Skips with the reason when the torch 2.x venv is absent (the 1.13 test runs
without it).
"""
import json
import os
import random
import shutil
import sys
import tempfile
import time
import unittest

from scoutlib import ScoutTestCase, run
import trainer_harness as th

TRAINER = os.path.join(th.HERE, "trainers", "twins_trainer.py")
sys.path.insert(0, os.path.join(th.HERE, "trainers"))
import twins_trainer  # noqa: E402  (make_plan, members_of: pure Python)

CALLS = 40
TYPE_OF = {"all_reduce": "all_reduce", "broadcast": "broadcast", "all_gather": "all_gather", "barrier": "barrier"}


def draw_seed():
    return int(os.environ.get("SCOUT_TEST_SEED") or random.SystemRandom().randrange(1 << 31))


class Twins(ScoutTestCase):
    def events_of(self, rec):
        """A record's ring events, oldest first (by op_seq)."""
        return sorted(rec["record"]["recent"], key=lambda e: e["op_seq"])

    def job(self, torch_version, hooks, seed):
        print(f"test_torch2_twins: torch {torch_version} hooks {hooks} seed {seed}", flush=True)
        plan = twins_trainer.make_plan(seed, CALLS)
        env = {"PYTHONWARNINGS": "ignore"}
        if hooks:
            env["SCOUT_PUBLISHER_HOOKS"] = hooks
        with th.TrainerJob(world=4, steps=3, fault="none", seed=seed, trainer=TRAINER,
                           pg_timeout=60, trainer_args=["--plan-seed", str(seed), "--calls", str(CALLS)],
                           extra_env=env) as job:
            job.start()
            rcs = job.wait_exit(timeout=240)
            msg = f"torch {torch_version} hooks {hooks} seed {seed}; logs in {job.logdir}"
            if rcs != [0, 0, 0, 0]:
                logs = "\n".join(job.log(r)[-1500:] for r in range(4))
                self.fail(f"{msg}: return codes {rcs}\n{logs}")
            doc = th.scout_records(job.job)
            recs = {r["record"]["rank"]: r for r in doc["details"]["records"] if r["record"] is not None}
            self.assertEqual(sorted(recs), [0, 1, 2, 3], msg)
            self.check(plan, recs, msg)

    def check(self, plan, recs, msg):
        at = {}  # (group, seq) -> {rank: plan index}
        for rank, rec in recs.items():
            evs = self.events_of(rec)
            self.assertGreater(len(evs), 0, f"{msg}: rank {rank} has no events: {json.dumps(rec)[:2000]}")
            self.assertLess(rec["record"]["ring_events"], 64, f"{msg}: the ring wrapped; the plan is too long")
            mine = [c for c in plan if rank in twins_trainer.members_of(c)]
            # The rank's calls in order: the plan's (sends and receives as the pair's), then the final barrier.
            got = [(e["type"], e["count"]) for e in evs]
            want = [(("send" if rank == 0 else "recv") if c["kind"] == "send" else TYPE_OF[c["kind"]],
                     0 if c["kind"] == "barrier" else c["count"]) for c in mine] + [("barrier", 0)]
            # Barriers carry gloo's own token tensor on some torches: compare their counts loosely.
            self.assertEqual([(t, n if t != "barrier" else 0) for t, n in got], want, f"{msg}: rank {rank}'s calls")
            seen = set()
            for e, c in zip(evs, mine + [None]):
                key = (e["group"], e["group_seq"])
                self.assertNotIn(key, seen, f"{msg}: rank {rank} has two calls at (group, seq) {key}")
                seen.add(key)
                at.setdefault(key, {})[rank] = c["index"] if c else "final"
        for key, ranks in sorted(at.items()):
            idx = set(ranks.values())
            self.assertEqual(len(idx), 1, f"{msg}: (group, seq) {key} names different calls: {ranks}")
            i = idx.pop()
            members = [0, 1, 2, 3] if i == "final" else twins_trainer.members_of(plan[i])
            self.assertEqual(sorted(ranks), members, f"{msg}: (group, seq) {key} of call {i}: ranks {sorted(ranks)}")
        print(f"test_torch2_twins: {len(at)} calls, each at one (group, seq) on all its members", flush=True)

    def test_flight_recorder_skip(self):
        """A rank skips a blocking call on a world twin (the plan has world twins only) and waits in
        its next call, a blocking one on another twin: at that (id, seq) its peers are in the skipped
        call and it is in its next one. From the Flight
        Recorder dumps alone (renumbered per id), scout names it.

        The skipped call and the next one must differ in what a record keeps of a call (type, count):
        twins share one id and one call counter, so a skipped barrier followed by a barrier on another
        twin leaves the skipper at the same (id, seq, type, count) as its peers, inside "the same" call.
        Nothing in a record tells them apart, and scout rightly names no one (seed 808960104, plan seed
        920142655: rank 3 skips call 13, a twin_a barrier, its next call a world barrier; every rank
        read inside the barrier at seq 14: group_stall, no suspect). progress-record.md states it."""
        th.require_python()
        seed = draw_seed()
        rng = random.Random(seed)
        # World twins only: every rank makes every call (the mesh scout infers from dumps, which
        # carry no coordinates, is dp = world, and replicas' histories are compared whole).
        world_twins = ("world", "twin_a", "twin_b")
        # A blocking all-reduce or barrier: every other rank waits in it (a broadcast can complete on
        # some receivers without the skipper, an async call lets them go on); the skipper's next call
        # is a blocking one on another twin, where it waits (a later call of the skipped pg would meet
        # the others' call there: gloo aborts on the size mismatch, seed 1506807277, and no dump).
        for _ in range(1000):
            plan_seed = rng.randrange(1 << 31)
            plan = twins_trainer.make_plan(plan_seed, CALLS, groups=world_twins)
            cands = [c["index"] for c, n in zip(plan[3:-1], plan[4:]) if c["kind"] in ("all_reduce", "barrier")
                     and not c["async"] and n["group"] != c["group"] and not n["async"]
                     and not twins_trainer.same_record(c, n)]
            if cands:
                break
        step, rank = rng.choice(cands), rng.randrange(4)
        print(f"test_torch2_twins: flight recorder seed {seed}: plan seed {plan_seed}, rank {rank} skips call {step} "
              f"({plan[step]['group']} {plan[step]['kind']}; next on {plan[step + 1]['group']})", flush=True)
        d = tempfile.mkdtemp(prefix="scout-twins-fr-")
        try:
            with th.TrainerJob(world=4, steps=3, fault="skip-collective", fault_rank=rank, fault_step=step, seed=seed,
                               trainer=TRAINER, pg_timeout=10,
                               trainer_args=["--plan-seed", str(plan_seed), "--calls", str(CALLS),
                                             "--plan-groups", ",".join(world_twins)],
                               extra_env={"SCOUT_TEST_FR_DIR": d, "PYTHONWARNINGS": "ignore",
                                          "SCOUT_PUBLISHER_HOOKS": "native"}) as job:
                job.start()
                rcs = job.wait_exit(timeout=240)
                msg = f"seed {seed} rank {rank} call {step}; logs in {job.logdir}"
                self.assertNotIn(None, rcs, f"{msg}: ranks still running")
                jdir = os.path.join(d, "json")
                dumps = sorted(os.listdir(jdir)) if os.path.isdir(jdir) else []
                if len(dumps) != 4:
                    logs = "\n".join(f"rank {r} (rc {rcs[r]}):\n{job.log(r)[-1500:]}" for r in range(4)
                                     if f"rank_{r}.json" not in dumps)
                    self.fail(f"{msg}: dumps {dumps}\n{logs}")
                res = run(["probe-hang", "--job", job.job, "--flight-recorder", jdir, "--threshold", "1"], timeout=60)
                msg = f"{msg}\n{res}"
                doc = res.json()
                print(f"test_torch2_twins: flight recorder: {doc['status']} suspects "
                      f"{[s['rank'] for s in doc['suspects']]}", flush=True)
                self.assertExit(res, "attributed")
                self.assertEqual([s["rank"] for s in doc["suspects"]], [rank], msg)
                # Each rank's last call, as its dump gives it (renumbered) and as the publisher's record
                # (native hooks) gives it: the same call at the same (id, seq).
                rec = run(["probe-hang", "--job", job.job, "--threshold", "1", "--timeout", "20"], timeout=60)
                rdoc = rec.json()
                print(f"test_torch2_twins: records: {rdoc['status']} suspects "
                      f"{[s['rank'] for s in rdoc['suspects']]}", flush=True)
                self.assertEqual([s["rank"] for s in rdoc["suspects"]], [rank], f"{msg}\nrecords: {rec}")
                # (A dump has no root: root_or_op is left out.)
                keys = ("group", "group_seq", "type", "count", "dtype")
                fr_pending = {r["rank"]: {k: r["pending"][k] for k in keys} for r in doc["details"]["ranks"]}
                rec_pending = {r["rank"]: {k: r["pending"][k] for k in keys} for r in rdoc["details"]["ranks"]}
                self.assertEqual(fr_pending, rec_pending, f"{msg}\nrecords: {rec}")
        finally:
            if os.environ.get("SCOUT_TEST_KEEP_FR"):
                print(f"test_torch2_twins: dumps kept in {d}", flush=True)
            else:
                shutil.rmtree(d, ignore_errors=True)

    def test_native_hooks(self):
        th.require_python()
        self.job("2", "native", draw_seed())

    def test_python_hooks(self):
        th.require_python()
        self.job("2", "python", draw_seed())

    def test_wrappers(self):
        th.require_python()
        self.job("2", "wrappers", draw_seed())


if __name__ == "__main__":
    unittest.main()
