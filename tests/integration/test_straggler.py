"""scout straggler on real DDP jobs (gloo, CPU, the scout publisher): a
random rank slowed by a random factor in [1.5, 3] by the trainer itself
(cause slow_compute), from outside the process (SIGSTOP/SIGCONT duty cycle),
by a real cgroup v1 or v2 CPU quota (cause cpu_quota; the cgroup is removed after),
and by 8-12 busy loops pinned to its CPU (cause cpu_contention); a slow link (a delay
inside one process group's collectives); every rank slowed equally (spatially
healthy, temporally fleet_slowdown); clean runs name no one. Seeds are
printed (straggler_jobs: seed=...); STRAGGLER_SEED reproduces a run.
The trainers run under the torch 2.x of $SCOUT_VENV (default <repo>/.venv; the tests skip without it)."""
import json
import os
import random
import shutil
import subprocess
import tempfile
import time
import unittest

import scoutlib
from straggler_jobs import (StragglerJob, busy_per_round, busy_ratio, cpu_quota_unavailable, memory_cgroup_unavailable,
                            remove_stale_cgroups)
import trainer_harness as th
from trainer_harness import require_python

SEED = int(os.environ["STRAGGLER_SEED"]) if os.environ.get("STRAGGLER_SEED") else None


def straggler(job, *extra, timeout=120):
    return scoutlib.run(["straggler", "--job", job, *extra], timeout=timeout)


def keep_evidence(path, result, name):
    """With STRAGGLER_KEEP=DIR, keeps the rounds scout decided on (DIR/NAME.evidence.json, for
    `scout straggler --evidence-in`) and its verdict (DIR/NAME.verdict.json)."""
    keep = os.environ.get("STRAGGLER_KEEP")
    if not keep or not os.path.exists(path):
        return
    os.makedirs(keep, exist_ok=True)
    shutil.copy(path, os.path.join(keep, f"{name}.evidence.json"))
    with open(os.path.join(keep, f"{name}.verdict.json"), "w") as f:
        f.write(result.stdout)
    print(f"test_straggler: evidence kept in {keep}/{name}.evidence.json", flush=True)


