"""scripts/gpu_check.py's checks that need no GPU (they run in both modes):
the build holds every program the GPU checks run and each one's libraries
load; the flags the GPU checks pass parse; the CPU tensor hash matches the
committed vectors; the catalog model's counts; the GPU paths' errors where no
GPU is (exit 5, `scout <cmd>: error: what; why; what to do`)."""
import json
import os
import re
import struct
import tempfile

import gpu_check_lib as lib

# Relative to the build directory: what the GPU checks run or load. The LibTorch module and hooks only load where
# their LibTorch is (the venv's torch 2.x wheel): the replay checks say so; the rest must load.
PROGRAMS = ["bin/scout", "bin/libscout_net.so", "tests/scout_gpu_tests", "bench/tensor_hash_bench",
            "lib/libscout_publisher.so"]
TORCH_MODULES = ["bin/libscout_torch.so", "lib/libscout_torch_hooks.so"]
GPU_TESTS = ["GpuTensorHash.MatchesCpuOnManySizesAndAlignments", "GpuTensorHash.RandomDtypesShapesAndStridesMatchCpu",
             "GpuTensorHash.TestVectors", "CatalogKernel.PaperRepresentativesMatchTheModel",
             "CatalogKernel.RandomConfigurationsMatchTheModel"]
FLAGS = {  # command -> flags the GPU checks pass
    ("replay",): ["--battery", "--device", "--peers", "--inject", "--size", "--seed", "--timeout", "--repeat"],
    ("probe-hang",): ["--job", "--flight-recorder", "--threshold"],
    ("records", "list"): ["--job"],
    ("catalog", "build"): ["--rows", "--sms"],
    ("hash",): ["--raw"],
}
PAPER_REPRESENTATIVES = [31, 32, 63, 800, 831, 832, 1696, 1727, 1728, 3360, 3391, 3392, 3424, 3455, 3456, 3457]
CLEAN_ERROR = re.compile(r"^scout (\S+): error: [^;\n]+; [^;\n]+; [^\n]+$", re.M)


def check_build(r, budget):
    missing = [p for p in PROGRAMS if not os.path.exists(os.path.join(r.build, p))]
    unresolved = {}
    for p in PROGRAMS:
        path = os.path.join(r.build, p)
        if os.path.exists(path):
            libs = lib.ldd_missing(path)
            if libs:
                unresolved[p] = libs
    figures = {"programs": len(PROGRAMS), "missing": missing, "libraries_not_found": unresolved,
               "publisher_package": os.path.isdir(os.path.join(r.src, "integrations", "python", "scout_publisher"))}
    for m in TORCH_MODULES:  # reported, not required
        path = os.path.join(r.build, m)
        figures[f"loads_{os.path.basename(m)}"] = os.path.exists(path) and not lib.ldd_missing(path)
    if missing or unresolved or not figures["publisher_package"]:
        why = []
        if missing:
            why.append(f"not built: {', '.join(missing)} (run scripts/build.sh here, then carry build/)")
        if unresolved:
            why.append("libraries not found: " + "; ".join(f"{k}: {' '.join(v)}" for k, v in unresolved.items()))
        if not figures["publisher_package"]:
            why.append("integrations/python/scout_publisher is missing")
        return "fail", "; ".join(why), figures
    return "pass", None, figures


def check_cli(r, budget):
    problems, figures = [], {}
    for cmd, flags in FLAGS.items():
        p = r.sh([r.scout, *cmd, "--help"], 20, log="cli.log")
        absent = [f for f in flags if f not in p.stdout]
        if p.rc != 0 or absent:
            problems.append(f"scout {' '.join(cmd)} --help: exit {p.rc}, flags absent {absent}")
    tests = os.path.join(r.build, "tests", "scout_gpu_tests")
    p = r.sh([tests, "--gtest_list_tests"], 30, log="cli.log")
    listed, suite = set(), ""
    for line in p.stdout.splitlines():
        if not line.startswith(" "):
            suite = line.strip()
        else:
            listed.add(suite + line.strip().split()[0])
    absent = [t for t in GPU_TESTS if t not in listed]
    figures["gpu_tests_listed"] = len(listed)
    if p.rc != 0 or absent:
        problems.append(f"scout_gpu_tests --gtest_list_tests: exit {p.rc}, absent {absent}")
    p = r.sh([os.path.join(r.build, "bench", "tensor_hash_bench"), "--help"], 20, log="cli.log")
    if "--gpu" not in p.stdout + p.stderr:
        problems.append("tensor_hash_bench --help does not mention --gpu")
    return ("fail", "; ".join(problems), figures) if problems else ("pass", None, figures)


def vector_bytes(v):
    if "bytes_hex" in v:
        return bytes.fromhex(v["bytes_hex"])
    state, length, out = v["generator"]["seed"], v["generator"]["length"], bytearray()
    m = (1 << 64) - 1
    while len(out) < length:
        state = (state + 0x9E3779B97F4A7C15) & m
        z = state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & m
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & m
        z ^= z >> 31
        out += struct.pack("<Q", z)
    return bytes(out[:length])


