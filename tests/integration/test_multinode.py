"""Real multi-node torch 2.x jobs on one machine: 3 namespace nodes x 2 ranks
(netns_nodes.NetnsNodes: a network, mount and UTS namespace per node, its own
address on a bridge, its own /dev/shm), one torchrun per node with a c10d
rendezvous on node 0, every worker under `python -m scout_publisher`, gloo
across the nodes' veths, and one scout observer per node inside it, all
joining torchrun's store. A fault on a node drawn at random (seed printed;
SCOUT_TEST_SEED reproduces it): its link down, the node frozen (cgroup v1
freezer), its processes killed (its observer alive, or dead with them: power-off), and its link rate-limited (tc tbf: this
kernel has no netem) on 4 nodes x 1 rank in a dp=2 x tp=2 layout. Every
observer's verdict is compared with the others and with the culprit node:
nothing innocent is ever named.

Skips with the reason where namespaces cannot be made (not root, no
iproute2, no freezer) or the torch 2.x venv is absent. bench/multinode_campaign.py
runs the same cases many times, up to 8 nodes x 4 ranks.
"""
import json
import os
import random
import shutil
import tempfile
import unittest

import etcd_cluster
import multinode_job as mj
import netns_nodes
import trainer_harness as th
from scoutlib import ScoutTestCase

WHY = netns_nodes.unavailable()


def seed_of(name):
    seed = int(os.environ.get("SCOUT_TEST_SEED") or random.SystemRandom().randrange(1 << 31))
    print(f"test_multinode: {name} seed={seed}", flush=True)
    return seed


