#!/usr/bin/env python3
"""Writes the seed inputs of fuzz/corpus/<target>/seed-* (valid documents and
edge cases). Regression inputs (regress-*) are committed by hand beside them
and never rewritten here. Run from anywhere: python3 fuzz/make-seeds.py"""
import json
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "corpus")


def put(target, name, data):
    d = os.path.join(CORPUS, target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(d, "seed-" + name), "wb") as f:
        f.write(data)


def js(obj):
    return json.dumps(obj, indent=1)


# --- safetensors -------------------------------------------------------------
def safetensors(header, data=b""):
    h = json.dumps(header).encode()
    return struct.pack("<Q", len(h)) + h + data


put("safetensors_header", "two-tensors", safetensors(
    {"a": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]},
     "b": {"dtype": "BF16", "shape": [3], "data_offsets": [16, 22]},
     "__metadata__": {"format": "pt"}}, bytes(range(22))))
put("safetensors_header", "empty-tensor", safetensors({"e": {"dtype": "I64", "shape": [0], "data_offsets": [0, 0]}}))
put("safetensors_header", "scalar", safetensors({"s": {"dtype": "F64", "shape": [], "data_offsets": [0, 8]}}, b"\0" * 8))
put("safetensors_header", "overlap", safetensors(
    {"a": {"dtype": "U8", "shape": [4], "data_offsets": [0, 4]}, "b": {"dtype": "U8", "shape": [4], "data_offsets": [2, 6]}}, b"\0" * 6))
