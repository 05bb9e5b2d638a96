"""The rank's coordinates (d, s, t, p, c, e) found from the job itself, used
when neither SCOUT_MESH nor enable(mesh=/coords=) gave them.

Sources, in order of trust (a later, better source replaces an earlier one):
- a DeviceMesh spanning the whole world (init_device_mesh, the meshes of
  FSDP2 / DTensor / TorchTitan): its named dims map to scout's dims (dp and
  dp_replicate -> d, dp_shard and fsdp -> s, tp -> t, pp -> p, cp -> c,
  ep -> e; flattened names such as dp_shard_cp are ignored). A 1-D unnamed
  mesh is FSDP2's sharding mesh (s); a 2-D unnamed one HSDP's (d, s).
- Megatron-Core's parallel_state (when imported and initialize_model_parallel
  ran): data (without cp), tensor, pipeline and context parallel ranks.
- DeepSpeed's groups (when imported): the mpu it was given or built (a
  deepspeed.pipe PipelineParallelGrid: data / slice / pipe ranks) or AutoTP's
  tensor and data groups; DeepSpeed's own meshes through their dim names.
  Both are polled at optimizer steps, and offered only when their sizes
  multiply to the world (a product mesh, which scout's peer groups assume).
  Tested against the real packages (megatron-core 0.16.1, deepspeed 0.19.8,
  torch 2.15, gloo on CPU) by tests/integration/test_torch2_frameworks.py.
The coordinates go into the record (scout_record_set_coords); `scout
probe-hang` then forms peer groups from them with no configuration.
"""
import sys

_NAMES = {"dp": 0, "dp_replicate": 0, "ddp": 0, "replicate": 0, "dp_shard": 1, "fsdp": 1, "shard": 1, "tp": 2,
          "pp": 3, "cp": 4, "ep": 5,
          # DeepSpeed's meshes (AutoTP: data_parallel x tensor_parallel; Ulysses: data_parallel x sequence_parallel)
          "data_parallel": 0, "tensor_parallel": 2, "sequence_parallel": 4}

_state = {"pub": None, "score": -1, "coords": None, "source": None}


def reset(pub):
    _state.update(pub=pub, score=-1, coords=None, source=None)


def found():
    """(coords, source) found so far, or (None, None)."""
    return _state["coords"], _state["source"]


def _offer(coords, score, source):
    pub = _state["pub"]
    if pub is None or score <= _state["score"]:
        return False
    _state.update(score=score, coords=list(coords), source=source)
    try:
        pub.record.set_coords(coords)
        pub.coords = list(coords)
        pub.coords_source = source
    except Exception:
        return False
    return True


def coords_from_device_mesh(mesh, world):
    """(coords, score) of this rank in `mesh`, or None when the mesh does not
    span the world or its dims cannot be named."""
    try:
        if int(mesh.mesh.numel()) != int(world):
            return None
        coord = mesh.get_coordinate()
        if coord is None:
            return None
        names = tuple(mesh.mesh_dim_names or ())
        ndim = mesh.mesh.dim()
    except Exception:
        return None
    out = [0] * 6
    if names:
        used = 0
        for name, c in zip(names, coord):
            idx = _NAMES.get(name)
            if idx is None:
                continue
            out[idx] = int(c)
            used += 1
        if used == 0:
            return None
        return out, 10 + used
    if ndim == 1:
        out[1] = int(coord[0])
        return out, 5
    if ndim == 2:
        out[0], out[1] = int(coord[0]), int(coord[1])
        return out, 6
    return None


def observe_device_mesh(mesh):
    """Called for every DeviceMesh created (patched __init__)."""
    if _state["pub"] is None:
        return
    try:
        import torch.distributed as dist
        world = dist.get_world_size()
    except Exception:
        return
    got = coords_from_device_mesh(mesh, world)
    if got is not None:
        _offer(got[0], got[1], "device_mesh")


def _rank_in(group):
    import torch.distributed as dist
    return int(dist.get_rank(group=group)), int(dist.get_world_size(group=group))


def _checked(ranks_sizes, world):
    """coords [d, 0, t, p, c, 0] from (rank, size) pairs for d, t, p, c, or
    None unless the sizes multiply to the world (a product mesh: what scout's
    peer groups are formed from)."""
    product = 1
    for r, n in ranks_sizes:
        if not 0 <= r < n:
            return None
        product *= n
    if product != int(world):
        return None
    (d, _), (t, _), (p, _), (c, _) = ranks_sizes
    return [d, 0, t, p, c, 0]


