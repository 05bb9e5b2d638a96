"""scout replay --recipe: recipes a real torch trainer exported
(scout_publisher.replay.RecipeExporter in a gloo DDP job) replayed across
peer processes on this machine, and across two "nodes" (two scout processes)
meeting at one store, with the recipe directory on both nodes, on one node only
(the other receives it over the store's session), or tampered on one. Injections choose the peer, recipe, quantity, word and
bit at random and print their seed (SCOUT_TEST_SEED=<seed> reproduces a run)."""
import json
import os
import random
import shutil
import subprocess
import tempfile
import unittest

from scoutlib import EXIT, SOURCE_DIR, BUILD_DIR, SCOUT_BIN, ScoutTestCase, run, validate
from trainer_harness import free_port
import trainer_harness as th

MODULE = os.path.join(BUILD_DIR, "bin", "libscout_torch.so")
HASH_LIB = os.path.join(BUILD_DIR, "lib", "libscout_hash.so")
TRAINER = os.path.join(SOURCE_DIR, "bench", "replay_trainer.py")
QUANTITIES = ["output", "input_grad", "param_grad", "param"]


def seed_for(name):
    s = int(os.environ.get("SCOUT_TEST_SEED", random.randrange(1 << 30)))
    print(f"{name}: seed {s} (SCOUT_TEST_SEED={s} reproduces it)", flush=True)
    return s


