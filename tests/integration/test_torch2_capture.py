"""torch 2.x: every collective of a real job is in the records, for each path
(eager forms incl. group_src and point-to-point, DDP's built-in C++
all-reduce, FSDP2, HSDP, DTensor TP, a pipeline schedule, a compiled model),
with no change to the training loop and no SCOUT_MESH: per rank, the counts
per kind scout published equal those torch's Flight Recorder saw in the same
run; coordinates come from the job's DeviceMesh; a compiled model has the
same graphs and graph breaks with and without the publisher. Also scout's two
LibTorch modules (--version, the tcp:// store of a torch 2.x process).

Skips with the reason when the torch 2.x venv ($SCOUT_VENV, default
<repo>/.venv) is absent.
"""
import contextlib
import glob
import json
import os
import shutil
import subprocess
import tempfile
import unittest

from scoutlib import EXIT, SCOUT_BIN, ScoutTestCase, run
import trainer_harness as th

TRAINER2 = os.path.join(th.HERE, "trainers", "torch2_trainer.py")
MODULE = os.path.join(th.BUILD_DIR, "bin", "libscout_torch.so")
HOOKS = os.path.join(th.BUILD_DIR, "lib", "libscout_torch_hooks.so")


def run_mode(mode, world=4, steps=3, publisher="call", env=None):
    """Runs torch2_trainer --mode MODE to the end; returns the per-rank output documents."""
    out = tempfile.mkdtemp(prefix="scout-t2-")
    try:
        extra = {"TORCH_FR_BUFFER_SIZE": "20000"}
        extra.update(env or {})
        with th.TrainerJob(world=world, steps=steps, trainer=TRAINER2, publisher=publisher,
                           trainer_args=["--mode", mode, "--out", os.path.join(out, "r")], extra_env=extra) as job:
            job.start()
            codes = job.wait_exit(timeout=400)
            logs = "\n".join(job.log(r)[-3000:] for r in range(world))
            if codes != [0] * world:
                raise AssertionError(f"{mode}: return codes {codes}\n{logs}")
            docs = []
            for r in range(world):
                with open(os.path.join(out, f"r.{r}.json")) as f:
                    docs.append(json.load(f))
            recs = job.records() if publisher != "off" else {}
            return docs, recs
    finally:
        shutil.rmtree(out, ignore_errors=True)


KINDS = ("all_reduce", "all_gather", "all_gather_into_tensor", "reduce_scatter", "reduce_scatter_tensor", "all_to_all",
         "all_to_all_single", "broadcast", "reduce", "gather", "scatter", "barrier", "send", "recv")


# gloo's Flight Recorder names an op by how gloo runs it (torch 2.15):
# reduce_scatter_tensor as all_reduce, all_gather_into_tensor as all_gather,
# all_to_all_single as all_to_all; a coalesced batch is one entry (as in
# scout's record). It records no point-to-point op; for those the eager
# trainer counts what it issued, and the pipeline's sends/recvs (no reference)
# are checked for presence only.
AS_FR = {"reduce_scatter_tensor": "all_reduce", "all_gather_into_tensor": "all_gather", "all_to_all_single": "all_to_all"}


def reference(d):
    """(scout's counts in FR's names, the reference counts) of one rank, by kind."""
    scout = {}
    for k, v in d["scout"].items():
        if k in KINDS:
            k = AS_FR.get(k, k)
            scout[k] = scout.get(k, 0) + v
    ref = dict(d["fr"])
    for k, v in d.get("issued", {}).items():
        ref.setdefault(k, v)
    return scout, ref