put("safetensors_header", "truncated", safetensors({"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}}, b"\0" * 3))
put("safetensors_header", "bad-length", struct.pack("<Q", 1 << 40) + b"{}")
put("safetensors_header", "short", b"\x02\0\0")

# --- hash manifest -------------------------------------------------------------
tensor = {"name": "w", "dtype": "F32", "shape": [2, 2], "bytes": 16, "hash": "0x0123456789abcdef"}
manifest = {"schema": "scout.ckpt-manifest", "schema_version": "1.0", "hash_spec_version": 2,
            "created_at": "2026-01-01T00:00:00Z", "mesh": "dp=2",
            "files": [{"path": "rank0.safetensors", "rank": 0, "shard": "s0", "replica": 0, "format": "safetensors",
                       "size": 100, "tensors": [tensor]},
                      {"path": "rank1.safetensors", "rank": 1, "shard": "s0", "replica": 1, "format": "safetensors",
                       "size": 100, "tensors": [tensor]}]}
put("manifest", "two-replicas", js(manifest))
m2 = json.loads(json.dumps(manifest))
m2["mesh"] = None
m2["files"][1]["rank"] = None
m2["files"][1]["path"] = "../escape"
put("manifest", "escape-path", js(m2))
put("manifest", "wrong-spec", js(dict(manifest, hash_spec_version=1)))

# --- ledger ----------------------------------------------------------------------
cp = {"id": "/ckpt/step-100", "seq": 1, "recorded_at": "2026-01-01T00:00:00Z", "state": "verified",
      "summary": "intact", "clean_cycles": 2, "last_clean_cycle": 4, "decided_by_cycle": 4}
ledger = {"schema": "scout.ckpt-ledger", "schema_version": "1.0", "job": "llm7", "revision": 3,
          "updated_at": "2026-01-01T00:00:00Z",
          "replay": {"last_cycle": 4, "clean_streak": 2, "cycles_seen": 5,
                     "last_full_sweep": {"cycle": 3, "clean": True, "after_seq": 1, "recorded_at": "x", "source": "s"}},
          "checkpoints": [cp, dict(cp, id="/ckpt/step-200", seq=2, state="pending", clean_cycles=0, last_clean_cycle=None,
                                   decided_by_cycle=None)]}
put("ledger", "verified-and-pending", js(ledger))
put("ledger", "empty", js(dict(ledger, checkpoints=[], replay={"last_cycle": None, "clean_streak": 0, "cycles_seen": 0})))
put("ledger", "big-cycle", js(dict(ledger, replay={"last_cycle": 9223372036854775807, "clean_streak": 0, "cycles_seen": 0})))

# --- replay verdicts ---------------------------------------------------------------
verdict = {"schema": "scout.verdict", "schema_version": "1.0", "command": "replay", "job": "job", "status": "healthy",
           "details": {"cycle": 7, "checkpoint": "/ckpt/a", "sweep": "full"}}
put("replay_verdict", "healthy-full", js(verdict))
put("replay_verdict", "attributed", js(dict(verdict, status="attributed", details={"cycle": 0, "checkpoint": None})))
put("replay_verdict", "group-stall", js(dict(verdict, status="group_stall", details={"cycle": 3, "sweep": "periodic"})))
put("replay_verdict", "other-job", js(dict(verdict, job="other")))

# --- catalog, observations, rows ------------------------------------------------------
kernel = {"name": "persistent_grouped_gemm", "model_version": 1, "tile": {"m": 64, "n": 64, "k": 32}, "sms": 108,
          "hidden": 128, "output_dim": 128, "experts": 4}
counts = {"forward": {"work_items": 4, "roles": {"first+m_tail": 2, "last+m_tail": 2}},
          "input_grad": {"work_items": 4, "roles": {"first+m_tail": 2, "last+m_tail": 2}},
          "weight_grad": {"work_items": 8, "roles": {"reduction_single+reduction_tail/tile_first": 2,
                                                     "reduction_single+reduction_tail/tile_last": 2,
                                                     "reduction_single+reduction_tail/tile_interior": 4}}}
put("observations", "one", js({"schema": "scout.catalog.observations", "schema_version": "1.0", "kernel": kernel,
                               "observations": [{"rows": [1, 2, 3, 4], "kernels": counts}]}))
put("observations", "other-config", js({"schema": "scout.catalog.observations", "schema_version": "1.0",
                                        "kernel": dict(kernel, experts=2), "observations": [{"rows": [0, 7], "kernels": counts}]}))
put("catalog_rows", "text", "\x01# rows\n1,2,3,4\n5 6 7 8\n\n1,2,3,4\n")
put("catalog_rows", "json-array", "\x02[[1,2,3,4],[0,0,0,9]]")
put("catalog_rows", "json-doc", "\x00" + json.dumps({"schema": "scout.catalog.rows", "schema_version": "1.0",
                                                      "shapes": [[1, 2], [3, 4]]}))
put("catalog_rows", "spec", "\x041-3457")
put("catalog_rows", "spec-list", "\x0831,32,63,1-4")

# --- mesh ------------------------------------------------------------------------------
for name, text in [("dp-tp", "dp=4,tp=2"), ("order", "dp=2,tp=2,pp=2\ntp,dp"), ("all", "dp=2,fsdp=2,tp=2,pp=2,cp=2,ep=2"),
                   ("big", "dp=2147483647"), ("bad", "dp=0,tp=x"), ("spaces", " dp = 3 , pp = 2 ")]:
    put("mesh", name, text)

# --- consensus input ------------------------------------------------------------------------
for name, text in [("lines", "5\n5\n5\n7\n"), ("json", "[5, 5, \"7\", 5.5]"), ("hashes", "0xabc\n0xabc\n0xdef\n"),
                   ("flag", "1,1,1,2"), ("inf", "1\ninf\n"), ("plus", "+1e3\n-0\n0\n")]:
    put("consensus_input", name, text)

# --- token files ------------------------------------------------------------------------------
put("token_file", "line", "s3cret-token\n")
put("token_file", "crlf", "tok \r\nsecond line\n")
put("token_file", "empty", "\n")

# --- number lists ------------------------------------------------------------------------------
for name, text in [("ranges", "0,2,4-7"), ("doubles", "1.5,2,-3e2"), ("neg", "-1"), ("big", "0-99999999")]:
    put("number_lists", name, text)


# --- evidence blob (CBOR, lib/hang/evidence.cpp) ------------------------------------------------------
def cbor(v):
    def head(major, n):
        if n < 24:
            return bytes([major << 5 | n])
        for add, fmt in ((24, ">B"), (25, ">H"), (26, ">I"), (27, ">Q")):
            if n < (1 << (8 * struct.calcsize(fmt))):
                return bytes([major << 5 | add]) + struct.pack(fmt, n)
    if isinstance(v, bool):
        return b"\xf5" if v else b"\xf4"
    if isinstance(v, int):
        return head(0, v) if v >= 0 else head(1, -1 - v)
    if isinstance(v, str):
        b = v.encode()
        return head(3, len(b)) + b
    if isinstance(v, list):
        return head(4, len(v)) + b"".join(cbor(x) for x in v)
    if isinstance(v, dict):
        return head(5, len(v)) + b"".join(cbor(k) + cbor(x) for k, x in v.items())
    raise TypeError(v)


fp = [5, 1, 2, 10, 0, 2]
ring = [[[5, 1, 2, 10, 0, 1], 8, 1, 2, False, 2], [fp, 9, 3, 0, False, 0]]
rank = {"job": "j", "att": "0", "r": 1, "w": 4, "c": [1, 0, 0, 0, 0, 0], "h": "node1", "pid": 1234, "st": 1, "step": 3,
        "op": 9, "ph": 3, "fp": fp, "cs": 2, "hb": 5, "pg": 4, "evn": 2, "drop": 0, "ev": ring, "wa": True,
        "ps": [1, "S", 0, 0, False, ""]}
blob = {"v": 2, "o": 0, "n": "node1", "job": "j", "att": "0", "t": 7, "ranks": [rank],
        "issues": [["scout.j.2", "torn", "msg", 2, False, "0", 4]]}
put("evidence_blob", "one-rank", cbor(blob))
put("evidence_blob", "empty", cbor(dict(blob, ranks=[], issues=[])))
put("evidence_blob", "bad-rank", cbor(dict(blob, ranks=[dict(rank, r=4)])))
# A stall's compact form (lib/hang/position.hpp): a rank's ring by digest, beside a full rank.
compact = dict(rank, r=2, ev=[], rg=[123456789, 987654321, 2, [5], [0]])
put("evidence_blob", "compact", cbor(dict(blob, ranks=[rank, compact])))


# --- record segments (lib/records/layout.hpp) -----------------------------------------------------------
def record(job="fuzzjob", rank=0, world=1, latch=2, ring_seq=2):
    w = [0] * (5328 // 8)
    w[0], w[1], w[2], w[3], w[4] = 0x43455254554f4353, 1, 5328, rank, world
    jb = job.encode() + b"\0" * (128 - len(job))
    for i in range(16):
        w[16 + i] = int.from_bytes(jb[8 * i:8 * i + 8], "little")
    w[32] = int.from_bytes(b"0".ljust(8, b"\0"), "little")
    w[57] = latch
    for c in range(2):
        base = 58 + 12 * c
        w[base:base + 12] = [1, 2, 3 | 3 << 8 | 1 << 16 | 2 << 24, 5, 10, 0, 1, 1, 0, 0, 1, 0]
    w[90:99] = [ring_seq, 1, 1 << 16 | 2 << 24, 5, 10, 0, 1, 100, 200]
    return b"".join(struct.pack("<Q", x) for x in w)


put("record_segment", "raw-valid", b"\x02" + record())
put("record_segment", "raw-odd-slot", b"\x00" + record(ring_seq=3))
put("record_segment", "raw-rank-out-of-range", b"\x02" + record(rank=3, world=2))
put("record_segment", "raw-short", b"\x00" + record()[:24])
put("record_segment", "template-progress", b"\x03" + bytes([58 // 3 + 1]) + struct.pack("<QQ", 7, 7))
put("record_segment", "template-ring", b"\x01" + bytes([30]) + struct.pack("<QQQ", 4, 2, 9 << 16))

# --- catalog: fuzz/corpus/catalog/seed-built is what `scout catalog build --rows 1-40 --experts 2 --sms 8
# --gpu-model none` wrote; these are edge cases beside it.
with open(os.path.join(CORPUS, "catalog", "seed-built")) as f:
    built = json.load(f)
put("catalog", "inconsistent-totals", js(dict(built, totals={"shapes": 1, "representatives": 2})))
put("catalog", "major-2", js(dict(built, schema_version="2.0")))
put("catalog", "no-environment", js({k: v for k, v in built.items() if k != "environment"}))

# --- straggler evidence (lib/straggler/evidence.hpp): --evidence-in JSON, and a round's CBOR as the gather carries it
def cbor(x):
    def head(major, n):
        if n < 24:
            return bytes([major << 5 | n])
        for add, fmt_ in ((24, ">B"), (25, ">H"), (26, ">I"), (27, ">Q")):
            if n < 1 << (8 * struct.calcsize(fmt_)):
                return bytes([major << 5 | add]) + struct.pack(fmt_, n)
    if isinstance(x, bool):
        return b"\xf5" if x else b"\xf4"
    if isinstance(x, int):
        return head(0, x) if x >= 0 else head(1, -1 - x)
    if isinstance(x, str):
        b = x.encode()
        return head(3, len(b)) + b
    if isinstance(x, list):
        return head(4, len(x)) + b"".join(cbor(v) for v in x)
    if isinstance(x, dict):
        return head(5, len(x)) + b"".join(cbor(k) + cbor(v) for k, v in x.items())
    raise TypeError(type(x))


def straggler_round(index, world=3, slow=1, baseline=False, observer=-1):
    ranks = []
    for r in range(world):
        events, t = [], 1_700_000_000_000_000_000 + index * 10_000_000
        for k in range(4):
            compute = 2_000_000 * (2 if r == slow else 1)
            events.append([index * 4 + k + 1, "0x00000000000000a1", 1, 1024, index * 4 + k + 1, t + compute, t + compute + 300_000])
            t += 4_400_000
        ranks.append({"rank": r, "node": "n0", "coords": [r, 0, 0, 0, 0, 0], "step": index * 4, "read_ns": t,
                      "written": index * 4 + 4, "sched": [index * 8_000_000 * (2 if r == slow else 1), index * 100_000],
                      "events": events})
    out = {"kind": "scout.straggler-round", "job": "j", "observer": observer, "world": world, "ranks": ranks}
    if baseline:
        out["baseline"] = True
    return out


put("straggler_evidence", "evidence", js({"schema": "scout.straggler-evidence", "version": 1, "job": "j",
                                          "rounds": [straggler_round(i, baseline=i == 0) for i in range(4)]}))
put("straggler_evidence", "evidence-no-counters", js({"schema": "scout.straggler-evidence", "version": 1, "job": "j",
                                                      "rounds": [dict(x, ranks=[{k: v for k, v in r.items() if k not in ("sched", "written")} for r in x["ranks"]])
                                                                 for x in (straggler_round(i) for i in range(2))]}))
put("straggler_evidence", "round-cbor", cbor(straggler_round(2, observer=1)))
# The CPU cgroup counters (nr_periods, nr_throttled, throttled_ns, quota_us, period_us): a throttled rank.
put("straggler_evidence", "evidence-cgroup", js({"schema": "scout.straggler-evidence", "version": 1, "job": "j",
                                                 "rounds": [dict(x, ranks=[dict(r, cgroup=[i * 10, i * (4 if r["rank"] == 1 else 0),
                                                                                           i * (40_000_000 if r["rank"] == 1 else 0),
                                                                                           20000 if r["rank"] == 1 else -1, 100000])
                                                                           for r in x["ranks"]])
                                                            for i, x in enumerate(straggler_round(i, baseline=i == 0) for i in range(3))]}))
# The observer's process state samples (samples, stopped): rank 1 stopped in 40% of them, in the JSON file and
# a round on the wire.
def stopped_round(i, **kw):
    x = straggler_round(i, **kw)
    for r in x["ranks"]:
        if not x.get("baseline"):
            r["stopped"] = [300, 120 if r["rank"] == 1 else 0]
    return x


put("straggler_evidence", "evidence-stopped", js({"schema": "scout.straggler-evidence", "version": 1, "job": "j",
                                                  "rounds": [stopped_round(i, baseline=i == 0) for i in range(4)]}))
put("straggler_evidence", "round-cbor-stopped", cbor(stopped_round(2, observer=1)))


# --- hang node positions (lib/hang/position.cpp) --------------------------------
def _mix(rank):
    m = (1 << 64) - 1
    z = (rank + 0x9E3779B97F4A7C15) & m
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & m
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & m
    return z ^ (z >> 31)


def node_position(observer, ranks, world, clean=True, collected=1_800_000_000_000_000_000, newest=None):
    newest = collected - 1_000_000_000 if newest is None else newest
    mix = sum(_mix(r) for r in ranks) & ((1 << 64) - 1)
    if mix >= 1 << 63:
        mix -= 1 << 64
    return struct.pack("<IHH7q", 0x31504353, 1, 1 if clean else 0, observer, collected, newest, world, len(ranks),
                       sum(ranks), mix)


put("node_position", "healthy-three-nodes", b"".join(node_position(o, [2 * o, 2 * o + 1], 6) for o in range(3)))
put("node_position", "one-unclean", node_position(0, [0, 1], 4) + node_position(1, [2, 3], 4, clean=False))
put("node_position", "silent", b"".join(node_position(o, [o], 2, newest=1) for o in range(2)))
put("node_position", "duplicate-rank", node_position(0, [0, 1], 4) + node_position(1, [1, 3], 4))
put("node_position", "truncated", node_position(0, [0], 1)[:40])


# --- verdict JSON from a hierarchy's leaders (lib/report/verdict.cpp verdict_from_json) ---
_verdict = {"schema": "scout.verdict", "schema_version": "1.0", "command": "probe-hang", "job": "j",
            "created_at": "2026-12-03T04:00:00.000Z", "status": "attributed", "scope": "rank",
            "summary": "stopped_rank: rank 3 (process_stopped)",
            "suspects": [{"rank": 3, "node": "n1", "reason": "process_stopped", "evidence": {"step": 7}},
                         {"rank": None, "node": "node2", "reason": "node_unreachable", "evidence": {}}],
            "groups": [{"kind": "replica", "members": [0, 1, 2], "mode": "exact", "status": "attributed",
                        "reason": "strict_majority", "outliers": [2], "values": [1, 1, 2], "stats": {}}],
            "action": "restart_in_place", "details": {"kind": "stopped_rank", "ranks": []}}
put("verdict_json", "attributed", js(_verdict))
put("verdict_json", "healthy-positions", js(dict(_verdict, status="healthy", scope="job", suspects=[], groups=[],
                                                 action="none", details={"ranks_listed": "positions"})))
put("verdict_json", "bad-status", js(dict(_verdict, status="fine")))
put("verdict_json", "not-object", "[1, 2, 3]")


# --- replay: a node's round-0 status and SRP1 tensor packs (lib/replay/) ----------
put("replay_node_status", "has-recipes", json.dumps(
    {"has": True, "error": "", "digest": "0x00000000deadbeef", "bytes": 4096,
     "files": {"layer3/manifest.json": "0x0123456789abcdef", "layer3/module.pt": "0xfedcba9876543210"}}))
put("replay_node_status", "none", json.dumps({"has": False, "error": "", "digest": "0x0000000000000000", "bytes": 0,
                                              "files": {}}))
put("replay_node_status", "damaged", json.dumps({"has": True, "error": "module.pt: truncated",
                                                 "digest": "0x0000000000000000", "bytes": 0, "files": {}}))
put("replay_node_status", "bad-digest", json.dumps({"has": True, "error": "", "digest": 12, "bytes": 0, "files": {}}))


def srp1(tensors):
    out = b"SRP1" + struct.pack("<I", len(tensors))
    for name, dtype, shape, data in tensors:
        n = name.encode()
        out += struct.pack("<H", len(n)) + n + struct.pack("<BB", dtype, len(shape))
        out += b"".join(struct.pack("<q", d) for d in shape) + struct.pack("<Q", len(data)) + data
    return out


put("replay_pack", "two-tensors", srp1([("input", 2, [2, 3], bytes(range(24))), ("rng", 5, [1], bytes(8))]))
put("replay_pack", "empty", srp1([]))
put("replay_pack", "scalar", srp1([("s", 1, [], bytes(8))]))
put("replay_pack", "size-mismatch", srp1([("x", 2, [4], bytes(8))]))
put("replay_pack", "truncated", srp1([("x", 2, [2], bytes(8))])[:-3])
