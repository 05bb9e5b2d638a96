"""A "zygote" for the trainer ranks of the integration tests: a venv
interpreter that has imported torch once and forks a child per rank, which
then runs the trainer script as `python SCRIPT ARGS` would (issue 38).

Why: `import torch` of the CUDA wheel costs each rank ~2.4 s of CPU (it maps
some 130 libraries even without a GPU); a test run starts hundreds of ranks on
2 cores. A forked child shares the imported modules and pays none of it.

Started by trainer_harness.Zygote as `python torch_zygote.py SOCKET PARENT_PID`
with an environment where no scout sitecustomize is active (the publisher must
be imported by each rank itself, in its own environment) and OMP_NUM_THREADS=1
(as every rank has it; then importing torch starts no thread, and this process
refuses to serve unless it is single-threaded, so that a forked child lacks no
thread it needs). It prints "ready" (or "refuse REASON") on stdout, then serves
on the unix socket SOCKET until its stdin reaches EOF (the harness exited) or
PARENT_PID dies (PR_SET_PDEATHSIG).

One request per connection: 8 bytes of length (big endian) carrying, as
SCM_RIGHTS, the child's stdin, stdout and stderr descriptors (a log file twice
for Popen's stderr=STDOUT, the write ends of pipes for stdout/stderr=PIPE),
then that many bytes of JSON {"argv": [script, args...], "env": {...}, "cwd": dir}
(argv ["-c", code, args...]: the code, as `python -c code args...` runs it). The reply
is a line {"pid": N}, later a line {"returncode": RC} (Popen's convention:
-SIG for a signal) once the child ended; it stays a zombie, as a Popen child does until
its parent polls it, and is reaped here when the client closes the connection.

The child is what `subprocess.Popen([python, *argv], env=env, cwd=cwd,
stdin=..., stdout=..., stderr=..., start_new_session=True)` would start: its
own session, default signal dispositions (as a fresh interpreter has them),
that environment (os.environ and the C library's), sys.path from PYTHONPATH,
sys.argv, __main__ run by runpy, the interpreter's own exit handling (atexit,
sys.excepthook, SystemExit).
"""
import ctypes
import json
import os
import selectors
import signal
import socket
import struct
import sys
import time

# What the trainers import at their start (ddp_trainer, torch2_trainer, cascade_trainer, ...): imported once here.
import torch  # noqa: F401
import torch.distributed  # noqa: F401
import torch.nn  # noqa: F401
import torch.nn.parallel  # noqa: F401
import torch.utils.data  # noqa: F401

PR_SET_PDEATHSIG = 1
_ZYGOTE_PATH = list(sys.path)  # sys.path of this interpreter: [0] is this file's directory
_ZYGOTE_PYTHONPATH = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
_SIGNALS = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGPIPE, signal.SIGXFSZ, signal.SIGCHLD,
                                             signal.SIGTERM, signal.SIGHUP)}


def _threads():
    return len(os.listdir("/proc/self/task"))


def _recv_exact(conn, n):
    out = b""
    while len(out) < n:
        chunk = conn.recv(n - len(out))
        if not chunk:
            raise EOFError("client closed the connection")
        out += chunk
    return out


def _read_request(conn):
    head, fds, _, _ = socket.recv_fds(conn, 8, 3)
    if len(head) < 8:
        head += _recv_exact(conn, 8 - len(head))
    if len(fds) != 3:
        for fd in fds:
            os.close(fd)
        raise ValueError(f"expected 3 descriptors, got {len(fds)}")
    (size,) = struct.unpack(">Q", head)
    return json.loads(_recv_exact(conn, size)), fds


def _returncode(status):
    return -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)


