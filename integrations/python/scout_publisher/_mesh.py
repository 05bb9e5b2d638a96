"""The rank's coordinates (d, s, t, p, c, e) found from the job itself, used
when neither SCOUT_MESH nor enable(mesh=/coords=) gave them.

Sources, in order of trust (a later, better source replaces an earlier one):
- a DeviceMesh spanning the whole world (init_device_mesh, the meshes of
  FSDP2 / DTensor / TorchTitan): its named dims map to scout's dims (dp and
  dp_replicate -> d, dp_shard and fsdp -> s, tp -> t, pp -> p, cp -> c,
  ep -> e; flattened names such as dp_shard_cp are ignored). A 1-D unnamed
  mesh is FSDP2's sharding mesh (s); a 2-D unnamed one HSDP's (d, s).
- Megatron-Core's parallel_state (when imported and initialized): data,
  tensor, pipeline, context and expert parallel ranks.
- DeepSpeed's groups (when imported): data / tensor (model) / pipeline /
  expert parallel ranks.
The coordinates go into the record (scout_record_set_coords); `scout
probe-hang` then forms peer groups from them with no configuration.
"""
import sys

_NAMES = {"dp": 0, "dp_replicate": 0, "ddp": 0, "replicate": 0, "dp_shard": 1, "fsdp": 1, "shard": 1, "tp": 2,
          "pp": 3, "cp": 4, "ep": 5}

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


def observe_frameworks():
    """Megatron-Core / DeepSpeed parallel state, where imported and set up."""
    if _state["pub"] is None:
        return
    ps = sys.modules.get("megatron.core.parallel_state")
    if ps is not None:
        try:
            if ps.model_parallel_is_initialized():
                c = [ps.get_data_parallel_rank(), 0, ps.get_tensor_model_parallel_rank(),
                     ps.get_pipeline_model_parallel_rank(),
                     ps.get_context_parallel_rank() if hasattr(ps, "get_context_parallel_rank") else 0,
                     ps.get_expert_model_parallel_rank() if hasattr(ps, "get_expert_model_parallel_rank") else 0]
                _offer([int(x) for x in c], 30, "megatron_core")
                return
        except Exception:
            pass
    groups = sys.modules.get("deepspeed.utils.groups")
    if groups is not None:
        try:
            def get(name):
                fn = getattr(groups, name, None)
                return int(fn()) if fn is not None else 0
            c = [get("_get_data_parallel_rank"), 0, get("_get_model_parallel_rank"),
                 get("_get_pipe_parallel_rank") if hasattr(groups, "_get_pipe_parallel_rank") else 0, 0,
                 get("_get_expert_parallel_rank") if hasattr(groups, "_get_expert_parallel_rank") else 0]
            _offer(c, 25, "deepspeed")
        except Exception:
            pass


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