@unittest.skipIf(WHY is not None, f"namespace nodes unavailable: {WHY}")
class MultiNode(ScoutTestCase):
    @classmethod
    def setUpClass(cls):
        th.require_python()

    def case(self, fault, nodes=3, ranks=2, **kw):
        seed = seed_of(fault)
        res = mj.run_case(netns_nodes.NetnsNodes, nodes, ranks, fault, seed, **kw)
        msg = f"fault {fault} seed {seed} culprit node {res['culprit']} ranks by node {res['rank_nodes']}\n" + \
            "\n".join(res["summaries"])
        print(msg, flush=True)
        self.assertNotIn("innocent", res["per_observer"], msg)
        return res, msg

    def trace_dir(self):
        d = tempfile.mkdtemp(prefix="scout-mn-trace-")
        self.addCleanup(shutil.rmtree, d, ignore_errors=True)
        return d

    def assert_traces(self, results, trace_dir, rank_nodes, msg, silent=()):
        """Every observer that printed a verdict wrote a trace (--trace-out) with a track for every rank of every
        node that gave evidence, named by node and rank, none empty; `silent` nodes marked as such. One that
        decided alone (store unreachable) holds its own node and says so."""
        for k, (rc, doc, err) in enumerate(results):
            if doc is None:
                continue
            where = f"observer {k}: {msg}"
            self.assertTrue(doc["details"]["trace"]["written"], where)
            with open(mj.trace_path(trace_dir, k)) as f:
                trace = json.load(f)
            other = trace["otherData"]
            alone = "decided_alone" in other
            self.assertEqual(alone, bool(doc["details"].get("transport", {}).get("store_unreachable")), where)
            nodes = {k} if alone else set(range(len(results))) - set(silent)
            want = {r for r, n in rank_nodes.items() if n in nodes}
            tracks = {t["rank"]: t for t in other["tracks"]}
            self.assertEqual(set(tracks), want, where)
            names = {e["tid"]: e["args"]["name"] for e in trace["traceEvents"] if e.get("name") == "thread_name"}
            with_slices = {e["tid"] for e in trace["traceEvents"] if e["ph"] == "X"}
            for r in want:
                self.assertEqual(tracks[r]["node"], rank_nodes[r], where)
                self.assertTrue(names[r].startswith(f"rank {r} (node {rank_nodes[r]}"), f"{names[r]}; {where}")
                self.assertIn(r, with_slices, f"rank {r}'s track is empty; {where}")
            if not alone:
                self.assertEqual(sorted(other["silent_nodes"]), sorted(silent), where)
                marks = {e["name"] for e in trace["traceEvents"] if e["ph"] == "i"}
                for n in silent:
                    self.assertIn(f"node {n}: no evidence (observer silent)", marks, where)

    def assert_store_host_gone(self, res, msg, why):
        """Node 0 hosts torchrun's store: frozen, or behind a downed link, no observer can meet there. Each one
        says why within its timeout, as an error (exit 5) or in its verdict's notes (before: a frozen store
        host held every observer in a TCPStore call past any timeout)."""
        for k, (rc, doc, err) in enumerate(res["results"]):
            if k == 0 and why == "cannot reach":
                continue  # node 0 itself reaches its own store, but no peer
            if rc is None:
                continue  # node 0's observer died with it
            if doc is None:
                # No store, no other observer: one line and exit 5 (unavailable), saying why
                # (test_observer_errors), never a verdict naming every other node unreachable.
                self.assertEqual(rc, 5, f"observer {k} printed no verdict: {msg}")
                self.assertIn(why, err, f"observer {k}: {msg}")
                self.assertEqual(len([l for l in err.splitlines() if "error:" in l]), 1, f"observer {k}: {msg}")
            else:
                notes = " ".join(doc["details"].get("transport", {}).get("notes", []))
                self.assertIn(why, notes, f"observer {k}: {msg}")

    def test_frozen_node_is_named_by_every_observer(self):
        res, msg = self.case("freeze")
        if res["culprit"] == 0:  # the frozen agent holds the store's socket: it accepts and never answers
            self.assert_store_host_gone(res, msg, "answered neither")
            return
        self.assertEqual(res["per_observer"], ["right"] * 3, msg)
        self.assertTrue(res["agree"], msg)

    def test_node_behind_a_downed_link_is_named_unreachable(self):
        res, msg = self.case("link-down")
        if res["culprit"] == 0:
            self.assert_store_host_gone(res, msg, "cannot reach")
            return
        for k, c in enumerate(res["per_observer"]):
            if k == res["culprit"]:
                # Behind its own downed link the culprit's observer cannot reach the store: an error
                # (exit 5, "cannot reach the store") or, if it got there before the link went down,
                # a verdict that names no one. Never a verdict naming an innocent node.
                self.assertIn(c, ("cut_off", "unavailable"), msg)
            else:
                self.assertEqual(c, "right", msg)
        self.assertTrue(res["agree"], msg)

    def test_killed_node_is_named_by_every_observer(self):
        # The node's processes killed at once (its observer alive): its ranks died with nothing in their records,
        # before every other rank recorded its failed call; every observer names that node (first_failed_node).
        # Every observer writes its trace (--trace-out): every node's ranks.
        trace_dir = self.trace_dir()
        res, msg = self.case("kill", trace_dir=trace_dir)
        self.assertEqual(res["per_observer"], ["right"] * 3, msg)
        self.assertTrue(res["agree"], msg)
        self.assert_traces(res["results"], trace_dir, res["rank_nodes"], msg)

    def test_node_lost_with_its_observer_is_named(self):
        # Every process of the node killed, its observer too (a machine that lost power): the others name it
        # (lost_node). Where it hosted torchrun's store, no observer can meet there: each says so.
        # Every observer's trace holds the ranks of the nodes that answered and marks the lost one silent.
        trace_dir = self.trace_dir()
        res, msg = self.case("power-off", trace_dir=trace_dir)
        if res["culprit"] == 0:
            self.assert_store_host_gone(res, msg, "cannot reach")
            return
        for k, c in enumerate(res["per_observer"]):
            self.assertEqual(c, "dead" if k == res["culprit"] else "right", msg)
        self.assertTrue(res["agree"], msg)
        self.assert_traces(res["results"], trace_dir, res["rank_nodes"], msg, silent=[res["culprit"]])

    @unittest.skipIf(etcd_cluster.available(), f"etcd unavailable: {etcd_cluster.available()}")
    def test_store_host_lost_observers_meet_on_etcd(self):
        # Node 0 hosts the job's store (its rank 0's TCPStore) and one of 3 etcd members, on which torchrun
        # rendezvouses too (--rdzv-backend etcd-v2); it loses power with its observer. The other observers meet
        # on the 2 etcd members left and name node 0 (lost_node), alike. (Observers on etcd beside torchrun's
        # c10d store: bench/multinode_campaign.py --observer-store etcd.)
        res, msg = self.case("power-off", observer_store="etcd-v2", culprit=0)
        self.assertEqual(res["per_observer"], ["dead", "right", "right"], msg)
        self.assertTrue(res["agree"], msg)

    # A rate limit named an innocent rank at load 20-25 (seed 31001, and 31002 at load 14): the rounds ran 0.2 s
    # apart after a slow join to the store (the link measure had too few calls), and the slow link's tp partner,
    # blocked sending into it between calls, was named for compute (off_cpu). Both fixed (lib/straggler); at
    # 32 Mbit/s under load 12 one run of 7 was still missed (never an innocent): the suite runs 8 Mbit/s.
    def test_rate_limited_link_is_a_communication_problem_of_its_node(self):
        res, msg = self.case("rate-limit", nodes=4, ranks=1, rate="8mbit")
        self.assertEqual(res["per_observer"], ["right"] * 4, msg)
        self.assertTrue(res["agree"], msg)


if __name__ == "__main__":
    unittest.main()
