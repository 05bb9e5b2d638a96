"""ctypes binding of libscout_publisher.so (integrations/publisher/scout_publisher.h)."""
import ctypes
import ctypes.util
import os

OK, EINVAL, EEXIST, EPERM, ESYS, EBUSY = 0, -1, -2, -3, -4, -5

PHASES = {"unknown": 0, "forward": 1, "backward": 2, "optimizer": 3, "dataloader": 4, "checkpoint": 5,
          "collective": 6, "idle": 7, "comm_error": 8,
          "terminated": 9}
# What an exit time is (enum scout_exit_kind in scout_publisher.h).
EXIT_KINDS = {"unknown": 0, "returned": 1, "completed": 2, "waited": 3, "ordered": 4}
COLLECTIVES = {"none": 0, "all_reduce": 1, "all_gather": 2, "all_gather_into_tensor": 3, "reduce_scatter": 4,
               "reduce_scatter_tensor": 5, "all_to_all": 6, "all_to_all_single": 7, "broadcast": 8, "reduce": 9,
               "gather": 10, "scatter": 11, "barrier": 12, "send": 13, "recv": 14, "other": 15}

_HERE = os.path.dirname(os.path.abspath(__file__))


class PublisherError(RuntimeError):
    """A publisher call failed; `status` is the SCOUT_E* code."""

    def __init__(self, what, status, lib=None):
        text = lib.scout_strerror(status).decode() if lib is not None else str(status)
        super().__init__(f"{what}: {text} (status {status})")
        self.status = status


class _Options(ctypes.Structure):
    _fields_ = [("job", ctypes.c_char_p), ("attempt", ctypes.c_char_p), ("rank", ctypes.c_int64),
                ("world_size", ctypes.c_int64), ("coords", ctypes.POINTER(ctypes.c_int64)),
                ("host", ctypes.c_char_p)]


def library_candidates():
    """Where the library is looked for, in order: $SCOUT_PUBLISHER_LIB, next to
    this package, the build directory ($SCOUT_BUILD_DIR/lib or the source tree's
    build/lib), then the system's library path."""
    out = []
    if os.environ.get("SCOUT_PUBLISHER_LIB"):
        out.append(os.environ["SCOUT_PUBLISHER_LIB"])
    out.append(os.path.join(_HERE, "libscout_publisher.so"))
    if os.environ.get("SCOUT_BUILD_DIR"):
        out.append(os.path.join(os.environ["SCOUT_BUILD_DIR"], "lib", "libscout_publisher.so"))
    out.append(os.path.normpath(os.path.join(_HERE, "..", "..", "..", "build", "lib", "libscout_publisher.so")))
    # Installed layout: <prefix>/share/scout/python/scout_publisher -> <prefix>/lib.
    out.append(os.path.normpath(os.path.join(_HERE, "..", "..", "..", "..", "lib", "libscout_publisher.so")))
    found = ctypes.util.find_library("scout_publisher")
    if found:
        out.append(found)
    return out


def load(path=None):
    """Loads the library (from `path`, or the first candidate that exists) and declares its functions."""
    tried = [path] if path else library_candidates()
    errors = []
    for p in tried:
        if os.path.sep in p and not os.path.exists(p):
            errors.append(f"{p}: missing")
            continue
        try:
            lib = ctypes.CDLL(p)
            break
        except OSError as e:
            errors.append(f"{p}: {e}")
    else:
        raise PublisherError("cannot load libscout_publisher.so (set SCOUT_PUBLISHER_LIB); tried " + "; ".join(errors), ESYS)
    u8, u64, i64, p = ctypes.c_uint8, ctypes.c_uint64, ctypes.c_int64, ctypes.c_void_p
    lib.scout_record_create.argtypes = [ctypes.POINTER(_Options), ctypes.POINTER(p)]
    lib.scout_record_close.argtypes = [p, ctypes.c_int]
    lib.scout_step_begin.argtypes = [p, u64]
    lib.scout_phase.argtypes = [p, u8]
    lib.scout_collective_enter.argtypes = [p, u64, u8, u8, u64, i64, u64, ctypes.POINTER(u64)]
    lib.scout_collective_exit.argtypes = [p, u64]
    lib.scout_collective_fail.argtypes = [p, u64]
    lib.scout_collective_exit_kind.argtypes = [p, u64, u8]
    lib.scout_collective_exit_kind.restype = ctypes.c_int
    lib.scout_heartbeat.argtypes = [p]
    lib.scout_record_watch_termination.argtypes = [p]
    lib.scout_record_set_coords.argtypes = [p, ctypes.POINTER(i64)]
    lib.scout_group_id.argtypes = [ctypes.POINTER(i64), ctypes.c_size_t]
    lib.scout_group_id.restype = u64
    lib.scout_segment_name.argtypes = [ctypes.c_char_p, i64, ctypes.c_char_p, ctypes.c_size_t]
    lib.scout_strerror.argtypes = [ctypes.c_int]
    lib.scout_strerror.restype = ctypes.c_char_p
    lib.scout_layout_version.restype = ctypes.c_uint32
    for name in ("scout_record_create", "scout_record_close", "scout_step_begin", "scout_phase",
                 "scout_collective_enter", "scout_collective_exit", "scout_collective_fail", "scout_heartbeat",
                 "scout_segment_name", "scout_record_set_coords", "scout_record_watch_termination"):
        getattr(lib, name).restype = ctypes.c_int
    return lib


