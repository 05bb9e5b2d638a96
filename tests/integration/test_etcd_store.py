"""--store etcd://: the observers' rendezvous on a real etcd v3 cluster that the test starts on
loopback (random free ports, a temporary data directory; every member killed when a test ends, however).

The store (lib/transport/etcd_store.cpp) through a client that opens it as an observer does
(tests/tools/store_client.cpp): set/get/check/add from several processes, get timing out within
its timeout, cleanup removing only this process's keys; and it keeps working, within its
timeouts, through the other two members of a 3-member cluster whose leader was SIGKILLed or one
of whose members is SIGSTOPped (accepts connections, never answers). Then real probes: three
`scout probe-hang` observers meeting through etcd:// while one member is dead. Skips where etcd
is not installed.
"""
import json
import os
import random
import subprocess
import sys
import time
import unittest

import etcd_cluster
from scoutlib import EXIT, SCOUT_BIN, ScoutTestCase, run, validate

HERE = os.path.dirname(os.path.abspath(__file__))
CLIENT = os.path.join(os.environ.get("SCOUT_BUILD_DIR", os.path.join(HERE, "..", "..", "build")), "tests",
                      "scout_test_store_client")
WHY_NOT = etcd_cluster.available()


def client(uri, timeout_ms, *ops, wait=60):
    """Runs the store client; returns (exit code, [one dict per operation], stderr)."""
    p = subprocess.run([CLIENT, uri, str(timeout_ms), *ops], capture_output=True, text=True, timeout=wait,
                       stdin=subprocess.DEVNULL)
    return p.returncode, [json.loads(line) for line in p.stdout.splitlines()], p.stderr


class EtcdUris(ScoutTestCase):
    """Bad etcd:// URIs are usage errors that say what is wrong (no etcd needed)."""

    def test_bad_uris(self):
        for uri, says in [("etcd://", "expected etcd://HOST:PORT"), ("etcd://h1", "has no port"),
                          ("etcd://h1:2379,", "an address is empty"), ("etcd://h1:0", "port must be"),
                          ("etcd://h1:2379,h2:x", "port must be"), ("etcd://h1:2379,h1:2379", "listed twice")]:
            r = run(["probe-hang", "--job", "j", "--nodes", "2", "--node-index", "0", "--store", uri])
            self.assertCleanError(r, "usage", "probe-hang")
            self.assertIn(says, r.stderr, uri)
        r = run(["probe-hang", "--job", "j", "--nodes", "2", "--node-index", "0", "--store-host", "--store",
                 "etcd://h1:2379"])
        self.assertCleanError(r, "usage", "probe-hang")


