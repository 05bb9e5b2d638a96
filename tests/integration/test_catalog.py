"""`scout catalog build` and `scout catalog check`, run as a user (or CI) would."""
import itertools
import json
import os
import random
import shutil
import tempfile

import jsonschema

from scoutlib import EXIT, SOURCE_DIR, ScoutTestCase, run, schema, validate

PAPER = ["--rows", "1-3457", "--hidden", "128", "--output-dim", "128", "--tile", "64x64x32", "--sms", "108"]
PAPER_REPS = [31, 32, 63, 800, 831, 832, 1696, 1727, 1728, 3360, 3391, 3392, 3424, 3455, 3456, 3457]
ENV_A = ["--gpu-model", "NVIDIA A100-SXM4-80GB", "--sm-count", "108", "--compute-capability", "8.0",
         "--driver", "12.4", "--cuda", "12.4", "--nccl", "2.21.5", "--torch", "2.4.0"]


def validate_catalog(doc):
    validate(doc, "catalog.schema.json")


def validate_observations(doc):
    cat = schema("catalog.schema.json")
    resolver = jsonschema.RefResolver.from_schema(schema("catalog_observations.schema.json"), store={cat["$id"]: cat})
    jsonschema.validate(doc, schema("catalog_observations.schema.json"), resolver=resolver)