class Record:
    """One rank's record. Publish calls return the C status (0 ok; SCOUT_EBUSY
    when another thread was writing: the event is dropped, never waited for)."""

    def __init__(self, lib, job, rank, world_size, coords=None, host=None, attempt=None):
        self._lib = lib
        self._handle = ctypes.c_void_p()
        c = (ctypes.c_int64 * 6)(*(list(coords or [])[:6] + [0] * (6 - len(list(coords or [])[:6]))))
        opts = _Options(job.encode(), attempt.encode() if attempt is not None else None, int(rank), int(world_size),
                        c, host.encode() if host else None)
        status = lib.scout_record_create(ctypes.byref(opts), ctypes.byref(self._handle))
        if status != OK:
            raise PublisherError(f"cannot create the record of job {job!r} rank {rank}", status, lib)
        self.job, self.rank, self.world_size = job, int(rank), int(world_size)
        buf = ctypes.create_string_buffer(512)
        lib.scout_segment_name(job.encode(), int(rank), buf, 512)
        self.segment = buf.value.decode()
        self._token = ctypes.c_uint64()
        self._enter = lib.scout_collective_enter
        self._exit = lib.scout_collective_exit
        self._fail = lib.scout_collective_fail
        self._phase = lib.scout_phase
        self._step = lib.scout_step_begin
        self._heartbeat = lib.scout_heartbeat

    def watch_termination(self):
        """SIGTERM marks this record's phase terminated before the process ends (or its previous handler runs)."""
        return self._lib.scout_record_watch_termination(self._handle)

    def step_begin(self, step):
        return self._step(self._handle, step)

    def phase(self, phase):
        """`phase`: a name of PHASES or its number."""
        return self._phase(self._handle, PHASES[phase] if isinstance(phase, str) else phase)

    def enter(self, group, ctype, dtype, count, root_or_op, group_seq):
        """Publishes a collective enter; returns the token for exit (0 when the event was dropped)."""
        token = ctypes.c_uint64()
        if self._enter(self._handle, group, ctype, dtype, count, root_or_op, group_seq, ctypes.byref(token)) != OK:
            return 0
        return token.value

    def exit(self, token, kind=None):
        """The collective entered with `token` completed; `kind` (a name of EXIT_KINDS) says what its
        time is; by default "returned" (the call returned)."""
        if not token:
            return EINVAL
        if kind is None:
            return self._exit(self._handle, token)
        return self._lib.scout_collective_exit_kind(self._handle, token, EXIT_KINDS[kind])

    def fail(self, token):
        """The collective entered with `token` completed with an error: published as "failed", not done."""
        return self._fail(self._handle, token) if token else EINVAL

    def set_coords(self, coords):
        """Replaces the record's (d, s, t, p, c, e)."""
        c = (ctypes.c_int64 * 6)(*(list(coords)[:6] + [0] * (6 - len(list(coords)[:6]))))
        return self._lib.scout_record_set_coords(self._handle, c)

    def heartbeat(self):
        return self._heartbeat(self._handle)

    def close(self, unlink=False):
        """Unmaps the record; removes the segment only when `unlink` (normally records outlive writers)."""
        if self._handle:
            self._lib.scout_record_close(self._handle, 1 if unlink else 0)
            self._handle = ctypes.c_void_p()


def group_id(lib, ranks):
    """Stable id of the process group made of these global ranks (in group order)."""
    arr = (ctypes.c_int64 * len(ranks))(*ranks)
    return lib.scout_group_id(arr, len(ranks))
