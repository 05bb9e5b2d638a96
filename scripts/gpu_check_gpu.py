"""scripts/gpu_check.py's GPU checks (skipped with the reason where no GPU is):
the CUDA tensor hash bit-exact against the CPU and its bandwidth against a
device-to-device copy; the catalog's instrumented kernel against the model;
`scout replay --battery standard --device cuda`, clean and with an injected
flip; a torch NCCL job under scout's publisher (exit stamps against CUDA
events, Flight Recorder dumps through `scout probe-hang`); the GPU paths'
errors on a GPU (out of memory)."""
import json
import os
import shutil
import socket
import statistics
import subprocess

import gpu_check_lib as lib

HASH_GOAL = 0.9  # docs/contracts.md: CUDA hash >= 90% of device bandwidth (the copy's read + write rate)
EXIT_SLACK_MS = 5.0  # an exit stamp within this of the CUDA event's completion is a completion time


def gtest(r, flt, budget, log, seed):
    out = os.path.join(r.work, log.replace(".log", ".json"))
    env = dict(os.environ, SCOUT_GPU_SEED=str(seed), SCOUT_SOURCE_DIR=r.src)
    p = r.sh([os.path.join(r.build, "tests", "scout_gpu_tests"), f"--gtest_filter={flt}", f"--gtest_output=json:{out}"],
             budget, env=env, log=log)
    try:
        with open(out) as f:
            doc = json.load(f)
        cases = [t for s in doc["testsuites"] for t in s["testsuite"]]
    except (OSError, ValueError, KeyError):
        cases = []
    failed = [c["name"] for c in cases if c.get("failures")]
    skipped = [c["name"] for c in cases if c.get("result") == "SKIPPED" or c.get("status") == "NOTRUN"]
    figures = {"tests": len(cases), "failed": failed, "skipped": skipped, "seconds": round(p.seconds, 2)}
    if p.timed_out:
        return "fail", f"timed out after {budget} s", figures, seed
    if p.rc != 0 or failed or not cases:
        return "fail", f"exit {p.rc}, failed {failed}: {p.tail()}", figures, seed
    if skipped:
        return "fail", f"skipped on a GPU: {skipped}: {p.tail()}", figures, seed
    return "pass", None, figures, seed


def check_hash_throughput(r, budget):
    p = r.sh([os.path.join(r.build, "bench", "tensor_hash_bench"), "--gpu"], budget, log="hash_throughput.log")
    line = next((ln for ln in reversed(p.stdout.splitlines()) if ln.startswith("{")), "")
    try:
        doc = json.loads(line)
    except ValueError:
        return "fail", f"exit {p.rc}: no JSON line: {p.tail()}", {}
    figures = {"device": doc["device"]}
    for s in doc["sizes"]:
        mib = s["bytes"] >> 20
        figures[f"hash_gbps_{mib}MiB"] = s["hash_gbps"]
        figures[f"copy_gbps_{mib}MiB"] = s["copy_gbps"]
        figures[f"hash_over_traffic_{mib}MiB"] = s["hash_over_traffic"]
    large = [s for s in doc["sizes"] if s["bytes"] >= 1 << 30]
    worst = min(s["hash_over_traffic"] for s in large)
    figures["goal"] = HASH_GOAL
    if worst < HASH_GOAL:
        return "fail", f"hash reads at {worst:.3f} of the copy's memory traffic (goal {HASH_GOAL})", figures
    return "pass", None, figures


def torch2_env(r):
    return dict(os.environ, SCOUT_TORCH_MODULE=os.path.join(r.build, "bin", "libscout_torch.so"))


def module_problem(r, name="libscout_torch.so"):
    """Why the CUDA replay's LibTorch module cannot load here, or None."""
    path = os.path.join(r.build, "bin", name)
    if not os.path.exists(path):
        return f"{path} is not built (a build with a torch 2.x venv builds it)"
    libs = lib.ldd_missing(path)
    if libs:
        return (f"{name} cannot load here: {' '.join(libs)} not found (it links the LibTorch of the build machine's "
                f"torch 2.x venv, which did not travel; this machine's torch is {r.python.get('torch')})")
    return None


