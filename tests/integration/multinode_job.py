"""A real multi-node torch 2.x job on namespace nodes (netns_nodes.NetnsNodes):
one torchrun per node (`--nnodes N --nproc-per-node R --rdzv-backend c10d
--rdzv-endpoint node0:PORT`, node 0's agent hosts the rendezvous TCPStore),
every worker under `python -m scout_publisher` (trainers/straggler_trainer.py,
gloo on CPU over the nodes' veths), and one scout observer per node inside
that node (its own /dev/shm, address and host name), all joining tcp://node0:PORT
(torchrun's store while it lives; observer 0 hosts one there once it is gone).

    with NetnsNodes(3) as nodes, MultinodeJob(nodes, ranks_per_node=2) as job:
        job.start(); job.wait_training()
        nodes.freeze(1); job.wait_silent()
        docs = job.observe("probe-hang", ["--threshold", "2"])   # [(rc, verdict JSON or None, stderr)] per node

Faults and their expected culprit are in FAULTS / judge(): the verdicts are
compared with the culprit node only after they are made.
"""
import concurrent.futures
import json
import os
import random
import subprocess
import sys
import time

import trainer_harness as th

HERE = os.path.dirname(os.path.abspath(__file__))
TRAINER = os.path.join(HERE, "trainers", "straggler_trainer.py")

# hang faults (probe-hang) and the link straggler (straggler)
# kill: the node's job processes killed, its observer alive; power-off: every process of the node killed, its
# observer never runs (a machine that lost power); freeze-link: the node frozen and its link down.
FAULTS = ("link-down", "freeze", "kill", "power-off", "freeze-link", "rate-limit")
CONTROLS = ("none-hang", "none-straggler")  # no fault: probe-hang / straggler on a clean job name no one
STORES = ("torchrun", "separate", "etcd", "etcd-v2")  # the observers' store (MultinodeJob's observer_store)


