"""The CLI frame, `scout groups` and `scout consensus`, run as a user would."""
import json
import os
import random
import re
import subprocess

from scoutlib import EXIT, SCOUT_BIN, SOURCE_DIR, ScoutTestCase, run, validate


class Version(ScoutTestCase):
    def test_version_lists_features(self):
        r = run(["--version"], fmt=None)
        self.assertExit(r, "healthy")
        self.assertRegex(r.stdout, r"scout \d+\.\d+\.\d+")
        self.assertRegex(r.stdout, r"cuda (yes|no)")
        self.assertRegex(r.stdout, r"torch (yes|no)")

    def test_help_lists_every_command_of_the_table(self):
        r = run(["--help"], fmt=None)
        self.assertExit(r, "healthy")
        with open(os.path.join(SOURCE_DIR, "cli", "commands.def")) as f:
            names = re.findall(r'^SCOUT_COMMAND\(\w+, "([^"]+)"', f.read(), re.M)
        self.assertGreaterEqual(len(names), 2)
        for name in names:
            self.assertIn(name, r.stdout)

    def test_unknown_command_and_flag_are_usage_errors(self):
        self.assertExit(run(["frobnicate"]), "usage")
        r = run(["groups", "--mesh", "dp=2", "--no-such-flag"])
        self.assertExit(r, "usage")
        self.assertIn("scout groups: error:", r.stderr)


class Groups(ScoutTestCase):
    def test_paper_example_replica_groups(self):
        doc = run(["groups", "--mesh", "dp=4,tp=2"]).json()
        d = doc["details"]
        self.assertEqual(d["peer_kind"], "replica")
        self.assertEqual([g["members"] for g in d["peer_groups"]], [[0, 2, 4, 6], [1, 3, 5, 7]])
        self.assertEqual(doc["status"], "healthy")

    def test_state_shard_groups_without_replication(self):
        doc = run(["groups", "--mesh", "dp=1,fsdp=4,tp=2"]).json()
        d = doc["details"]
        self.assertEqual(d["peer_kind"], "state_shard")
        self.assertEqual([g["members"] for g in d["peer_groups"]], [[0, 2, 4, 6], [1, 3, 5, 7]])
        self.assertTrue(all(g["kind"] == "state_shard" for g in d["peer_groups"]))

    def test_one_rank_with_nodes(self):
        doc = run(["groups", "--mesh", "dp=2,pp=2,tp=2", "--ranks-per-node", "4", "--rank", "5"]).json()
        (rank,) = doc["details"]["ranks"]
        self.assertEqual(rank["rank"], 5)
        self.assertEqual(rank["node"], "node1")
        self.assertEqual(rank["peer_group"], [1, 5])
        self.assertEqual(rank["process_groups"]["tp"], [4, 5])
        self.assertEqual(rank["process_groups"]["pp"], [5, 7])

    def test_hosts_and_text(self):
        r = run(["groups", "--mesh", "dp=4", "--hosts", "a,b"], fmt="text")
        self.assertExit(r, "healthy")
        self.assertIn("peer groups are replica", r.stdout)

    def test_bad_specs_are_clean_usage_errors(self):
        for spec in ["dp=0", "dp=x", "zz=2", "dp=4,,tp=2", "dp=100000,tp=100000", ""]:
            with self.subTest(spec=spec):
                self.assertCleanError(run(["groups", "--mesh", spec]), "usage", "groups")
        self.assertCleanError(run(["groups", "--mesh", "dp=4", "--world-size", "8"]), "usage", "groups")
        self.assertCleanError(run(["groups", "--mesh", "dp=4", "--ranks-per-node", "3"]), "usage", "groups")
        self.assertCleanError(run(["groups", "--mesh", "dp=4", "--rank", "4"]), "usage", "groups")
        for n in ["0", "-2"]:
            with self.subTest(ranks_per_node=n):
                r = run(["groups", "--mesh", "dp=4", "--ranks-per-node", n])
                self.assertCleanError(r, "usage", "groups")
                self.assertIn("--ranks-per-node", r.stderr)