def replay(r, budget, extra, log, env=None):
    cmd = [r.scout, "replay", "--battery", "standard", "--device", "cuda", "--peers", "4", "--size", "small",
           "--seed", str(r.seed), "--timeout", "60", "--format", "json"] + extra
    p = r.sh(cmd, budget, env=env or torch2_env(r), log=log)
    return p, p.json()


def timings(doc):
    out = {}
    for rec in doc["details"]["recipes"]:
        peers = rec.get("timings", {}).get("peers", [])
        if peers:
            out[f"{rec['recipe']}_forward_ms"] = round(1e3 * statistics.median(x["forward_s"] for x in peers), 3)
            out[f"{rec['recipe']}_gather_ms"] = round(1e3 * statistics.median(x["gather_s"] for x in peers), 3)
    return out


def check_replay_clean(r, budget):
    if module_problem(r):
        return "fail", module_problem(r), {}, r.seed
    p, doc = replay(r, budget, [], "replay_cuda.log")
    if p.rc != 0 or not doc:
        return "fail", f"exit {p.rc} (want 0, healthy): {p.tail()}", {"seconds": round(p.seconds, 2)}, r.seed
    figures = {"status": doc["status"], "seconds": round(p.seconds, 2),
               "device_model": doc["details"]["recipes"][0]["contract"].get("device_model"), **timings(doc)}
    return "pass", None, figures, r.seed


def check_replay_inject(r, budget):
    if module_problem(r):
        return "fail", module_problem(r), {}, r.seed
    p, doc = replay(r, budget, ["--inject", f"sdc:random,seed={r.seed}"], "replay_cuda_inject.log")
    if not doc:
        return "fail", f"exit {p.rc}, no verdict: {p.tail()}", {}, r.seed
    injected = sorted({i["peer"] for i in doc["details"]["injections"]})
    named = sorted({s.get("rank", s.get("peer")) for s in doc["suspects"]})
    figures = {"status": doc["status"], "injected_peers": injected, "named": named, "seconds": round(p.seconds, 2)}
    if p.rc != 1 or named != injected:
        return "fail", f"exit {p.rc} (want 1), named {named}, injected {injected}", figures, r.seed
    return "pass", None, figures, r.seed


