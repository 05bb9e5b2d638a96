"""N "nodes" on one machine, each a Linux network + mount + UTS namespace,
for real multi-node jobs: every node has its own address on a bridge the
harness creates (a veth pair per node), its own host name, its own tmpfs
/dev/shm (so each node's records are its own) and its own /etc/hosts naming
every node. Traffic stays inside the namespaces made here: the bridge has no
address on the host and the subnet (10.231.X.0/24, X random) is used only
inside them.

    with NetnsNodes(3) as nodes:               # needs root; unavailable() says why not
        p = nodes.popen(1, ["scout", "records", "list"], stdout=PIPE)
        nodes.run(1, ["ip", "addr"])           # subprocess.run inside node 1
        nodes.link(2, "down")                  # node 2's veth (inside and on the bridge)
        nodes.rate_limit(2, "4mbit")           # tbf on both ends (netem is absent in this kernel)
        nodes.freeze(2) / nodes.thaw(2)        # cgroup v1 freezer of node 2's job processes
        nodes.kill_job(2)                      # SIGKILL to every process of node 2's job cgroup

A node is a long-lived agent process (`sleep`, pid in `agents`) created by
`nsenter --net=/run/netns/NS unshare --mount --uts --propagation private sh -c '...'`;
later commands enter its namespaces with `nsenter -t PID -m -n -u`. A command
started with job=True first moves itself into the node's freezer cgroup, so
everything it starts (torchrun's workers) can be frozen or killed as one.

Everything is torn down on exit, after an exception and on SIGINT/SIGTERM
(the handlers raise, so the `with` exits); names carry a random tag and a
state file under /run/scout-netns/ names the owner pid, so a later run removes
what a killed run (SIGKILL) left behind (clean_stale()).
"""
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time

PREFIX = "scmn"  # names: scmn<tag>b (bridge), scmn<tag>n<k> (netns), scmn<tag>h<k> / scmn<tag>p<k> (veth)
STATE_DIR = "/run/scout-netns"
FREEZER = "/sys/fs/cgroup/freezer"
IFNAME = "scv0"  # the node's interface, inside its namespace


def _sh(cmd, timeout=30, check=True):
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if check and p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: exit {p.returncode}: {p.stderr.strip()}")
    return p


def _pid_alive(pid):
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


AGENT_SLEEP = "100000000"  # the agents' `sleep` argument: how a stale agent is recognised