class Capture(ScoutTestCase):
    @classmethod
    def setUpClass(cls):
        th.require_python()
        if not os.path.exists(HOOKS):
            raise unittest.SkipTest(f"{HOOKS} not built (no torch 2.x venv at configure time)")

    def check(self, mode, world=4, coords_from=None):
        docs, recs = run_mode(mode, world=world)
        for d in docs:
            msg = (f"{mode} rank {d['rank']}: scout {d['scout']} fr {d['fr']} commdebugmode {d.get('cdm')} "
                   f"(FR names unknown to the test: {d['fr_unknown']})")
            print(msg)
            self.assertEqual(d["capture"], "native", msg)
            self.assertEqual(d["fr_unknown"], {}, msg)
            scout, ref = reference(d)
            if mode == "pp":
                for k in ("send", "recv"):
                    scout.pop(k, None)
            self.assertEqual(scout, ref, msg)
            self.assertGreater(sum(scout.values()), 0, msg)
            self.assertEqual(d["scout"]["failed"], 0, msg)
            self.assertEqual(d["scout"]["hook_errors"], 0, msg)
            if coords_from:
                self.assertEqual(d["coords_source"], coords_from, msg)
        return docs, recs

    def test_eager_forms(self):
        docs, recs = self.check("eager")
        for d in docs:
            for k in ("send", "recv", "all_to_all_single", "reduce_scatter_tensor", "barrier"):
                self.assertIn(k, d["scout"], d)
            # gloo's send and recv Works have no future: their exits come from the watcher once the
            # trainer's wait() returned, none is left unpublished.
            self.assertGreaterEqual(d["scout"].get("exits_waited", 0), d["scout"]["send"] + d["scout"]["recv"], d)
            self.assertEqual(d["scout"]["exits_at_issue"], 0, d)
            # broadcast(src=None, group_src=1, group=new_group([0, 1])): published on the group's ranks
            self.assertEqual("broadcast" in d["scout"], d["rank"] in (0, 1), d)
        # Every rank ended outside any call: the first send or recv no longer leaves it "inside" for good.
        self.assertEqual(sorted(recs), list(range(len(docs))))
        for r, rec in recs.items():
            self.assertEqual(rec["record"]["collective_state"], "done", rec)
            # Each exit says what its time is: sends and recvs seen completed after wait(), the others
            # completed by the backend (or, gloo's reduce_scatter_tensor, closed by a later call).
            for e in rec["record"]["recent"]:
                if e["exit_ns"] is None:
                    continue
                want = ("waited",) if e["type"] in ("send", "recv") else ("completed", "waited", "ordered")
                self.assertIn(e.get("exit_kind"), want, e)

    def test_ddp_builtin_allreduce_without_a_comm_hook(self):
        docs, _ = self.check("ddp", world=2)
        for d in docs:
            # DDP's initial parameter/buffer broadcast and per-step bucket all-reduces, through its C++ Reducer.
            self.assertIn("broadcast", d["scout"], d)
            self.assertGreater(d["scout"]["all_reduce"], 3, d)

    def test_fsdp2(self):
        docs, recs = self.check("fsdp2", coords_from="device_mesh")
        for d in docs:
            self.assertIn("all_gather_into_tensor", d["scout"], d)
            self.assertIn("reduce_scatter_tensor", d["scout"], d)
            self.assertEqual(d["coords"][1], d["rank"], d)  # s = rank on a 1-D shard mesh

    def test_hsdp_2x2(self):
        docs, _ = self.check("hsdp", coords_from="device_mesh")
        for d in docs:
            self.assertEqual(d["coords"][:2], [d["rank"] // 2, d["rank"] % 2], d)

    def test_dtensor_tp_2x2(self):
        docs, recs = self.check("tp", coords_from="device_mesh")
        for d in docs:
            self.assertEqual((d["coords"][0], d["coords"][2]), (d["rank"] // 2, d["rank"] % 2), d)
        # The records carry the coordinates too (what probe-hang's peer groups use).
        for r, rec in recs.items():
            self.assertEqual(rec["record"]["coords"][2], r % 2, rec)

    def test_pipeline_2_stages(self):
        docs, recs = self.check("pp", coords_from="device_mesh")
        for d in docs:
            self.assertEqual((d["coords"][0], d["coords"][3]), (d["rank"] // 2, d["rank"] % 2), d)
            self.assertGreater(d["scout"].get("send", 0) + d["scout"].get("recv", 0), 0, d)
            self.assertEqual(d["scout"]["exits_at_issue"], 0, d)
        # The schedule's sends and recvs were waited: no stage is left "inside" after them.
        for r, rec in recs.items():
            self.assertEqual(rec["record"]["collective_state"], "done", rec)

    def test_compiled_model_has_no_new_graph_breaks(self):
        docs, _ = self.check("compile", world=2)
        ref, _ = run_mode("compile", world=2, publisher="off")
        for rank, (d, r) in enumerate(zip(docs, ref)):
            print(f"compile rank {rank}: unique graphs / graph breaks with the publisher {d['unique_graphs']} / "
                  f"{d['graph_breaks']}, without {r['unique_graphs']} / {r['graph_breaks']}", flush=True)
            self.assertEqual((d["unique_graphs"], d["graph_breaks"]), (r["unique_graphs"], r["graph_breaks"]),
                             f"with publisher {d}, without {r}")
            self.assertGreater(d["unique_graphs"], 0)


class Modules(ScoutTestCase):
    """scout's LibTorch module, built against the venv's torch 2.x."""

    @classmethod
    def setUpClass(cls):
        if not os.path.exists(MODULE):
            raise unittest.SkipTest(f"{MODULE} not built (no torch 2.x venv at configure time)")
        cls.stall = None

    @classmethod
    def tearDownClass(cls):
        if cls.stall is not None:
            cls.stall.teardown()
            cls.stall = None

    @contextlib.contextmanager
    def stalled_job(self):
        """A 4-rank job with one rank stopped before a collective, its peers waiting inside it. One such job serves
        both store tests (each only probes it; a 4-rank job costs ~13 s of CPU to start, measured): started on
        first use, torn down with the class, its peers held by a 600 s gloo timeout; each use first checks that
        it is still that stall (every rank alive, the fault rank stopped)."""
        cls = type(self)
        if cls.stall is None:
            cls.stall = th.start_stall(world=4, steps=5, pg_timeout=600)
        th.assert_still_stalled(self, cls.stall)
        yield cls.stall

    def test_version_names_the_module_and_its_torch(self):
        env = dict(os.environ)
        env.pop("SCOUT_TORCH_MODULE", None)
        r = run(["--version"], fmt=None, env=env)
        self.assertExit(r, "healthy")
        line = [l for l in r.stdout.splitlines() if l.startswith("torch module:")]
        self.assertEqual(len(line), 1, r)
        self.assertIn("built for LibTorch 2.", line[0], r)
        self.assertIn("libscout_torch.so", line[0], r)

    def probe_through(self, port):
        """Two observers of a stopped 4-rank job joining the store at `port`; (rc, out, err) each."""
        with self.stalled_job() as job:
            env = dict(os.environ)
            env.pop("SCOUT_TORCH_MODULE", None)
            procs = [subprocess.Popen([SCOUT_BIN, "probe-hang", "--job", job.job, "--threshold", "1",
                                       "--timeout", "40", "--format", "json", "--nodes", "2", "--node-index",
                                       str(i), "--local-ranks", f"{2 * i}-{2 * i + 1}", "--store",
                                       f"tcp://127.0.0.1:{port}", "--no-store-host"], env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                     for i in range(2)]
            outs = [p.communicate(timeout=120) for p in procs]
            return job, [(p.returncode, out, err) for p, (out, err) in zip(procs, outs)]

    def test_store_hosted_by_a_torch2_process(self):
        """What torchrun runs on torch 2.x (a libuv TCPStore server): the observers meet through it and agree."""
        py = th.require_python()
        port = th.free_port()
        with th.torch_store_host(port, "s.set('from-torch', 'hello')\n"
                                    "s.wait(['scout-done'], datetime.timedelta(seconds=900))\n") as host:
            job, results = self.probe_through(port)
            for rc, out, err in results:
                self.assertEqual(rc, EXIT["attributed"], f"seed {job.seed}\n{out}\n{err}")
                doc = json.loads(out)
                self.assertEqual([s["rank"] for s in doc["suspects"]], [job.fault_rank], doc)
                self.assertFalse(doc["details"]["transport"]["store_hosted_here"])
                self.assertEqual(doc["details"]["unreachable"], [], doc)
            probe = subprocess.run([py, "-c", (
                "import datetime, torch.distributed as d\n"
                f"s = d.TCPStore('127.0.0.1', {port}, is_master=False, timeout=datetime.timedelta(seconds=30))\n"
                "s.set('scout-done', '1')\n")], timeout=120)
            self.assertEqual(probe.returncode, 0)
            self.assertEqual(host.wait(timeout=60), 0)

    def test_store_that_goes_away_after_an_observer_joined_is_hosted_again(self):
        """torchrun's agent exits with its store seconds after a node's loss, after observers joined it: observer 0
        hosts it again at the same address, observer 1 (started after it went away) meets it there, and both name
        the stopped rank."""
        port = th.free_port()
        # Observer 0's first keys: its presence, then its gather's.
        with self.stalled_job() as job:
            results = th.observers_across_a_lost_store(
                self, port, 2, lambda i: ["probe-hang", "--job", job.job, "--threshold", "1", "--timeout", "30",
                                          "--local-ranks", f"{2 * i}-{2 * i + 1}"], job.seed)
        for i, (rc, out, err) in enumerate(results):
            msg = f"seed {job.seed}, observer {i}\n{out}\n{err[-3000:]}"
            self.assertEqual(rc, EXIT["attributed"], msg)
            doc = json.loads(out)
            self.assertEqual([s["rank"] for s in doc["suspects"]], [job.fault_rank], msg)
            self.assertEqual(doc["details"]["unreachable"], [], msg)
            transport = doc["details"]["transport"]
            self.assertEqual(transport.get("store_rejoined", False), i == 0, msg)
            self.assertEqual(transport["store_hosted_here"], i == 0, msg)

if __name__ == "__main__":
    unittest.main()