class MultinodeJob:
    def __init__(self, nodes, ranks_per_node=2, tp=1, trainer_args=(), job=None, token=None, pg_timeout=600,
                 observer_store="torchrun"):
        """observer_store "torchrun": the observers join torchrun's store on node 0; "separate": the last node
        of `nodes` runs no job and hosts a plain TCPStore for them (a control-plane store); "etcd": a 3-member
        etcd cluster on nodes 0-2 (Debian's etcd-server), each member a process of its node's job (killed and
        frozen with it), that the observers join with --store etcd://; "etcd-v2": that cluster, and torchrun
        rendezvouses on it too (--rdzv-backend etcd-v2, each node's agent on its own member, nodes past the third
        on member k % 3), so that no node hosts a store the job or the observers need."""
        if observer_store not in STORES:
            raise ValueError(observer_store)
        self.python = th.require_python()
        self.nodes, self.r, self.tp = nodes, ranks_per_node, tp
        self.observer_store = observer_store
        self.jn = nodes.n - 1 if observer_store == "separate" else nodes.n  # the job's nodes
        self.world = self.jn * ranks_per_node
        self.store_proc = None
        self.job = job or f"mn-{nodes.tag}-{random.SystemRandom().randrange(1 << 20):x}"
        self.token = token or f"{random.SystemRandom().randrange(1 << 64):016x}"
        self.port = 29400 + random.SystemRandom().randrange(500)  # each node's namespace is fresh: nothing holds it
        self.trainer_args, self.pg_timeout = list(trainer_args), pg_timeout
        self.procs, self.logs, self.etcd_procs = [], [], []
        self.logdir = nodes.tmp
        print(f"multinode_job: job={self.job} nodes={self.jn} ranks_per_node={ranks_per_node} tp={tp} "
              f"rendezvous={self.rendezvous_text} observers' store={self.observer_store_uri}",
              file=sys.stderr, flush=True)

    @property
    def etcd_members(self):
        return min(3, self.jn)

    @property
    def on_etcd(self):
        return self.observer_store in ("etcd", "etcd-v2")

    @property
    def rendezvous_text(self):
        if self.observer_store == "etcd-v2":
            return f"etcd-v2 on etcd://...:{self.port + 2}"
        return f"tcp://{self.store_host}:{self.port}"

    def rendezvous_args(self, k):
        """torchrun's rendezvous flags on node k."""
        if self.observer_store == "etcd-v2":
            member = self.nodes.hostnames[k % self.etcd_members]
            return ["--rdzv-backend", "etcd-v2", "--rdzv-endpoint", f"{member}:{self.port + 2}"]
        return ["--rdzv-backend", "c10d", "--rdzv-endpoint", f"{self.store_host}:{self.port}"]

    @property
    def observer_store_uri(self):
        if self.on_etcd:
            return "etcd://" + ",".join(f"{self.nodes.hostnames[k]}:{self.port + 2}" for k in range(self.etcd_members))
        if self.observer_store == "separate":
            return f"tcp://{self.nodes.hostnames[self.jn]}:{self.port + 1}"
        return f"tcp://{self.store_host}:{self.port}"

    @property
    def store_host(self):
        return self.nodes.hostnames[0]

    def env(self):
        env = dict(os.environ)
        for k in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
            env.pop(k, None)
        env.update({"SCOUT_JOB": self.job, "SCOUT_PUBLISHER_LIB": th.PUBLISHER_LIB, "OMP_NUM_THREADS": "1",
                    "PYTHONUNBUFFERED": "1", "GLOO_SOCKET_IFNAME": "scv0", "SCOUT_JOB_TOKEN": self.token,
                    # the observers here are the test's own (the automatic probe has test_autoprobe)
                    "SCOUT_AUTOPROBE": "0",
                    # torchrun's agents make torchelastic_* directories under it: a killed agent leaves them, and
                    # this one is removed with the nodes
                    "TMPDIR": self.logdir,
                    "PYTHONPATH": os.pathsep.join([th.PYTHON_DIR] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH")
                                                                      else []))})
        if self.tp > 1:
            env["SCOUT_MESH"] = f"dp={self.world // self.tp},tp={self.tp}"
        return env

    def start_etcd(self, timeout=60):
        """One etcd member per node of nodes 0-2, client port PORT+2, peer port PORT+3; waits until every member
        answers /health."""
        etcd = "/usr/bin/etcd"
        cluster = ",".join(f"m{k}=http://{self.nodes.hostnames[k]}:{self.port + 3}" for k in range(self.etcd_members))
        for k in range(self.etcd_members):
            h = self.nodes.hostnames[k]
            cmd = [etcd, "--name", f"m{k}", "--data-dir", os.path.join(self.logdir, f"etcd{k}"),
                   "--listen-client-urls", f"http://0.0.0.0:{self.port + 2}",
                   "--advertise-client-urls", f"http://{h}:{self.port + 2}",
                   "--listen-peer-urls", f"http://0.0.0.0:{self.port + 3}",
                   "--initial-advertise-peer-urls", f"http://{h}:{self.port + 3}",
                   "--initial-cluster", cluster, "--initial-cluster-state", "new",
                   "--initial-cluster-token", self.job, "--heartbeat-interval", "100", "--election-timeout", "1000"]
            if self.observer_store == "etcd-v2":
                cmd += ["--enable-v2=true"]  # torchrun's etcd-v2 rendezvous speaks etcd's v2 API
            log = open(os.path.join(self.logdir, f"etcd{k}.log"), "w")
            self.logs.append(log)
            self.etcd_procs.append(self.nodes.popen(k, cmd, job=True, stdout=log, stderr=subprocess.STDOUT))
        probe = ("import sys, urllib.request, json; "
                 "d = json.loads(urllib.request.urlopen(sys.argv[1], timeout=1).read()); "
                 "sys.exit(0 if d.get('health') in (True, 'true') else 1)")
        deadline = time.monotonic() + timeout
        for k in range(self.etcd_members):
            url = f"http://{self.nodes.hostnames[k]}:{self.port + 2}/health"
            while True:
                if self.nodes.run(k, [self.python, "-c", probe, url], timeout=10).returncode == 0:
                    break
                if time.monotonic() > deadline:
                    raise RuntimeError(f"etcd member {k} not healthy in {timeout} s; logs in {self.logdir}")
                time.sleep(0.3)

    def start(self):
        if self.on_etcd:
            self.start_etcd()
        if self.observer_store == "separate":
            serve = ("import sys, time, torch.distributed as d; s = d.TCPStore('0.0.0.0', int(sys.argv[1]), "
                     "is_master=True, wait_for_workers=False); print('ready', flush=True); time.sleep(1e8)")
            self.store_proc = self.nodes.popen(self.jn, [self.python, "-c", serve, str(self.port + 1)], job=True,
                                               stdout=subprocess.PIPE, text=True)
            if self.store_proc.stdout.readline().strip() != "ready":
                raise RuntimeError("the observers' store did not start")
        for k in range(self.jn):
            cmd = [self.python, "-m", "torch.distributed.run", "--nnodes", str(self.jn), "--nproc-per-node",
                   str(self.r), *self.rendezvous_args(k), "--rdzv-id", self.job, "--rdzv-conf", "join_timeout=300", "--max-restarts", "0",
                   "--monitor-interval", "1", "-m", "scout_publisher", TRAINER, "--tp", str(self.tp),
                   "--pg-timeout", str(self.pg_timeout), *self.trainer_args]
            log = open(os.path.join(self.logdir, f"torchrun{k}.log"), "w")
            self.logs.append(log)
            self.procs.append(self.nodes.popen(k, cmd, job=True, env=self.env(), stdout=log,
                                               stderr=subprocess.STDOUT))
        return self

    def log(self, k):
        with open(os.path.join(self.logdir, f"torchrun{k}.log")) as f:
            return f.read()

    def records(self, k):
        """Node k's records of the job (`scout records list` inside node k): rank -> entry."""
        p = self.nodes.run(k, [th.SCOUT_BIN, "records", "list", "--job", self.job, "--format", "json"], timeout=30)
        if p.returncode != 0:
            raise RuntimeError(f"node {k}: scout records list failed ({p.returncode}): {p.stderr}")
        out = {}
        for r in json.loads(p.stdout)["details"]["records"]:
            if r["record"] is not None:
                out[r["record"]["rank"]] = r
        return out

    def all_records(self):
        return [self.records(k) for k in range(self.jn)]

    def rank_nodes(self):
        """rank -> node index, from where each record lives."""
        out = {}
        for k, recs in enumerate(self.all_records()):
            for rank in recs:
                out[rank] = k
        return out

    def wait_training(self, min_step=3, timeout=300):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for k, p in enumerate(self.procs):
                if p.poll() is not None:
                    raise RuntimeError(f"node {k}: torchrun exited {p.returncode}:\n{self.log(k)[-3000:]}")
            recs = self.all_records()
            if all(len(r) == self.r for r in recs) and min(x["record"]["step"] for r in recs for x in r.values()) >= min_step:
                return recs
            time.sleep(0.5)
        raise TimeoutError(f"job {self.job} did not train in {timeout} s; logs in {self.logdir}")

    def wait_silent(self, quiet_s=3.0, timeout=120, nodes=None):
        """Until no record of `nodes` (default all) advanced for quiet_s seconds."""
        nodes = range(self.jn) if nodes is None else nodes
        deadline = time.monotonic() + timeout
        last, since = None, time.monotonic()
        while time.monotonic() < deadline:
            sig = []
            for k in nodes:
                try:
                    sig.append(tuple(sorted((rank, r["record"]["step"], r["record"]["op_seq"],
                                             r["record"]["collective_state"]) for rank, r in self.records(k).items())))
                except (RuntimeError, subprocess.TimeoutExpired):
                    sig.append(None)  # a frozen node's records are still readable; this is a scout failure
            if sig != last:
                last, since = sig, time.monotonic()
            elif time.monotonic() - since >= quiet_s:
                return
            time.sleep(0.3)
        raise TimeoutError(f"records of job {self.job} did not go silent in {timeout} s")

    def observe(self, command, args=(), timeout_s=40, nodes=None, trace_dir=None):
        """Runs `scout COMMAND --job J --nodes N --node-index k --store tcp://node0:PORT ARGS` in every node
        at once (with `trace_dir`, also `--trace-out TRACE_DIR/trace-k.json`: /tmp is the host's in every
        node); returns [(rc, verdict JSON or None, stderr)] by node."""
        nodes = list(range(self.jn)) if nodes is None else nodes

        def one(k):
            cmd = [th.SCOUT_BIN, command, "--job", self.job, "--nodes", str(self.jn), "--node-index", str(k),
                   "--store", self.observer_store_uri, "--format", "json", *args]
            if os.environ.get("SCOUT_MN_LOG_LEVEL"):  # e.g. debug: the observers' logs in their stderr
                cmd[1:1] = ["--log-level", os.environ["SCOUT_MN_LOG_LEVEL"]]
            if trace_dir is not None:
                cmd += ["--trace-out", trace_path(trace_dir, k)]
            env = dict(os.environ, SCOUT_JOB_TOKEN=self.token)
            try:
                p = self.nodes.run(k, cmd, timeout=timeout_s + 60, env=env)
            except subprocess.TimeoutExpired:
                return (124, None, f"node {k}: scout {command} ran past {timeout_s + 60} s")
            try:
                doc = json.loads(p.stdout) if p.stdout.strip() else None
            except ValueError:
                doc = None
            return (p.returncode, doc, p.stderr)

        with concurrent.futures.ThreadPoolExecutor(len(nodes)) as ex:
            return list(ex.map(one, nodes))

    def teardown(self):
        for k in range(self.nodes.n):
            if os.path.isdir(self.nodes.freezers[k]):
                self.nodes.thaw(k)
            self.nodes.kill_job(k)
        for p in self.procs + self.etcd_procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                print(f"multinode_job: pid {p.pid} ({p.args[0]}) did not end", file=sys.stderr)
        if self.store_proc is not None:
            try:
                self.store_proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                pass
            self.store_proc.stdout.close()
        for log in self.logs:
            log.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.teardown()
        return False