class StragglerOnRealJobs(scoutlib.ScoutTestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        remove_stale_cgroups()  # an earlier run killed before its teardown

    def check_compute_straggler(self, python, how, observe=False, lowest=1.3, cause=None):
        # 60 ms of the trainer's work per step. When the factor scaled that work alone, torch's own work per step
        # diluted it (at 25 ms, torch 2.x: 1.3x showed as 1.07-1.2x of the CPU per call, CI fresh clone, seed
        # 1366315264); the trainer now scales its whole computation.
        # how: "trainer" (its computation takes F x its CPU), "stall" (the same extra CPU all in one gap of the
        # step, after the optimizer step: a slow data loader's pattern), "sleep" (that stall slept: blocked off its
        # CPU), "outside" (SIGSTOP/SIGCONT duty cycle), "quota" (a
        # cgroup v1 or v2 CPU quota of 1/F of the CPU it used), "contention" (pinned to one CPU with H busy loops, no quota).
        with StragglerJob(world=4, seed=SEED, python=python, work_ms=60) as job:
            victim = job.rng.randrange(4)
            factor = round(job.rng.uniform(lowest, 3.0), 2)
            hogs = job.rng.randint(8, 12)  # drawn in every mode, so that a seed draws the same victim and factor
            print(f"test_straggler: victim={victim} factor={factor} how={how}" + (f" hogs={hogs}" if how == "contention" else ""),
                  flush=True)
            if how in ("trainer", "stall", "sleep"):
                job.start(slow_rank=victim, slow_factor=factor, slow_at="each" if how == "trainer" else "end",
                          slow_kind="sleep" if how == "sleep" else "cpu")
            else:
                job.start()
            job.wait_steps(3)
            if how == "outside":
                job.duty_cycle(victim, factor)
            elif how == "quota":
                job.cpu_quota(victim, factor)
            elif how == "contention":
                job.cpu_hogs(victim, hogs)
            time.sleep(1.0)
            if how == "contention":
                # The premise: the hogs slow the victim more than the host's other load slows its peers. How much
                # they do depends on that load, which pinning cannot control (measured at load 8-13 on 2 CPUs:
                # 8 hogs left the victim at 0.99-1.02x its peers' compute, 2 of 10 runs): the victim's busy time
                # against its peers' (busy_ratio) is measured first, and again in the rounds scout decides on.
                slowdown = busy_ratio([p.pid for p in job.procs], victim, 2.0)
                print(f"test_straggler: victim's busy time {slowdown:.2f}x its peers'", flush=True)
                if slowdown < 1.5:
                    self.skipTest(f"the host's own load slowed the victim's peers about as much as {hogs} hogs slowed it "
                                  f"(busy {slowdown:.2f}x < 1.5x): contention is not controlled here")
            # 8-12 hogs slow the victim 1.7-3.4x (measured): its steps then take up to ~0.7 s, and 1.5 s rounds held
            # 3-4 calls (one miss in 20, seed 8000, at 3.38x; the rounds need 3 common calls): 2.5 s rounds there.
            # A 2-3x quota on torch 2.x alike: 3 of 10 runs were inconclusive with too few common calls in 1.5 s
            # rounds (seeds 9247013-022).
            ev_path = os.path.join(job.logdir, "evidence.json")
            r = straggler(job.job, "--rounds", "3", "--interval", "2.5" if how in ("contention", "quota") else "1.5",
                          "--evidence-out", ev_path)
            keep_evidence(ev_path, r, f"{how}-{job.seed}")
            doc = r.json()
            if how in ("contention", "quota"):
                # The same premise in the rounds scout decided on, from their scheduler counters: the host's load
                # moves within seconds (seed 8004: the victim busy 2.01x, 1.37x, then 0.94x its peers in its
                # three rounds, after 2.01x before them; seed 8000: 2.33x, 1.18x, 1.31x), and a rank slowed in one
                # round of three is not named (the majority rule). A quota is set from the CPU the victim got in
                # the second before it: when the host's load then takes more from it than the quota would, the
                # quota never bites (CI fresh clone, seed 701145559: quota 0.26 CPUs after it had used 0.47,
                # healthy). Throttled time is run-queue wait in schedstat (measured: a busy loop under a 0.25 CPU
                # quota, 0.53 s run and 1.45 s wait in 2 s), so the busy time sees the quota. Where the fault did
                # not make a straggler, no innocent may be named all the same.
                ratios = busy_per_round(ev_path, victim)
                print(f"test_straggler: victim's busy time per round {[round(x, 2) for x in ratios]} x its peers'",
                      flush=True)
                if 2 * sum(x >= 1.5 for x in ratios) <= len(ratios):
                    self.assertEqual([s for s in doc["suspects"] if s.get("rank") != victim], [], doc["summary"])
                    self.skipTest(f"the {'hogs' if how == 'contention' else 'quota'} slowed the victim 1.5x or more "
                                  f"in a minority of the rounds ({[round(x, 2) for x in ratios]}): the fault was not "
                                  f"controlled here")
            self.assertExit(r, "attributed")
            self.assertEqual([(s["rank"], s["reason"]) for s in doc["suspects"]], [(victim, "compute")], doc["summary"])
            self.assertEqual(doc["details"]["straggler"]["diagnosis"], "compute")
            ev = doc["suspects"][0]["evidence"]
            self.assertGreater(ev["compute_ratio"], 1.1)
            print(f"test_straggler: cause {ev['cause']} {ev['cause_figures']}", flush=True)
            # Pinned hogs can also raise the victim's CPU per call (its cache shared with them) past
            # more_work_min_relative (CI fresh clone, 873f50c: 1.18x, 10 hogs); where its wait beyond its peers' rate
            # explains more of its excess than that (6.47 s against 2.37 s), the cause is cpu_contention (issue 40).
            # Known limit: where its extra CPU, with the wait that costs at its peers' rate (more_work_s), explains at
            # least as much as all its wait beyond their rate, its figures are those of a trainer-slowed rank and
            # slow_compute is what they say (seed 4142: 1.40x its peers' CPU per call, 1.31x their wait per CPU
            # second; 1.45 s against 1.37 s). Only there.
            f = ev["cause_figures"]
            if cause == "cpu_contention" and ev["cause"] == "slow_compute":
                self.assertGreaterEqual(f["more_work_s"], f["runq_s"] - f["runq_at_peers_rate_s"], ev)
            elif cause is not None:
                self.assertEqual(ev["cause"], cause, ev)
            if observe:
                # The daemon form: one verdict file for the finding (and no second one for the same finding).
                with tempfile.TemporaryDirectory() as tmp:
                    r = scoutlib.run(["observe", "--job", job.job, "--threshold", "60", "--straggler", "--straggler-every", "0.5",
                                      "--straggler-rounds", "3", "--straggler-interval", "1", "--verdict-dir", tmp,
                                      "--max-verdicts", "1", "--duration", "60"], timeout=120)
                    self.assertExit(r, "healthy")
                    files = sorted(os.listdir(tmp))
                    self.assertEqual(len(files), 1, files)
                    with open(os.path.join(tmp, files[0])) as f:
                        v = json.load(f)
                    scoutlib.validate(v)
                    self.assertEqual(v["command"], "straggler")
                    self.assertEqual([(s["rank"], s["reason"]) for s in v["suspects"]], [(victim, "compute")])

    def test_compute_straggler_slowed_by_the_trainer(self):
        # Known defect (issue #13): a 1.3-1.5x straggler is named in 2 of 3 rounds only some of the time on 2 loaded
        # CPUs (CI fresh clone: 1.34x, seed 941393545, 1 of 3); SCOUT_STRAGGLER_KNOWN_DEFECTS=1 draws from 1.3x.
        # (Once a torch 1.13 twin of it ran as well; since the venv's torch 2.x is the only one, this is the one.) The
        # miss at 2.35x (CI fresh clone, seed 2064653550: 1.13x its peers' median) was the trainer's: its calibration
        # timed torch 2.x's cold first products (straggler_trainer.py now warms up and keeps the fastest batch).
        known = os.environ.get("SCOUT_STRAGGLER_KNOWN_DEFECTS") == "1"
        self.check_compute_straggler(require_python(), "trainer", observe=True, lowest=1.3 if known else 1.5,
                                     cause="slow_compute")

    def test_compute_straggler_stalled_in_one_gap_of_the_step(self):
        # Its extra time falls before one of the step's two calls: the per-call median missed it (8 of 9 campaign
        # runs at 1.3-1.5x); the step's ratio names it.
        self.check_compute_straggler(require_python(), "stall", lowest=1.5, cause="slow_compute")

    def test_compute_straggler_blocked_off_its_cpu(self):
        # The stall slept (I/O, a lock): no more CPU, no longer CPU wait, not stopped; cause blocked. On torch 2.15
        # a contended host once hid it from every counter (seed 1973658015, recorded run sleep-1973658015): the
        # measure late names it by its peers' wait.
        self.check_compute_straggler(require_python(), "sleep", lowest=1.5, cause="blocked")

    def test_compute_straggler_slowed_from_outside(self):
        # The premise: stopping a rank for (1 - 1/F) of the time takes CPU from it. On a host whose run
        # queue is far longer than its CPUs the rank is already starved and the cap is lost in the
        # scheduling noise (measured here at load ~27 on 2 CPUs: 0 of 2 campaign runs found). Since off_cpu
        # compares its peers' wait with the smaller of its time and off-CPU excess: 10 of 10 at load 8.2-12.3
        # (6 extra busy loops, seeds 3000-3009), 30 of 30 at 4-8; the guard was 4 x CPUs (skipped at load 8).
        load, cpus = os.getloadavg()[0], os.cpu_count() or 1
        if load > 6 * cpus:
            self.skipTest(f"host overloaded (load {load:.0f} on {cpus} CPUs): an outside CPU cap is lost in scheduling noise")
        known = os.environ.get("SCOUT_STRAGGLER_KNOWN_DEFECTS") == "1"
        # The observer samples each rank's process state between reads: a rank stopped from outside is
        # stopped in those samples, its peers never (cause stopped, whichever measure named it).
        self.check_compute_straggler(require_python(), "outside", lowest=1.3 if known else 1.5, cause="stopped")

    def test_a_rank_stopped_inside_its_collectives_is_named_by_its_process_state(self):
        # Every rank sleeps 0.3 s inside its tp all-reduce each step (tp=4: the world; the trainer's slow-group
        # delay, after the publisher recorded the enter) and computes ~2 ms: nearly all of a step is inside a
        # collective, so nearly every stop of the duty cycle (67-133 ms of every 200) falls inside one, where the
        # rank's own wait absorbs it (the torch 2.x campaign's miss, seed 20263318, had its stops there by
        # chance): its compute and wait look like its peers'. The observer's samples of its process state see
        # it stopped. --mesh dp=4 makes the four ranks one peer group (the records say dp=1,tp=4).
        with StragglerJob(world=4, tp=4, seed=SEED, python=require_python(), work_ms=2) as job:
            victim = job.rng.randrange(4)
            factor = round(job.rng.uniform(1.5, 3.0), 2)
            print(f"test_straggler: victim={victim} factor={factor} how=outside, stops inside collectives", flush=True)
            job.start(slow_group=[0, 1, 2, 3], slow_group_delay=0.3)
            job.wait_steps(3)
            job.duty_cycle(victim, factor)
            time.sleep(1.0)
            ev_path = os.path.join(job.logdir, "evidence.json")
            r = straggler(job.job, "--rounds", "3", "--interval", "2", "--mesh", "dp=4", "--evidence-out", ev_path)
            keep_evidence(ev_path, r, f"outside-inside-{job.seed}")
            doc = r.json()
            self.assertExit(r, "attributed")
            self.assertEqual([(s["rank"], s["reason"]) for s in doc["suspects"]], [(victim, "compute")], doc["summary"])
            ev = doc["suspects"][0]["evidence"]
            print(f"test_straggler: measure {ev['measure']} ratio {ev['compute_ratio']} time_ratio {ev['time_ratio']} "
                  f"stopped_share {ev.get('stopped_share')} of {ev.get('state_samples')} samples; cause {ev['cause']}",
                  flush=True)
            self.assertEqual((ev["measure"], ev["cause"]), ("stopped", "stopped"), ev)
            self.assertGreater(ev["stopped_share"], 0.05)
            self.assertGreater(ev["state_samples"], 0)
            sampling = doc["details"]["straggler"]["state_sampling"]
            self.assertEqual(sampling["ranks"], 4, sampling)
            self.assertGreater(sampling["samples"], 0, sampling)
            # The evidence carries the samples: decided again offline, the same suspect.
            again = straggler(job.job, "--evidence-in", ev_path, "--mesh", "dp=4")
            self.assertExit(again, "attributed")
            self.assertEqual([(s["rank"], s["evidence"]["measure"]) for s in again.json()["suspects"]], [(victim, "stopped")])

    def test_compute_straggler_under_a_cpu_quota(self):
        why = cpu_quota_unavailable()
        if why:
            self.skipTest(why)
        self.check_compute_straggler(require_python(), "quota", lowest=1.5, cause="cpu_quota")

    def test_compute_straggler_under_cpu_contention(self):
        # Named to run after the outside test: its busy loops raise the load average that test reads.
        # Its premise is checked before the rounds and in them (busy_ratio, busy_per_round). The misses that
        # kept it opt-in (seeds 8000, 8107; again 8000, 8004 and 8007 in 8 looped runs at load 8-15) were runs
        # where the host's other load, moved onto the peers' CPU, slowed them as much as the hogs slowed the
        # victim in 2 or 3 of the rounds (its busy time 0.87-1.37x theirs there), while the premise measured
        # before them (wait per CPU second) said 1.51-2.01x.
        if (os.cpu_count() or 1) < 2 or len(os.sched_getaffinity(0)) < 2:
            self.skipTest("contention from pinned busy loops needs 2 CPUs: the peers run on another one")
        # On the venv's torch 2.15: 9 runs at load 7-13 on 2 CPUs, 7 named with cause cpu_contention, 2 skipped
        # (the premise failed in the rounds), none missed (issue 40). Earlier, on torch 2.15 the hogs slowed the
        # victim 1.5x in a majority of rounds in 1 of 4 runs, flagged in 1 round of 3 only (seed 1219140054).
        self.check_compute_straggler(require_python(), "contention", cause="cpu_contention")

    def test_compute_straggler_under_memory_pressure(self):
        # Every rank reads the next 64 MB of its data shard (256 MB) each step, from the page cache; the victim's
        # memory cgroup (v1) is limited to 16 MB, so the kernel reclaims its shard's pages as it reads them and it
        # reads its batch from storage every step. Measured on 2 CPUs: 1.6x its peers' compute (by CPU: the
        # reclaim and the reads cost it CPU), ~96 MB a call from storage against 0 for its peers, its cgroup at its
        # limit hundreds of thousands of times (seed 105). Named, with the cause memory_pressure.
        why = memory_cgroup_unavailable()
        if why:
            self.skipTest(why)
        with StragglerJob(world=4, seed=SEED, python=require_python()) as job:
            victim = job.rng.randrange(4)
            print(f"test_straggler: victim={victim} how=memory (16 MB limit, 64 MB read a step)", flush=True)
            job.start(read_mb=64)
            job.wait_steps(3)
            job.memory_limit(victim, 16)
            time.sleep(1.0)
            ev_path = os.path.join(job.logdir, "evidence.json")
            r = straggler(job.job, "--rounds", "3", "--interval", "1.5", "--evidence-out", ev_path)
            keep_evidence(ev_path, r, f"memory-{job.seed}")
            doc = r.json()
            # The premise, in the rounds scout decided on: the reclaim and the reads cost the victim busy time
            # (1.18-1.25x its peers' per round on a quiet host). On an oversubscribed host scout names no rank
            # slowed less than the noise it measured there (its notes say so: unnamed_ratio), and the victim may
            # stay under it (CI fresh clone, 200ef0b, seed 1613696278, load ~7: the victim's compute 1.16x its
            # peers' median, rank 2 flagged in each round and left unconfirmed under a floor of 1.39x, healthy).
            # Where it did, no innocent all the same.
            noise = doc["details"]["straggler"].get("noise", {})
            floor = noise.get("unnamed_ratio", 1.1) if noise.get("oversubscribed") else 1.1
            ratios = busy_per_round(ev_path, victim)
            print(f"test_straggler: victim's busy time per round {[round(x, 2) for x in ratios]} x its peers' "
                  f"(floor {floor:.2f})", flush=True)
            self.assertTrue(ratios, "the evidence holds no scheduler counters")
            if 2 * sum(x >= floor for x in ratios) <= len(ratios):
                self.assertEqual([s for s in doc["suspects"] if s.get("rank") != victim], [], doc["summary"])
                self.skipTest(f"the memory limit slowed the victim {floor:.2f}x or more in a minority of the rounds "
                              f"({[round(x, 2) for x in ratios]}), on a host scout found oversubscribed: the fault "
                              f"was not controlled here")
            self.assertExit(r, "attributed")
            self.assertEqual([(s["rank"], s["reason"]) for s in doc["suspects"]], [(victim, "compute")], doc["summary"])
            ev = doc["suspects"][0]["evidence"]
            print(f"test_straggler: cause {ev['cause']} {ev['cause_figures']}", flush=True)
            self.assertEqual(ev["cause"], "memory_pressure", ev)
            f = ev["cause_figures"]
            self.assertGreater(f["read_mb_per_call"], 4 * f["peers_read_mb_per_call"], f)
            self.assertGreater(f["memory_limit_hits"], 0, f)

    def test_clean_run_names_no_one_and_bench_places_probes_like_the_ranks(self):
        with StragglerJob(world=4, tp=2, seed=SEED, ranks_per_host=2) as job, tempfile.TemporaryDirectory() as tmp:
            job.start()
            job.wait_steps(3)
            ev = os.path.join(tmp, "evidence.json")
            r = straggler(job.job, "--rounds", "3", "--interval", "1", "--bench", "--evidence-out", ev)
            keep_evidence(ev, r, f"pair-clean-{job.seed}")
            doc = r.json()
            self.assertExit(r, "healthy")
            self.assertEqual(doc["suspects"], [])
            self.assertEqual(doc["details"]["straggler"]["mesh"], "dp=2,tp=2")
            self.assertEqual(doc["details"]["straggler"]["mesh_source"], "records")
            bench = doc["details"]["bench"]
            self.assertEqual(sorted(x["rank"] for x in bench["ranks"]), [0, 1, 2, 3])
            for x in bench["ranks"]:
                self.assertIn(x["placement"], ("affinity", "cgroup+affinity"))
                self.assertGreater(x["total_ms"], 0)
            # Communication per process group: a timed all-gather in each of the mesh's groups.
            coll = bench["collective"]
            self.assertEqual(sorted((g["kind"], tuple(g["members"])) for g in coll["groups"]),
                             [("dp", (0, 2)), ("dp", (1, 3)), ("tp", (0, 1)), ("tp", (2, 3)), ("world", (0, 1, 2, 3))], coll)
            for g in coll["groups"]:
                self.assertNotIn("error", g, coll)
                self.assertGreater(g["all_gather_ms"], 0)
                self.assertEqual(len(g["iterations_ms"]), coll["iterations"])
                self.assertIsInstance(g["id"], str)
            # The recorded evidence decides the same offline; a bad history next to it is bad input.
            again = straggler(job.job, "--evidence-in", ev)
            self.assertExit(again, "healthy")
            self.assertEqual(again.json()["details"]["straggler"]["rounds"], 3)
            bad = os.path.join(tmp, "bad-history.json")
            with open(bad, "w") as f:
                f.write('{"schema": "scout.straggler-history", "version": 1, "job": "other", "groups": {}}')
            r = straggler(job.job, "--evidence-in", ev, "--history", bad)
            self.assertCleanError(r, "bad_input", "straggler")
            r = straggler("another-job", "--evidence-in", ev)
            self.assertCleanError(r, "bad_input", "straggler")

    def test_slow_link_names_the_group_and_the_link_kind(self):
        # dp=2,tp=2 on two "hosts" (SCOUT_HOST): tp groups live inside a host, dp groups span both.
        with StragglerJob(world=4, tp=2, seed=SEED, ranks_per_host=2) as job:
            kind = job.rng.choice(["tp", "dp"])
            index = job.rng.randrange(2)
            group = [2 * index, 2 * index + 1] if kind == "tp" else [index, index + 2]
            delay = round(job.rng.uniform(0.01, 0.03), 3)
            print(f"test_straggler: slow {kind} group {group} delay {delay}", flush=True)
            job.start(slow_group=group, slow_group_delay=delay)
            job.wait_steps(3)
            # Two observers, one per "host", each reading only its ranks, gathered every round through a store.
            with tempfile.TemporaryDirectory() as store:
                procs = [subprocess.Popen([scoutlib.SCOUT_BIN, "straggler", "--job", job.job, "--rounds", "3", "--interval", "1.5",
                                           "--nodes", "2", "--node-index", str(i), "--local-ranks", f"{2 * i}-{2 * i + 1}",
                                           "--store", f"file://{store}", "--format", "json"],
                                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for i in range(2)]
                outs = [p.communicate(timeout=120) for p in procs]
            docs = []
            for p, (out, err) in zip(procs, outs):
                self.assertEqual(p.returncode, scoutlib.EXIT["attributed"], err)
                d = json.loads(out)
                scoutlib.validate(d)
                docs.append(d)
            self.assertEqual(docs[0]["suspects"], docs[1]["suspects"])
            self.assertEqual(docs[0]["details"]["straggler"]["slow_groups"], docs[1]["details"]["straggler"]["slow_groups"])
            # The baseline read (which opens the scheduler counters' window), then the three rounds.
            gathers = docs[0]["details"]["transport"]["gathers"]
            self.assertEqual([(g["round"], g["baseline"], g["observers"]) for g in gathers],
                             [(0, True, 2), (1, False, 2), (2, False, 2), (3, False, 2)])
            doc = docs[0]
            slow = doc["details"]["straggler"]["slow_groups"]
            # The injected group is the slowest slow group. (A second, far less slow group is sometimes
            # confirmed on this 2-core host: see the known defects of the straggler report.)
            self.assertTrue(slow, doc["summary"])
            top = max(slow, key=lambda g: g["link_ratio"])
            self.assertEqual((top["kind"], top["members"]), (kind, group), doc["summary"])
            self.assertTrue(all(isinstance(g["id"], str) for g in slow))
            self.assertEqual([s for s in doc["suspects"] if s["reason"] == "compute"], [])
            if len(slow) == 1 and kind == "tp":
                self.assertEqual(doc["details"]["straggler"]["diagnosis"], "intra_node_link")
                self.assertEqual([s["node"] for s in doc["suspects"]], [f"host{index}"])
            elif len(slow) == 1:
                self.assertEqual(doc["details"]["straggler"]["diagnosis"], "inter_node_network")
                self.assertEqual(doc["scope"], "group")
            self.assertTrue(all(s["reason"] == "communication" for s in doc["suspects"]))

    def test_store_that_goes_away_after_an_observer_joined_is_hosted_again(self):
        """torchrun's agent exits with its store seconds after a node's loss, after observers joined it: observer 0
        hosts it again at the same address (once per run), observer 1 (started after it went away) meets it there,
        and both decide every round on both nodes' ranks, as on a store that stayed (a clean job: no one named)."""
        if not os.path.exists(os.path.join(scoutlib.BUILD_DIR, "bin", "libscout_torch.so")):
            self.skipTest("libscout_torch.so not built (no torch 2.x venv at configure time)")
        port = th.free_port()
        with StragglerJob(world=4, seed=SEED, ranks_per_host=2) as job:
            job.start()
            job.wait_steps(3)
            # Observer 0's first key: its first round's gather's.
            results = th.observers_across_a_lost_store(
                self, port, 1, lambda i: ["straggler", "--job", job.job, "--rounds", "2", "--interval", "1", "--timeout",
                                          "15", "--local-ranks", f"{2 * i}-{2 * i + 1}"], job.seed)
            # A store that is not there from the start (its host lost before any observer joined): the observer
            # says so and decides on its own node's rounds, as probe-hang does (before: exit 5, no verdict).
            lost = th.free_port()
            r = straggler(job.job, "--nodes", "2", "--node-index", "1", "--store", f"tcp://127.0.0.1:{lost}",
                          "--no-store-host", "--timeout", "2", "--rounds", "2", "--interval", "1", "--local-ranks", "2-3")
            self.assertExit(r, "healthy")
            alone = r.json()
            scoutlib.validate(alone)
            self.assertEqual(alone["suspects"], [], r)
            self.assertTrue(alone["details"]["transport"]["store_unreachable"], r)
            self.assertFalse(alone["details"]["transport"]["store_hosted_here"], r)
            self.assertEqual([g["observers"] for g in alone["details"]["transport"]["gathers"]], [1, 1, 1], r)
            self.assertTrue(any(n.startswith("cannot reach the store") and "this node's evidence alone" in n
                                for n in alone["details"]["straggler"]["notes"]), r)
        docs = []
        for i, (rc, out, err) in enumerate(results):
            msg = f"seed {job.seed}, observer {i}\n{out}\n{err[-3000:]}"
            self.assertEqual(rc, scoutlib.EXIT["healthy"], msg)
            doc = json.loads(out)
            scoutlib.validate(doc)
            docs.append(doc)
            self.assertEqual(doc["suspects"], [], msg)
            transport = doc["details"]["transport"]
            self.assertEqual(transport.get("store_rejoined", False), i == 0, msg)
            self.assertEqual(transport["store_hosted_here"], i == 0, msg)
            self.assertNotIn("store_unreachable", transport, msg)
            # The baseline and both rounds gathered from both observers: neither decided alone.
            self.assertEqual([(g["round"], g["observers"]) for g in transport["gathers"]], [(0, 2), (1, 2), (2, 2)], msg)
        self.assertEqual(docs[0]["details"]["straggler"]["rounds"], docs[1]["details"]["straggler"]["rounds"])

    def test_every_rank_slowed_equally_is_a_fleet_slowdown_not_a_straggler(self):
        with StragglerJob(world=4, seed=SEED) as job, tempfile.TemporaryDirectory() as tmp:
            history = os.path.join(tmp, "history.json")
            job.start(slow_all_factor=3.0)
            job.wait_steps(3)
            for i in range(3):
                r = straggler(job.job, "--rounds", "2", "--interval", "1", "--history", history)
                doc = r.json()
                self.assertExit(r, "healthy")
                self.assertNotEqual(doc["details"]["temporal"]["status"], "fleet_slowdown", doc["details"]["temporal"])
            job.slow_all()
            time.sleep(1.5)
            # Steps are 3x slower now (10x was seen at load ~9): 2 s between reads keeps 3 or more new calls in each.
            r = straggler(job.job, "--rounds", "2", "--interval", "2", "--history", history)
            doc = r.json()
            self.assertExit(r, "healthy")
            self.assertEqual(doc["suspects"], [])
            self.assertEqual(doc["details"]["temporal"]["status"], "fleet_slowdown", doc["details"]["temporal"])
            self.assertIn("fleet_slowdown", [f["kind"] for f in doc["details"]["findings"]])
            with open(history) as f:
                h = json.load(f)
            self.assertEqual(h["job"], job.job)


class StragglerRecordedRuns(scoutlib.ScoutTestCase):
    """Rounds recorded by real runs (--evidence-out, tests/integration/data/straggler/), decided again:
    each run's slowed rank (drawn from its seed; the name says how and which seed) is named by the
    measure that found it, and the clean run names no one. Each of the three slowed runs was missed
    by the decision of before (healthy):
      outside-30299011 (rank 1 at 1.75x) and outside-30299019 (rank 2 at 2.75x), torch 2.x, SIGSTOP
        duty cycle: a few long calls on the clean peers raised their mean compute to the stopped
        rank's (off_cpu now takes the larger of the mean's and the per-call median's excess);
      contention-30683001 (rank 2, 10 pinned busy loops), torch 1.13: flagged by cpu and cpu_wait in
        round 1, by cpu_wait in round 2 (a round now counts for every measure that flagged it).
    And one the cpu measure's "arrives late" check missed when it took the mean's excess only:
      trainer2-1900518409 (rank 2 slowed 2.23x by the trainer, torch 2.x, contended host; CI fresh clone).
    And two jobs whose peer groups are pairs (torch 1.13), which were never decided before ("0 of 3
    rounds had 3 or more calls every peer completed"):
      pair-outside-715529931 (a two-rank job, rank 1 SIGSTOP-cycled at 2.7x: named by off_cpu);
      pair-clean-715009310 (a clean dp=2 x tp=2 job on 2 CPUs, where rank 0 waited 1.9x its partner's
        time for a CPU in 2 of 3 rounds: cpu_wait does not apply to a pair, and no one is named).
    And a pair the cpu measure missed round by round (torch 1.13, load 4.5 on 2 CPUs):
      pair-trainer-500614964 (a two-rank job, rank 1 slowed by the trainer: 1.41x, 1.11x and 1.16x its
        partner's CPU per call, under the 1.2x floor in 2 of 3 rounds, its partner waiting for it in all
        three): a contended pair's rounds are pooled (1.21x), and the cpu measure names it.
      pair-clean-20264601 (a clean dp=2 x tp=2 job, load 9.9 on 2 CPUs: rank 3 was named by off_cpu at
        1.20x, its time off a CPU 0.25 ms per call against its partner's -0.95 ms, compute less CPU less CPU
        wait, noise of two counters over different calls: time off a CPU is now at least 0).
    And two trainer-slowed ranks of groups of three or more the cpu measure's floor of 1.2 missed (torch 1.13, load
    11-12 on 2 CPUs), where the other peers' spread was far smaller than their excess:
      trainer-20265702 (world 4, rank 3 at 1.33x: 1.09x, 1.16x and 1.17x its peers' median CPU per call);
      trainer-20268316 (world 3, rank 2 at 1.42x: 1.16x, 1.19x and 1.22x). A group of three or more then used
        a floor of 1.15. It uses 1.2 again, as a pair does: a clean world-8 job (load 3.7, seed 20370002) named
        a rank at 1.19x. These two victims were slowed by the trainer of before, whose factor did not scale torch's
        own per-step work (about 1.2x of CPU delivered for 1.33-1.42x asked): they go unnamed, and the verdict says
        why (the host oversubscribed; a rank no one named at 1.17x and 1.22x).
    And a pair's rank under a CPU quota (torch 1.13, load 5.5):
      pair-quota-20273601 (a two-rank job, rank 1 under a cgroup v1 quota of 0.42 CPU: 1.97-2.22x its partner's
        compute time on 0.87-0.93x its CPU, throttled 25 ms per call; cpu_wait does not apply to a pair): the
        cgroup's throttled time now flags it (measure throttled).
    And a pair's trainer-slowed rank whose extra CPU partly replaced time it would have waited for a CPU (torch 2.x,
    load 6.5):
      pair-trainer2-20268702 (a two-rank job, rank 0 slowed 1.31x: 1.27x its partner's CPU per call in all three
        rounds, its time excess 0.56x and its partner's extra wait 0.49x its CPU excess, pooled; the "arrives late"
        share was 0.5, now 0.4 in a pair).
    And a clean dp=2 x tp=2 job (torch 1.13, load 9.4) where a pair's rank was named:
      pair-clean-20266206 (rank 1 at 1.21-1.31x its partner's CPU per call in all three rounds, 1.25x pooled, its
        partner waiting for it; the other pair's ranks 1.15x and 0.87x apart): a pair's cpu suspect must now stand
        out of the other pairs' spread, and no one is named.
      pair-trainer-20282100 (dp=2 x tp=2, load 5.6, rank 1 slowed 1.47x: 1.34-1.41x its partner's CPU per call in all
        three rounds, the other pair at 0.96x and 1.04x, but late by only 0.34x its CPU excess, every rank CPU-bound):
        where the other pairs are quiet, a pooled pair's rank need only be late at all.
    And two of the session after:
      stall-20301002 (a two-rank job, no load, rank 0 burning 0.42x its step's CPU after the optimizer step: 1.44x
        its partner's mean compute, per-call median 1.00x; not named): the step's ratio names it.
      inside-477098678 (every rank sleeping 0.3 s inside each collective, 1-2 ms of compute per call, rank 1
        stopped from outside; --mesh dp=4): rank 0 computed 0.4-0.6 ms per call longer than its peers (0.4% of
        their 131 ms per call) and off_cpu named it beside rank 1; a straggler's excess must now be at least 2% of
        its peers' time per call.
      stall2-20358202 (torch 2.x, world 6 at load 4.5, rank 4 burning 1.19x its step's CPU in one gap: 2x its
        peers' CPU per call, its peers waiting 20 ms per call longer, its time 0.94-1.01x theirs per call): the step's
        ratio is the time excess the cpu measure asks for on a contended host too.
    And two stalls an oversubscribed host absorbed (the rank took its extra CPU from time it would have waited for
    one, and its peers did not wait for it; not named before):
      stall-20418006 (torch 1.13, world 8 at load 7.6, rank 1 stalled 1.32x: 1.31-1.33x its peers' CPU per call in
        every round, the other peers within 0.12 of each other, its time 1.07x, its wait its peers' median): a rank
        of a group of three or more standing out by twice the other peers' spread needs no lateness;
      pair-stall2-20468000 (torch 2.x, dp=2 x tp=2 at load 5.5, rank 1 stalled 1.33x: 1.25-1.30x its partner's CPU
        per call, its time 0.92-0.98x, its partner waiting 0.4-1.5 ms per call longer; the other pair within 0.01
        pooled): where the other pairs are that quiet, a pair's rank need only keep its partner waiting longer.
    And two clean dp=2 x tp=2 jobs under 2 busy loops beside a build (load 6-8 on 2 CPUs), where a pair's rank was named:
      pair-clean-365129926 (rank 0 at 0.90, 1.59 and 1.24x its partner's CPU per call, 1.23x pooled) and
      pair-clean-208788480 (rank 0 at 1.12, 1.57 and 1.29x, 1.5x its compute time in two rounds): a contended pair's
        cpu suspect must now be above the cpu floor (1.2x) in every round; pair-trainer-500614964 (1.41, 1.11, 1.16x)
        is no longer named either, and its verdict says why ("noted").
    And a clean dp=2 x tp=2 job whose tp group was named a slow intra-node link (torch 1.13, 2 busy loops beside a
    build, load 6-9 on 2 CPUs):
      pair-clean-631963951 (in rounds 2 and 3 host1's ranks 2 and 3 waited 195-395 ms for a CPU, host0's 5-37 ms:
        tp [2,3] at 11-15x the other tp group's link time, 5-6 ms per call more, while its members' CPU wait per call
        summed was 10.7-10.9 ms beyond the other group's): a group's link with its members' extra CPU wait taken out
        must still be slow, and no one is named.
    And two multi-node jobs (torch 2.x, 4 namespace nodes x 1 rank, dp=2 x tp=2, torchrun; one node's veth under a
    16 Mbit/s tbf both ways; 6 busy loops beside, load 14 on 2 CPUs; bench/multinode_campaign.py's rate-limit case):
      link-31002 (node 1's link: its tp and dp groups at 27-63x the others' link time; rank 0, its tp partner, spent
        1.8-2.3x its peer's time off a CPU between calls, blocked sending into the congested link, and off_cpu named
        it a compute straggler on another node) and link-31003 (node 3's link; rank 3 itself 1.6x off a CPU, named
        for compute beside communication): off_cpu flags of a slow group's members are dropped, the link names the
        rank.
    And a clean dp=2 x tp=2 job beside a CI build and 2 busy loops (load 11 on 2 CPUs):
      pair-clean-353869121 (rank 0 at 1.31, 1.66 and 1.28x its partner's CPU per call, 1.40x pooled; the other
        pair's heavy rank moved, rank 3 in two rounds and rank 1 in the third, 0.57-0.85 apart in each round and 0.32
        pooled): a pair's noise is also its drift within a round, and a rank heavy in some rounds only is that noise,
        not a second straggler; no one is named.
    And a clean dp=2 x tp=2 job beside a CI build and 2 busy loops (ranks waiting for a CPU 69% as long as they
    computed; 1 of 50 clean-run tests):
      pair-clean-578854929 (dp group [1, 3] at 6.7x and 4.1x its kind's link time in two rounds of three, 7-8 calls
        a round, 0.79x in the third; named the inter-node network): on an oversubscribed host a slow group must be
        slow in every round, as the rate-limited links above are (22-63x in all three); no one is named.
    And a rank blocked off its CPU on torch 2.15 at load ~6 (the blocked test's seed 1973658015, factor 1.54):
      sleep-1973658015 (rank 3 slept in one gap of each step; its peers' CPU wait accrued inside their calls too, so
        no one's time off a CPU stood out; it waited 0.16-0.33x the least of its peers' waits per call): named late.
    And two of the same job beside 3 busy loops (bench/straggler_inside_campaign_result.txt), where a clean rank's
    3-15 ms of compute per call reached 2-7% of the step with scheduling alone:
      inside2-438547015 (rank 3 stopped at 2.52x; rank 0 flagged by off_cpu in 2 rounds of 3 and named beside it) and
      inside-clean-717940639 (no rank stopped; rank 0 named by off_cpu): where the peer group waits for CPUs, a time
        measure's excess must now be 6% of its peers' time per call; rank 3 alone, and no one.
    ("unseen", r): rank r was slowed and is not named, and the verdict notes the oversubscribed host and a rank no
    one named at 1.15x or more."""

    CASES = {"outside-30299011": (1, "off_cpu"), "outside-30299019": (2, "off_cpu"), "trainer2-1900518409": (2, "cpu"),
             "contention-30683001": (2, "cpu_wait"), "clean-400": (None, None),
             "pair-outside-715529931": (1, "off_cpu"), "pair-clean-715009310": (None, None),
             "pair-trainer-500614964": ("noted", 1), "pair-clean-365129926": (None, None),
             "pair-clean-208788480": (None, None), "pair-clean-20264601": (None, None),
             "trainer-20265702": ("unseen", 3), "trainer-20268316": ("unseen", 2), "pair-quota-20273601": (1, "throttled"),
             "pair-trainer2-20268702": (0, "cpu"), "pair-clean-20266206": (None, None),
             "pair-trainer-20282100": (1, "cpu"), "stall-20301002": (0, "compute"),
             "inside-477098678": (1, "stopped", "--mesh", "dp=4"), "stall2-20358202": (4, "cpu"),
             "stall-20418006": (1, "cpu"), "pair-stall2-20468000": (1, "cpu"),
             "pair-clean-631963951": (None, None), "link-31002": (1, "link"), "link-31003": (3, "link"),
             "pair-clean-55434957": (None, None), "pair-clean-238488398": (None, None),
             "pair-clean-1021091123": (None, None), "pair-clean-900927578": (None, None),
             "pair-clean-23329949": (None, None), "pair-clean-353869121": (None, None),
             "pair-clean-578854929": (None, None), "sleep-1973658015": (3, "late"),
             "inside2-438547015": (3, "stopped", "--mesh", "dp=4"),
             "inside-clean-717940639": (None, None, "--mesh", "dp=4")}

    def test_recorded_runs_are_decided_as_measured(self):
        data = os.path.join(scoutlib.SOURCE_DIR, "tests", "integration", "data", "straggler")
        for name, (victim, measure, *args) in self.CASES.items():
            with self.subTest(run=name):
                path = os.path.join(data, f"{name}.evidence.json")
                with open(path) as f:
                    job = json.load(f)["job"]
                r = straggler(job, "--evidence-in", path, *args)
                doc = r.json()
                # Without --job, the job the file names: the same verdict.
                alone = scoutlib.run(["straggler", "--evidence-in", path, *args], timeout=120)
                self.assertEqual(alone.rc, r.rc, alone)
                self.assertEqual((alone.json()["job"], alone.json()["suspects"]), (job, doc["suspects"]), alone)
                if victim == "noted":
                    self.assertExit(r, "healthy")
                    self.assertEqual(doc["suspects"], [], r)
                    self.assertTrue(any(n.startswith(f"rank {measure} used") and n.endswith("not named")
                                        for n in doc["details"]["straggler"]["notes"]), doc)
                    continue
                if victim is None or victim == "unseen":
                    self.assertExit(r, "healthy")
                    self.assertEqual(doc["suspects"], [], r)
                    if victim == "unseen":
                        noise = doc["details"]["straggler"]["noise"]
                        self.assertTrue(noise["oversubscribed"], noise)
                        self.assertGreaterEqual(noise["unnamed_ratio"], 1.15, noise)
                        self.assertTrue(any("oversubscribed" in n for n in doc["details"]["straggler"]["notes"]), doc)
                    continue
                self.assertExit(r, "attributed")
                self.assertEqual([(s["rank"], s["evidence"]["measure"]) for s in doc["suspects"]], [(victim, measure)],
                                 r)


class StragglerErrors(scoutlib.ScoutTestCase):
    def test_no_records_is_unavailable(self):
        r = straggler(f"no-such-job-{random.randrange(1 << 30)}", "--rounds", "1")
        self.assertCleanError(r, "unavailable", "straggler")

    def test_bad_flags_are_usage_errors(self):
        for args in (["--rounds", "0"], ["--interval", "-1"], ["--min-ratio", "0.9"], ["--nodes", "2"],
                     ["--store", "file:///tmp/x"], ["--order", "tp,dp"], ["--evidence-in", "/x", "--bench"]):
            r = straggler("j", *args)
            self.assertCleanError(r, "usage", "straggler")

    def test_bad_history_and_evidence_are_bad_input(self):
        with tempfile.TemporaryDirectory() as tmp:
            bad = os.path.join(tmp, "bad.json")
            with open(bad, "w") as f:
                f.write("{not json")
            r = straggler("j", "--evidence-in", bad)
            self.assertCleanError(r, "bad_input", "straggler")
            ev = os.path.join(tmp, "ev.json")
            with open(ev, "w") as f:
                json.dump({"schema": "scout.straggler-evidence", "version": 1, "job": "other", "rounds": []}, f)
            r = straggler("j", "--evidence-in", ev)
            self.assertCleanError(r, "bad_input", "straggler")
            r = scoutlib.run(["straggler", "--evidence-in", bad])  # no --job: the file must name it
            self.assertCleanError(r, "bad_input", "straggler")
            r = scoutlib.run(["straggler", "--rounds", "1"])  # no --job, no --evidence-in
            self.assertCleanError(r, "usage", "straggler")


if __name__ == "__main__":
    unittest.main()