def check_cpu_hash(r, budget):
    """scout hash of a safetensors file holding every committed vector against the vectors' hashes."""
    with open(os.path.join(r.src, "schemas", "tensor-hash-vectors.json")) as f:
        vectors = json.load(f)["vectors"]
    header, blob = {}, bytearray()
    for i, v in enumerate(vectors):
        data = vector_bytes(v)
        header[f"v{i:03d}"] = {"dtype": v["dtype"], "shape": v["shape"], "data_offsets": [len(blob), len(blob) + len(data)]}
        blob += data
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with tempfile.TemporaryDirectory(prefix="scout-gpu-check-") as d:
        path = os.path.join(d, "vectors.safetensors")
        with open(path, "wb") as f:
            f.write(struct.pack("<Q", len(h)) + h + bytes(blob))
        p = r.sh([r.scout, "hash", path, "--format", "json"], budget, log="cpu_hash.log")
    doc = p.json()
    if p.rc != 0 or not doc:
        return "fail", f"scout hash exit {p.rc}: {p.tail()}", {}
    got = {t["name"]: t["hash"] for t in doc["details"]["files"][0]["tensors"]}
    wrong = [vectors[int(n[1:])]["name"] for n, hv in got.items() if hv != vectors[int(n[1:])]["hash"]]
    figures = {"vectors": len(vectors), "hashed": len(got), "wrong": wrong}
    if wrong or len(got) != len(vectors):
        return "fail", f"{len(wrong)} of {len(vectors)} vectors differ: {wrong[:5]}", figures
    return "pass", None, figures


def check_catalog_model(r, budget):
    p = r.sh([r.scout, "catalog", "build", "--rows", "1-3457", "--sms", "108", "--format", "json"], budget,
             log="catalog_model.log")
    doc = p.json()
    if p.rc != 0 or not doc:
        return "fail", f"scout catalog build exit {p.rc}: {p.tail()}", {}
    reps = sorted(x for g in doc["regimes"] for x in g["representatives"])
    t = doc["totals"]
    figures = {"shapes": t["shapes"], "regimes": t["regimes"], "representatives": t["representatives"],
               "replay_work_items": t["replay_work_items"]}
    if (t["shapes"], t["regimes"], t["representatives"]) != (3457, 4, 16) or reps != PAPER_REPRESENTATIVES:
        return "fail", f"the model gives {t['shapes']} shapes, {t['regimes']} regimes, representatives {reps}", figures
    return "pass", None, figures


def expect_clean_error(p, command, code, needle, what):
    """None when p is scout's clean error (exit `code`, one `scout <command>: error: what; why; fix` line holding
    `needle`), else what is wrong."""
    line = next((ln for ln in p.stderr.splitlines() if ln.startswith(f"scout {command}: error:")), "")
    if p.rc != code:
        return f"{what}: exit {p.rc}, want {code}: {p.tail()}"
    if not CLEAN_ERROR.match(line) or needle not in line:
        return f"{what}: not a clean 'scout {command}: error: what; why; what to do' line with '{needle}': {p.tail()}"
    return None


def check_no_gpu_errors(r, budget):
    """Where no GPU is: every GPU path ends in a clear error or a skip with the reason."""
    problems, figures = [], {}
    p = r.sh([r.scout, "replay", "--battery", "standard", "--device", "cuda", "--peers", "2", "--size", "tiny"], 60,
             log="no_gpu_errors.log")
    figures["replay_cuda_error"] = p.stderr.strip().splitlines()[-1] if p.stderr.strip() else ""
    problems.append(expect_clean_error(p, "replay", 5, "--device cuda", "scout replay --device cuda"))
    p = r.sh([os.path.join(r.build, "bench", "tensor_hash_bench"), "--gpu"], 30, log="no_gpu_errors.log")
    figures["bench_gpu_error"] = p.stderr.strip()
    if p.rc != 5 or "error:" not in p.stderr:
        problems.append(f"tensor_hash_bench --gpu: exit {p.rc}, want 5 with the reason: {p.tail()}")
    p = r.sh([os.path.join(r.build, "tests", "scout_gpu_tests"), "--gtest_brief=0"], 60, log="no_gpu_errors.log")
    skipped = re.findall(r"^\[  SKIPPED \] (\w+\.\w+)", p.stdout, re.M)
    reasons = sorted(set(re.findall(r"Skipped\s*\n(.*)", p.stdout)))
    figures["gpu_tests_skipped"] = len(set(skipped))
    figures["gpu_test_skip_reasons"] = reasons
    if p.rc != 0 or len(set(skipped)) < len(GPU_TESTS) or not reasons:
        problems.append(f"scout_gpu_tests: exit {p.rc}, {len(set(skipped))} skipped of {len(GPU_TESTS)}, reasons {reasons}")
    problems = [x for x in problems if x]
    return ("fail", "; ".join(problems), figures) if problems else ("pass", None, figures)


def run_all(r):
    r.check("build", lambda b: check_build(r, b), False, 30)
    r.check("cli_flags", lambda b: check_cli(r, b), False, 60)
    r.check("cpu_hash_vectors", lambda b: check_cpu_hash(r, b), False, 30)
    r.check("catalog_model", lambda b: check_catalog_model(r, b), False, 30)
    if not r.gpu["present"]:
        r.check("no_gpu_errors", lambda b: check_no_gpu_errors(r, b), False, 120)