@unittest.skipUnless(os.path.exists(MODULE) and os.path.exists(HASH_LIB), "scout was built without the LibTorch module")
@unittest.skipUnless(os.access(th.VENV_PYTHON, os.X_OK), f"no torch 2.x venv at {th.VENV} (run scripts/install-deps.sh)")
class RecipeReplay(ScoutTestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="scout-recipe-")
        cls.recipes = os.path.join(cls.tmp, "recipes")
        # A real 2-rank gloo DDP job (residual MLP blocks with dropout, AdamW) exporting a
        # sampled layer every 4 steps: steps 0, 4, 8 -> three recipes over three layers.
        p = subprocess.run([th.VENV_PYTHON, TRAINER, "--world", "2", "--steps", "9", "--every", "4", "--layers", "3", "--dim", "16",
                            "--batch", "4", "--job", "jr", "--export-dir", cls.recipes, "--init-file", os.path.join(cls.tmp, "init")],
                           capture_output=True, text=True, timeout=600, env=dict(os.environ, SCOUT_HASH_LIB=HASH_LIB))
        if p.returncode != 0:
            raise RuntimeError("the trainer failed: " + p.stderr[-3000:])

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, True)

    def replay(self, args, timeout=600):
        return run(["replay", "--recipe", self.recipes, "--job", "jr"] + args, timeout=timeout)

    def test_exported_recipes_replay_healthy_across_peers(self):
        self.assertEqual(len(os.listdir(self.recipes)), 3, os.listdir(self.recipes))
        peers = random.Random(seed_for("recipe clean")).choice([3, 4])
        r = self.replay(["--peers", str(peers)])
        self.assertExit(r, "healthy")
        doc = r.json()
        validate(doc, "verdict.schema.json")
        d = doc["details"]
        self.assertEqual((d["mode"], d["numerics"], d["peers"]), ("recipe", "clean", peers))
        self.assertEqual(len(d["recipes"]), 3)
        for rec in d["recipes"]:
            self.assertEqual(rec["status"], "agree", rec)
            self.assertEqual(sorted(q["quantity"] for q in rec["quantities"]), sorted(QUANTITIES))
            self.assertEqual(rec["contract"]["recipe"], "exported")
            self.assertTrue(rec["contract"]["deterministic_algorithms"])
        self.assertEqual(sorted(x["layer"] for x in d["exported"]), ["blocks.0", "blocks.1", "blocks.2"])

    def test_injected_flip_names_the_peer(self):
        rng = random.Random(seed_for("recipe sdc"))
        peers = rng.choice([3, 4])
        names = []
        for d in sorted(os.listdir(self.recipes)):
            with open(os.path.join(self.recipes, d, "manifest.json")) as f:
                m = json.load(f)
            names.append(f"{m['layer']}@{m['step']}")
        peer, recipe, q = rng.randrange(peers), rng.choice(names), rng.choice(QUANTITIES)
        word, bit = rng.randrange(1 << 16), rng.choice([63, 62, 31, 30, rng.randrange(64)])
        spec = f"sdc:peer={peer},tensor={q},word={word},bit={bit},recipe={recipe}"
        print(f"recipe sdc: {peers} peers, {spec}", flush=True)
        r = self.replay(["--peers", str(peers), "--inject", spec])
        self.assertExit(r, "attributed")
        doc = r.json()
        self.assertEqual(sorted((s["rank"], s["reason"]) for s in doc["suspects"] if s["reason"] == "sdc"), [(peer, "sdc")])
        cells = {(x["recipe"], y["quantity"]): y["outliers"] for x in doc["details"]["recipes"] for y in x["quantities"] if y["outliers"]}
        self.assertEqual(cells, {(recipe, q): [peer]})
        self.assertEqual(doc["details"]["numerics"], "sdc")

    def test_two_nodes_meet_at_one_store_and_name_the_peer(self):
        rng = random.Random(seed_for("recipe nodes"))
        local = 2
        peer = rng.randrange(2 * local)
        q = rng.choice(QUANTITIES)
        spec = f"sdc:peer={peer},tensor={q},word={rng.randrange(1 << 16)},bit={rng.randrange(64)}"
        print(f"recipe nodes: 2 nodes x {local} peers, {spec}", flush=True)
        store = os.path.join(self.tmp, f"store-{rng.randrange(1 << 30)}")
        procs = []
        for node in range(2):
            cmd = [SCOUT_BIN, "replay", "--recipe", self.recipes, "--job", "jr", "--peers", str(local), "--store", "file://" + store,
                   "--nodes", "2", "--node-index", str(node), "--inject", spec, "--format", "json"]
            procs.append(subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL))
        outs = []
        try:
            for p in procs:
                out, err = p.communicate(timeout=600)
                outs.append((p.returncode, out, err))
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
                    p.wait()
        for node, (rc, out, err) in enumerate(outs):
            self.assertEqual(rc, EXIT["attributed"], f"node {node}: {err[-2000:]}")
            doc = json.loads(out)
            self.assertEqual(doc["details"]["peers"], 2 * local)
            self.assertEqual(doc["details"]["transport"]["node_index"], node)
            self.assertEqual(sorted({(s["rank"], s["reason"]) for s in doc["suspects"] if s["reason"] == "sdc"}), [(peer, "sdc")])

    def two_nodes(self, dirs, extra, store, tmpdirs=None, prefixes=([], [])):
        """Runs one 'scout replay --recipe' per node (dirs[k]: node k's --recipe; prefixes[k]: a command it runs
        under, e.g. a network namespace) at one store; (rc, stdout, stderr) each."""
        procs = []
        for node in range(2):
            env = dict(os.environ)
            if tmpdirs:
                env["TMPDIR"] = tmpdirs[node]
            cmd = list(prefixes[node]) + [SCOUT_BIN, "replay", "--recipe", dirs[node], "--job", "jr", "--peers", "2", "--store", store, "--nodes", "2",
                   "--node-index", str(node), "--timeout", "60", "--format", "json"] + extra
            procs.append(subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL, env=env))
        outs = []
        try:
            for p in procs:
                out, err = p.communicate(timeout=600)
                outs.append((p.returncode, out, err))
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
                    p.wait()
        return outs

    def store_uri(self, rng, kind):
        if kind == "tcp":
            return f"tcp://127.0.0.1:{free_port()}"
        return "file://" + os.path.join(self.tmp, f"store-{rng.randrange(1 << 30)}")

    def test_node_without_recipes_receives_the_sources_and_names_the_peer(self):
        rng = random.Random(seed_for("recipe received"))
        lacking = rng.randrange(2)  # the node whose --recipe directory does not exist
        kind = rng.choice(["file", "tcp"])
        peer = rng.randrange(4)
        spec = f"sdc:peer={peer},tensor={rng.choice(QUANTITIES)},word={rng.randrange(1 << 16)},bit={rng.randrange(64)}"
        print(f"recipe received: node {lacking} has no directory, {kind} store, {spec}", flush=True)
        dirs = [self.recipes, self.recipes]
        dirs[lacking] = os.path.join(self.tmp, f"absent-{rng.randrange(1 << 30)}")
        tmpdirs = [tempfile.mkdtemp(prefix=f"tmp{k}-", dir=self.tmp) for k in range(2)]
        outs = self.two_nodes(dirs, ["--inject", spec], self.store_uri(rng, kind), tmpdirs)
        digests = set()
        for node, (rc, out, err) in enumerate(outs):
            self.assertEqual(rc, EXIT["attributed"], f"node {node}: {err[-2000:]}")
            doc = json.loads(out)
            validate(doc, "verdict.schema.json")
            d = doc["details"]
            self.assertEqual((d["peers"], d["transport"]["node_index"]), (4, node))
            self.assertEqual(sorted({(s["rank"], s["reason"]) for s in doc["suspects"] if s["reason"] == "sdc"}), [(peer, "sdc")])
            src = d["recipe_source"]
            self.assertEqual(src["node"], 1 - lacking)
            self.assertEqual(src["origin"], "received" if node == lacking else "local")
            self.assertEqual([n["has_recipes"] for n in src["nodes"]], [k != lacking for k in range(2)])
            self.assertGreater(src["bytes"], 0)
            digests.add(src["digest"])
            self.assertEqual(len(d["recipes"]), 3)
            self.assertEqual(all(x["module"] is None for x in d["exported"]), node == lacking)
            # The received files lay in a private directory under TMPDIR, removed afterwards.
            self.assertEqual(os.listdir(tmpdirs[node]), [], f"node {node} left files behind")
        self.assertEqual(len(digests), 1)

    @unittest.skipUnless(th.have_netns(), "needs root and ip netns for two namespace 'nodes'")
    def test_two_hosts_one_with_recipes_name_the_peer(self):
        # Two network namespaces joined by a veth link stand for two machines: every peer
        # binds an address the other node reaches (loopback would not), and node 1, without
        # the recipe directory, receives node 0's over the link.
        rng = random.Random(seed_for("recipe hosts"))
        peer = rng.randrange(4)
        spec = f"sdc:peer={peer},tensor={rng.choice(QUANTITIES)},word={rng.randrange(1 << 16)},bit={rng.randrange(64)}"
        print(f"recipe hosts: 2 namespaces, node 1 without recipes, {spec}", flush=True)
        with th.TwoNetnsNodes() as nodes:
            store = f"tcp://{nodes.addrs[0]}:{free_port()}"
            prefixes = [["ip", "netns", "exec", n] for n in nodes.ns]
            absent = os.path.join(self.tmp, f"absent-{rng.randrange(1 << 30)}")
            outs = self.two_nodes([self.recipes, absent], ["--inject", spec], store, prefixes=prefixes)
        for node, (rc, out, err) in enumerate(outs):
            self.assertEqual(rc, EXIT["attributed"], f"node {node}: {err[-2000:]}")
            doc = json.loads(out)
            self.assertEqual(sorted({(s["rank"], s["reason"]) for s in doc["suspects"] if s["reason"] == "sdc"}), [(peer, "sdc")])
            self.assertEqual(doc["details"]["recipe_source"]["origin"], "received" if node == 1 else "local")

    def test_tampered_copy_on_a_node_is_bad_input_never_an_sdc(self):
        rng = random.Random(seed_for("recipe tampered"))
        copy = os.path.join(self.tmp, f"copy-{rng.randrange(1 << 30)}")
        shutil.copytree(self.recipes, copy)
        recipe = rng.choice(sorted(os.listdir(copy)))
        name = rng.choice(["module.pt", "params.pack", "input.pack"])
        path = os.path.join(copy, recipe, name)
        at = rng.randrange(os.path.getsize(path))
        with open(path, "r+b") as f:
            f.seek(at)
            b = f.read(1)
            f.seek(at)
            f.write(bytes([b[0] ^ (1 << rng.randrange(8))]))
        print(f"recipe tampered: node 1's {recipe}/{name} byte {at} flipped", flush=True)
        outs = self.two_nodes([self.recipes, copy], [], self.store_uri(rng, rng.choice(["file", "tcp"])))
        for node, (rc, out, err) in enumerate(outs):
            self.assertEqual(rc, EXIT["bad_input"], f"node {node}: {err[-2000:]}")
            self.assertEqual(out, "", "no verdict, so never an SDC")
            self.assertIn("scout replay: error:", err)
            self.assertIn("node 1", err)
            if name == "module.pt":  # passes the directory's own checks: differs from the source's
                self.assertIn(f"{recipe}/module.pt differs", err)

    def test_no_node_with_recipes_is_a_clear_error(self):
        rng = random.Random(seed_for("recipe nowhere"))
        absent = os.path.join(self.tmp, "nowhere")
        outs = self.two_nodes([absent, absent], [], self.store_uri(rng, rng.choice(["file", "tcp"])))
        for node, (rc, out, err) in enumerate(outs):
            self.assertEqual(rc, EXIT["bad_input"], f"node {node}: {err[-2000:]}")
            self.assertIn("no node holds a recipe", err)
            self.assertEqual(out, "")

    def test_bad_recipe_directories_are_clean_errors(self):
        empty = tempfile.mkdtemp(prefix="scout-norecipe-", dir=self.tmp)
        self.assertCleanError(run(["replay", "--recipe", empty, "--job", "jr"]), "bad_input", "replay")
        self.assertCleanError(run(["replay", "--recipe", os.path.join(self.tmp, "absent"), "--job", "jr"]), "bad_input", "replay")
        self.assertCleanError(run(["replay", "--recipe", self.recipes]), "usage", "replay")
        self.assertCleanError(self.replay(["--nodes", "2"]), "usage", "replay")
        # A recipe damaged after export is bad input, never an SDC.
        damaged = os.path.join(self.tmp, "damaged")
        if not os.path.exists(damaged):
            src = os.path.join(self.recipes, sorted(os.listdir(self.recipes))[0])
            shutil.copytree(src, os.path.join(damaged, "r"))
            with open(os.path.join(damaged, "r", "params.pack"), "r+b") as f:
                f.seek(-3, 2)
                b = f.read(1)
                f.seek(-3, 2)
                f.write(bytes([b[0] ^ 0x10]))
        self.assertCleanError(run(["replay", "--recipe", damaged, "--job", "jr"]), "bad_input", "replay")


if __name__ == "__main__":
    unittest.main()