class Consensus(ScoutTestCase):
    def verdict(self, values, *extra, expect):
        r = run(["consensus", "--values", values, *extra])
        self.assertExit(r, expect)
        return r.json()

    def test_exact_rules(self):
        doc = self.verdict("5,5,5,7", expect="attributed")
        self.assertEqual([s["rank"] for s in doc["suspects"]], [3])
        self.assertEqual(doc["status"], "attributed")
        self.assertEqual(self.verdict("5,5,7,7", expect="inconclusive")["status"], "inconclusive")
        self.assertEqual(self.verdict("5,5,5,5", expect="healthy")["suspects"], [])
        self.assertEqual(self.verdict("5,7", expect="inconclusive")["status"], "inconclusive")

    def test_ranks_name_suspects(self):
        doc = self.verdict("1,1,9,1", "--ranks", "0,2,4,6", expect="attributed")
        self.assertEqual([s["rank"] for s in doc["suspects"]], [4])
        self.assertEqual(doc["groups"][0]["members"], [0, 2, 4, 6])

    def test_exact_on_hashes(self):
        doc = self.verdict("0xab,0xab,0xcd", expect="attributed")
        self.assertEqual(doc["suspects"][0]["evidence"]["value"], "0xcd")

    def test_statistical_rules(self):
        doc = self.verdict("100,101,99,100,100.5,250", "--mode", "statistical", expect="attributed")
        self.assertEqual([s["rank"] for s in doc["suspects"]], [5])
        self.verdict("0.100000,0.100001,0.100003,0.099998", "--mode", "statistical", expect="healthy")
        self.assertEqual(self.verdict("1,1,100,100", "--mode", "statistical", expect="inconclusive")["status"],
                         "inconclusive")

    def test_random_straggler_is_found(self):
        seed = random.randrange(1 << 30)
        rng = random.Random(seed)
        n = rng.randrange(4, 64)
        slow = rng.randrange(n)
        values = [1.0 + rng.gauss(0, 0.001) for _ in range(n)]
        values[slow] = 2.0
        doc = self.verdict(",".join(f"{v:.6f}" for v in values), "--mode", "statistical", expect="attributed")
        self.assertEqual([s["rank"] for s in doc["suspects"]], [slow], f"seed {seed}")

    def test_stdin_lines_and_json(self):
        r = run(["consensus"], stdin="5\n5\n5\n7\n")
        self.assertExit(r, "attributed")
        for text in ["1 1 1 2\n", "1 1\n1 2", "1,1,1,2", "\t1  1 1\t2 \n\n"]:  # several values on a line are several values
            with self.subTest(text=text):
                r = run(["consensus"], stdin=text)
                self.assertExit(r, "attributed")
                doc = r.json()
                self.assertEqual(doc["details"]["count"], 4)
                self.assertEqual([x["rank"] for x in doc["suspects"]], [3])
        r = run(["consensus", "--ranks", "10-13"], stdin="[5, 5, 5, 7]")
        self.assertExit(r, "attributed")
        self.assertEqual(r.json()["suspects"][0]["rank"], 13)

    def test_bad_input_is_clean(self):
        self.assertCleanError(run(["consensus", "--values", "1,,x"]), "usage", "consensus")
        self.assertCleanError(run(["consensus", "--values", "1,nan,1"]), "bad_input", "consensus")
        self.assertCleanError(run(["consensus", "--values", "1,2,x"]), "bad_input", "consensus")
        self.assertCleanError(run(["consensus"], stdin=""), "bad_input", "consensus")
        self.assertCleanError(run(["consensus"], stdin="[1, 2"), "bad_input", "consensus")
        self.assertCleanError(run(["consensus", "--values", "1,2", "--ranks", "1"]), "usage", "consensus")
        self.assertCleanError(run(["consensus", "--values", "a,b", "--mode", "statistical"]), "bad_input", "consensus")
        self.assertCleanError(run(["consensus", "--values", "1,2,3", "--kappa", "-1"]), "usage", "consensus")

    def test_text_format(self):
        r = run(["consensus", "--values", "5,5,5,7"], fmt="text")
        self.assertExit(r, "attributed")
        self.assertIn("attributed", r.stdout)
        self.assertIn("rank 3", r.stdout)