@unittest.skipIf(WHY_NOT, WHY_NOT)
class EtcdStore(ScoutTestCase):
    """One member: the store's operations."""

    def setUp(self):
        self.cluster = etcd_cluster.EtcdCluster(1).start()
        self.addCleanup(self.cluster.stop)  # runs even when setUp fails later
        self.uri = self.cluster.uri()
        self.ns = f"t{os.getpid()}-{random.randrange(1 << 30)}"

    def test_processes_meet_and_count(self):
        procs = []
        for i in range(4):
            ops = [f"set:{self.ns}/here/{i}=v{i}", f"adds:{self.ns}/n=25"]
            ops += [f"get:{self.ns}/here/{k}" for k in range(4)]
            procs.append(subprocess.Popen([CLIENT, self.uri, "10000", *ops], stdout=subprocess.PIPE,
                                          stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL))
        counted = []
        for i, p in enumerate(procs):
            out, err = p.communicate(timeout=60)
            self.assertEqual(p.returncode, 0, out + err)
            lines = [json.loads(line) for line in out.splitlines()]
            counted += lines[2]["values"]
            self.assertEqual([x["value"] for x in lines[3:]], [f"v{k}" for k in range(4)])
        self.assertEqual(sorted(counted), list(range(1, 101)))  # every add once, none lost
        rc, lines, err = client(self.uri, 5000, f"add:{self.ns}/n=0", f"check:{self.ns}/here/0",
                                f"check:{self.ns}/absent")
        self.assertEqual(rc, 0, err)
        self.assertEqual(lines[1]["values"], [100])
        self.assertTrue(lines[2]["exists"])
        self.assertFalse(lines[3]["exists"])

    def test_get_times_out_cleanly(self):
        rc, lines, err = client(self.uri, 1500, f"get:{self.ns}/never")
        self.assertEqual(rc, 1)
        self.assertFalse(lines[1]["ok"])
        self.assertIn(f"key {self.ns}/never did not appear in the store {self.uri}", lines[1]["error"])
        self.assertGreaterEqual(lines[1]["ms"], 1400)
        self.assertLess(lines[1]["ms"], 2500)

    def test_cleanup_removes_only_own_keys_and_leaves_counters(self):
        rc, _, err = client(self.uri, 5000, f"set:{self.ns}/a=1", f"set:{self.ns}/b=2", f"keep:{self.ns}/b",
                            f"add:{self.ns}/n=3", "cleanup")
        self.assertEqual(rc, 0, err)
        rc, lines, err = client(self.uri, 5000, f"check:{self.ns}/a", f"check:{self.ns}/b", f"add:{self.ns}/n=0")
        self.assertEqual(rc, 0, err)
        self.assertEqual([lines[1]["exists"], lines[2]["exists"], lines[3]["values"]], [False, True, [3]])

    def test_frozen_only_member_bounds_every_call(self):
        self.cluster.freeze(0)
        t = time.monotonic()
        rc, lines, err = client(self.uri, 3000, wait=30)
        self.assertEqual(rc, 1)
        self.assertLess(time.monotonic() - t, 6)
        self.assertIn("no etcd member answered in time", lines[0]["error"])
        self.assertIn(f"127.0.0.1:{self.cluster.client_ports[0]}: no answer", lines[0]["error"])

    def test_no_member_listening_names_every_endpoint(self):
        a, b = etcd_cluster.free_ports(2)
        rc, lines, err = client(f"etcd://127.0.0.1:{a},127.0.0.1:{b}", 1000)
        self.assertEqual(rc, 1)
        for port in (a, b):
            self.assertIn(f"127.0.0.1:{port}: connection refused", lines[0]["error"])
        self.assertLess(lines[0]["ms"], 2000)


