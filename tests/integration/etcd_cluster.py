"""A real etcd cluster on loopback for the tests (Debian's etcd-server): random free ports,
a temporary data directory, every member killed and the directory removed by stop(), whatever
happened before. Members are asked through etcd's JSON gateway (the protocol scout speaks).
"""
import base64
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request

ETCD = shutil.which("etcd") or "/usr/bin/etcd"


def available():
    """"" when etcd can be run here, else why not (the reason a test skips with)."""
    if not os.access(ETCD, os.X_OK):
        return "etcd is not installed (Debian: apt-get install etcd-server; scripts/install-deps.sh)"
    return ""


def free_ports(n):
    socks, ports = [], []
    for _ in range(n):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
        ports.append(s.getsockname()[1])
    for s in socks:
        s.close()
    return ports


def post(port, path, body, timeout=1.0):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.loads(r.read())


def b64(text):
    return base64.b64encode(text.encode()).decode()


class EtcdCluster:
    def __init__(self, members=3):
        self.n = members
        self.dir = tempfile.mkdtemp(prefix="scout-etcd-")
        ports = free_ports(2 * members)
        self.client_ports, self.peer_ports = ports[:members], ports[members:]
        self.procs = [None] * members
        self.stopped = set()
        self.token = f"scout-test-{os.getpid()}-{ports[0]}"

    def uri(self, order=None):
        """etcd://127.0.0.1:P,... listing the members in `order` (default: all, by index)."""
        order = range(self.n) if order is None else order
        return "etcd://" + ",".join(f"127.0.0.1:{self.client_ports[i]}" for i in order)

    def start(self, timeout=30):
        initial = ",".join(f"m{i}=http://127.0.0.1:{p}" for i, p in enumerate(self.peer_ports))
        for i in range(self.n):
            log = open(os.path.join(self.dir, f"m{i}.log"), "w")
            cmd = [ETCD, "--name", f"m{i}", "--data-dir", os.path.join(self.dir, f"m{i}"),
                   "--listen-client-urls", f"http://127.0.0.1:{self.client_ports[i]}",
                   "--advertise-client-urls", f"http://127.0.0.1:{self.client_ports[i]}",
                   "--listen-peer-urls", f"http://127.0.0.1:{self.peer_ports[i]}",
                   "--initial-advertise-peer-urls", f"http://127.0.0.1:{self.peer_ports[i]}",
                   "--initial-cluster", initial, "--initial-cluster-state", "new",
                   "--initial-cluster-token", self.token, "--logger", "zap", "--log-level", "warn"]
            self.procs[i] = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                             start_new_session=True)
            log.close()
        deadline = time.monotonic() + timeout
        for i in range(self.n):
            while True:
                try:
                    # A linearizable read answers only once the cluster has a leader.
                    post(self.client_ports[i], "/v3/kv/range", {"key": b64("/health")})
                    break
                except Exception as e:  # noqa: BLE001 (not up yet)
                    if self.procs[i].poll() is not None or time.monotonic() > deadline:
                        self.stop()
                        raise RuntimeError(f"etcd member m{i} did not start: {e}; log: {self.log(i)[-2000:]}")
                    time.sleep(0.1)
        return self

    def log(self, i):
        try:
            with open(os.path.join(self.dir, f"m{i}.log")) as f:
                return f.read()
        except OSError:
            return ""

    def leader(self, among=None):
        """Index of the member that leads now (asked of a running one), or None."""
        for i in among if among is not None else range(self.n):
            if i in self.stopped or self.procs[i].poll() is not None:
                continue
            try:
                st = post(self.client_ports[i], "/v3/maintenance/status", {})
            except Exception:  # noqa: BLE001
                continue
            leader = st.get("leader")
            for k in range(self.n):
                try:
                    if k not in self.stopped and self.procs[k].poll() is None and \
                            post(self.client_ports[k], "/v3/maintenance/status", {})["header"]["member_id"] == leader:
                        return k
                except Exception:  # noqa: BLE001
                    continue
        return None

    def kill(self, i):
        self.procs[i].send_signal(signal.SIGKILL)
        self.procs[i].wait(timeout=10)

    def freeze(self, i):
        self.procs[i].send_signal(signal.SIGSTOP)
        self.stopped.add(i)

    def thaw(self, i):
        self.procs[i].send_signal(signal.SIGCONT)
        self.stopped.discard(i)

    def stop(self):
        for p in self.procs:
            if p is not None and p.poll() is None:
                p.send_signal(signal.SIGKILL)  # a stopped member dies too
                p.wait(timeout=10)
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
