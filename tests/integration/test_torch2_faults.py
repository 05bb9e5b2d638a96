"""torch 2.x: random injected faults localized by `scout probe-hang` in the
parallelisms of torch 2.x users, with coordinates found from the job (no
SCOUT_MESH): FSDP2 on 4 ranks, HSDP 2x2, DTensor TP on a dp x tp 2x2 mesh, a
2-stage pipeline schedule (dp x pp 2x2), a compiled model, and a DDP job
launched by torchrun. Each test draws
the fault (stop, exit, wrong shape, skip) and its rank and step from a seed
it prints (SCOUT_TEST_SEED reproduces a run); the verdict must name that rank.

Skips with the reason when the torch 2.x venv is absent.
"""
import os
import random
import unittest

from scoutlib import ScoutTestCase, run
import trainer_harness as th

TRAINER2 = os.path.join(th.HERE, "trainers", "torch2_trainer.py")
HOOKS = os.path.join(th.BUILD_DIR, "lib", "libscout_torch_hooks.so")
FAULTS = ("stop-before-collective", "exit", "wrong-shape", "skip-collective")


class Localize(ScoutTestCase):
    @classmethod
    def setUpClass(cls):
        th.require_python()
        if not os.path.exists(HOOKS):
            raise unittest.SkipTest(f"{HOOKS} not built (no torch 2.x venv at configure time)")

    def localize(self, mode, world=4, launcher=None):
        seed = int(os.environ.get("SCOUT_TEST_SEED") or random.SystemRandom().randrange(1 << 31))
        # Its own stream: the harness draws the fault rank from Random(seed) too.
        fault = random.Random(seed ^ 0xFA17).choice(FAULTS)
        print(f"test_torch2_faults: mode={mode} launcher={launcher or 'per-rank'} seed={seed} fault={fault}", flush=True)
        with th.TrainerJob(world=world, steps=5, fault=fault, seed=seed, trainer=TRAINER2,
                           pg_timeout=120, trainer_args=["--mode", mode], launcher=launcher) as job:
            job.start()
            job.settle()
            res = run(["probe-hang", "--job", job.job, "--threshold", "1", "--timeout", "20"], timeout=60)
            msg = f"mode {mode} seed {seed} fault {fault} rank {job.fault_rank} step {job.fault_step}\n{res}"
            doc = res.json()
            named = sorted(s["rank"] for s in doc["suspects"])
            if fault == "skip-collective" and mode == "pp":
                # On a 2x2 pipeline every replica group has 2 members (no strict majority) and each
                # stage has only its two replicas: the skipper waits in its next send for a partner
                # inside the skipped all-reduce, at the same step as the others. Nothing singles it
                # out (inconclusive, its split from its replica in details.replica_splits); never a
                # wrong rank. (A wrong shape is named: the world all-reduce's other three members
                # made it with the right count, seeds 5, 9, 104-109, 120, 122.)
                print(f"test_torch2_faults: 2x2 {fault}: named {named}, injected rank {job.fault_rank}, status {doc['status']}: "
                      f"{doc['summary']}", flush=True)
                self.assertIn(named, ([], [job.fault_rank]), msg)
                # Replicas' sends align by pair of stages: only the skipper parts from its replica
                # (seeds 6, 7, 100, 101, 110, 112, 113; each pipeline's pair id once split the other pair too).
                for split in doc["details"].get("replica_splits", []):
                    self.assertIn(job.fault_rank, split["ranks"], msg)
                return doc, job
            self.assertExit(res, "attributed")
            self.assertEqual(named, [job.fault_rank], msg)
            return doc, job

    def test_fsdp2_4_ranks(self):
        self.localize("fsdp2")

    def test_hsdp_2x2(self):
        self.localize("hsdp")

    def test_dtensor_tp_2x2(self):
        self.localize("tp")

    def test_pipeline_2_stages(self):
        self.localize("pp")

    def test_compiled_model(self):
        self.localize("compile")

    def test_ddp_launched_by_torchrun(self):
        # torchrun hosts the rendezvous store and starts the workers; when one exits
        # it stops the others itself, so an exit fault is diagnosed post mortem.
        self.localize("ddp", launcher="torchrun")


if __name__ == "__main__":
    unittest.main()