@unittest.skipIf(WHY_NOT, WHY_NOT)
class EtcdMemberLoss(ScoutTestCase):
    """Three members: the store works through the other two when one is killed or frozen."""

    def setUp(self):
        self.cluster = etcd_cluster.EtcdCluster(3).start()
        self.addCleanup(self.cluster.stop)
        self.ns = f"t{os.getpid()}-{random.randrange(1 << 30)}"

    def ops_through(self, lost, what):
        """Runs set/get/check/add with the lost member listed first; returns the first call's ms."""
        order = [lost] + [i for i in range(3) if i != lost]
        rc, lines, err = client(self.cluster.uri(order), 8000, f"set:{self.ns}/k=v", f"get:{self.ns}/k",
                                f"check:{self.ns}/k", f"adds:{self.ns}/n=5", f"get:{self.ns}/k")
        self.assertEqual(rc, 0, f"{lines}\n{err}")
        self.assertEqual(lines[2]["value"], "v")
        self.assertEqual(lines[4]["values"], [1, 2, 3, 4, 5])
        ms = [round(x["ms"]) for x in lines]
        print(f"{what}: open/set/get/check/add x5/get took {ms} ms", file=sys.stderr)
        # The lost member costs one request's wait at most, once: the member that answered is asked
        # first afterwards.
        self.assertLess(lines[0]["ms"] + lines[1]["ms"], 8000)
        self.assertLess(lines[5]["ms"], 1000)
        return ms

    def test_leader_killed(self):
        leader = self.cluster.leader()
        self.assertIsNotNone(leader)
        self.cluster.kill(leader)
        self.ops_through(leader, "leader SIGKILLed")

    def test_member_frozen(self):
        leader = self.cluster.leader()
        frozen = leader if leader is not None else 0
        self.cluster.freeze(frozen)
        ms = self.ops_through(frozen, "leader SIGSTOPped")
        self.assertGreaterEqual(ms[0], 1500)  # the frozen member held the first request until it was given up

    def test_follower_frozen_after_open(self):
        leader = self.cluster.leader()
        follower = (leader + 1) % 3 if leader is not None else 1
        order = [follower] + [i for i in range(3) if i != follower]
        # The client opens through the follower, then it freezes while the client waits on a key.
        p = subprocess.Popen([CLIENT, self.cluster.uri(order), "8000", f"get:{self.ns}/late", f"adds:{self.ns}/n=3"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
        time.sleep(1.0)
        self.cluster.freeze(follower)
        rc, _, err = client(self.cluster.uri([leader if leader is not None else 0]), 5000, f"set:{self.ns}/late=x")
        self.assertEqual(rc, 0, err)
        out, err = p.communicate(timeout=30)
        self.assertEqual(p.returncode, 0, out + err)
        lines = [json.loads(line) for line in out.splitlines()]
        self.assertEqual(lines[1]["value"], "x")
        self.assertEqual(lines[2]["values"], [1, 2, 3])


@unittest.skipIf(WHY_NOT, WHY_NOT)
class ObserversMeetOnEtcd(ScoutTestCase):
    """Real probes: three observers meet through etcd:// while one member is dead."""
    WORLD = 6

    def setUp(self):
        seed = random.randrange(1 << 30)
        print(f"etcd probe seed {seed}", file=sys.stderr)
        self.job = f"etcd-{os.getpid()}-{seed}"
        self.cluster = etcd_cluster.EtcdCluster(3).start()
        self.addCleanup(self.cluster.stop)  # runs even when writing the records fails
        self.addCleanup(self.remove_records)
        writer = os.path.join(HERE, "trainers", "record_writer.py")
        for r in range(self.WORLD):
            subprocess.run(["/usr/bin/python3", writer, self.job, str(r), str(self.WORLD), "once"], check=True,
                           timeout=60, env=dict(os.environ, SCOUT_ATTEMPT="0"))

    def remove_records(self):
        for name in os.listdir("/dev/shm"):
            if name.startswith(f"scout.{self.job}."):
                os.unlink(os.path.join("/dev/shm", name))

    def probe(self, uri, node, env=None):
        cmd = [SCOUT_BIN, "probe-hang", "--job", self.job, "--threshold", "1", "--timeout", "15", "--format", "json",
               "--log-level", "info", "--nodes", "3", "--node-index", str(node), "--local-ranks",
               f"{2 * node}-{2 * node + 1}", "--store", uri]
        return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL,
                                env=dict(os.environ, SCOUT_AUTOPROBE="0", **(env or {})))

    def meet(self, lose, how):
        """Loses the leader by `lose` (kill or freeze), then runs three observers; they must all meet."""
        leader = self.cluster.leader()
        self.assertIsNotNone(leader)
        lose(leader)
        # The lost member stays listed, first: every observer asks it first and must move on.
        uri = self.cluster.uri([leader] + [i for i in range(3) if i != leader])
        t = time.monotonic()
        procs = [self.probe(uri, i) for i in range(3)]
        docs = []
        for p in procs:
            out, err = p.communicate(timeout=90)
            self.assertIn(p.returncode, (EXIT["healthy"], EXIT["attributed"], EXIT["inconclusive"]), err)
            doc = json.loads(out)
            validate(doc)
            self.assertEqual(doc["details"]["observers"]["reached"], [0, 1, 2], err)
            self.assertEqual(doc["details"]["transport"]["store"], uri)
            docs.append(doc)
        print(f"three observers met through etcd with member m{leader} {how} in {time.monotonic() - t:.1f} s",
              file=sys.stderr)
        self.assertEqual(len({(d["status"], json.dumps(d["suspects"], sort_keys=True)) for d in docs}), 1)

    def test_three_observers_meet_with_the_leader_dead(self):
        self.meet(self.cluster.kill, "SIGKILLed")

    def test_three_observers_meet_with_the_leader_frozen(self):
        self.meet(self.cluster.freeze, "SIGSTOPped")

if __name__ == "__main__":
    unittest.main()