# Every command with arguments that give it a verdict, for the checks below that run each.
def command_lines(tmp):
    st = os.path.join(tmp, "m.safetensors")
    if not os.path.exists(st):
        import struct
        header = json.dumps({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}).encode()
        for path in (st, st + ".copy"):
            with open(path, "wb") as f:
                f.write(struct.pack("<Q", len(header)) + header + b"\0" * 8)
    cat = os.path.join(tmp, "catalog.json")
    if not os.path.exists(cat):
        run(["catalog", "build", "-o", cat, "--rows", "1-64", "--hidden", "128", "--output-dim", "128", "--tile",
             "64x64x32", "--sms", "108"])
    return {
        "groups": ["groups", "--mesh", "dp=4,tp=2"],
        "consensus": ["consensus", "--values", "5,5,5,7"],
        "hash": ["hash", st],
        "catalog": ["catalog", "check", cat],
        "records": ["records", "list", "--job", "no-such-job-" + str(os.getpid()), "--shm-dir", tmp],
        "verify-ckpt": ["verify-ckpt", "check", "--replicas", st, st + ".copy"],
        "completion": ["completion", "bash"],
        "probe-hang": ["probe-hang", "--job", "no-such-job-" + str(os.getpid()), "--shm-dir", tmp, "--threshold", "1",
                       "--timeout", "5"],
        "observe": ["observe", "--job", "no-such-job-" + str(os.getpid()), "--shm-dir", tmp, "--duration", "0.3",
                    "--interval", "0.1"],
        "straggler": ["straggler", "--job", "no-such-job-" + str(os.getpid()), "--shm-dir", tmp, "--rounds", "1"],
        "replay": ["replay", "--evidence", tmp, "--job", "no-such-job-" + str(os.getpid()), "--cycle", "0"],
    }


class Output(ScoutTestCase):
    """A verdict that cannot be written is an error (exit 5), for every command."""

    def setUp(self):
        import tempfile
        self._tmp = tempfile.TemporaryDirectory()
        self.tmp = self._tmp.name

    def tearDown(self):
        self._tmp.cleanup()

    def test_every_command_of_the_table_is_covered(self):
        with open(os.path.join(SOURCE_DIR, "cli", "commands.def")) as f:
            names = re.findall(r'^SCOUT_COMMAND\(\w+, "([^"]+)"', f.read(), re.M)
        self.assertEqual(sorted(command_lines(self.tmp)), sorted(names))

    def test_a_full_disk_is_never_a_success(self):
        if not os.path.exists("/dev/full"):
            self.skipTest("no /dev/full on this machine")
        for name, args in command_lines(self.tmp).items():
            for fmt in ["json", "text"]:
                with self.subTest(command=name, fmt=fmt):
                    with open("/dev/full", "w") as full:
                        proc = subprocess.run([SCOUT_BIN, *args, "--format", fmt], stdout=full, stderr=subprocess.PIPE,
                                              stdin=subprocess.DEVNULL, text=True, timeout=120)
                    ok = subprocess.run([SCOUT_BIN, *args, "--format", fmt], capture_output=True, text=True,
                                        stdin=subprocess.DEVNULL, timeout=120)
                    if ok.stdout == "":
                        # Nothing to print (observe saw no stall): nothing lost, the code stands.
                        self.assertEqual(proc.returncode, ok.returncode, proc.stderr)
                        continue
                    self.assertEqual(proc.returncode, EXIT["unavailable"], f"{name}: {proc.stderr}")
                    self.assertIn("error: cannot write", proc.stderr)
                    self.assertIn("standard output", proc.stderr)

    def test_help_to_a_full_disk_fails_too(self):
        with open("/dev/full", "w") as full:
            proc = subprocess.run([SCOUT_BIN, "--help"], stdout=full, stderr=subprocess.PIPE, text=True, timeout=30)
        self.assertEqual(proc.returncode, EXIT["unavailable"], proc.stderr)


