"""The automatic probe's detached child (see _autoprobe.py): run by the
trainer's interpreter as `python -I _probe_child.py PLAN_JSON` in a session of
its own, standard library only (no scout_publisher, no torch: it must not
publish a record nor slow the trainer).

PLAN_JSON: {"command": [scout, "probe-hang", ...], "verdict": FILE, "log": FILE,
"trigger": why, "rank": R, "trainer_pid": P, "incident": K, "delay_s": S,
"kill_after_s": T}. Sleeps delay_s, runs the command (its own process group,
killed after kill_after_s), writes its stdout (the verdict JSON) to `verdict`
atomically when it is a JSON document, and appends what happened to `log`.
Exit status: scout's, or 124 when it was killed, 70 when it could not run."""
import json
import os
import signal
import subprocess
import sys
import time


def stamp():
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def atomic_write(path, data):
    d = os.path.dirname(path) or "."
    tmp = os.path.join(d, f".{os.path.basename(path)}.{os.getpid()}.tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fd = os.open(d, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def main():
    plan = json.loads(sys.argv[1])
    log = open(plan["log"], "a")

    def say(text):
        log.write(f"{stamp()} {text}\n")
        log.flush()

    say(f"incident {plan['incident']}: trigger {plan['trigger']} on rank {plan['rank']} (trainer pid "
        f"{plan['trainer_pid']}); probing in {plan['delay_s']} s")
    time.sleep(plan["delay_s"])
    cmd = plan["command"]
    say("running: " + " ".join(cmd))
    start = time.monotonic()
    try:
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=log,
                                start_new_session=True)
    except OSError as e:
        say(f"cannot run scout: {e}")
        return 70
    try:
        out, _ = proc.communicate(timeout=plan["kill_after_s"])
        rc = proc.returncode
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        say(f"scout did not finish in {plan['kill_after_s']} s: killed")
        return 124
    took = time.monotonic() - start
    try:
        doc = json.loads(out)
    except ValueError:
        say(f"scout exited {rc} after {took:.1f} s without a verdict on stdout")
        return rc if rc else 70
    try:
        atomic_write(plan["verdict"], out)
    except OSError as e:
        say(f"cannot write the verdict {plan['verdict']}: {e}")
        return 70
    suspects = [s.get("rank") for s in doc.get("suspects", []) if isinstance(s, dict)]
    say(f"scout exited {rc} after {took:.1f} s: status {doc.get('status')}, suspects {suspects}: "
        f"{doc.get('summary')}; verdict {plan['verdict']}")
    return rc


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Exception as e:  # the trainer never sees this process; its log says what happened
        print(f"scout autoprobe child: {e}", file=sys.stderr)
        sys.exit(70)
