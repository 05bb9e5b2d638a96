"""A gloo job whose process groups have "twins" (groups over the same
members), for scout's tests (test_torch2_twins.py): the world's default
group, two more groups over the whole world (new_group(all ranks), as
DeepSpeed's pipeline grid makes one), and two over ranks [0, 1], created
interleaved with one over [2, 3]. Every rank draws the same plan of calls
from --plan-seed (make_plan): each call goes to one of those groups (or is
a send from rank 0 to rank 1 on the world or on the first [0, 1] group), is
an all_reduce, broadcast (a random member as root), all_gather or
barrier, blocking or async (async ones are waited for at the end of their
round of 6 calls, so calls on different twins are in flight together), and
has call index + 1 elements, so that each call has its own fingerprint.
Members make the group's calls; other ranks skip them.

Torch 1.13 (Debian's) and 2.x alike; the publisher as the other trainers
(--publisher call|env|off). Faults (the harness's): --fault exit or
skip-collective at call --fault-step of the plan on --fault-rank (exit:
os._exit(3) before that call; skip: the rank does not make it). With
SCOUT_TEST_FR_DIR (torch 2.x), a rank whose call fails dumps its Flight
Recorder there as torch2_trainer.py does (JSON, its pg_config completed with
every pg's members, as NCCL's recorder writes it and gloo's does not), and so
does every rank at the end.

--out PREFIX writes PREFIX.<rank>.json at the end: the calls this rank made
(plan index, group name, kind, count).
"""
import argparse
import json
import os
import random
import sys
import time
from datetime import timedelta

FAULTS = ("none", "stop-before-collective", "exit", "skip-collective", "wrong-shape")
GROUPS = {  # name -> members (world size 4); created in this order after the default group
    "twin_a": (0, 1, 2, 3),
    "pair_a": (0, 1),
    "other": (2, 3),
    "twin_b": (0, 1, 2, 3),
    "pair_b": (0, 1),
}
KINDS = ("all_reduce", "broadcast", "all_gather", "barrier")
ROUND = 6


ALL_GROUPS = ("world", *GROUPS, "p2p_world", "p2p_pair_a")


def make_plan(seed, calls, world=4, groups=ALL_GROUPS):
    """The job's calls, the same on every rank: dicts with index, group (one of `groups`: a GROUPS
    name, "world", or "p2p_world" / "p2p_pair_a" for a send 0 -> 1), kind, root (global), count, async."""
    rng = random.Random(seed)
    names = list(groups)
    plan = []
    for i in range(calls):
        group = rng.choice(names)
        if group.startswith("p2p_"):
            kind, root = "send", 0
        else:
            kind = rng.choice(KINDS)
            members = list(range(world)) if group == "world" else list(GROUPS[group])
            root = rng.choice(members) if kind == "broadcast" else -1
        plan.append({"index": i, "group": group, "kind": kind, "root": root, "count": i + 1,
                     "async": kind != "send" and rng.random() < 0.35})
    return plan


def same_record(a, b):
    """Whether calls a and b leave the same trace in a record when they are the same call of two
    twins (same id, same seq): the same kind and count (a barrier has no tensor, so no count)."""
    return a["kind"] == b["kind"] and (a["kind"] == "barrier" or a["count"] == b["count"])


def members_of(call, world=4):
    g = call["group"]
    if g == "world":
        return list(range(world))
    if g.startswith("p2p_"):
        return [0, 1]
    return list(GROUPS[g])


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=5)  # the harness's; unused
    p.add_argument("--fault", choices=FAULTS, default="none")
    p.add_argument("--fault-rank", type=int, default=-1)
    p.add_argument("--fault-step", type=int, default=-1)
    p.add_argument("--publisher", choices=("call", "env", "off"), default="call")
    p.add_argument("--pg-timeout", type=float, default=60.0)
    p.add_argument("--step-delay", type=float, default=0.0)
    p.add_argument("--plan-seed", type=int, default=1)
    p.add_argument("--calls", type=int, default=40)
    p.add_argument("--plan-groups", default=",".join(ALL_GROUPS), help="the groups the plan draws from")
    p.add_argument("--out", default="")
    return p.parse_args(argv)