# An independent reference of the model: simulate every work item of the
# persistent scheduler, then compare all pairs (no skyline, no closed form).
def ceil_div(a, b):
    return -(-a // b)


def position(i, n):
    return "single" if n == 1 else "first" if i == 0 else "last" if i == n - 1 else "interior"


def pressure(w, sms):
    return "underfilled" if w < sms else "one_repeat" if w <= 2 * sms else "multi_repeat"


def reference_counts(rows, tm, tn, tk, sms, hidden, out):
    counts = {}
    work = {}
    for kernel, n in (("forward", out), ("input_grad", hidden)):
        slot = 0
        nt = ceil_div(n, tn)
        for r in rows:
            tiles = ceil_div(r, tm) * nt
            for t in range(tiles):
                m, c = divmod(t, nt)
                role = (kernel, m == ceil_div(r, tm) - 1 and r % tm != 0, c == nt - 1 and n % tn != 0, position(t, tiles), slot >= sms)
                counts[role] = counts.get(role, 0) + 1
                slot += 1
        work[kernel] = slot
    tiles = ceil_div(hidden, tm) * ceil_div(out, tn)
    work["weight_grad"] = 0
    for e, r in enumerate(rows):
        chunks = ceil_div(r, tk)
        for t in range(tiles):
            for k in range(chunks):
                role = ("weight_grad", k == chunks - 1 and r % tk != 0, position(k, chunks), position(t, tiles), e * tiles + t >= sms)
                counts[role] = counts.get(role, 0) + 1
                work["weight_grad"] += 1
    fp = tuple(pressure(work[k], sms) for k in ("forward", "input_grad", "weight_grad"))
    for k, w in work.items():
        counts[(k, "work")] = w
    return fp, counts


def reference_representatives(shapes, cfg):
    info = {s: reference_counts(s, *cfg) for s in shapes}

    def key(s):
        c = info[s][1]
        return (c[("forward", "work")] + c[("input_grad", "work")] + c[("weight_grad", "work")], sum(s), s)

    reps = set()
    for b in shapes:
        fb, cb = info[b]
        dominated = False
        for a in shapes:
            fa, ca = info[a]
            if a == b or fa != fb or any(ca.get(k, 0) < v for k, v in cb.items()):
                continue
            if ca != cb or key(a) > key(b):
                dominated = True
                break
        if not dominated:
            reps.add(b)
    return reps


class CatalogTestCase(ScoutTestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="scout_catalog_")

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def path(self, name):
        return os.path.join(self.dir, name)

    def write(self, name, text):
        with open(self.path(name), "w") as f:
            f.write(text)
        return self.path(name)


class Build(CatalogTestCase):
    def test_paper_case(self):
        r = run(["catalog", "build"] + PAPER + ENV_A)
        self.assertExit(r, "healthy")
        doc = json.loads(r.stdout)
        validate_catalog(doc)
        t = doc["totals"]
        self.assertEqual(t["shapes"], 3457)
        self.assertEqual(t["regimes"], 4)
        self.assertEqual(t["representatives"], 16)
        self.assertEqual(t["obligations_covered"], 1134224)
        self.assertEqual(t["replay_work_items"], 5960)  # the paper's 5,960 selected occurrences
        self.assertEqual(round(100 * t["replay_reduction"], 2), 99.54)
        reps = sorted(x for g in doc["regimes"] for x in g["representatives"])
        self.assertEqual(reps, PAPER_REPS)
        self.assertEqual(sum(g["members"] for g in doc["regimes"]), 3457)
        self.assertEqual(sum(g["obligations"] for g in doc["regimes"]), 1134224)
        for g in doc["regimes"]:
            self.assertEqual(sum(x["covers"] for x in g["replay"]), g["members"])
            self.assertEqual([x["rows"] for x in g["replay"]], g["representatives"])
        self.assertEqual(doc["environment"]["cuda"], "12.4")
        self.assertEqual(doc["environment"]["sources"]["cuda"], "flag")
        self.assertEqual(doc["kernel"]["tile"], {"m": 64, "n": 64, "k": 32})

    def test_text_table(self):
        r = run(["catalog", "build"] + PAPER, fmt="text")
        self.assertExit(r, "healthy")
        self.assertIn("3457 shapes -> 16 representatives in 4 regimes (99.54% fewer replays)", r.stdout)
        self.assertIn("underfilled/underfilled/underfilled", r.stdout)
        self.assertIn("31 32 63 800 831 832", r.stdout)

    def test_output_file_is_written_atomically(self):
        out = self.path("catalog.json")
        r = run(["catalog", "build", "-o", out] + PAPER)
        self.assertExit(r, "healthy")
        self.assertEqual(r.stdout, "")
        with open(out) as f:
            validate_catalog(json.load(f))
        self.assertEqual(os.listdir(self.dir), ["catalog.json"])
        r = run(["catalog", "build", "-o", os.path.join(self.dir, "missing", "c.json")] + PAPER)
        self.assertCleanError(r, "usage", "catalog")
        self.assertEqual(os.listdir(self.dir), ["catalog.json"])

    def test_matches_independent_reference_on_random_domains(self):
        seed = random.randrange(1 << 30)
        print(f"catalog reference seed {seed}")
        rng = random.Random(seed)
        for trial in range(12):
            tm, tn, tk = rng.randint(1, 8), rng.randint(1, 8), rng.randint(1, 8)
            sms, hidden, out = rng.randint(1, 24), rng.randint(1, 20), rng.randint(1, 20)
            experts = rng.randint(1, 3)
            cfg = (tm, tn, tk, sms, hidden, out)
            if trial % 2 == 0:
                rows = sorted(set(rng.randint(1, 90) for _ in range(rng.randint(1, 40))))
                shapes = [tuple([r] * experts) for r in rows]
                args = ["--rows", ",".join(map(str, rows)), "--experts", str(experts)]
            else:
                shapes = set()
                wanted = rng.randint(1, 30)  # E = 1 has exactly 30 non-zero vectors
                while len(shapes) < wanted:
                    v = tuple(rng.randint(0, 30) for _ in range(experts))
                    if any(v):
                        shapes.add(v)
                shapes = sorted(shapes)
                rows_file = self.write(f"rows{trial}.txt", "\n".join(",".join(map(str, v)) for v in shapes) + "\n")
                args = ["--rows-file", rows_file]
            r = run(["catalog", "build", "--tile", f"{tm}x{tn}x{tk}", "--sms", str(sms), "--hidden", str(hidden),
                     "--output-dim", str(out)] + args)
            self.assertExit(r, "healthy")
            doc = json.loads(r.stdout)
            validate_catalog(doc)
            got = set()
            for g in doc["regimes"]:
                for x in g["representatives"]:
                    got.add(tuple(x) if isinstance(x, list) else tuple([x] * experts))
            self.assertEqual(got, reference_representatives(shapes, cfg), f"seed {seed} trial {trial} cfg {cfg}")

    def test_heterogeneous_rows_file_json_and_duplicates(self):
        f = self.write("rows.json", json.dumps({"schema": "scout.catalog.rows", "schema_version": "1.0",
                                                "shapes": [[3, 0, 70], [64, 64, 64], [3, 0, 70], [1, 2, 3]]}))
        r = run(["catalog", "build", "--rows-file", f, "--sms", "108"])
        self.assertExit(r, "healthy")
        doc = json.loads(r.stdout)
        validate_catalog(doc)
        self.assertEqual(doc["shape_space"]["kind"], "heterogeneous")
        self.assertEqual(doc["shape_space"]["experts"], 3)
        self.assertEqual(doc["shape_space"]["duplicates_ignored"], 1)
        self.assertEqual(doc["totals"]["shapes"], 3)
        for g in doc["regimes"]:
            for x in g["representatives"]:
                self.assertIsInstance(x, list)

    def test_observations_replace_model_counts(self):
        base = json.loads(run(["catalog", "build", "--rows", "1-200", "--sms", "108"]).stdout)
        kernel = base["kernel"]
        reps = [x for g in base["regimes"] for x in g["replay"]]
        observations = {"schema": "scout.catalog.observations", "schema_version": "1.0", "kernel": kernel,
                        "observations": [{"rows": [x["rows"]], "kernels": x["kernels"]} for x in reps]}
        validate_observations(observations)
        same = self.write("same.json", json.dumps(observations))
        doc = json.loads(run(["catalog", "build", "--rows", "1-200", "--sms", "108", "--observations", same]).stdout)
        validate_catalog(doc)
        self.assertEqual(doc["observations"]["applied"], len(reps))
        self.assertEqual(doc["observations"]["differ_from_model"], 0)
        self.assertEqual(doc["totals"]["representatives"], base["totals"]["representatives"])
        # A measured shape that ran one more forward tile than modelled (as a
        # queue repeat, a role the model never gives it) becomes a representative.
        rows = random.choice([r for r in range(1, 200) if r not in {x["rows"] for x in reps}])
        print(f"observed extra tile at rows {rows}")
        alone = json.loads(run(["catalog", "build", "--rows", str(rows), "--sms", "108"]).stdout)
        counts = alone["regimes"][0]["replay"][0]["kernels"]
        counts["forward"]["work_items"] += 1
        counts["forward"]["roles"]["single+queue_repeat"] = 1
        observations["observations"] = [{"rows": [rows], "kernels": counts}]
        validate_observations(observations)
        changed = self.write("changed.json", json.dumps(observations))
        doc = json.loads(run(["catalog", "build", "--rows", "1-200", "--sms", "108", "--observations", changed]).stdout)
        self.assertEqual(doc["observations"]["differ_from_model"], 1)
        self.assertIn(rows, [x for g in doc["regimes"] for x in g["representatives"]])
        # Observations from another kernel configuration are refused.
        observations["kernel"] = dict(kernel, sms=132)
        other = self.write("other.json", json.dumps(observations))
        r = run(["catalog", "build", "--rows", "1-200", "--sms", "108", "--observations", other])
        self.assertCleanError(r, "bad_input", "catalog")
        self.assertIn("another kernel configuration", r.stderr)

    def test_bad_flags_are_usage_errors(self):
        cases = [
            ["--rows", "1-10", "--tile", "0x64x32", "--sms", "108"],
            ["--rows", "1-10", "--tile", "64x64", "--sms", "108"],
            ["--rows", "-5", "--sms", "108"],
            ["--rows", "0-10", "--sms", "108"],
            ["--rows", "10-1", "--sms", "108"],
            ["--rows", "1-10", "--sms", "0"],
            ["--rows", "1-10", "--sms", "108", "--hidden", "0"],
            ["--rows", "1-10", "--sms", "108", "--experts", "0"],
            ["--sms", "108"],
            ["--rows", "1-10", "--rows-file", "x", "--sms", "108"],
            ["--rows", "1-10", "--sms", "108", "--cuda", ""],
        ]
        for args in cases:
            with self.subTest(args=args):
                self.assertCleanError(run(["catalog", "build"] + args), "usage", "catalog")

    def test_bad_rows_files_are_input_errors(self):
        for name, text in [("neg.txt", "1,2\n3,-4\n"), ("ragged.txt", "1,2\n3\n"), ("zero.txt", "0,0\n"),
                           ("junk.txt", "1,x\n"), ("bad.json", "[[1,2],"), ("empty.txt", "\n# nothing\n")]:
            with self.subTest(name=name):
                f = self.write(name, text)
                r = run(["catalog", "build", "--rows-file", f, "--sms", "108"])
                self.assertCleanError(r, "bad_input", "catalog")
        r = run(["catalog", "build", "--rows-file", self.path("absent.txt"), "--sms", "108"])
        self.assertCleanError(r, "bad_input", "catalog")


class Check(CatalogTestCase):
    def build(self, env):
        out = self.path("catalog.json")
        r = run(["catalog", "build", "-o", out] + PAPER + env)
        self.assertExit(r, "healthy")
        return out

    def test_same_environment_matches(self):
        cat = self.build(ENV_A)
        r = run(["catalog", "check", cat] + ENV_A)
        self.assertExit(r, "healthy")
        doc = r.json()
        self.assertEqual(doc["command"], "catalog")
        self.assertTrue(doc["details"]["match"])
        self.assertEqual(doc["details"]["totals"]["representatives"], 16)

    def test_detected_environment_matches_itself(self):
        cat = self.build([])
        r = run(["catalog", "check", cat])
        self.assertExit(r, "healthy")
        self.assertTrue(r.json()["details"]["match"])

    def test_new_cuda_image_is_refused_with_the_fields_named(self):
        cat = self.build(ENV_A)
        new_image = list(ENV_A)
        new_image[new_image.index("--cuda") + 1] = "13.0"
        new_image[new_image.index("--torch") + 1] = "2.5.1"
        r = run(["catalog", "check", cat] + new_image)
        self.assertExit(r, "inconclusive")  # the status and the exit code agree
        doc = r.json()
        self.assertFalse(doc["details"]["match"])
        self.assertEqual(doc["status"], "inconclusive")
        self.assertEqual(doc["action"], "rebuild_catalog")
        diffs = {d["field"]: (d["recorded"], d["current"]) for d in doc["details"]["differences"]}
        self.assertEqual(diffs, {"cuda": ("12.4", "13.0"), "torch": ("2.4.0", "2.5.1")})
        self.assertIn("cuda (catalog 12.4, here 13.0)", r.stderr)
        self.assertIn("rebuild the catalog on this image", r.stderr)
        text = run(["catalog", "check", cat] + new_image, fmt="text")
        self.assertExit(text, "inconclusive")
        self.assertIn("torch (catalog 2.4.0, here 2.5.1)", text.stdout)

    def test_malformed_catalogs_are_input_errors(self):
        with open(self.build(ENV_A)) as f:
            good = json.load(f)
        cases = {
            "v2.json": dict(good, schema_version="2.0"),
            "notcat.json": dict(good, schema="scout.verdict"),
            "zero_tile.json": dict(good, kernel=dict(good["kernel"], tile={"m": 64, "n": 0, "k": 32})),
            "no_env.json": {k: v for k, v in good.items() if k != "environment"},
        }
        for name, doc in cases.items():
            with self.subTest(name=name):
                r = run(["catalog", "check", self.write(name, json.dumps(doc))] + ENV_A)
                self.assertCleanError(r, "bad_input", "catalog")
                self.assertIn("rebuild the catalog", r.stderr)
        r = run(["catalog", "check", self.write("v2b.json", json.dumps(cases["v2.json"]))])
        self.assertIn("schema version 2.0", r.stderr)
        self.assertCleanError(run(["catalog", "check", self.write("junk.json", "{not json")]), "bad_input", "catalog")
        self.assertCleanError(run(["catalog", "check", self.path("absent.json")]), "bad_input", "catalog")
        self.assertCleanError(run(["catalog", "check"]), "usage", "catalog")


if __name__ == "__main__":
    import unittest
    unittest.main()