class Help(ScoutTestCase):
    """Mistakes get a clean usage error that says what to do, never the parser's wording."""

    RAW = ["The following arguments were not expected", "A subcommand is required", "could not be converted",
           "Run with --help", "required TEXT missing", "ExtrasError", "RequiredError"]

    def usage(self, args, command, *expect):
        r = run(args, fmt=None)
        self.assertExit(r, "usage")
        self.assertEqual(r.stdout, "")
        self.assertIn(f"scout{' ' + command if command else ''}: error:", r.stderr)
        self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)
        for raw in self.RAW:
            self.assertNotIn(raw, r.stderr)
        for e in expect:
            self.assertIn(e, r.stderr)
        return r

    def test_did_you_mean_a_command(self):
        self.usage(["probe-hnag", "--job", "j"], "", "unknown command 'probe-hnag'", "did you mean 'probe-hang'?")
        self.usage(["--format", "json", "grops"], "", "did you mean 'groups'?")
        self.usage(["frobnicate"], "", "unknown command 'frobnicate'", "scout --help")

    def test_did_you_mean_a_subcommand(self):
        self.usage(["records", "lst"], "records", "unknown subcommand 'lst'", "did you mean 'list'?")
        self.usage(["catalog", "chek", "x.json"], "catalog", "did you mean 'check'?")
        self.usage(["verify-ckpt", "manifest", "wrte", "d"], "verify-ckpt", "did you mean 'write'?")
        self.usage(["records"], "records", "needs a subcommand", "list", "gc")

    def test_did_you_mean_an_option(self):
        self.usage(["verify-ckpt", "check", "--replica", "a", "b"], "verify-ckpt", "unknown option '--replica'",
                   "did you mean '--replicas'?")
        self.usage(["groups", "--mesh", "dp=4", "--rank-per-node", "2"], "groups", "did you mean '--ranks-per-node'?")
        self.usage(["groups", "--mesh", "dp=4", "--formt", "json"], "groups", "did you mean '--format'?")

    def test_bad_values_are_reworded(self):
        self.usage(["consensus", "--values", "1,2,3", "--mode", "exakt"], "consensus", "exakt", "exact")
        self.usage(["groups", "--mesh", "dp=4", "--rank", "x"], "groups", "--rank", "scout groups --help")
        self.usage(["groups"], "groups", "--mesh", "scout groups --help")
        self.usage(["groups", "--mesh"], "groups", "'--mesh' needs a value")

    def test_scout_help_command(self):
        for args, words in [(["help"], ["probe-hang", "verify-ckpt"]), (["help", "groups"], ["--mesh"]),
                            (["help", "records", "gc"], ["--dry-run"]), (["help", "verify-ckpt", "manifest"], ["write"])]:
            with self.subTest(args=args):
                r = run(args, fmt=None)
                self.assertExit(r, "healthy")
                for w in words:
                    self.assertIn(w, r.stdout)
        self.usage(["help", "grops"], "", "did you mean 'groups'?")