def verdict_key(doc):
    """What observers must agree on: status, and the suspects (rank, node, reason)."""
    if doc is None:
        return None
    sus = sorted((s.get("rank") if s.get("rank") is not None else -1, s.get("node") or "", s.get("reason") or "")
                 for s in doc.get("suspects", []))
    return (doc.get("status"), tuple(sus))


def suspect_nodes(doc, rank_nodes, hostnames):
    """The node indices a verdict names: a suspect rank's node, or a suspect node by host name or by the
    observers' label node<I> (probe-hang names an unreachable observer so); -1 for a name it cannot place."""
    host_index = {h: i for i, h in enumerate(hostnames)}
    where = set()
    for s in doc.get("suspects", []):
        if s.get("rank") is not None and s["rank"] >= 0:
            where.add(rank_nodes.get(s["rank"], -1))
        elif s.get("node"):
            n = s["node"]
            if n in host_index:
                where.add(host_index[n])
            elif n.startswith("node") and n[4:].isdigit() and int(n[4:]) < len(hostnames):
                where.add(int(n[4:]))
            else:
                where.add(-1)
    return where


def alone(doc):
    """Whether a verdict was decided without the store, on its observer's node alone."""
    return bool(doc and doc.get("details", {}).get("transport", {}).get("store_unreachable"))


