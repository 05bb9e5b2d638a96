"""scout verify-ckpt end to end: real safetensors files (written here, format by
hand), real torch.save files from the venv's torch 2.x, real directories,
ledgers and SIGKILLs. Fault positions are random; each test prints its seed."""
import json
import os
import random
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time
import unittest
import zlib

import scoutlib
from scoutlib import ScoutTestCase, run, validate
import trainer_harness as th

SEED = int(os.environ.get("SCOUT_TEST_SEED", random.randrange(1 << 30)))
print(f"test_verify_ckpt seed {SEED} (rerun with SCOUT_TEST_SEED={SEED})", file=sys.stderr)

DTYPES = {"F32": 4, "F16": 2, "BF16": 2, "I64": 8, "U8": 1, "F64": 8}


def make_tensors(rng, count=6):
    """name -> (dtype, shape, bytes) with random contents."""
    out = {}
    for i in range(count):
        dt = rng.choice(list(DTYPES))
        shape = [rng.randint(1, 9), rng.randint(1, 40)]
        n = shape[0] * shape[1] * DTYPES[dt]
        out[f"layers.{i}.weight"] = (dt, shape, bytearray(rng.randbytes(n)))
    return out


def write_safetensors(path, tensors, metadata=None):
    """The format: 8-byte little-endian header length, JSON header, data section."""
    header, data, off = {}, bytearray(), 0
    if metadata:
        header["__metadata__"] = metadata
    for name, (dt, shape, raw) in tensors.items():
        header[name] = {"dtype": dt, "shape": shape, "data_offsets": [off, off + len(raw)]}
        off += len(raw)
        data += raw
    h = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        f.write(data)


def flip(tensors, rng):
    """Copy of tensors with one random bit of one random tensor flipped."""
    name = rng.choice(sorted(tensors))
    dt, shape, raw = tensors[name]
    byte = rng.randrange(len(raw))
    bit = rng.randrange(8)
    out = {k: (d, s, bytearray(r)) for k, (d, s, r) in tensors.items()}
    out[name][2][byte] ^= 1 << bit
    return out, name, byte, bit


CKPT_WRITER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "trainers", "ckpt_writer.py")
VENV = os.environ.get("SCOUT_VENV", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".venv"))


def find_torch2():
    """The venv's python when it has torch 2.x, else None."""
    py = os.path.join(VENV, "bin", "python")
    if not os.path.exists(py):
        return None
    proc = subprocess.run([py, "-c", "import torch; print(torch.__version__)"], capture_output=True, text=True, timeout=120)
    return py if proc.returncode == 0 and proc.stdout.startswith("2.") else None


TORCH2 = find_torch2()


def torch_run(python, argv, env=None, timeout=300):
    """subprocess.run([python, *argv], capture_output=True, text=True, timeout=timeout) for a torch child (a script,
    or ["-c", code, ...]), forked by the torch zygote (trainer_harness.start_rank: no `import torch` of its own,
    issue 38) when `python` is the venv's. With OMP_NUM_THREADS=1: a forked child keeps the thread count the zygote
    imported torch with, so a fresh one (SCOUT_TEST_ZYGOTE=0) is given the same."""
    env = dict(os.environ if env is None else env, OMP_NUM_THREADS="1")
    p = th.start_rank(python, argv, env, subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                      zygote=os.path.realpath(python) == os.path.realpath(th.VENV_PYTHON))
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        p.communicate()
        raise
    return subprocess.CompletedProcess([python, *argv], p.returncode, out, err)


def torch_script(body):
    """Runs torch code in a child of the venv's python (torch_run: forked by the torch zygote)."""
    if not TORCH2:
        raise unittest.SkipTest(f"no torch 2.x at {VENV} (set SCOUT_VENV)")
    proc = torch_run(TORCH2, ["-c", "import torch\n" + body])
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr)
    return proc.stdout


def peak_rss_kib(cmd, timeout=300):
    """Runs cmd and returns (exit code, its own peak resident memory in KiB, from wait4); killed after timeout."""
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + timeout
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid == proc.pid:
            proc.returncode = os.waitstatus_to_exitcode(status)
            return proc.returncode, usage.ru_maxrss
        if time.monotonic() > deadline:
            proc.kill()
            proc.wait()
            raise TimeoutError(f"{cmd} ran past {timeout} s")
        time.sleep(0.02)


