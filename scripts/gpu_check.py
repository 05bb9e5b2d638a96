"""scripts/gpu-check.sh's body: every GPU check of scout in one run of at most
8 minutes on one GPU, over an existing build (it builds nothing), with one
JSON summary (schemas/gpu-check.schema.json), a text summary, one log of
every command it ran and an archive of its scratch files in --out DIR
(gpu-check.json, .txt, .log, -work.tar.gz: the device returns 8 files).

Without a GPU (no /dev/nvidia*, or nvidia-smi fails; or --dry) it runs only
its CPU references and says for each GPU check that it was skipped and why.
Standard library only: the torch parts run under a torch python it finds
($SCOUT_GPU_PYTHON, <source>/.venv/bin/python, python3). Exit 0 when no check
failed, 1 when one did, 2 on a usage error."""
import argparse
import datetime
import json
import os
import random
import shutil
import signal
import socket
import sys
import tarfile
import tempfile
import time

import gpu_check_lib as lib

CHECK_BUDGET_S = 470  # the whole run; gpu-check.sh kills at 480


class Run:
    def __init__(self, args):
        self.args, self.src, self.build, self.out = args, args.source, args.build, args.out
        self.scout = os.path.join(self.build, "bin", "scout")
        self.started = time.monotonic()
        self.deadline = self.started + args.budget
        self.seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1, 2**31)
        self.checks = []
        self.doc = {}

    def left(self):
        return self.deadline - time.monotonic()

    def sh(self, cmd, timeout, env=None, log=None, stdin=None):
        """Runs cmd under coreutils `timeout` (never past the run's deadline); returns lib.Proc."""
        t = max(1, min(timeout, int(self.left()) - 5))
        p = lib.run_timed(cmd, t, env=env, stdin=stdin)
        with open(os.path.join(self.out, "gpu-check.log"), "a") as f:  # one log: the device returns 8 files at most
            f.write(f"=== [{log or 'run'}] $ {' '.join(cmd)}\n[exit {p.rc}, {p.seconds:.2f} s]\n{p.stdout}\n{p.stderr}\n")
        return p

    def check(self, name, fn, gpu, budget, what=""):
        """Runs one check: fn(budget) -> (status, reason, figures[, seed]); records it and rewrites the summary.
        `what`: what a GPU check runs, said when it is skipped."""
        t0 = time.monotonic()
        if gpu and not self.gpu["present"]:
            res = ("skip", f"no GPU: {self.gpu['why_absent']}; skipped: {what}", {})
        elif self.left() < 10:
            res = ("skip", f"out of time: {self.left():.0f} s left of the {self.args.budget} s budget", {})
        else:
            try:
                res = fn(min(budget, int(self.left()) - 5))
            except Exception as e:  # a check's own bug is its failure, never the run's end
                res = ("fail", f"the check raised {type(e).__name__}: {e}", {})
        status, reason, figures = res[0], res[1], res[2]
        seed = res[3] if len(res) > 3 else None
        self.checks.append({"name": name, "gpu": gpu, "status": status, "reason": reason, "seed": seed,
                            "duration_s": round(time.monotonic() - t0, 3), "budget_s": budget, "figures": figures})
        print(f"gpu-check: {name}: {status}" + (f" ({reason})" if reason else ""), file=sys.stderr, flush=True)
        self.write()

    def write(self):
        counts = {s: sum(c["status"] == s for c in self.checks) for s in ("pass", "fail", "skip")}
        self.doc.update({"checks": self.checks, "counts": counts, "duration_s": round(time.monotonic() - self.started, 3),
                         "exit_code": 1 if counts["fail"] else 0})
        lib.write_atomic(os.path.join(self.out, "gpu-check.json"), json.dumps(self.doc, indent=2) + "\n")
        lib.write_atomic(os.path.join(self.out, "gpu-check.txt"), lib.text_summary(self.doc))


def parse_args(argv):
    here = os.path.dirname(os.path.abspath(__file__))
    p = argparse.ArgumentParser(prog="gpu-check.sh", description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default=os.environ.get("OUT") or "gpu-check-out", help="summary directory ($OUT, else ./gpu-check-out)")
    p.add_argument("--dry", action="store_true", help="CPU references only, as where no GPU exists")
    p.add_argument("--build", default=os.environ.get("SCOUT_BUILD_DIR") or os.path.join(os.path.dirname(here), "build"))
    p.add_argument("--source", default=os.path.dirname(here))
    p.add_argument("--seed", type=int, help="master seed (printed; each check's seed derives from it)")
    p.add_argument("--budget", type=int, default=CHECK_BUDGET_S, help="seconds for the whole run (<= 470)")
    a = p.parse_args(argv)
    if not 30 <= a.budget <= CHECK_BUDGET_S:
        p.error(f"--budget {a.budget}: give 30..{CHECK_BUDGET_S} seconds")
    a.build, a.source, a.out = (os.path.abspath(x) for x in (a.build, a.source, a.out))
    return a


def main(argv):
    args = parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    for f in ("gpu-check.log", "gpu-check-work.tar.gz"):  # an earlier run's would be mixed into this one's
        if os.path.exists(os.path.join(args.out, f)):
            os.remove(os.path.join(args.out, f))
    r = Run(args)
    # gpu-check.sh's 480 s `timeout` sends SIGTERM: end through the finally below (summary and archive written).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(124))
    r.work = tempfile.mkdtemp(prefix="scout-gpu-check-")  # scratch: gtest JSON, the NCCL job's files
    r.gpu = lib.detect_gpu(args.dry)
    r.python = lib.find_torch_python(args.source, want_cuda=r.gpu["present"])
    mode = "dry" if not r.gpu["present"] else "gpu"
    print(f"gpu-check: mode {mode}, seed {r.seed} (--seed {r.seed} reproduces it), build {args.build}", file=sys.stderr)
    if not r.gpu["present"]:
        print(f"gpu-check: no GPU: {r.gpu['why_absent']}", file=sys.stderr)
    r.doc = {"schema": "scout.gpu-check", "schema_version": "1.0", "mode": mode, "seed": r.seed,
             "started_at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
             "host": socket.gethostname(), "source_dir": args.source, "build_dir": args.build,
             "budget_s": args.budget, "gpu": r.gpu, "python": r.python}
    import gpu_check_cpu as cpu
    import gpu_check_gpu as gpu
    try:
        cpu.run_all(r)
        gpu.run_all(r)
    finally:
        r.write()
        # The scratch files (gtest JSON, NCCL timings, Flight Recorder dumps) as one archive beside the summary.
        with tarfile.open(os.path.join(args.out, "gpu-check-work.tar.gz"), "w:gz") as t:
            t.add(r.work, arcname="work")
        shutil.rmtree(r.work, ignore_errors=True)
    print(lib.text_summary(r.doc), end="")
    return r.doc["exit_code"]


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    sys.exit(main(sys.argv[1:]))