def dump_flight_recorder(rank):
    d = os.environ.get("SCOUT_TEST_FR_DIR")
    if not d:
        return
    import torch
    c10d = torch._C._distributed_c10d
    if not hasattr(c10d, "_dump_fr_trace_json"):
        return
    doc = json.loads(c10d._dump_fr_trace_json(includeCollectives=True))
    # gloo's recorder keeps one pg_config entry, keyed "" (the ranks of the last pg it registered);
    # NCCL's names every pg (name, desc, ranks). Complete it as NCCL's would, so that scout knows
    # each pg's members.
    import torch.distributed as dist
    cfg = doc.setdefault("pg_config", {})
    for pg, name in dist.distributed_c10d._world.pg_names.items():
        if name not in cfg:
            ranks = dist.get_process_group_ranks(pg)
            cfg[name] = {"name": name, "desc": getattr(pg, "group_desc", "undefined"), "ranks": str(list(ranks))}
    js = json.dumps(doc).encode()
    os.makedirs(os.path.join(d, "json"), exist_ok=True)
    tmp = os.path.join(d, "json", f".rank_{rank}.json.tmp")
    with open(tmp, "wb") as f:
        f.write(js)
    os.replace(tmp, os.path.join(d, "json", f"rank_{rank}.json"))


def main(argv=None):
    args = parse_args(argv)
    import scout_publisher

    if args.publisher == "call":
        scout_publisher.enable()
    import torch
    import torch.distributed as dist

    rank = int(os.environ["RANK"])
    world = int(os.environ["WORLD_SIZE"])
    if world != 4:
        print("twins_trainer: needs a world of 4", file=sys.stderr)
        return 2
    torch.set_num_threads(1)
    timeout = timedelta(seconds=args.pg_timeout)
    dist.init_process_group("gloo", timeout=timeout)
    groups = {"world": dist.group.WORLD}
    for name, members in GROUPS.items():
        groups[name] = dist.new_group(list(members), timeout=timeout)
    plan = make_plan(args.plan_seed, args.calls, world, args.plan_groups.split(","))
    made, pending = [], []
    print(f"twins_trainer: rank {rank} plan seed {args.plan_seed} calls {len(plan)}", flush=True)
    try:
        for call in plan:
            i = call["index"]
            if rank not in members_of(call, world):
                continue
            if rank == args.fault_rank and i == args.fault_step and args.fault != "none":
                print(f"twins_trainer: rank {rank} injects {args.fault} at call {i}", flush=True)
                if args.fault == "exit":
                    sys.stdout.flush()
                    os._exit(3)
                if args.fault == "skip-collective":
                    continue
            t = torch.full((call["count"],), float(rank + 1))
            kind, g = call["kind"], call["group"]
            work = None
            if kind == "send":
                pg = groups["world" if g == "p2p_world" else "pair_a"]
                if rank == 0:
                    dist.send(t, 1, group=pg)
                else:
                    dist.recv(t, 0, group=pg)
            elif kind == "all_reduce":
                work = dist.all_reduce(t, group=groups[g], async_op=call["async"])
            elif kind == "broadcast":
                work = dist.broadcast(t, call["root"], group=groups[g], async_op=call["async"])
            elif kind == "all_gather":  # the list form: 1.13's gloo has no all_gather_into_tensor
                out = [torch.empty(call["count"]) for _ in members_of(call, world)]
                work = dist.all_gather(out, t, group=groups[g], async_op=call["async"])
            else:
                work = dist.barrier(group=groups[g], async_op=call["async"])
            if call["async"] and work is not None:
                pending.append(work)
            made.append({"index": i, "group": g, "kind": kind, "count": call["count"]})
            if (i + 1) % ROUND == 0:
                for w in pending:
                    w.wait()
                pending.clear()
            if args.step_delay > 0:
                time.sleep(args.step_delay)
        for w in pending:
            w.wait()
        dist.barrier()
    except Exception as e:
        print(f"twins_trainer: rank {rank} failed: {type(e).__name__}: {e}", flush=True)
        dump_flight_recorder(rank)
        # Stay until every rank dumped (at most 60 s): exiting closes this rank's connections, and
        # gloo aborts a peer still waiting out its timeout (SIGABRT from its transport thread),
        # which then never dumps.
        d = os.environ.get("SCOUT_TEST_FR_DIR")
        deadline = time.monotonic() + 60
        while d and time.monotonic() < deadline:
            jdir = os.path.join(d, "json")
            if len([f for f in os.listdir(jdir) if f.endswith(".json") and not f.startswith(".")]) >= world:
                break
            time.sleep(0.2)
        sys.stdout.flush()
        os._exit(1)
    dump_flight_recorder(rank)
    if args.out:
        with open(f"{args.out}.{rank}.json", "w") as f:
            json.dump({"rank": rank, "made": made, "torch": torch.__version__}, f)
    print(f"twins_trainer: rank {rank} done", flush=True)
    return 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