def megatron_coords(ps, world):
    """Coordinates from Megatron-Core's parallel_state once
    initialize_model_parallel ran, else None. Only group.rank()/size() are
    read (no getter that creates a group). d is the data-parallel rank
    without context parallel, c the context-parallel rank. Expert parallel is
    not a separate dim of the world there (its groups are carved out of
    dp x cp), so e stays 0 and the dense groups stay right."""
    if not ps.model_parallel_is_initialized():
        return None
    out = [(int(ps.get_data_parallel_rank()), int(ps.get_data_parallel_world_size())),
           (int(ps.get_tensor_model_parallel_rank()), int(ps.get_tensor_model_parallel_world_size())),
           (int(ps.get_pipeline_model_parallel_rank()), int(ps.get_pipeline_model_parallel_world_size()))]
    cp = (0, 1)
    if hasattr(ps, "get_context_parallel_group") and ps.get_context_parallel_group(check_initialized=False) is not None:
        cp = (int(ps.get_context_parallel_rank()), int(ps.get_context_parallel_world_size()))
    return _checked(out + [cp], world)


def _first(obj, *names):
    for name in names:
        fn = getattr(obj, name, None)
        if fn is not None:
            return fn
    return None


def deepspeed_coords(groups, world):
    """Coordinates from DeepSpeed's groups, else None: its `mpu` (a
    PipelineParallelGrid of deepspeed.pipe, or the mpu a Megatron-DeepSpeed
    job passed to deepspeed.initialize), or AutoTP's tensor / data groups.
    Never calls groups' own _get_* helpers: without an mpu they clone the
    world group (a collective) when called. The grid's "model parallel" rank
    spans pipe x slice; t is its slice (tensor) rank. ZeRO alone (no mpu, no
    tensor group) gives None: the default coordinates (d = rank) are right."""
    mpu = getattr(groups, "mpu", None)
    if mpu is not None and mpu is not groups:
        dp = (int(mpu.get_data_parallel_rank()), int(mpu.get_data_parallel_world_size()))
        tr = _first(mpu, "get_tensor_model_parallel_rank", "get_slice_parallel_rank")
        tn = _first(mpu, "get_tensor_model_parallel_world_size", "get_slice_parallel_world_size")
        pr = _first(mpu, "get_pipe_parallel_rank", "get_pipeline_model_parallel_rank")
        pn = _first(mpu, "get_pipe_parallel_world_size", "get_pipeline_model_parallel_world_size")
        sr = _first(mpu, "get_sequence_parallel_rank")
        sn = _first(mpu, "get_sequence_parallel_world_size")
        tp = (int(tr()), int(tn())) if tr and tn else (0, 1)
        pp = (int(pr()), int(pn())) if pr and pn else (0, 1)
        cp = (int(sr()), int(sn())) if sr and sn else (0, 1)
        return _checked([dp, tp, pp, cp], world)
    tp_group = getattr(groups, "_TENSOR_MODEL_PARALLEL_GROUP", None)
    dp_group = getattr(groups, "_DATA_PARALLEL_GROUP", None)
    if tp_group is not None and dp_group is not None:
        return _checked([_rank_in(dp_group), _rank_in(tp_group), (0, 1), (0, 1)], world)
    return None


def observe_frameworks():
    """Megatron-Core / DeepSpeed parallel state, where imported and set up
    (polled at optimizer steps: the state exists once the job set it up)."""
    if _state["pub"] is None:
        return
    try:
        import torch.distributed as dist
        if not dist.is_initialized():
            return
        world = dist.get_world_size()
    except Exception:
        return
    ps = sys.modules.get("megatron.core.parallel_state")
    if ps is not None:
        try:
            c = megatron_coords(ps, world)
        except Exception:
            c = None
        if c is not None:
            _offer(c, 30, "megatron_core")
            return
    groups = sys.modules.get("deepspeed.utils.groups")
    if groups is not None:
        try:
            c = deepspeed_coords(groups, world)
        except Exception:
            c = None
        if c is not None:
            _offer(c, 25, "deepspeed")


def install(pub):
    """Watches DeviceMesh creation (once) and records coordinates into `pub`."""
    reset(pub)
    try:
        from torch.distributed import device_mesh as dm
    except Exception:
        return
    cls = getattr(dm, "DeviceMesh", None)
    if cls is None or getattr(cls, "_scout_watched", False):
        return
    orig_init = cls.__init__

    def __init__(self, *args, **kwargs):
        orig_init(self, *args, **kwargs)
        try:
            observe_device_mesh(self)
        except Exception:
            pass

    import functools
    functools.update_wrapper(__init__, orig_init)
    cls.__init__ = __init__
    cls._scout_watched = True