def nccl_job(r, world, budget):
    """Runs the NCCL job of `world` ranks under the publisher; returns (status, reason, figures, seed)."""
    py = r.python.get("path")
    if not py:
        return "skip", f"no torch python with CUDA: {r.python.get('why')}", {}, r.seed
    job = f"gpu-check-{r.seed}-w{world}"
    d = os.path.join(r.work, f"nccl_w{world}")
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = dict(os.environ, SCOUT_JOB=job, WORLD_SIZE=str(world), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
               PYTHONPATH=os.path.join(r.src, "integrations", "python"), SCOUT_BUILD_DIR=r.build,
               SCOUT_PUBLISHER_LIB=os.path.join(r.build, "lib", "libscout_publisher.so"),
               TORCH_NCCL_TRACE_BUFFER_SIZE="2000", TORCH_FR_BUFFER_SIZE="2000", TORCH_NCCL_ENABLE_TIMING="1",
               PYTHONUNBUFFERED="1")
    worker = os.path.join(r.src, "scripts", "gpu_check_nccl.py")
    procs = []
    for rank in range(world):
        e = dict(env, RANK=str(rank), LOCAL_RANK=str(rank))
        log = open(os.path.join(d, f"rank_{rank}.log"), "w")
        procs.append(subprocess.Popen(["timeout", "-k", "5", str(max(10, budget - 10)), py, "-m", "scout_publisher", worker, d, "10"],
                                      env=e, stdout=log, stderr=subprocess.STDOUT, start_new_session=True))
    rcs = [p.wait() for p in procs]
    logs = " | ".join(open(os.path.join(d, f"rank_{k}.log")).read()[-300:] for k in range(world))
    try:
        ranks = [json.load(open(os.path.join(d, f"rank_{k}.json"))) for k in range(world)]
    except (OSError, ValueError):
        return "fail", f"ranks exited {rcs}: {logs}", {}, r.seed
    rec = r.sh([r.scout, "records", "list", "--job", job, "--format", "json"], 30, log=f"nccl_w{world}.log").json()
    figures = {"torch": ranks[0]["torch"], "nccl": ranks[0]["nccl"], "capture": ranks[0]["capture"], "rank_exits": rcs}
    problems = []
    reads = (rec or {}).get("details", {}).get("records", [])
    by_rank = {x["record"]["rank"]: x["record"] for x in reads if x.get("record")}
    figures["records"] = len(by_rank)
    for k, doc in enumerate(ranks):
        entries = by_rank.get(k, {}).get("recent", [])
        for mode in ("sync", "async"):
            calls = [c for c in doc["calls"] if c["mode"] == mode]
            pairs = []
            for c in calls:
                e = min(entries, key=lambda e: abs(e["enter_ns"] - c["call_ns"]), default=None)
                if e and abs(e["enter_ns"] - c["call_ns"]) < 5e6 and e.get("exit_ns"):
                    pairs.append((c, e))
            if not pairs:
                problems.append(f"rank {k} {mode}: no record entry matches the calls")
                continue
            vs_done = [(e["exit_ns"] - c["done_ns"]) / 1e6 for c, e in pairs]
            ret_lag = [(c["done_ns"] - c["ret_ns"]) / 1e6 for c, _ in pairs]
            kinds = sorted({e.get("exit_kind") for _, e in pairs})
            figures[f"r{k}_{mode}_matched"] = len(pairs)
            figures[f"r{k}_{mode}_exit_minus_done_ms_median"] = round(statistics.median(vs_done), 3)
            figures[f"r{k}_{mode}_exit_minus_done_ms_max"] = round(max(vs_done, key=abs), 3)
            figures[f"r{k}_{mode}_done_minus_return_ms_median"] = round(statistics.median(ret_lag), 3)
            figures[f"r{k}_{mode}_exit_kinds"] = ",".join(str(x) for x in kinds)
            late = [x for x in vs_done if abs(x) > EXIT_SLACK_MS]
            if late:
                problems.append(f"rank {k} {mode}: {len(late)} of {len(pairs)} exits are {statistics.median(late):+.1f} ms "
                                f"from the CUDA completion (exit kinds {kinds}; completion came "
                                f"{statistics.median(ret_lag):.1f} ms after return)")
    r.sh([r.scout, "records", "gc", "--job", job], 30, log=f"nccl_w{world}.log")  # the dead ranks' records
    fr = check_flight_recorder(r, job, d, world, figures)
    if fr:
        problems.append(fr)
    return ("fail", "; ".join(problems), figures, r.seed) if problems else ("pass", None, figures, r.seed)


def check_flight_recorder(r, job, d, world, figures):
    """The ranks' Flight Recorder dumps through probe-hang (JSON and pickled): a healthy verdict over every rank."""
    out = []
    for form in ("json", "pickle"):
        fd = os.path.join(d, "fr", form)
        if not os.path.isdir(fd):
            return f"no Flight Recorder dump ({form}) was written"
        p = r.sh([r.scout, "probe-hang", "--job", job, "--flight-recorder", fd, "--threshold", "1", "--format", "json"],
                 30, log=f"fr_w{world}.log")
        doc = p.json() or {}
        figures[f"fr_{form}_exit"] = p.rc
        figures[f"fr_{form}_status"] = doc.get("status")
        figures[f"fr_{form}_summary"] = doc.get("summary")
        missing = doc.get("details", {}).get("missing_ranks")
        if p.rc != 0 or missing:
            out.append(f"probe-hang --flight-recorder ({form}): exit {p.rc}, status {doc.get('status')}, missing ranks "
                       f"{missing}: {p.tail(200)}")
    return "; ".join(out) or None


