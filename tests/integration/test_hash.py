"""`scout hash` end to end: real safetensors files written here, hashes checked against the
independent Python reference of the specification (tensor_hash_ref.py) and the shared test
vectors; malformed files must give a clean error and exit 4."""
import json
import os
import random
import struct
import tempfile

import tensor_hash_ref as ref
from scoutlib import SOURCE_DIR, ScoutTestCase, run


def safetensors_bytes(tensors, order=None, metadata=None):
    """tensors: list of (name, dtype, shape, raw bytes). Data laid out in `order` (names)."""
    order = order or [t[0] for t in tensors]
    by_name = {t[0]: t for t in tensors}
    header, data = {}, b""
    for name in order:
        _, dtype, shape, raw = by_name[name]
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    if metadata:
        header["__metadata__"] = metadata
    h = json.dumps(header).encode()
    return struct.pack("<Q", len(h)) + h + data


class HashCommand(ScoutTestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.seed = random.randrange(1 << 30)
        print(f"seed {self.seed}")
        self.rng = random.Random(self.seed)

    def tearDown(self):
        self.tmp.cleanup()

    def write(self, name, content):
        path = os.path.join(self.tmp.name, name)
        with open(path, "wb") as f:
            f.write(content)
        return path

    def tensors(self):
        rb = lambda n: bytes(self.rng.getrandbits(8) for _ in range(n))
        return [("layer.0.weight", "F32", [7, 5], rb(140)), ("layer.0.bias", "BF16", [5], rb(10)),
                ("embed", "F16", [3, 3, 3], rb(54)), ("steps", "I64", [], rb(8)), ("empty", "F32", [0, 4], b""),
                ("mask", "BOOL", [13], rb(13))]

    def hashes(self, path, *extra):
        r = run(["hash", path] + list(extra))
        self.assertExit(r, "healthy")
        doc = r.json()
        self.assertEqual(doc["command"], "hash")
        self.assertEqual(doc["details"]["hash"]["spec_version"], 2)
        return {t["name"]: t for t in doc["details"]["files"][0]["tensors"]}

    def test_hashes_match_the_independent_reference(self):
        ts = self.tensors()
        path = self.write("m.safetensors", safetensors_bytes(ts, metadata={"format": "pt"}))
        got = self.hashes(path)
        self.assertEqual(set(got), {t[0] for t in ts})
        for name, dtype, shape, raw in ts:
            with self.subTest(tensor=name):
                self.assertEqual(got[name]["dtype"], dtype)
                self.assertEqual(got[name]["shape"], shape)
                self.assertEqual(got[name]["bytes"], len(raw))
                self.assertEqual(got[name]["hash"], "0x%016x" % ref.tensor_hash(dtype, shape, raw))

    def test_replicas_compare_by_tensor_and_a_single_flip_is_localized(self):
        ts = self.tensors()
        a = self.write("a.safetensors", safetensors_bytes(ts))
        names = [t[0] for t in ts]
        self.rng.shuffle(names)
        b = self.write("b.safetensors", safetensors_bytes(ts, order=names))  # other layout, same tensors
        self.assertEqual({k: v["hash"] for k, v in self.hashes(a).items()}, {k: v["hash"] for k, v in self.hashes(b).items()})
        victim = self.rng.choice([t for t in ts if t[3]])
        raw = bytearray(victim[3])
        bit = self.rng.randrange(8 * len(raw))
        raw[bit // 8] ^= 1 << (bit % 8)
        flipped = [(n, d, s, bytes(raw) if n == victim[0] else r) for n, d, s, r in ts]
        c = self.write("c.safetensors", safetensors_bytes(flipped))
        ha, hc = self.hashes(a), self.hashes(c)
        differ = [n for n in ha if ha[n]["hash"] != hc[n]["hash"]]
        self.assertEqual(differ, [victim[0]], f"flipped bit {bit} of {victim[0]}")

    def test_text_format(self):
        ts = self.tensors()
        path = self.write("m.safetensors", safetensors_bytes(ts))
        r = run(["hash", path], fmt="text")
        self.assertExit(r, "healthy")
        lines = r.stdout.splitlines()
        self.assertTrue(lines[0].startswith(f"# {path} (safetensors,"), lines[0])
        rows = {line.split()[0]: line for line in lines[1:]}
        for name, dtype, shape, raw in ts:
            row = rows[name]
            self.assertIn(dtype, row)
            self.assertIn("[" + ", ".join(map(str, shape)) + "]", row)
            self.assertTrue(row.endswith("0x%016x" % ref.tensor_hash(dtype, shape, raw)), row)

    def test_every_test_vector_end_to_end(self):
        with open(os.path.join(SOURCE_DIR, "schemas", "tensor-hash-vectors.json")) as f:
            vectors = json.load(f)["vectors"]
        ts = [(f"v{i}", v["dtype"], v["shape"], ref.vector_bytes(v)) for i, v in enumerate(vectors)]
        got = self.hashes(self.write("vectors.safetensors", safetensors_bytes(ts)))
        for i, v in enumerate(vectors):
            with self.subTest(vector=v["name"]):
                self.assertEqual(got[f"v{i}"]["hash"], v["hash"])

    def test_raw_files(self):
        data = bytes(self.rng.getrandbits(8) for _ in range(5000 + self.rng.randrange(100)))
        path = self.write("blob.bin", data)
        empty = self.write("empty.bin", b"")
        r = run(["hash", "--raw", path, empty])
        self.assertExit(r, "healthy")
        files = r.json()["details"]["files"]
        self.assertEqual([f["kind"] for f in files], ["raw", "raw"])
        self.assertEqual(files[0]["tensors"][0]["hash"], "0x%016x" % ref.tensor_hash("U8", [len(data)], data))
        self.assertEqual(files[0]["tensors"][0]["shape"], [len(data)])
        self.assertEqual(files[1]["tensors"][0]["hash"], "0x%016x" % ref.tensor_hash("U8", [0], b""))

    def test_thread_count_does_not_change_a_large_file(self):
        data = os.urandom((6 << 20) + 5)
        path = self.write("big.bin", data)
        seen = set()
        for threads in ("1", "2", "3", "0"):
            r = run(["hash", "--raw", "--threads", threads, path])
            self.assertExit(r, "healthy")
            seen.add(r.json()["details"]["files"][0]["tensors"][0]["hash"])
        self.assertEqual(len(seen), 1, seen)
        # Through the safetensors streaming path (8 MiB chunks, parallel above 2 MiB) too.
        st = self.write("big.safetensors", safetensors_bytes([("x", "U8", [len(data)], data)]))
        self.assertEqual(self.hashes(st)["x"]["hash"], seen.pop())

    def test_malformed_files_exit_4_cleanly(self):
        good = safetensors_bytes(self.tensors())
        (n,) = struct.unpack_from("<Q", good)
        header = json.loads(good[8:8 + n])
        data = good[8 + n:]

        def with_header(h, payload=data):
            raw = json.dumps(h).encode()
            return struct.pack("<Q", len(raw)) + raw + payload

        lying = json.loads(json.dumps(header))
        lying["layer.0.weight"]["data_offsets"][1] += 4000  # past the end of the data
        inconsistent = json.loads(json.dumps(header))
        inconsistent["layer.0.weight"]["shape"] = [7, 6]  # offsets no longer match dtype x shape
        overlap = json.loads(json.dumps(header))
        a, b = overlap["layer.0.weight"], overlap["layer.0.bias"]
        b["data_offsets"] = [a["data_offsets"][0] + 4, a["data_offsets"][0] + 14]
        cases = {
            "header length beyond the file": struct.pack("<Q", 1 << 40) + good[8:],
            "header length shorter than the JSON": struct.pack("<Q", n - 5) + good[8:],
            "file shorter than 8 bytes": good[:5],
            "not JSON": struct.pack("<Q", 9) + b"not json!" + data,
            "offsets past the data": with_header(lying),
            "offsets inconsistent with the shape": with_header(inconsistent),
            "truncated data": good[:-7],
            "overlapping ranges": with_header(overlap),
            "unknown dtype": with_header({**header, "embed": {**header["embed"], "dtype": "Q7"}}),
        }
        for what, content in cases.items():
            with self.subTest(case=what):
                path = self.write("bad.safetensors", content)
                self.assertCleanError(run(["hash", path]), "bad_input", "hash")
        self.assertCleanError(run(["hash", os.path.join(self.tmp.name, "missing.safetensors")]), "bad_input", "hash")
        self.assertCleanError(run(["hash", "--raw", os.path.join(self.tmp.name, "missing.bin")]), "bad_input", "hash")
        # One bad file among good ones: no partial output.
        ok = self.write("ok.safetensors", good)
        bad = self.write("bad2.safetensors", good[:-1])
        self.assertCleanError(run(["hash", ok, bad]), "bad_input", "hash")

    def test_usage_errors_exit_2(self):
        r = run(["hash"])
        self.assertExit(r, "usage")