def judge(results, culprit, rank_nodes, hostnames, fault):
    """Classifies each observer's verdict against the culprit node: 'right' (something named, all on the
    culprit node; for a rate limit with reason communication), 'innocent' (a rank or node elsewhere named),
    'wrong_reason' (the culprit node's ranks named as compute stragglers), 'ranks_only' (a killed node's ranks
    named, not the node: scope rank), 'missed' (nothing named),
    'cut_off' (the culprit's own observer behind its downed link, naming no one: it cannot tell),
    'unavailable' (no verdict); with no fault (CONTROLS) 'clean' or 'innocent'. Returns (classes by observer, agree: every observer with a verdict, the
    cut-off one aside, printed the same status and suspects; one that decided without the store, on its own node
    alone, aside too)."""
    per = []
    for k, (rc, doc, _) in enumerate(results):
        if rc is None:
            per.append("dead")  # the culprit's own observer died with its node (power-off)
            continue
        if doc is None or rc not in (0, 1, 3):
            per.append("unavailable")
            continue
        where = suspect_nodes(doc, rank_nodes, hostnames)
        reasons = {s.get("reason") for s in doc.get("suspects", [])}
        if fault in CONTROLS:
            per.append("innocent" if where else "clean")
        elif fault in ("link-down", "freeze-link") and k == culprit and not where:
            per.append("cut_off")
        elif not where:
            per.append("missed")
        elif where != {culprit}:
            per.append("innocent")
        elif fault == "rate-limit" and reasons - {"communication"}:
            per.append("wrong_reason")
        elif fault in ("kill", "power-off") and doc.get("scope") != "node" and \
                sum(n == culprit for n in rank_nodes.values()) > 1:
            per.append("ranks_only")  # the whole node died: some of its ranks named, the node not (one rank: alike)
        else:
            per.append("right")
    # An observer that could not reach the store decided on its own node alone (store_unreachable): it cannot
    # agree with the others by construction, and its verdict says so; the others must agree.
    keys = {verdict_key(doc) for (rc, doc, _), c in zip(results, per)
            if c not in ("unavailable", "cut_off", "dead") and not alone(doc)}
    return per, len(keys) <= 1


