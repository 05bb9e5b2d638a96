"""A minimal record writer over libscout_publisher.so (no torch), for record tests.

    record_writer.py JOB RANK WORLD MODE
MODE: once  publish a few events and exit (the record stays)
      hold  publish a few events, print "ready", then sleep until killed
      loop  publish one collective, print "ready", then publish collective
            enter/exit forever; every event has count == group_seq ==
            root_or_op == group, the first one included (a reader checks
            that every snapshot it gets satisfies this)
"""
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "integrations", "python"))
from scout_publisher import _lib  # noqa: E402


def main():
    job, rank, world, mode = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    lib = _lib.load()
    rec = _lib.Record(lib, job, rank, world, coords=[rank, 0, 0, 0, 0, 0], attempt=os.environ.get("SCOUT_ATTEMPT", "0"))
    rec.step_begin(1)
    rec.phase("forward")
    if mode == "loop":
        # The loop's invariant holds from the first event on: every state a
        # reader can see after "ready" (this collective pending, or in ring
        # slot 0 until the loop overwrites it) has count == group_seq ==
        # root_or_op == group.
        t = rec.enter(1, _lib.COLLECTIVES["all_reduce"], 2, 1, 1, 1)
    else:
        t = rec.enter(7, _lib.COLLECTIVES["all_reduce"], 2, 10, 0, 1)
    rec.exit(t)
    if mode == "once":
        return 0
    print("ready", flush=True)
    if mode == "hold":
        while True:
            time.sleep(1)
    enter, exit_, handle = rec._enter, rec._exit, rec._handle
    import ctypes
    token = ctypes.c_uint64()
    ref = ctypes.byref(token)
    i = 1
    while True:
        i += 1
        enter(handle, i, 1, 2, i, i, i, ref)
        exit_(handle, token.value)


if __name__ == "__main__":
    sys.exit(main())
