"""DDP's communication hook on torch without ProcessGroup hooks (Debian's
1.13, the publisher's wrappers mode): the publisher sees DDP's buckets
through one comm hook, and never takes DDP's one registration away from the
user. Real 2-rank gloo DDP jobs with the publisher:
- no hook of the user's: every step's bucket all-reduce is published;
- a built-in hook registered before the first forward (FP16 compression):
  training runs with it (the publisher used to register its own hook at the
  first forward, and DDP refused the second registration: the job died);
- a Python hook, or a built-in one, registered after the first forward:
  training runs, the user's hook is called from then on, and every step is
  still published.
Each run draws its step count from a seed it prints (SCOUT_TEST_SEED repeats it).
"""
import os
import random
import shutil
import subprocess
import tempfile
import unittest

import scoutlib
import trainer_harness as th

SEED = int(os.environ.get("SCOUT_TEST_SEED") or random.SystemRandom().randrange(1 << 31))

TRAINER = r"""
import os, sys, torch, torch.distributed as dist, torch.nn as nn
import scout_publisher

def main():
    rank, world, case, steps, late = (int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), sys.argv[1],
                                      int(sys.argv[2]), int(sys.argv[3]))
    scout_publisher.enable(job=os.environ["SCOUT_JOB"], rank=rank, world_size=world)
    dist.init_process_group("gloo", rank=rank, world_size=world, init_method=os.environ["INIT"])
    torch.manual_seed(0)
    model = nn.parallel.DistributedDataParallel(nn.Sequential(nn.Linear(16, 16), nn.Linear(16, 4)))
    builtin = getattr(model, "register_builtin_comm_hook", None) or model._register_builtin_comm_hook
    calls = [0]

    def user_hook(state, bucket):
        calls[0] += 1
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
        return default_hooks.allreduce_hook(state, bucket)

    if case == "builtin-early":
        builtin(dist.BuiltinCommHookType.FP16_COMPRESS)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(steps):
        if step == late and case == "python-late":
            model.register_comm_hook(None, user_hook)
        if step == late and case == "builtin-late":
            builtin(dist.BuiltinCommHookType.FP16_COMPRESS)
        opt.zero_grad()
        model(torch.randn(8, 16)).sum().backward()
        opt.step()
    dist.barrier()
    print(f"done rank {rank} user_hook_calls {calls[0]}", flush=True)
    sys.stdout.flush()
    os._exit(0)  # no interpreter teardown: gloo may abort in a destructor there

main()
"""


class CommHook(scoutlib.ScoutTestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="scout_comm_hook_")
        cls.script = os.path.join(cls.tmp, "trainer.py")
        with open(cls.script, "w") as f:
            f.write(TRAINER)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def train(self, case):
        rng = random.Random(f"{SEED}:{case}")
        steps = rng.randint(4, 7)
        late = rng.randint(1, steps - 2)
        print(f"test_ddp_comm_hook: case={case} seed={SEED} steps={steps} late={late}", flush=True)
        job = f"commhook-{os.getpid()}-{case}"
        self.addCleanup(scoutlib.run, ["records", "gc", "--job", job])
        init = f"file://{self.tmp}/{case}.init"
        procs = []
        for rank in range(2):
            # OMP_NUM_THREADS=1: the torch zygote's (torch_zygote.py), whose forked ranks keep the thread count it
            # imported torch with; a fresh rank is given the same.
            env = dict(os.environ, RANK=str(rank), WORLD_SIZE="2", INIT=init, SCOUT_JOB=job, PYTHONPATH=th.PYTHON_DIR,
                       SCOUT_PUBLISHER_LIB=th.PUBLISHER_LIB, SCOUT_PUBLISHER_HOOKS="wrappers", OMP_NUM_THREADS="1")
            # Forked by the torch zygote (th.start_rank, issue 38), in its own session; output read by communicate().
            procs.append(th.start_rank(th.require_python(), [self.script, case, str(steps), str(late)], env,
                                       subprocess.PIPE, text=True))
        outs = []
        for p in procs:
            try:
                out, _ = p.communicate(timeout=180)
            except subprocess.TimeoutExpired:
                for q in procs:
                    q.kill()
                raise
            outs.append(out)
        msg = f"case {case} seed {SEED}\n" + "\n".join(outs)
        self.assertEqual([p.returncode for p in procs], [0, 0], msg)
        calls = [int(o.split("user_hook_calls ")[1].split()[0]) for o in outs]
        r = scoutlib.run(["records", "list", "--job", job])
        self.assertEqual(r.rc, 0, repr(r))
        recs = {x["record"]["rank"]: x["record"] for x in r.json()["details"]["records"] if x["record"]}
        self.assertEqual(sorted(recs), [0, 1], msg)
        # Each step's one bucket all-reduce, in DDP's process group (the barrier is the last call).
        reduces = {rk: [e for e in rec["recent"] if e["type"] == "all_reduce"] for rk, rec in recs.items()}
        return steps, late, calls, reduces, msg

    def test_without_a_user_hook_every_bucket_is_published(self):
        steps, _, _, reduces, msg = self.train("none")
        for rk in (0, 1):
            self.assertEqual(len(reduces[rk]), steps, msg)
            self.assertEqual([e["group_seq"] for e in reduces[rk]], list(range(1, steps + 1)), msg)

    def test_a_builtin_hook_before_the_first_forward_is_left_to_ddp(self):
        _, _, _, reduces, msg = self.train("builtin-early")
        # DDP's C++ hook runs the buckets: nothing of them is published, and the job trains.
        self.assertEqual(reduces, {0: [], 1: []}, msg)

    def test_a_python_hook_registered_late_replaces_the_default_and_is_published(self):
        steps, late, calls, reduces, msg = self.train("python-late")
        self.assertEqual(calls, [steps - late, steps - late], msg)
        for rk in (0, 1):
            self.assertEqual(len(reduces[rk]), steps, msg)

    def test_a_builtin_hook_registered_late_runs_and_every_step_is_published(self):
        steps, _, _, reduces, msg = self.train("builtin-late")
        for rk in (0, 1):
            self.assertEqual(len(reduces[rk]), steps, msg)


if __name__ == "__main__":
    unittest.main()