def _kill_stale_agent(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = f.read().split(b"\0")
    except OSError:
        return
    if argv[:2] == [b"sleep", AGENT_SLEEP.encode()]:  # not a pid reused by something else
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _remove(tag, netns=None, freezers=None, agents=()):
    """Removes everything of run `tag`: its job cgroups (thawed, emptied), its agents (each holds its node's
    namespaces and so its veth: a deleted namespace name does not end them), namespaces, veths, bridge and
    state file."""
    for d in freezers if freezers is not None else _glob_freezers(tag):
        _empty_cgroup(d)
    for pid in agents:
        _kill_stale_agent(pid)
    names = netns if netns is not None else [n for n in _netns_list() if n.startswith(f"{PREFIX}{tag}n")]
    for n in names:  # deleting a namespace removes its end of the veth, and so the pair
        _sh(["ip", "netns", "delete", n], check=False)
    links = _sh(["ip", "-o", "link", "show"], check=False).stdout
    for line in links.splitlines():  # host-side veth ends whose node end outlived its namespace's name
        name = line.split(":")[1].strip().split("@")[0] if ":" in line else ""
        if name.startswith(f"{PREFIX}{tag}h"):
            _sh(["ip", "link", "delete", name], check=False)
    _sh(["ip", "link", "delete", f"{PREFIX}{tag}b"], check=False)
    try:
        os.unlink(os.path.join(STATE_DIR, f"{tag}.json"))
    except OSError:
        pass


def _glob_freezers(tag):
    try:
        return [os.path.join(FREEZER, d) for d in os.listdir(FREEZER) if d.startswith(f"{PREFIX}{tag}n")]
    except OSError:
        return []


def _cgroup_pids(d):
    try:
        with open(os.path.join(d, "cgroup.procs")) as f:
            return [int(x) for x in f.read().split()]
    except OSError:
        return []


def _empty_cgroup(d, timeout_s=10):
    if not os.path.isdir(d):
        return
    try:
        with open(os.path.join(d, "freezer.state"), "w") as f:
            f.write("THAWED\n")
    except OSError:
        pass
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        pids = _cgroup_pids(d)
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            os.rmdir(d)
            return
        except OSError:
            time.sleep(0.1)
    print(f"netns_nodes: could not remove cgroup {d}", file=sys.stderr)


def _netns_list():
    p = _sh(["ip", "netns", "list"], check=False)
    return [line.split()[0] for line in p.stdout.splitlines() if line.strip()]


def clean_stale():
    """Removes what runs whose owner is gone left behind (state files, then any scmn* namespace,
    bridge or cgroup without a live owner's state file)."""
    live = set()
    try:
        files = os.listdir(STATE_DIR)
    except OSError:
        files = []
    for name in files:
        if not name.endswith(".json"):
            continue
        tag = name[:-5]
        try:
            with open(os.path.join(STATE_DIR, name)) as f:
                state = json.load(f)
            owner = int(state["owner"])
            agents = [int(x) for x in state.get("agents", [])]
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            owner, agents = -1, []
        if owner > 0 and _pid_alive(owner):
            live.add(tag)
        else:
            _remove(tag, agents=agents)
    owners = set()
    for tag in live:
        try:
            with open(os.path.join(STATE_DIR, f"{tag}.json")) as f:
                owners.add(int(json.load(f)["owner"]))
        except (OSError, ValueError, KeyError, TypeError):
            pass
    for pid in os.listdir("/proc"):  # agents whose owner died before it wrote their pids
        if pid.isdigit():
            try:
                with open(f"/proc/{pid}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            if ppid not in owners:
                _kill_stale_agent(int(pid))
    tags = set()
    for n in _netns_list():
        if n.startswith(PREFIX) and "n" in n[len(PREFIX):]:
            tags.add(n[len(PREFIX):].rsplit("n", 1)[0])
    for line in _sh(["ip", "-o", "link", "show"], check=False).stdout.splitlines():
        name = line.split(":")[1].strip().split("@")[0] if ":" in line else ""
        if name.startswith(PREFIX) and len(name) > len(PREFIX) + 6:
            tags.add(name[len(PREFIX):len(PREFIX) + 6])
    for d in os.listdir(FREEZER) if os.path.isdir(FREEZER) else []:
        if d.startswith(PREFIX) and len(d) > len(PREFIX) + 6:
            tags.add(d[len(PREFIX):len(PREFIX) + 6])
    for tag in tags - live:
        _remove(tag)


def unavailable():
    """Why nodes cannot be made here (None: they can). Makes and removes one namespace, veth and bridge."""
    if os.geteuid() != 0:
        return "needs root (network and mount namespaces)"
    for tool in ("ip", "nsenter", "unshare", "tc", "mount"):
        if shutil.which(tool) is None:
            return f"{tool} not found (iproute2, util-linux)"
    tag = f"{random.SystemRandom().randrange(16 ** 6):06x}"
    try:
        try:
            _sh(["ip", "netns", "add", f"{PREFIX}{tag}n0"])
            _sh(["ip", "link", "add", f"{PREFIX}{tag}b", "type", "bridge"])
            _sh(["ip", "link", "add", f"{PREFIX}{tag}h0", "type", "veth", "peer", "name", f"{PREFIX}{tag}p0"])
            _sh(["ip", "netns", "exec", f"{PREFIX}{tag}n0", "unshare", "--mount", "--uts", "--propagation", "private",
                 "sh", "-c", "mount -t tmpfs tmpfs /dev/shm"])
        except (RuntimeError, OSError, subprocess.TimeoutExpired) as e:
            return f"cannot make a namespace node: {e}"
    finally:
        _sh(["ip", "link", "delete", f"{PREFIX}{tag}h0"], check=False)
        _remove(tag, netns=[f"{PREFIX}{tag}n0"], freezers=[])
    if not os.path.isdir(FREEZER):
        return f"no cgroup v1 freezer at {FREEZER}"
    return None


def netem_available():
    """Whether tc's netem qdisc exists (this project's CI kernel is built without it: tbf only)."""
    tag = f"{random.SystemRandom().randrange(16 ** 6):06x}"
    ns = f"{PREFIX}{tag}n0"
    try:
        _sh(["ip", "netns", "add", ns])
        p = _sh(["ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", "lo", "root", "netem", "delay", "1ms"],
                check=False)
        return p.returncode == 0
    finally:
        _remove(tag, netns=[ns], freezers=[])


class _Interrupted(BaseException):
    pass


class NetnsNodes:
    def __init__(self, n, tag=None):
        if not 1 <= n <= 200:
            raise ValueError(f"nodes {n}: 1 to 200")
        rng = random.SystemRandom()
        self.n = n
        self.tag = tag or f"{rng.randrange(16 ** 6):06x}"
        self.octet = rng.randrange(256)
        self.netns = [f"{PREFIX}{self.tag}n{k}" for k in range(n)]
        self.hostnames = [f"node{k}-{self.tag}" for k in range(n)]
        self.addrs = [f"10.231.{self.octet}.{k + 1}" for k in range(n)]
        self.bridge = f"{PREFIX}{self.tag}b"
        self.freezers = [os.path.join(FREEZER, f"{PREFIX}{self.tag}n{k}") for k in range(n)]
        self.agents = []
        self._agent_procs = []
        self._old_handlers = {}
        self.tmp = None

    # --- set-up and teardown ------------------------------------------------
    def __enter__(self):
        clean_stale()
        self._write_state()
        for sig in (signal.SIGINT, signal.SIGTERM):
            try:
                self._old_handlers[sig] = signal.signal(sig, self._on_signal)
            except ValueError:  # not the main thread
                pass
        try:
            self._make()
        except BaseException:
            self.__exit__(*sys.exc_info())
            raise
        return self

    def _write_state(self):
        os.makedirs(STATE_DIR, exist_ok=True)
        path = os.path.join(STATE_DIR, f"{self.tag}.json")
        with open(path + ".tmp", "w") as f:
            json.dump({"owner": os.getpid(), "nodes": self.n, "agents": self.agents}, f)
        os.replace(path + ".tmp", path)

    def _on_signal(self, signum, frame):
        raise _Interrupted(f"signal {signum}")

    def _make(self):
        self.tmp = tempfile.mkdtemp(prefix=f"scout-netns-{self.tag}-")
        hosts = os.path.join(self.tmp, "hosts")
        with open(hosts, "w") as f:
            f.write("127.0.0.1 localhost\n")
            for h, a in zip(self.hostnames, self.addrs):
                f.write(f"{a} {h}\n")
        _sh(["ip", "link", "add", self.bridge, "type", "bridge"])
        _sh(["ip", "link", "set", self.bridge, "up"])
        for k in range(self.n):
            ns, host_end, node_end = self.netns[k], f"{PREFIX}{self.tag}h{k}", f"{PREFIX}{self.tag}p{k}"
            _sh(["ip", "netns", "add", ns])
            _sh(["ip", "link", "add", host_end, "type", "veth", "peer", "name", node_end])
            _sh(["ip", "link", "set", node_end, "netns", ns])
            _sh(["ip", "link", "set", host_end, "master", self.bridge])
            _sh(["ip", "link", "set", host_end, "up"])
            inside = ["ip", "netns", "exec", ns]
            _sh(inside + ["ip", "link", "set", node_end, "name", IFNAME])
            _sh(inside + ["ip", "addr", "add", f"{self.addrs[k]}/24", "dev", IFNAME])
            _sh(inside + ["ip", "link", "set", IFNAME, "up"])
            _sh(inside + ["ip", "link", "set", "lo", "up"])
            os.makedirs(self.freezers[k], exist_ok=True)
            script = (f"mount -t tmpfs -o size=512m,mode=1777 tmpfs /dev/shm && mount --bind {hosts} /etc/hosts && "
                      f"hostname {self.hostnames[k]} && echo ready && exec sleep {AGENT_SLEEP}")
            # nsenter --net, not `ip netns exec`: that remounts /sys for the namespace, which hides
            # /sys/fs/cgroup (the freezer, and the cpu cgroups `scout straggler` reads) inside the node.
            p = subprocess.Popen(["nsenter", f"--net=/run/netns/{ns}", "unshare", "--mount", "--uts", "--propagation",
                                  "private", "sh", "-c", script], stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
            self._agent_procs.append(p)
            line = p.stdout.readline()  # the agent's namespaces are ready once it said so
            if line.strip() != "ready":
                raise RuntimeError(f"node {k}: agent did not start (exit {p.poll()})")
            self.agents.append(p.pid)
            self._write_state()
        for k in range(self.n):
            _sh(self.enter(k) + ["true"])

    def __exit__(self, *exc):
        for d in self.freezers:
            _empty_cgroup(d)
        for p in self._agent_procs:  # the last process of a mount namespace takes its tmpfs with it
            if p.poll() is None:
                p.kill()
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
            if p.stdout:
                p.stdout.close()
        _remove(self.tag, netns=self.netns, freezers=[])
        if self.tmp:
            shutil.rmtree(self.tmp, ignore_errors=True)
        for sig, h in self._old_handlers.items():
            signal.signal(sig, h)
        self._old_handlers = {}
        return False

    # --- running inside a node ----------------------------------------------
    def enter(self, k):
        """The command prefix that runs a program inside node k."""
        return ["nsenter", "-t", str(self.agents[k]), "-m", "-n", "-u", "--"]

    def command(self, k, cmd, job=False):
        if job:  # into node k's freezer cgroup first; its children inherit it
            cmd = ["sh", "-c", f'echo $$ > {self.freezers[k]}/cgroup.procs && exec "$@"', "sh", *cmd]
        return self.enter(k) + list(cmd)

    def popen(self, k, cmd, job=False, **kw):
        kw.setdefault("stdin", subprocess.DEVNULL)
        return subprocess.Popen(self.command(k, cmd, job), **kw)

    def run(self, k, cmd, timeout=60, **kw):
        kw.setdefault("capture_output", True)
        kw.setdefault("text", True)
        return subprocess.run(self.command(k, cmd), timeout=timeout, **kw)

    def job_pids(self, k):
        return _cgroup_pids(self.freezers[k])

    # --- faults -------------------------------------------------------------
    def link(self, k, state):
        """Node k's link "down" or "up" (both ends of its veth pair)."""
        if state not in ("up", "down"):
            raise ValueError(state)
        _sh(["ip", "netns", "exec", self.netns[k], "ip", "link", "set", IFNAME, state])
        _sh(["ip", "link", "set", f"{PREFIX}{self.tag}h{k}", state])

    def rate_limit(self, k, rate, burst="4kb", latency="2s"):
        """Node k's link limited to `rate` (tc tbf) both ways: on its own interface (egress) and on
        the bridge port (its ingress). rate None removes it."""
        for prefix, dev in ((["ip", "netns", "exec", self.netns[k]], IFNAME), ([], f"{PREFIX}{self.tag}h{k}")):
            if rate is None:
                _sh(prefix + ["tc", "qdisc", "del", "dev", dev, "root"], check=False)
            else:
                _sh(prefix + ["tc", "qdisc", "replace", "dev", dev, "root", "tbf", "rate", rate, "burst", burst,
                              "latency", latency])

    def delay(self, k, ms):
        """netem delay on node k's link (raises where the kernel has no netem)."""
        for prefix, dev in ((["ip", "netns", "exec", self.netns[k]], IFNAME), ([], f"{PREFIX}{self.tag}h{k}")):
            _sh(prefix + ["tc", "qdisc", "replace", "dev", dev, "root", "netem", "delay", f"{ms}ms"])

    def _freezer_state(self, k, state):
        with open(os.path.join(self.freezers[k], "freezer.state"), "w") as f:
            f.write(f"{state}\n")

    def freeze(self, k, timeout_s=10):
        """Freezes every process of node k's job (cgroup v1 freezer); waits until FROZEN."""
        self._freezer_state(k, "FROZEN")
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            with open(os.path.join(self.freezers[k], "freezer.state")) as f:
                if f.read().strip() == "FROZEN":
                    return
            time.sleep(0.05)
        raise RuntimeError(f"node {k}: job cgroup did not freeze in {timeout_s} s")

    def thaw(self, k):
        self._freezer_state(k, "THAWED")

    def kill_job(self, k):
        """SIGKILL to every process of node k's job (torchrun's agent and its workers)."""
        for pid in self.job_pids(k):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


if __name__ == "__main__":  # a smoke check: make 2 nodes, show them, tear down
    why = unavailable()
    if why:
        print(f"netns_nodes: unavailable: {why}")
        sys.exit(5)
    print("netem:", "available" if netem_available() else "absent (tbf only)")
    with NetnsNodes(int(sys.argv[1]) if len(sys.argv) > 1 else 2) as nodes:
        for k in range(nodes.n):
            r = nodes.run(k, ["sh", "-c", "hostname; ip -4 -o addr show dev scv0; touch /dev/shm/x; ls /dev/shm"])
            print(k, r.stdout.replace("\n", " | "))
        r = nodes.run(0, ["getent", "hosts", nodes.hostnames[-1]])
        print("resolve:", r.stdout.strip())