class Documents(ScoutTestCase):
    """Every 64-bit id and hash in every document is a string of one spelling (docs/contracts.md)."""

    ID_KEYS = {"group", "hash", "majority_hash", "group_id", "pg"}
    BIG = 1 << 53

    def scan(self, doc, where):
        bad = []

        def walk(x, path, key):
            if isinstance(x, bool):
                return
            if isinstance(x, int):
                if abs(x) >= self.BIG and not key.endswith("_ns"):
                    bad.append(f"{path}: integer {x} above 2^53")
                if key in self.ID_KEYS:
                    bad.append(f"{path}: 64-bit id {x} is a number")
            elif isinstance(x, str):
                if re.fullmatch(r"[0-9a-f]{16}", x) or re.fullmatch(r"0x[0-9a-fA-F]{1,15}|0x[0-9a-fA-F]{17,}", x):
                    bad.append(f"{path}: '{x}' is not spelled 0x and 16 hex digits")
                if key in ("hash", "majority_hash") and not re.fullmatch(r"0x[0-9a-f]{16}", x):
                    bad.append(f"{path}: hash '{x}' is not spelled 0x and 16 lowercase hex digits")
            elif isinstance(x, dict):
                for k, v in x.items():
                    walk(v, f"{path}.{k}", k)
            elif isinstance(x, list):
                for i, v in enumerate(x):
                    walk(v, f"{path}[{i}]", key)

        walk(doc, where, "")
        self.assertEqual(bad, [], where)

    def test_every_document_type(self):
        import tempfile
        with tempfile.TemporaryDirectory() as tmp:
            lines = command_lines(tmp)
            del lines["completion"], lines["observe"]  # a script; observe prints only on a stall
            for name, args in lines.items():
                with self.subTest(command=name):
                    r = run(args)
                    self.assertIn(r.rc, EXIT.values())
                    if r.stdout:
                        self.scan(r.json(), name)
            with open(os.path.join(tmp, "catalog.json")) as f:
                self.scan(json.load(f), "catalog file")
            d = os.path.join(tmp, "ckpt")
            os.makedirs(d)
            import shutil
            shutil.copy(os.path.join(tmp, "m.safetensors"), os.path.join(d, "model_rank0.safetensors"))
            r = run(["verify-ckpt", "manifest", "write", d, "--mesh", "dp=1"])
            self.assertExit(r, "healthy")
            self.scan(r.json(), "verify-ckpt manifest write")
            with open(os.path.join(d, "scout-ckpt.json")) as f:
                self.scan(json.load(f), "manifest file")

    def test_process_group_ids_above_2_53_survive_a_probe(self):
        """A hung job whose process-group id needs all 64 bits: records list and probe-hang keep every digit."""
        import tempfile
        seed = random.randrange(1 << 30)
        rng = random.Random(seed)
        group = rng.randrange(1 << 63, 1 << 64)
        behind = rng.randrange(4)
        job = f"ids{os.getpid()}x{seed}"
        writer = f"""
import sys, time
sys.path.insert(0, {os.path.join(SOURCE_DIR, "integrations", "python")!r})
from scout_publisher import _lib
lib = _lib.load()
recs = [_lib.Record(lib, {job!r}, r, 4, coords=[r, 0, 0, 0, 0, 0]) for r in range(4)]
for r, rec in enumerate(recs):
    rec.step_begin(1)
    rec.exit(rec.enter({group}, _lib.COLLECTIVES["all_reduce"], 2, 10, 0, 1))
    if r != {behind}:
        rec.enter({group}, _lib.COLLECTIVES["all_reduce"], 2, 10, 0, 2)
print("ready", flush=True)
time.sleep(120)
"""
        proc = subprocess.Popen(["/usr/bin/python3", "-c", writer], stdout=subprocess.PIPE, text=True)
        try:
            self.assertEqual(proc.stdout.readline().strip(), "ready", f"seed {seed}")
            listed = run(["records", "list", "--job", job])
            self.assertExit(listed, "healthy")
            doc = listed.json()
            self.scan(doc, "records list")
            groups = {e["group"] for rec in doc["details"]["records"] for e in rec["record"]["recent"]}
            self.assertEqual(groups, {"0x%016x" % group}, f"seed {seed}")
            import time
            time.sleep(1.2)  # the silence the probe's threshold asks for
            probe = run(["probe-hang", "--job", job, "--threshold", "1", "--timeout", "10"], timeout=60)
            self.assertIn(probe.rc, (EXIT["attributed"], EXIT["inconclusive"]), repr(probe))
            pdoc = probe.json()
            self.scan(pdoc, "probe-hang")
            self.assertIn('"0x%016x"' % group, probe.stdout, f"seed {seed}")
            self.assertNotIn(str(group), probe.stdout)
        finally:
            proc.kill()
            proc.wait()
            proc.stdout.close()
            run(["records", "gc", "--job", job])


class Leftovers(ScoutTestCase):
    def test_libtorch_logging_never_reaches_stderr_raw(self):
        """Joining a tcp:// store nobody serves makes c10d log an error: scout words it, glog does not."""
        if "torch yes" not in run(["--version"], fmt=None).stdout:
            self.skipTest("built without LibTorch (-DSCOUT_WITH_TORCH=OFF): no tcp:// store")
        import socket
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]  # closed again: nobody listens there
        r = run(["probe-hang", "--job", f"glog{os.getpid()}", "--nodes", "2", "--node-index", "1", "--store",
                 f"tcp://127.0.0.1:{port}", "--timeout", "4", "--threshold", "1"], timeout=120)
        self.assertIn(r.rc, EXIT.values(), repr(r))
        self.assertNotIn("InitGoogleLogging", r.stderr)
        self.assertNotRegex(r.stderr, r"(?m)^[IWEF]\d{8} ", "a raw glog line reached stderr")