def serve(path):
    """Serves until stdin reaches EOF; returns (request, fds) in a forked child only, with every descriptor of
    this loop closed, else None."""
    rfd, wfd = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    signal.set_wakeup_fd(wfd)
    signal.signal(signal.SIGCHLD, lambda *_: None)  # wakes the selector through the wakeup fd
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    sel = selectors.DefaultSelector()
    sel.register(listener, selectors.EVENT_READ, "accept")
    sel.register(rfd, selectors.EVENT_READ, "sigchld")
    sel.register(0, selectors.EVENT_READ, "stdin")
    children = {}  # pid -> connection to report its end on (None once the client went away)
    reported = set()  # children whose end was reported, kept as zombies until their client closes
    print("ready", flush=True)
    done, deadline = False, None
    while not done or children:
        for key, _ in sel.select(timeout=None if not done else 0.1):
            if key.data == "stdin":
                if not os.read(0, 4096):
                    sel.unregister(0)
                    done = True
            elif key.data == "sigchld":
                try:
                    while os.read(rfd, 4096):
                        pass
                except BlockingIOError:
                    pass
            elif key.data == "accept":
                conn, _ = listener.accept()
                conn.settimeout(30)
                try:
                    req, fds = _read_request(conn)
                except (OSError, ValueError, EOFError) as e:
                    print(f"torch_zygote: bad request: {e}", file=sys.stderr, flush=True)
                    conn.close()
                    continue
                pid = os.fork()
                if pid == 0:
                    signal.set_wakeup_fd(-1)
                    sel.close()
                    for fd in (rfd, wfd):
                        os.close(fd)
                    listener.close()
                    for c in children.values():
                        if c is not None:
                            c.close()
                    return req, fds, conn
                for fd in fds:
                    os.close(fd)
                try:
                    conn.sendall(json.dumps({"pid": pid}).encode() + b"\n")
                    sel.register(conn, selectors.EVENT_READ, pid)
                    children[pid] = conn
                except OSError:
                    conn.close()
                    children[pid] = None
            else:  # a client closed (or wrote to) the connection of child key.data
                conn = key.fileobj
                try:
                    data = conn.recv(4096)
                except OSError:
                    data = b""
                if not data:
                    sel.unregister(conn)
                    conn.close()
                    if children.get(key.data) is conn:
                        children[key.data] = None
        # Report every child that ended, and reap it once its client closed the connection, as a Popen child stays
        # a zombie until its parent polls it: scout reads a dead rank's exit code or signal from its zombie's
        # /proc/PID/stat, and a rank reaped at once reads as gone, its form of death unknown (CI, 717e75c's
        # successor: test_hang_cascade's kill campaign, seed 451267136, the SIGKILLed rank then unnamed).
        for pid in list(children):
            conn = children[pid]
            try:
                if conn is None:  # nobody to keep its zombie for
                    if os.waitpid(pid, os.WNOHANG)[0]:
                        del children[pid]
                        reported.discard(pid)
                    continue
                if pid in reported:
                    continue
                info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            except ChildProcessError:
                del children[pid]
                continue
            if info is None:
                continue
            reported.add(pid)
            rc = info.si_status if info.si_code == os.CLD_EXITED else -info.si_status
            try:
                conn.sendall(json.dumps({"returncode": rc}).encode() + b"\n")
            except OSError:
                sel.unregister(conn)
                conn.close()
                children[pid] = None
                if os.waitpid(pid, os.WNOHANG)[0]:
                    del children[pid]
        if done and children:
            # The harness is gone: its teardown killed its ranks, reaped here before this process exits (so that
            # their CPU time counts in the harness's); a rank still running after 5 s is left to run on, reparented,
            # as a Popen child whose parent exited would.
            if deadline is None:
                deadline = time.monotonic() + 5
            if time.monotonic() > deadline or not any(_alive(p) for p in children):
                for pid in children:
                    try:
                        os.waitpid(pid, os.WNOHANG)
                    except ChildProcessError:
                        pass
                break
    return None


def _alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def become(req, fds, conn):
    """In the forked child: turns this process into `python SCRIPT ARGS` of the request and runs the script."""
    os.setsid()
    for s, handler in _SIGNALS.items():
        signal.signal(s, handler)
    conn.close()
    for target, fd in enumerate(fds):  # stdin, stdout, stderr
        os.dup2(fd, target)
    for fd in fds:
        os.close(fd)
    env = req["env"]
    os.environ.clear()  # os.environ's item assignments call putenv: the C library sees the rank's environment
    os.environ.update(env)
    os.chdir(req["cwd"])
    argv = list(req["argv"])
    code = argv[1] if argv[0] == "-c" else None
    pythonpath = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    rest = [p for p in _ZYGOTE_PATH[1:] if p not in _ZYGOTE_PYTHONPATH]
    if code is not None:
        # As `python -c`: sys.argv[0] "-c", sys.path[0] "" (the working directory), the code in a new __main__
        # module of its own (no __file__), compiled as "<string>".
        sys.path[:] = [""] + pythonpath + rest
        sys.argv[:] = ["-c"] + argv[2:]
        import types
        main = types.ModuleType("__main__")
        main.__dict__["__builtins__"] = __builtins__
        sys.modules["__main__"] = main
        exec(compile(code, "<string>", "exec"), main.__dict__)
        return
    script = os.path.abspath(argv[0])
    sys.path[:] = [os.path.dirname(script)] + pythonpath + rest
    sys.argv[:] = argv
    import runpy
    runpy.run_path(script, run_name="__main__")


def main():
    path, parent = sys.argv[1], int(sys.argv[2])
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:  # the harness died before the prctl
        return 1
    if "scout_publisher" in sys.modules:
        print("refuse scout_publisher was imported before the trainers' environment (a sitecustomize?)", flush=True)
        return 1
    if _threads() != 1:
        omp = os.environ.get("OMP_NUM_THREADS")
        print(f"refuse {_threads()} threads after importing torch (OMP_NUM_THREADS={omp})", flush=True)
        return 1
    child = serve(path)
    if child is None:
        return 0
    become(*child)
    return 0


if __name__ == "__main__":
    sys.exit(main())