class VerifyCkptTest(ScoutTestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="scout_vc_")
        self.rng = random.Random(SEED ^ zlib.crc32(self._testMethodName.encode()))

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def path(self, *parts):
        return os.path.join(self.dir, *parts)

    # --- replica consensus -------------------------------------------------
    def test_safetensors_bit_flip_named_among_replicas(self):
        for trial in range(3):
            tensors = make_tensors(self.rng)
            n = self.rng.randint(3, 6)
            bad = self.rng.randrange(n)
            bent, name, byte, bit = flip(tensors, self.rng)
            print(f"seed {SEED} trial {trial}: {n} replicas, replica {bad}, tensor {name}, byte {byte}, bit {bit}", file=sys.stderr)
            files = []
            for i in range(n):
                p = self.path(f"t{trial}_r{i}.safetensors")
                write_safetensors(p, bent if i == bad else tensors)
                files.append(p)
            r = run(["verify-ckpt", "--replicas"] + files)
            self.assertExit(r, "attributed")
            doc = r.json()
            self.assertEqual(len(doc["suspects"]), 1, doc["suspects"])
            ev = doc["suspects"][0]["evidence"]
            self.assertEqual((ev["file"], ev["tensor"], ev["replica"]), (files[bad], name, bad))
            self.assertEqual(doc["details"]["disagreements"][0]["tensor"], name)
            self.assertEqual(doc["action"], "repair_replica")

    def test_torch_bit_flip_named_among_replicas(self):
        n = self.rng.randint(3, 5)
        bad = self.rng.randrange(n)
        names = ["enc.weight", "enc.bias", "dec.weight", "step_scale"]
        target = self.rng.choice(names)
        seed = self.rng.randrange(1 << 30)
        bit = self.rng.randrange(32)
        print(f"seed {SEED}: torch {n} replicas, replica {bad}, tensor {target}, bit {bit}", file=sys.stderr)
        torch_script(f"""
g = torch.Generator().manual_seed({seed})
state = {{"enc.weight": torch.randn(16, 8, generator=g), "enc.bias": torch.randn(16, generator=g),
         "dec.weight": torch.randn(8, 16, generator=g).to(torch.bfloat16), "step_scale": torch.arange(5, dtype=torch.int64)}}
state["dec.weight"] = state["dec.weight"].t()  # non-contiguous: scout must hash the logical bytes
for i in range({n}):
    s = {{k: v.clone() if i != {bad} else v.clone() for k, v in state.items()}}
    if i == {bad}:
        t = s["{target}"].contiguous()
        flat = t.view(-1).view(torch.uint8)
        idx = {self.rng.randrange(1 << 20)} % flat.numel()
        flat[idx] ^= 1 << ({bit} % 8)
        s["{target}"] = t
    torch.save(s, "{self.dir}/rank%d.pt" % i)
""")
        files = [self.path(f"rank{i}.pt") for i in range(n)]
        r = run(["verify-ckpt", "check", "--replicas"] + files)
        self.assertExit(r, "attributed")
        doc = r.json()
        self.assertEqual(len(doc["suspects"]), 1)
        ev = doc["suspects"][0]["evidence"]
        self.assertEqual((ev["file"], ev["tensor"], ev["replica"]), (files[bad], target, bad))
        self.assertEqual({f["format"] for f in doc["details"]["files"]}, {"torch"})

    def test_clean_replicas_pass_and_torch_equals_safetensors(self):
        torch_script(f"""
import json, struct
g = torch.Generator().manual_seed(7)
state = {{"a": torch.randn(4, 6, generator=g), "b": torch.arange(10, dtype=torch.int32)}}
torch.save(state, "{self.dir}/x.pt")
torch.save({{k: v.clone() for k, v in state.items()}}, "{self.dir}/y.pt")
hdr, data, off = {{}}, b"", 0
for k, dt in (("a", "F32"), ("b", "I32")):
    raw = state[k].numpy().tobytes()
    hdr[k] = {{"dtype": dt, "shape": list(state[k].shape), "data_offsets": [off, off + len(raw)]}}
    off += len(raw); data += raw
h = json.dumps(hdr).encode()
open("{self.dir}/z.safetensors", "wb").write(struct.pack("<Q", len(h)) + h + data)
""")
        r = run(["verify-ckpt", "--replicas", self.path("x.pt"), self.path("y.pt"), self.path("z.safetensors")])
        self.assertExit(r, "healthy")
        doc = r.json()
        self.assertEqual(doc["details"]["tensors_compared"], 2)
        self.assertEqual(doc["suspects"], [])

    def test_two_replicas_that_disagree_are_inconclusive_with_both_named(self):
        tensors = make_tensors(self.rng)
        bent, name, _, _ = flip(tensors, self.rng)
        a, b = self.path("a.safetensors"), self.path("b.safetensors")
        write_safetensors(a, tensors)
        write_safetensors(b, bent)
        r = run(["verify-ckpt", "--replicas", a, b])
        self.assertExit(r, "inconclusive")
        doc = r.json()
        self.assertEqual(doc["suspects"], [])
        files = [x["file"] for x in doc["details"]["disagreements"][0]["replicas"]]
        self.assertEqual(files, [a, b])
        self.assertIn(a, doc["summary"])
        self.assertIn(b, doc["summary"])
        self.assertIn(name, doc["summary"])

    # --- zip CRC-32: corruption inside one file, with or without replicas ---
    def flip_in_storage(self, path, rng, entries_of=lambda name: "/data/" in name):
        """Flips one random bit of one random storage entry (or entry `entries_of` picks) of the zip file at
        path (bytes on disk, CRC left as torch wrote it); returns (entry name, offset in the entry, bit)."""
        import zipfile
        with zipfile.ZipFile(path) as z:
            entries = [i for i in z.infolist() if entries_of(i.filename) and i.file_size > 0]
        info = rng.choice(entries)
        with open(path, "r+b") as f:
            f.seek(info.header_offset)
            local = f.read(30)
            name_len, extra_len = struct.unpack("<HH", local[26:30])
            at = rng.randrange(info.file_size)
            bit = rng.randrange(8)
            pos = info.header_offset + 30 + name_len + extra_len + at
            f.seek(pos)
            b = f.read(1)[0]
            f.seek(pos)
            f.write(bytes([b ^ (1 << bit)]))
        return info.filename, at, bit

    def test_zip_crc_names_a_flipped_storage_byte_with_and_without_replicas(self):
        torch_script(f"""
g = torch.Generator().manual_seed({self.rng.randrange(1 << 30)})
state = {{"enc.weight": torch.randn(64, 32, generator=g), "enc.bias": torch.randn(64, generator=g),
         "dec.weight": torch.randn(32, 64, generator=g).to(torch.bfloat16), "steps": torch.arange(7)}}
for i in range(3):
    torch.save(state, "{self.dir}/r%d.pt" % i)
""")
        files = [self.path(f"r{i}.pt") for i in range(3)]
        bad = self.rng.randrange(3)
        entry, at, bit = self.flip_in_storage(files[bad], self.rng)
        print(f"seed {SEED}: replica {bad}, entry {entry}, byte {at}, bit {bit}", file=sys.stderr)

        def crc_evidence(doc):
            fails = doc["details"]["crc_failures"]
            self.assertEqual(len(fails), 1, fails)
            self.assertEqual((fails[0]["file"], fails[0]["entry"]), (files[bad], entry))
            self.assertNotEqual(fails[0]["expected_crc32"], fails[0]["actual_crc32"])
            return fails[0]

        # Three replicas: consensus names the tensor; the CRC marks the same suspect.
        r = run(["verify-ckpt", "--replicas"] + files)
        self.assertExit(r, "attributed")
        doc = r.json()
        fail = crc_evidence(doc)
        self.assertEqual(len(doc["suspects"]), 1, doc["suspects"])
        ev = doc["suspects"][0]["evidence"]
        self.assertEqual((ev["file"], ev["replica"]), (files[bad], bad))
        self.assertEqual([ev["tensor"]], fail["tensors"])
        self.assertEqual(ev["zip_crc"]["entry"], entry)
        self.assertIn("CRC", doc["summary"])
        # Two replicas: no majority, but the CRC says which copy is corrupt.
        other = (bad + 1) % 3
        r = run(["verify-ckpt", "--replicas", files[other], files[bad]])
        self.assertExit(r, "attributed")
        doc = r.json()
        crc_evidence(doc)
        self.assertEqual({s["evidence"]["file"] for s in doc["suspects"]}, {files[bad]})
        self.assertEqual(doc["suspects"][0]["reason"], "zip_entry_fails_crc")
        # One copy alone (a tensor-parallel pair, each shard single-copy): nothing to compare, yet it is reported corrupt.
        ckpt = self.path("tp")
        os.makedirs(ckpt)
        shutil.copy(files[bad], os.path.join(ckpt, "model_rank0.pt"))
        shutil.copy(files[other], os.path.join(ckpt, "model_rank1.pt"))
        files[bad] = os.path.join(ckpt, "model_rank0.pt")
        r = run(["verify-ckpt", "check", ckpt, "--mesh", "dp=1,tp=2"])
        self.assertExit(r, "attributed")
        doc = r.json()
        crc_evidence(doc)
        self.assertEqual(doc["details"]["single_copy_shards"], 2)
        self.assertEqual(doc["suspects"][0]["evidence"]["tensor"], fail["tensors"][0])
        self.assertEqual(doc["suspects"][0]["rank"], 0)
        files[bad] = self.path(f"r{bad}.pt")
        # The clean copies alone are healthy.
        r = run(["verify-ckpt", "--replicas"] + [p for i, p in enumerate(files) if i != bad])
        self.assertExit(r, "healthy")
        self.assertEqual(r.json()["details"]["crc_failures"], [])

    def test_zip_crc_names_a_flipped_byte_of_an_entry_without_tensors(self):
        # version, byteorder, .data/serialization_id: no tensor in them, but torch.load reads them.
        torch_script(f"""
state = {{"w": torch.arange(12.0).reshape(3, 4), "b": torch.ones(4)}}
for i in range(3):
    torch.save(state, "{self.dir}/r%d.pt" % i)
""")
        files = [self.path(f"r{i}.pt") for i in range(3)]
        bad = self.rng.randrange(3)
        entry, at, bit = self.flip_in_storage(files[bad], self.rng,
                                              lambda name: "/data/" not in name and not name.endswith("/data.pkl"))
        print(f"seed {SEED}: replica {bad}, entry {entry}, byte {at}, bit {bit}", file=sys.stderr)
        r = run(["verify-ckpt", "--replicas"] + files)
        self.assertExit(r, "attributed")
        doc = r.json()
        fails = doc["details"]["crc_failures"]
        self.assertEqual([(f["file"], f["entry"], f["tensors"]) for f in fails], [(files[bad], entry, [])])
        self.assertEqual([(s["reason"], s["evidence"]["file"], s["evidence"]["tensor"]) for s in doc["suspects"]],
                         [("zip_entry_fails_crc", files[bad], entry)])
        r = run(["verify-ckpt", "--replicas"] + [p for i, p in enumerate(files) if i != bad])
        self.assertExit(r, "healthy")

    def test_zip_crc_in_a_dcp_chunk_names_the_distcp_file(self):
        if not TORCH2:
            self.skipTest(f"no torch 2.x at {VENV} (set SCOUT_VENV)")
        out = self.path("dcp")
        proc = torch_run(TORCH2, ["-c", f"""
import json, torch, torch.distributed.checkpoint as dcp
g = torch.Generator().manual_seed({self.rng.randrange(1 << 30)})
state = {{"w": torch.randn(32, 16, generator=g), "b": torch.randn(16, generator=g)}}
dcp.save(state, checkpoint_id="{out}")
print(json.dumps({{k: v.numpy().tobytes().hex() for k, v in state.items()}}))
"""])
        self.assertEqual(proc.returncode, 0, proc.stderr)
        values = {k: bytes.fromhex(v) for k, v in json.loads(proc.stdout).items()}
        clean = self.path("dcp_clean")
        shutil.copytree(out, clean)
        distcp = sorted(f for f in os.listdir(out) if f.endswith(".distcp"))
        # Each tensor chunk is a torch.save archive inside the .distcp file: flip a byte of one tensor's storage,
        # found by its bytes (DCP's archives put sizes in data descriptors, not in the local headers).
        with open(os.path.join(out, distcp[0]), "rb") as f:
            raw = f.read()
        name = self.rng.choice(["w", "b"])
        data = raw.find(values[name])
        self.assertGreater(data, 0)
        pos = data + self.rng.randrange(len(values[name]))
        with open(os.path.join(out, distcp[0]), "r+b") as f:
            f.seek(pos)
            f.write(bytes([raw[pos] ^ 0x10]))
        print(f"seed {SEED}: {distcp[0]} tensor {name} byte {pos}", file=sys.stderr)
        r = run(["verify-ckpt", "--replicas", out, clean])
        self.assertExit(r, "attributed")
        doc = r.json()
        fails = doc["details"]["crc_failures"]
        self.assertEqual(len(fails), 1, fails)
        self.assertEqual(fails[0]["source"], distcp[0])
        self.assertEqual(doc["suspects"][0]["evidence"]["source"], distcp[0])
        self.assertEqual(doc["suspects"][0]["evidence"]["tensor"], name)
        self.assertEqual(fails[0]["tensors"], [name])
        # One DCP directory alone (one copy of every chunk): checked on its own, and said so.
        r = run(["verify-ckpt", "check", clean])
        self.assertExit(r, "healthy")
        doc = r.json()
        self.assertEqual(doc["details"]["layout"]["source"], "single_copy")
        self.assertEqual(doc["details"]["single_copy_shards"], 1)
        self.assertIn("one copy", doc["summary"])
        self.assertIn("CRC-32", doc["summary"])
        r = run(["verify-ckpt", "check", out])
        self.assertExit(r, "attributed")
        self.assertEqual(r.json()["suspects"][0]["reason"], "zip_entry_fails_crc")
        self.assertEqual(r.json()["suspects"][0]["evidence"]["source"], distcp[0])
        # The cron form finds DCP directories under a root and checks each the same way.
        root = self.path("dcp_root")
        shutil.copytree(clean, os.path.join(root, "step100"))
        shutil.copytree(out, os.path.join(root, "step200"))
        r = run(["verify-ckpt", "--job", "jdcp", "--ledger", self.path("dcp_ledger.json"), "--settle", "0", root])
        self.assertExit(r, "attributed")
        doc = r.json()
        self.assertEqual([s["evidence"]["checkpoint"] for s in doc["suspects"]], [os.path.join(root, "step200")])

    def test_dcp_copies_sharded_differently_are_refused_saying_so(self):
        # The same state saved by 1 process and by 2 (DTensor Shard(0)): DCP chunks differ, so the
        # copies cannot be compared chunk by chunk, and the error says why.
        if not TORCH2:
            self.skipTest(f"no torch 2.x at {VENV} (set SCOUT_VENV)")
        seed = self.rng.randrange(1 << 30)
        script = f"""
import os, sys, torch, torch.distributed as dist, torch.distributed.checkpoint as dcp
world = int(os.environ.get("WORLD_SIZE", "1"))
g = torch.Generator().manual_seed({seed})
state = {{"w": torch.randn(64, 8, generator=g)}}
if world > 1:
    dist.init_process_group("gloo", init_method="file://" + sys.argv[2], rank=int(os.environ["RANK"]), world_size=world)
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import distribute_tensor, Shard
    state = {{"w": distribute_tensor(state["w"], init_device_mesh("cpu", (world,)), [Shard(0)])}}
dcp.save(state, checkpoint_id=sys.argv[1])
if world > 1:
    dist.barrier()
    dist.destroy_process_group()
sys.stdout.flush()
sys.stderr.flush()
# The copy is saved. Skip interpreter teardown: torch 2.x's gloo process group can still abort
# in a C++ destructor at exit ("terminate called without an active exception", CI seed 270317785)
# after destroy_process_group(), which would turn a clean save into exit -6.
os._exit(0)
"""
        one, two = self.path("dcp_one"), self.path("dcp_two")
        p = torch_run(TORCH2, ["-c", script, one, ""])
        self.assertEqual(p.returncode, 0, p.stderr)
        rdv = self.path("rdv")
        # The two ranks forked by the torch zygote (start_rank, issue 38), OMP_NUM_THREADS=1 as torch_run's.
        procs = [th.start_rank(TORCH2, ["-c", script, two, rdv],
                               dict(os.environ, RANK=str(r), WORLD_SIZE="2", OMP_NUM_THREADS="1"), subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True,
                               zygote=os.path.realpath(TORCH2) == os.path.realpath(th.VENV_PYTHON))
                 for r in range(2)]
        for q in procs:
            _, err = q.communicate(timeout=300)
            self.assertEqual(q.returncode, 0, err)
        r = run(["verify-ckpt", "--replicas", one, two])
        self.assertCleanError(r, "bad_input", "verify-ckpt")
        self.assertIn("sharded differently", r.stderr)
        self.assertIn("'w'", r.stderr)
        r = run(["verify-ckpt", "check", two])
        self.assertExit(r, "healthy")
        self.assertEqual(r.json()["details"]["files"][0]["tensors"], 2)

    def test_dcp_stream_transforms_are_refused_naming_them(self):
        if not TORCH2:
            self.skipTest(f"no torch 2.x at {VENV} (set SCOUT_VENV)")
        out = self.path("dcp_ext")
        # A real save through DCP's experimental stream-transform hook (torch's own ZStandard extension needs
        # the zstandard module): an identity transform writes the same transform_descriptors metadata.
        proc = torch_run(TORCH2, ["-c", f"""
import torch, torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint._extension import StreamTransformExtension
class Identity(StreamTransformExtension):
    @staticmethod
    def registry_name():
        return "stream.scout-identity"
    @staticmethod
    def from_descriptor(version):
        return Identity()
    def get_descriptor(self):
        return "stream.scout-identity/1"
    def transform_to(self, output):
        return output
    def transform_from(self, input):
        return input
w = dcp.FileSystemWriter("{out}", _extensions=[Identity()])
dcp.save({{"w": torch.randn(8, 4)}}, storage_writer=w)
"""])
        self.assertEqual(proc.returncode, 0, proc.stderr)
        shutil.copytree(out, out + "_copy")
        r = run(["verify-ckpt", "--replicas", out, out + "_copy"])
        self.assertCleanError(r, "bad_input", "verify-ckpt")
        self.assertIn("stream.scout-identity/1", r.stderr)
        self.assertIn("_extensions", r.stderr)

    # --- bad input ---------------------------------------------------------
    def three(self, tensors_list):
        files = []
        for i, t in enumerate(tensors_list):
            p = self.path(f"r{i}.safetensors")
            write_safetensors(p, t)
            files.append(p)
        return files

    def test_truncated_file_is_bad_input_naming_it(self):
        tensors = make_tensors(self.rng)
        files = self.three([tensors] * 3)
        victim = self.rng.choice(files)
        size = os.path.getsize(victim)
        cut = self.rng.randint(9, size - 1)
        print(f"seed {SEED}: truncating {victim} to {cut} of {size}", file=sys.stderr)
        with open(victim, "r+b") as f:
            f.truncate(cut)
        r = run(["verify-ckpt", "--replicas"] + files)
        self.assertCleanError(r, "bad_input", "verify-ckpt")
        self.assertIn(victim, r.stderr)

    def test_file_truncated_by_another_process_while_read_is_bad_input_not_a_crash(self):
        """Warm files are hashed in place from mappings of the page cache: a file cut while scout reads it must end
        in the read error (exit 4 naming it), never SIGBUS. This process cuts one replica at a random moment of a
        run (drawn over the length of an uncut run), until a cut lands mid-read (at most 16 tries)."""
        tensor_bytes = 8 << 20
        tensors = {f"layers.{i}.weight": ("U8", [tensor_bytes], bytearray(self.rng.randbytes(64)) * (tensor_bytes // 64))
                   for i in range(8)}
        files = self.three([tensors] * 3)
        victim = files[self.rng.randrange(3)]
        size = os.path.getsize(victim)
        with open(victim, "rb") as f:
            original = f.read()
        cmd = [scoutlib.SCOUT_BIN, "verify-ckpt", "--replicas"] + files + ["--format", "json"]
        t = time.monotonic()
        self.assertEqual(subprocess.run(cmd, capture_output=True, timeout=120).returncode, 0)
        span = time.monotonic() - t
        outcomes = []
        for attempt in range(16):
            with open(victim, "wb") as f:
                f.write(original)
            delay = self.rng.uniform(0, span)
            cut = self.rng.randrange(4096, size - 1)
            proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            time.sleep(delay)
            os.truncate(victim, cut)
            out, err = proc.communicate(timeout=120)
            print(f"seed {SEED}: try {attempt}: cut {victim} to {cut} of {size} after {delay * 1e3:.1f} ms "
                  f"(run {span * 1e3:.1f} ms): rc {proc.returncode}", file=sys.stderr)
            self.assertGreaterEqual(proc.returncode, 0, f"scout died of signal {-proc.returncode}: {err}")
            self.assertIn(proc.returncode, (0, scoutlib.EXIT["bad_input"]), err)
            if proc.returncode == 0:
                outcomes.append("after")
                continue
            self.assertIn(victim, err)
            self.assertEqual(out, "", "no partial output on error")
            if "read failed" in err:
                outcomes.append("mid-read")
                break
            outcomes.append("before")
        print(f"seed {SEED}: outcomes {outcomes}", file=sys.stderr)

    def test_malformed_headers_are_bad_input(self):
        tensors = make_tensors(self.rng, 2)
        good = self.three([tensors] * 2)
        cases = {
            "huge_length": struct.pack("<Q", 1 << 40) + b"{}",
            "not_json": struct.pack("<Q", 5) + b"{oops",
            "bad_dtype": None,
            "short": b"\x01\x02",
        }
        for label, content in cases.items():
            p = self.path(f"bad_{label}.safetensors")
            if content is None:
                h = json.dumps({"w": {"dtype": "F33", "shape": [1], "data_offsets": [0, 4]}}).encode()
                content = struct.pack("<Q", len(h)) + h + b"\0" * 4
            with open(p, "wb") as f:
                f.write(content)
            r = run(["verify-ckpt", "--replicas"] + good + [p])
            self.assertCleanError(r, "bad_input", "verify-ckpt")
            self.assertIn(p, r.stderr, label)

    def test_dtype_shape_and_missing_tensor_mismatches_are_bad_input(self):
        tensors = make_tensors(self.rng, 3)
        name = sorted(tensors)[0]
        dt, shape, raw = tensors[name]
        same_size = {"F32": "I32", "F16": "BF16", "BF16": "F16", "I64": "F64", "F64": "I64", "U8": "I8"}
        variants = {
            "dtype": {**tensors, name: (same_size[dt], shape, raw)},
            "shape": {**tensors, name: (dt, [shape[1], shape[0]] if shape[0] != shape[1] else [shape[0] * shape[1]], raw)},
            "missing": {k: v for k, v in tensors.items() if k != name},
        }
        for label, variant in variants.items():
            files = self.three([tensors, tensors, variant])
            r = run(["verify-ckpt", "--replicas"] + files)
            self.assertCleanError(r, "bad_input", "verify-ckpt")
            self.assertIn(name, r.stderr, label)
            self.assertIn(files[2], r.stderr, label)

    def test_state_dict_nested_views_and_legacy(self):
        torch_script(f"""
import argparse
m = torch.nn.Linear(4, 3)
torch.save(m.state_dict(), "{self.dir}/od.pt")
torch.save(dict(m.state_dict()), "{self.dir}/plain.pt")
torch.save(dict(m.state_dict()), "{self.dir}/legacy.pt", _use_new_zipfile_serialization=False)
big = torch.arange(30, dtype=torch.float32).reshape(6, 5)
torch.save({{"w": big[1:4, ::2], "t": big.t(), "one": torch.tensor(2.5), "args": argparse.Namespace(lr=0.1), "n": None}}, "{self.dir}/v1.pt")
torch.save({{"w": big[1:4, ::2].contiguous(), "t": big.t().contiguous(), "one": torch.tensor(2.5), "args": argparse.Namespace(lr=0.1), "n": None}}, "{self.dir}/v2.pt")
import os
class Evil:
    def __reduce__(self):
        return (os.system, ("true",))
torch.save({{"x": Evil()}}, "{self.dir}/evil.pt")
""")
        r = run(["verify-ckpt", "--replicas", self.path("od.pt"), self.path("plain.pt")])
        self.assertExit(r, "healthy")
        self.assertEqual(r.json()["details"]["tensors_compared"], 2)
        # Views hash by their logical bytes, like their contiguous copies; leaves compare too.
        r = run(["verify-ckpt", "--replicas", self.path("v1.pt"), self.path("v2.pt")])
        self.assertExit(r, "healthy")
        self.assertGreaterEqual(r.json()["details"]["tensors_compared"], 5)
        r = run(["verify-ckpt", "--replicas", self.path("legacy.pt"), self.path("plain.pt")])
        self.assertCleanError(r, "bad_input", "verify-ckpt")
        self.assertIn("legacy", r.stderr)
        r = run(["verify-ckpt", "--replicas", self.path("evil.pt"), self.path("plain.pt")])
        self.assertCleanError(r, "bad_input", "verify-ckpt")
        self.assertIn("posix.system", r.stderr)
        self.assertIn("not allowed", r.stderr)

    def test_a_large_strided_view_is_gathered_in_windows_not_read_whole(self):
        """A transposed view over a 96 MiB storage: hashed like its contiguous copy, one flipped bit named, and the
        process's peak memory stays below the storage's size (it is gathered through bounded windows)."""
        bad = self.rng.randrange(3)
        element = self.rng.randrange(4096 * 6144)
        bit = self.rng.randrange(32)
        print(f"seed {SEED}: strided view, replica {bad}, element {element}, bit {bit}", file=sys.stderr)
        torch_script(f"""
torch.manual_seed({self.rng.randrange(1 << 30)})
big = torch.randn(4096, 6144)
torch.save({{"t": big.t().contiguous()}}, "{self.dir}/copy.pt")
for r in range(3):
    if r == {bad}:
        flipped = big.clone()
        flipped.view(-1).view(torch.int32)[{element}] ^= (1 << {bit}) - (1 << 32 if {bit} == 31 else 0)
        torch.save({{"t": flipped.t()}}, f"{self.dir}/r{{r}}.pt")
    else:
        torch.save({{"t": big.t()}}, f"{self.dir}/r{{r}}.pt")
""")
        files = [self.path(f"r{r}.pt") for r in range(3)]
        storage_kib = 4096 * 6144 * 4 // 1024
        proc = subprocess.Popen([scoutlib.SCOUT_BIN, "verify-ckpt", "--replicas"] + files + ["--jobs", "1", "--format", "json"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        out, err = proc.communicate(timeout=300)
        r = scoutlib.Result(subprocess.CompletedProcess(proc.args, proc.returncode, out, err))
        self.assertExit(r, "attributed")
        doc = r.json()
        self.assertEqual(len(doc["suspects"]), 1, doc["suspects"])
        ev = doc["suspects"][0]["evidence"]
        self.assertEqual((ev["file"], ev["tensor"], ev["replica"]), (files[bad], "t", bad))
        # The view hashes like its contiguous copy (the clean replicas and the copy agree).
        clean = [f for i, f in enumerate(files) if i != bad]
        rc, peak = peak_rss_kib([scoutlib.SCOUT_BIN, "verify-ckpt", "--replicas"] + clean + [self.path("copy.pt"), "--jobs", "1"])
        self.assertEqual(rc, 0)
        r = run(["verify-ckpt", "--replicas"] + clean + [self.path("copy.pt")])
        self.assertExit(r, "healthy")
        self.assertEqual(r.json()["details"]["tensors_compared"], 1)
        print(f"strided view: peak memory {peak} KiB for a {storage_kib} KiB storage", file=sys.stderr)
        self.assertLess(peak, storage_kib, f"peak memory {peak} KiB, storage {storage_kib} KiB")

    def check_form(self, python, form, n=3):
        """Replicas of one form written by real torch: one flipped bit named with file, tensor and replica; clean ones healthy."""
        bad = self.rng.randrange(n)
        seed = self.rng.randrange(1 << 30)
        out = tempfile.mkdtemp(dir=self.dir)
        proc = torch_run(python, [CKPT_WRITER, form, out, str(n), str(seed), str(bad)])
        self.assertEqual(proc.returncode, 0, proc.stderr)
        info = json.loads(proc.stdout)
        print(f"seed {SEED}: {form} ({python}) writer seed {seed}: {info}", file=sys.stderr)
        r = run(["verify-ckpt", "--replicas"] + info["paths"])
        self.assertExit(r, "attributed")
        doc = r.json()
        # In the nested form "extra.view" is a transposed view of "model.0.weight"'s
        # storage: a bit flipped there changes both tensors, and both are named.
        aliases = {"model.0.weight": {"extra.view"}, "extra.view": {"model.0.weight"}} if form == "nested" else {}
        named = {s["evidence"]["tensor"] for s in doc["suspects"]}
        self.assertIn(info["tensor"], named, doc["suspects"])
        self.assertLessEqual(named - {info["tensor"]}, aliases.get(info["tensor"], set()), doc["suspects"])
        for s in doc["suspects"]:
            self.assertEqual((s["evidence"]["file"], s["evidence"]["replica"]), (info["paths"][bad], bad))
        ev = next(s["evidence"] for s in doc["suspects"] if s["evidence"]["tensor"] == info["tensor"])
        if form == "hf":
            self.assertEqual(ev["source"], info["file"])
        if form == "dcp":
            self.assertTrue(ev["source"].endswith(".distcp"), ev)
        self.assertIn(info["tensor"], r.stdout)
        clean = tempfile.mkdtemp(dir=self.dir)
        proc = torch_run(python, [CKPT_WRITER, form, clean, "2", str(seed), "-1"])
        self.assertEqual(proc.returncode, 0, proc.stderr)
        r = run(["verify-ckpt", "--replicas"] + json.loads(proc.stdout)["paths"] + [p for i, p in enumerate(info["paths"]) if i != bad])
        self.assertExit(r, "healthy")
        return doc

    def test_bit_flip_in_sharded_safetensors(self):
        if not TORCH2:
            self.skipTest(f"no torch 2.x at {VENV} (set SCOUT_VENV)")
        self.check_form(TORCH2, "hf")

    def test_bit_flip_in_torch2_forms(self):
        if not TORCH2:
            self.skipTest(f"no torch 2.x at {VENV} (set SCOUT_VENV)")
        for form in ("state_dict", "nested", "dcp"):
            with self.subTest(form=form):
                doc = self.check_form(TORCH2, form)
                if form == "nested":
                    self.assertGreater(doc["details"]["tensors_compared"], 10)

    # --- directories, mesh, manifest ----------------------------------------
    def write_mesh_checkpoint(self, ckpt, dp, tp, corrupt_rank=None):
        os.makedirs(ckpt, exist_ok=True)
        shards = [make_tensors(self.rng, 3) for _ in range(tp)]
        info = None
        for rank in range(dp * tp):
            t = shards[rank % tp]  # dp=..,tp=.. row-major: tp varies fastest
            if rank == corrupt_rank:
                t, name, byte, bit = flip(t, self.rng)
                info = name
            write_safetensors(os.path.join(ckpt, f"model_rank{rank}.safetensors"), t)
        return info

    def test_directory_with_mesh_names_rank_file_and_tensor(self):
        dp, tp = self.rng.randint(3, 4), 2
        bad = self.rng.randrange(dp * tp)
        ckpt = self.path("step_100")
        name = self.write_mesh_checkpoint(ckpt, dp, tp, corrupt_rank=bad)
        print(f"seed {SEED}: mesh dp={dp},tp={tp}, corrupt rank {bad}, tensor {name}", file=sys.stderr)
        r = run(["verify-ckpt", "check", ckpt, "--mesh", f"dp={dp},tp={tp}"])
        self.assertExit(r, "attributed")
        doc = r.json()
        self.assertEqual(len(doc["suspects"]), 1)
        s = doc["suspects"][0]
        self.assertEqual(s["rank"], bad)
        self.assertEqual(s["evidence"]["tensor"], name)
        self.assertEqual(s["evidence"]["file"], os.path.join(ckpt, f"model_rank{bad}.safetensors"))
        # A missing shard is bad input naming the rank.
        gone = self.rng.randrange(dp * tp)
        os.remove(os.path.join(ckpt, f"model_rank{gone}.safetensors"))
        r = run(["verify-ckpt", "check", ckpt, "--mesh", f"dp={dp},tp={tp}"])
        self.assertCleanError(r, "bad_input", "verify-ckpt")
        self.assertIn(f"rank {gone}", r.stderr)
        self.assertIn("missing shard", r.stderr)

    def test_manifest_catches_bit_rot_without_replicas(self):
        ckpt = self.path("step_5")
        self.write_mesh_checkpoint(ckpt, 1, 3)
        r = run(["verify-ckpt", "manifest", "write", ckpt, "--mesh", "tp=3"])
        self.assertExit(r, "healthy")
        with open(os.path.join(ckpt, "scout-ckpt.json")) as f:
            validate(json.load(f), "ckpt-manifest.schema.json")
        self.assertExit(run(["verify-ckpt", "manifest", "check", ckpt]), "healthy")
        rank = self.rng.randrange(3)
        victim = os.path.join(ckpt, f"model_rank{rank}.safetensors")
        with open(victim, "r+b") as f:
            (hl,) = struct.unpack("<Q", f.read(8))
            size = os.path.getsize(victim)
            pos = self.rng.randrange(8 + hl, size)
            f.seek(pos)
            b = f.read(1)[0]
            f.seek(pos)
            f.write(bytes([b ^ (1 << self.rng.randrange(8))]))
        print(f"seed {SEED}: bit rot in rank {rank} at byte {pos}", file=sys.stderr)
        for args in (["manifest", "check", ckpt], ["check", ckpt]):
            r = run(["verify-ckpt"] + args)
            self.assertExit(r, "attributed")
            doc = r.json()
            self.assertEqual([s["evidence"]["file"] for s in doc["suspects"]], [victim])
            self.assertEqual(doc["suspects"][0]["reason"], "hash_differs_from_manifest")

    # --- ledger, cron, select -----------------------------------------------
    def replay(self, cycle, status, checkpoint=None, sweep="periodic", job="j1"):
        p = self.path(f"replay_{cycle}_{status}.json")
        doc = {"schema": "scout.verdict", "schema_version": "1.0", "command": "replay", "job": job,
               "created_at": "2026-11-29T08:00:00.000Z", "status": status, "scope": "job", "summary": "",
               "suspects": [] if status != "attributed" else [{"rank": 3, "node": None, "reason": "sdc", "evidence": {}}],
               "groups": [], "action": "none",
               "details": {"cycle": cycle, "checkpoint": checkpoint, "sweep": sweep, "mode": "job",
                           "numerics": {"healthy": "clean", "attributed": "sdc"}.get(status, "unclear"), "peers": 4,
                           "missing_peers": [], "recipes": [], "uncomparable": [], "findings": [], "thresholds": {}}}
        validate(doc)
        with open(p, "w") as f:
            json.dump(doc, f)
        return p

    def test_cron_ledger_record_and_select(self):
        root = self.path("ckpts")
        ledger = self.path("state", "j1.ledger.json")
        prom = self.path("scout.prom")
        common = ["--job", "j1", "--ledger", ledger]
        self.write_mesh_checkpoint(os.path.join(root, "step_100"), 3, 1)
        r = run(["verify-ckpt"] + common + ["--mesh", "dp=3", "--settle", "0", "--prometheus", prom, root])
        self.assertExit(r, "healthy")
        doc = r.json()
        step100 = os.path.join(root, "step_100")
        self.assertEqual(doc["details"]["ledger"]["latest"], step100)
        with open(ledger) as f:
            validate(json.load(f), "ledger.schema.json")
        with open(prom) as f:
            text = f.read()
        self.assertIn('scout_ckpt_info{job="j1",role="latest",checkpoint="%s"} 1' % step100, text)
        self.assertIn('scout_ckpt_last_run_exit_code{job="j1"} 0', text)
        # Two clean replay cycles verify step_100.
        run(["verify-ckpt", "record"] + common + ["--replay", self.replay(1, "healthy")])
        r = run(["verify-ckpt", "record"] + common + ["--replay", self.replay(2, "healthy")])
        self.assertEqual(r.json()["details"]["ledger"]["verified"], step100)
        # A second checkpoint, one corrupted third one.
        self.write_mesh_checkpoint(os.path.join(root, "step_200"), 3, 1)
        self.write_mesh_checkpoint(os.path.join(root, "step_300"), 3, 1, corrupt_rank=1)
        r = run(["verify-ckpt"] + common + ["--mesh", "dp=3", "--settle", "0", root])
        self.assertExit(r, "attributed")
        doc = r.json()
        results = {os.path.basename(c["id"]): c["result"] for c in doc["details"]["checkpoints"]}
        self.assertEqual(results, {"step_200": "intact", "step_300": "corrupt"})
        self.assertEqual(doc["suspects"][0]["rank"], 1)
        step200 = os.path.join(root, "step_200")
        self.assertEqual(doc["details"]["ledger"]["latest"], step200)
        step300 = os.path.join(root, "step_300")
        self.assertIn(step300, doc["summary"])
        # Nothing new: a re-run checks nothing, but the finding stays reported, and an
        # unwritable --prometheus changes neither the verdict nor its exit code.
        r = run(["verify-ckpt"] + common + ["--mesh", "dp=3", "--settle", "0", "--prometheus", "/proc/nonexistent/x.prom", root])
        self.assertExit(r, "attributed")
        doc = r.json()
        self.assertEqual(doc["details"]["checkpoints"], [])
        self.assertEqual([c["id"] for c in doc["details"]["outstanding"]], [step300])
        self.assertIn(step300, doc["summary"])
        self.assertFalse(doc["details"]["side_outputs"]["prometheus"]["written"])
        self.assertIn("prometheus", r.stderr)
        st = run(["verify-ckpt", "status"] + common, fmt="text")
        self.assertEqual(st.rc, 1, st)
        self.assertIn(step300, st.stdout)
        r = run(["verify-ckpt", "ack"] + common + [step300])
        self.assertExit(r, "healthy")
        r = run(["verify-ckpt"] + common + ["--mesh", "dp=3", "--settle", "0", root])
        self.assertExit(r, "healthy")
        self.assertEqual(r.json()["details"]["outstanding"], [])

        def select(failure, *extra):
            r = run(["verify-ckpt", "select"] + common + ["--failure", failure] + list(extra))
            self.assertExit(r, "healthy")
            return r.json()["details"]

        self.assertEqual(select("sdc")["selected"]["id"], step100)
        self.assertEqual(select("machine-lost")["selected"]["id"], step100)
        self.assertEqual(select("straggler")["selected"]["id"], step200)
        self.assertEqual(select("hang")["selected"]["id"], step100)
        self.assertEqual(select("unknown", "--sweep", self.replay(9, "healthy", sweep="full"))["selected"]["id"], step200)
        self.assertEqual(select("hang", "--sweep", self.replay(9, "attributed", sweep="full"))["selected"]["id"], step100)
        # SDC evidence rejects the candidate; verified stays.
        r = run(["verify-ckpt", "record"] + common + ["--replay", self.replay(3, "attributed")])
        self.assertExit(r, "healthy")
        d = r.json()["details"]
        self.assertEqual(d["recorded"][0]["rejected"], [step200])
        self.assertEqual(d["ledger"]["verified"], step100)
        self.assertEqual(select("straggler")["selected"]["id"], step100)
        # A stale cycle is bad input; a replay verdict of another job too.
        self.assertCleanError(run(["verify-ckpt", "record"] + common + ["--replay", self.replay(2, "healthy")]), "bad_input", "verify-ckpt")
        self.assertCleanError(run(["verify-ckpt", "record"] + common + ["--replay", self.replay(4, "healthy", job="other")]),
                              "bad_input", "verify-ckpt")
        st = run(["verify-ckpt", "status"] + common)
        self.assertExit(st, "healthy")  # step_300's finding was acknowledged above
        self.assertEqual(len(st.json()["details"]["checkpoints"]), 3)

    def test_a_corrupt_finding_survives_a_failed_prometheus_write(self):
        root, ledger = self.path("ck"), self.path("j3.ledger.json")
        step = os.path.join(root, "step_5")
        name = self.write_mesh_checkpoint(step, 3, 1, corrupt_rank=self.rng.randrange(3))
        args = ["verify-ckpt", "--job", "j3", "--ledger", ledger, "--mesh", "dp=3", "--settle", "0", "--quiet"]
        r = run(args + ["--prometheus", self.path("no", "such", "dir", "x.prom"), root], fmt="text")
        self.assertEqual(r.rc, 1, r)
        self.assertIn(step, r.stdout)
        self.assertIn(name, r.stdout)  # text names the tensor, not a bare "node"
        self.assertNotIn("  node ", r.stdout)
        self.assertIn("prometheus", r.stderr)
        r = run(args + [root])
        self.assertExit(r, "attributed")
        self.assertIn(step, r.json()["summary"])

    def test_options_of_other_forms_are_refused_with_replicas(self):
        tensors = make_tensors(self.rng)
        files = []
        for i in range(3):
            files.append(self.path(f"o{i}.safetensors"))
            write_safetensors(files[-1], tensors)
        for extra in (["--mesh", "dp=3"], ["--prometheus", self.path("p.prom")], ["--settle", "5"]):
            r = run(["verify-ckpt", "--replicas"] + files + extra)
            self.assertCleanError(r, "usage", "verify-ckpt")
            self.assertIn(extra[0], r.stderr)
            self.assertFalse(os.path.exists(self.path("p.prom")))
        r = run(["verify-ckpt", "check", "--replicas"] + files + ["--mesh", "dp=3"])
        self.assertCleanError(r, "usage", "verify-ckpt")

    def test_replica_suspect_text_names_file_and_tensor(self):
        tensors = make_tensors(self.rng)
        bent, name, _, _ = flip(tensors, self.rng)
        files = []
        for i in range(3):
            files.append(self.path(f"x{i}.safetensors"))
            write_safetensors(files[-1], bent if i == 1 else tensors)
        r = run(["verify-ckpt", "--replicas"] + files, fmt="text")
        self.assertEqual(r.rc, 1, r)
        self.assertIn("replica 1", r.stdout)
        self.assertIn(files[1], r.stdout)
        self.assertIn(name, r.stdout)

    def test_cron_records_an_invalid_checkpoint_and_exits_4(self):
        root = self.path("ckpts")
        ledger = self.path("j2.ledger.json")
        self.write_mesh_checkpoint(os.path.join(root, "step_1"), 2, 1)
        bad = os.path.join(root, "step_2")
        self.write_mesh_checkpoint(bad, 2, 1)
        victim = os.path.join(bad, "model_rank1.safetensors")
        with open(victim, "r+b") as f:
            f.truncate(os.path.getsize(victim) - 3)
        r = run(["verify-ckpt", "--job", "j2", "--ledger", ledger, "--mesh", "dp=2", "--settle", "0", "--quiet", root])
        self.assertExit(r, "bad_input")
        doc = r.json()  # the verdict is still printed and valid
        results = {os.path.basename(c["id"]): c for c in doc["details"]["checkpoints"]}
        self.assertEqual(results["step_1"]["result"], "intact")
        self.assertEqual(results["step_2"]["result"], "invalid")
        self.assertIn(victim, results["step_2"]["summary"])
        with open(ledger) as f:
            states = {os.path.basename(c["id"]): c["state"] for c in json.load(f)["checkpoints"]}
        self.assertEqual(states, {"step_1": "pending", "step_2": "invalid"})
        # Invalid checkpoints are not re-read unless asked; once repaired they become pending.
        r = run(["verify-ckpt", "--job", "j2", "--ledger", ledger, "--mesh", "dp=2", "--settle", "0", root])
        self.assertExit(r, "healthy")
        self.write_mesh_checkpoint(bad, 2, 1)
        r = run(["verify-ckpt", "--job", "j2", "--ledger", ledger, "--mesh", "dp=2", "--settle", "0", "--recheck-invalid", root])
        self.assertExit(r, "healthy")
        self.assertEqual([(os.path.basename(c["id"]), c["result"]) for c in r.json()["details"]["checkpoints"]], [("step_2", "intact")])
        self.assertEqual(r.json()["details"]["ledger"]["latest"], bad)
        # Settling checkpoints are left for a later run.
        self.write_mesh_checkpoint(os.path.join(root, "step_3"), 2, 1)
        r = run(["verify-ckpt", "--job", "j2", "--ledger", ledger, "--mesh", "dp=2", "--settle", "3600", root])
        self.assertExit(r, "healthy")
        self.assertEqual([c["result"] for c in r.json()["details"]["checkpoints"]], ["settling"])

    def test_help_answers(self):
        for args in (["verify-ckpt", "--help"], ["verify-ckpt", "select", "--help"], ["verify-ckpt", "manifest", "write", "--help"]):
            r = run(args, fmt=None)
            self.assertEqual(r.rc, 0, r)
            self.assertIn("Usage", r.stdout)

    # --- crash consistency ---------------------------------------------------
    def test_sigkill_during_ledger_updates_never_loses_verified(self):
        ledger = self.path("j1.ledger.json")
        common = ["--job", "j1", "--ledger", ledger, "--format", "json"]
        root = self.path("ckpts")
        killed = completed = 0
        verified_seq = 0
        iterations = 0
        schema = scoutlib.schema("ledger.schema.json")
        # Calibrate: how long one un-killed ledger update takes here, so kill times span whole runs.
        os.makedirs(root)
        durations = []
        for c in range(1, 4):
            t0 = time.monotonic()
            self.assertExit(run(["verify-ckpt", "record", "--job", "j1", "--ledger", ledger, "--replay", self.replay(c, "inconclusive")]), "healthy")
            durations.append(time.monotonic() - t0)
        window = 1.6 * sorted(durations)[1]
        print(f"seed {SEED}: one ledger update takes {window / 1.6 * 1000:.1f} ms; kills land in [0, {window * 1000:.1f}] ms", file=sys.stderr)
        deadline = time.monotonic() + 40
        while time.monotonic() < deadline and iterations < 300:
            iterations += 1
            state = None
            if os.path.exists(ledger):
                with open(ledger) as f:
                    state = json.load(f)  # must always parse
                scoutlib.jsonschema.validate(state, schema)
            last = state["replay"]["last_cycle"] if state and state["replay"]["last_cycle"] is not None else 0
            if iterations % 6 == 1:
                ck = os.path.join(root, f"step_{iterations}")
                os.makedirs(ck)
                write_safetensors(os.path.join(ck, "rank0.safetensors"), make_tensors(self.rng, 2))
                args = ["verify-ckpt", "--job", "j1", "--ledger", ledger, "--mesh", "dp=1", "--settle", "0", "--quiet", root]
            else:
                outcome = "healthy" if self.rng.random() < 0.9 else "inconclusive"
                args = ["verify-ckpt", "record", "--job", "j1", "--ledger", ledger, "--replay", self.replay(last + 1, outcome)]
            proc = subprocess.Popen([scoutlib.SCOUT_BIN] + args + ["--format", "json"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(self.rng.uniform(0, window))
            proc.send_signal(signal.SIGKILL)
            rc = proc.wait(timeout=30)
            if rc == -signal.SIGKILL:
                killed += 1
                window *= 1.05
            else:
                completed += 1
                # Runs finish faster than calibrated (load changes): aim kills earlier, so
                # most runs keep being cut mid-way (the ratio settles near 2 kills : 1 completion).
                window *= 0.9
            if os.path.exists(ledger):
                with open(ledger) as f:
                    after = json.load(f)
                scoutlib.jsonschema.validate(after, schema)
                seqs = {c["id"]: c["seq"] for c in after["checkpoints"]}
                if verified_seq:
                    self.assertIsNotNone(after["verified"], f"iteration {iterations}: verified checkpoint lost")
                    self.assertGreaterEqual(seqs[after["verified"]], verified_seq)
                if after["verified"]:
                    verified_seq = seqs[after["verified"]]
        print(f"seed {SEED}: {iterations} iterations, {killed} killed, {completed} completed, verified seq {verified_seq}", file=sys.stderr)
        self.assertGreater(killed, iterations // 4, "most runs should be killed mid-way")
        with open(ledger) as f:
            final = json.load(f)
        self.assertGreater(verified_seq, 0, f"some checkpoint should have been verified over the run: {json.dumps(final)[:3000]}")
        # The next update under the lock removes temp files of killed writers.
        self.assertExit(run(["verify-ckpt", "record", "--job", "j1", "--ledger", ledger, "--replay", self.replay(10000, "healthy")]), "healthy")
        leftovers = [n for n in os.listdir(self.dir) if ".tmp." in n]
        self.assertEqual(leftovers, [])


if __name__ == "__main__":
    unittest.main()
