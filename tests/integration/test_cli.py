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