def link_layout(n, r):
    """The tp size under which one node's slow link shows as slow groups of two kinds meeting in that node
    only (None: no such layout for n nodes x r ranks). tp groups are r x tp / r consecutive ranks (whole
    nodes), dp groups take one rank of each tp group: with tp = 3r over n >= 6 nodes (n % 3 == 0) a node's
    ranks are in r of the 3r dp groups (a strict minority, C3) and in one of n / 3 tp groups; with one rank
    a node and tp = 2, two dp groups and n / 2 tp groups (the ratio rule where there are two)."""
    if n >= 6 and n % 3 == 0:
        return 3 * r
    if r == 1 and n >= 4 and n % 2 == 0:
        return 2
    return None


RATES = ("8mbit", "16mbit", "32mbit")  # drawn per run; 64 KiB calls at 32 Mbit/s still take ~16 ms against ~1
GROUP_NUMEL = 16384  # 64 KiB per tp / dp all-reduce: at 1 MB/s its node's groups take 60+ ms a call


def trace_path(trace_dir, k):
    """Node k's observer's --trace-out file under `trace_dir`."""
    return os.path.join(trace_dir, f"trace-{k}.json")


def run_case(nodes_cls, n, r, fault, seed, out=sys.stderr, observer_store="torchrun", culprit=None, rate=None,
             probe_timeout=30, trace_dir=None):
    """One run: n nodes x r ranks, `fault` on a node (and moment) drawn from `seed` (`culprit` overrides the
    node, `rate` the rate limit); every node's observer decides (probe-hang --timeout `probe_timeout`); returns a
    dict (fault, seed, culprit, per-observer classes, agree, verdict summaries, decide_s: from the observers' start
    to the last verdict). With `trace_dir`, a hang probe's observers write their traces to TRACE_DIR/trace-k.json."""
    rng = random.Random(seed)
    drawn = rng.randrange(n)
    culprit = drawn if culprit is None else culprit
    pause = rng.uniform(0.0, 2.0)
    drawn_rate = rng.choice(RATES)
    rate = drawn_rate if rate is None else rate
    tp = 1
    trainer_args = ["--work", "20"]
    if fault in ("rate-limit", "none-straggler"):
        tp = link_layout(n, r)
        if tp is None:
            raise ValueError(f"rate-limit needs a layout: {n} nodes x {r} ranks has none (link_layout)")
        trainer_args += ["--group-numel", str(GROUP_NUMEL)]
    print(f"multinode: fault={fault} seed={seed} nodes={n} ranks_per_node={r} culprit_node={culprit} "
          f"pause={pause:.2f}" + (f" rate={rate}" if fault == "rate-limit" else ""), file=out, flush=True)
    extra = 1 if observer_store == "separate" else 0
    with nodes_cls(n + extra) as nodes, MultinodeJob(nodes, ranks_per_node=r, tp=tp, trainer_args=trainer_args,
                                                     observer_store=observer_store) as job:
        t0 = time.monotonic()
        job.start()
        job.wait_training()
        t_trained = time.monotonic()
        time.sleep(pause)
        if fault == "link-down":
            nodes.link(culprit, "down")
        elif fault == "freeze":
            nodes.freeze(culprit)
        elif fault in ("kill", "power-off"):
            nodes.kill_job(culprit)
        elif fault == "freeze-link":
            nodes.freeze(culprit)
            nodes.link(culprit, "down")
        elif fault == "rate-limit":
            nodes.rate_limit(culprit, rate)
        elif fault not in CONTROLS:
            raise ValueError(fault)
        rank_nodes = job.rank_nodes()
        t_fault = time.monotonic()
        decide_s = None
        if fault in ("rate-limit", "none-straggler"):
            time.sleep(2)
            results = job.observe("straggler", ["--rounds", "3", "--interval", "2", "--timeout", "30"],
                                  timeout_s=60)
        else:
            if fault != "none-hang":  # a clean job keeps training: probed while it runs
                job.wait_silent(quiet_s=3.0)
            alive = [k for k in range(n) if not (fault == "power-off" and k == culprit)]
            started = time.monotonic()
            got = job.observe("probe-hang", ["--threshold", "2", "--timeout", f"{probe_timeout:g}"],
                              timeout_s=probe_timeout, nodes=alive, trace_dir=trace_dir)
            results = [(None, None, "node lost with its observer")] * n
            for k, res in zip(alive, got):
                results[k] = res
            decide_s = time.monotonic() - started
            print(f"multinode: observers done in {decide_s:.1f} s", file=out, flush=True)
        # Where a case's time goes (the suite's longest file is these cases): the job's start until every rank
        # trained, the fault, and from it to the last verdict (the wait for the records to go silent included).
        print(f"multinode: job trained after {t_trained - t0:.1f} s, fault at {t_fault - t0:.1f} s, verdicts "
              f"{time.monotonic() - t_fault:.1f} s after it", file=out, flush=True)
        per, agree = judge(results, culprit, rank_nodes, nodes.hostnames[:n], fault)
        summaries = []
        for k, (rc, doc, err) in enumerate(results):
            if doc is None:
                summaries.append(f"node {k}: exit {rc}, no verdict: {err.strip()[-400:]}")
            else:
                sus = [(s.get("rank"), s.get("node"), s.get("reason")) for s in doc.get("suspects", [])]
                summaries.append(f"node {k}: exit {rc} {doc.get('status')} suspects={sus} :: {doc.get('summary')}" +
                                 (f" || stderr: {' | '.join(err.strip().splitlines()[-3:])[-600:]}"
                                  if per[k] != "right" and err and err.strip() else ""))
        return {"fault": fault, "seed": seed, "nodes": n, "ranks_per_node": r, "culprit": culprit,
                "observer_store": observer_store,
                "per_observer": per, "agree": agree, "summaries": summaries, "rank_nodes": rank_nodes,
                "results": results, "decide_s": decide_s}


def main():
    import argparse
    from netns_nodes import NetnsNodes, unavailable
    p = argparse.ArgumentParser(description="one multi-node fault run on namespace nodes")
    p.add_argument("--nodes", type=int, default=3)
    p.add_argument("--ranks-per-node", type=int, default=2)
    p.add_argument("--fault", choices=FAULTS + CONTROLS, required=True)
    p.add_argument("--seed", type=int)
    p.add_argument("--observer-store", choices=STORES, default="torchrun")
    a = p.parse_args()
    why = unavailable()
    if why:
        print(f"multinode_job: {why}", file=sys.stderr)
        return 5
    seed = a.seed if a.seed is not None else random.SystemRandom().randrange(1 << 31)
    res = run_case(NetnsNodes, a.nodes, a.ranks_per_node, a.fault, seed, observer_store=a.observer_store)
    for line in res["summaries"]:
        print(line)
    print("per observer:", res["per_observer"], "agree:", res["agree"], "culprit:", res["culprit"],
          "rank_nodes:", res["rank_nodes"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
