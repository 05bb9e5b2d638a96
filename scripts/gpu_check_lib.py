"""Helpers of scripts/gpu_check.py: timed commands, atomic writes, the GPU and
torch python it runs with, the text summary."""
import glob
import json
import os
import re
import signal
import subprocess
import tempfile
import time


class Proc:
    def __init__(self, rc, stdout, stderr, seconds, timed_out):
        self.rc, self.stdout, self.stderr, self.seconds, self.timed_out = rc, stdout, stderr, seconds, timed_out

    def json(self):
        try:
            return json.loads(self.stdout)
        except ValueError:
            return None

    def tail(self, n=400):
        text = (self.stderr.strip() or self.stdout.strip()).replace("\n", " | ")
        return text[-n:]


def run_timed(cmd, timeout, env=None, stdin=None):
    """cmd under coreutils `timeout -k 5 T` in its own session (its children die with it); rc 124 on a timeout."""
    t0 = time.monotonic()
    full = ["timeout", "-k", "5", str(int(timeout))] + list(cmd)
    try:
        p = subprocess.Popen(full, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.PIPE if stdin else
                             subprocess.DEVNULL, env=env, text=True, start_new_session=True)
    except OSError as e:
        return Proc(127, "", f"{cmd[0]}: {e}", 0.0, False)
    try:
        out, err = p.communicate(stdin, timeout=timeout + 15)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, err = p.communicate()
    return Proc(p.returncode, out, err, time.monotonic() - t0, p.returncode in (124, 137))


def write_atomic(path, text):
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".tmp-")
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)


def detect_gpu(dry):
    """{"present", "why_absent", "devices": [...], "driver"} from /dev/nvidia* and nvidia-smi."""
    g = {"present": False, "why_absent": None, "devices": [], "driver": None}
    if dry:
        g["why_absent"] = "--dry given"
        return g
    if not glob.glob("/dev/nvidia[0-9]*") and not os.path.exists("/dev/nvidiactl"):
        g["why_absent"] = "no /dev/nvidia* device nodes (no NVIDIA driver loaded)"
        return g
    p = run_timed(["nvidia-smi", "--query-gpu=name,memory.total,driver_version,compute_cap", "--format=csv,noheader"], 30)
    if p.rc != 0:
        g["why_absent"] = f"nvidia-smi failed (exit {p.rc}): {p.tail(200)}"
        return g
    for line in p.stdout.strip().splitlines():
        parts = [x.strip() for x in line.split(",")]
        if len(parts) >= 4:
            g["devices"].append({"name": parts[0], "memory": parts[1], "compute_capability": parts[3]})
            g["driver"] = parts[2]
    if not g["devices"]:
        g["why_absent"] = f"nvidia-smi lists no GPU: {p.tail(200)}"
        return g
    g["present"] = True
    return g


PROBE = ("import json, torch, torch.distributed as d; c = torch.cuda.is_available(); "
         "print(json.dumps({'torch': torch.__version__, 'cuda': torch.version.cuda, 'cuda_available': c, "
         "'devices': torch.cuda.device_count() if c else 0, 'nccl': d.is_nccl_available()}))")


def find_torch_python(source, want_cuda):
    """The first of $SCOUT_GPU_PYTHON, <source>/.venv/bin/python, python3 whose torch imports (with CUDA when
    want_cuda); {"path": None, "why": ...} when none."""
    cands = [os.environ.get("SCOUT_GPU_PYTHON"), os.path.join(source, ".venv", "bin", "python"), "python3"]
    tried = []
    for c in cands:
        if not c or (os.sep in c and not os.path.exists(c)):
            continue
        p = run_timed([c, "-c", PROBE], 120)
        info = p.json() if p.rc == 0 else None
        if not info:
            tried.append(f"{c}: {p.tail(160)}")
            continue
        info["path"] = c
        if want_cuda and not info["cuda_available"]:
            tried.append(f"{c}: torch {info['torch']} without a usable CUDA (torch.version.cuda {info['cuda']})")
            continue
        return info
    return {"path": None, "why": "; ".join(tried) or "no python found"}


def ldd_missing(path):
    """Shared libraries `path` needs that the loader does not find here."""
    p = run_timed(["ldd", path], 30)
    return sorted(set(m.group(1) for m in re.finditer(r"^\s*(\S+) => not found", p.stdout, re.M)))


def text_summary(doc):
    lines = [f"scout gpu-check ({doc['mode']} mode), seed {doc['seed']}, {doc.get('duration_s', 0):.1f} s, "
             f"exit {doc.get('exit_code')}"]
    g = doc["gpu"]
    lines.append("GPU: " + (", ".join(d["name"] for d in g["devices"]) + f", driver {g['driver']}" if g["present"]
                            else f"none ({g['why_absent']})"))
    py = doc["python"]
    lines.append("torch python: " + (f"{py['path']} (torch {py['torch']}, CUDA {py['cuda']})" if py.get("path")
                                     else f"none ({py.get('why')})"))
    def short(text, n):
        text = str(text).replace("\n", " | ")
        return text if len(text) <= n else text[:n - 3] + "..."

    for c in doc.get("checks", []):
        figs = ", ".join(f"{k} {short(v, 120)}" for k, v in c["figures"].items() if not isinstance(v, (dict, list)))
        lines.append(f"  {c['status']:<4} {c['name']:<24} {c['duration_s']:6.1f} s"
                     + (f"  {short(c['reason'], 400)}" if c["reason"] else "") + (f"  [{figs}]" if figs else "")
                     + (f"  seed {c['seed']}" if c.get("seed") is not None else ""))
    n = doc.get("counts", {})
    lines.append(f"{n.get('pass', 0)} passed, {n.get('fail', 0)} failed, {n.get('skip', 0)} skipped")
    return "\n".join(lines) + "\n"