def check_gpu_errors(r, budget):
    """On a GPU: an impossible allocation is a clear out-of-memory error (exit 5)."""
    problems, figures = [], {}
    p = r.sh([os.path.join(r.build, "bench", "tensor_hash_bench"), "--gpu", "--bytes", str(1 << 44)], 60,
             log="gpu_errors.log")
    figures["oom_error"] = p.stderr.strip()[-300:]
    if p.rc != 5 or "out of memory" not in p.stderr:
        problems.append(f"tensor_hash_bench --gpu --bytes 16TiB: exit {p.rc}, want 5 'out of memory': {p.tail()}")
    return ("fail", "; ".join(problems), figures) if problems else ("pass", None, figures)


WHAT = {
    "tensor_hash_exact": "scout_gpu_tests GpuTensorHash.* (the CUDA hash against the CPU's: sizes, alignments, "
                         "every dtype, random shapes and strided views, the committed vectors)",
    "tensor_hash_throughput": "tensor_hash_bench --gpu (hash vs device-to-device copy at 64 MiB, 1 GiB, 4 GiB; "
                              f"goal >= {HASH_GOAL} of the copy's traffic)",
    "catalog_kernel": "scout_gpu_tests CatalogKernel.* (the instrumented grouped GEMM's work items against the model)",
    "replay_cuda": "scout replay --battery standard --device cuda --peers 4 (clean: healthy, timings)",
    "replay_cuda_inject": "scout replay --battery standard --device cuda --inject sdc:random (the injected peer named)",
    "nccl_world1": "a torch NCCL job of 1 rank under python -m scout_publisher (exit stamps vs CUDA events, "
                   "Flight Recorder dumps through probe-hang)",
    "nccl_world2": "the same NCCL job with 2 ranks on 2 GPUs",
    "gpu_errors": "tensor_hash_bench --gpu --bytes 16TiB (out of memory: exit 5)",
}


def run_all(r):
    s1, s2 = r.seed, r.seed + 1
    r.check("tensor_hash_exact", lambda b: gtest(r, "GpuTensorHash.*", b, "tensor_hash_exact.log", s1), True, 75,
            WHAT["tensor_hash_exact"])
    r.check("tensor_hash_throughput", lambda b: check_hash_throughput(r, b), True, 40, WHAT["tensor_hash_throughput"])
    r.check("catalog_kernel", lambda b: gtest(r, "CatalogKernel.*", b, "catalog_kernel.log", s2), True, 75,
            WHAT["catalog_kernel"])
    r.check("replay_cuda", lambda b: check_replay_clean(r, b), True, 50, WHAT["replay_cuda"])
    r.check("replay_cuda_inject", lambda b: check_replay_inject(r, b), True, 50, WHAT["replay_cuda_inject"])
    r.check("nccl_world1", lambda b: nccl_job(r, 1, b), True, 50, WHAT["nccl_world1"])
    gpus = len(r.gpu["devices"])
    if gpus >= 2 or not r.gpu["present"]:
        r.check("nccl_world2", lambda b: nccl_job(r, 2, b), True, 50, WHAT["nccl_world2"])
    else:
        r.checks.append({"name": "nccl_world2", "gpu": True, "status": "skip", "seed": None, "duration_s": 0.0,
                         "budget_s": 0, "figures": {"gpus": gpus},
                         "reason": f"{gpus} GPU: NCCL needs a distinct GPU per rank; skipped: {WHAT['nccl_world2']}"})
    r.check("gpu_errors", lambda b: check_gpu_errors(r, b), True, 40, WHAT["gpu_errors"])
