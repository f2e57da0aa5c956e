"""Process groups and their set-up: ``init_process_group`` and friends over MPI.

A ``ProcessGroup`` wraps one MPI intra-communicator (mpi4py) and, under the
"nccl" backend, an NCCL communicator over the same ranks for CUDA tensors. How
the ranks find each other:

- under ``mpiexec`` (what the launcher uses when it finds one): MPI's own
  ``COMM_WORLD``; ``RANK``/``WORLD_SIZE`` in the environment must agree with it;
- started by another launcher with ``RANK``, ``WORLD_SIZE``, ``MASTER_ADDR`` and
  ``MASTER_PORT`` (torchrun's variables): each process starts MPI alone, rank 0
  opens an MPI port and hands its name to the others over one TCP connection
  each at ``MASTER_ADDR:MASTER_PORT``, and they join with
  ``MPI_Comm_connect``/``accept`` (see ``_rendezvous``);
- neither: a world of one process.

mpi4py is imported only here and only when a group is made, so ``import
tracegrad.distributed`` never fails; without it ``is_available()`` is False and
``init_process_group`` raises a ``RuntimeError`` that says how to install it.
"""
import datetime
import importlib.util
import os

INSTALL_HINT = ('tracegrad.distributed needs mpi4py and an MPI library: '
                'pip install "tracegrad[distributed]" (or: pip install mpi4py mpich)')
default_pg_timeout = datetime.timedelta(minutes=30)


class Backend:
    """PyTorch's backend names. "gloo" (PyTorch's CPU backend) runs on MPI here."""
    MPI = "mpi"
    NCCL = "nccl"
    GLOO = "gloo"
    UNDEFINED = "undefined"


def is_available():
    """True when mpi4py can be imported (nothing is started)."""
    return importlib.util.find_spec("mpi4py") is not None


def mpi():
    """The ``mpi4py.MPI`` module, or a RuntimeError that says how to install it."""
    try:
        from mpi4py import MPI
    except ImportError as e:
        raise RuntimeError(f"{INSTALL_HINT} ({e})") from None
    return MPI


class ProcessGroup:
    """A set of ranks and the communicator that joins them. ``ranks`` are global ranks in
    group-rank order."""

    def __init__(self, comm, ranks, backend, timeout, nccl=None):
        from ._check import debug_level
        self.comm = comm
        self.ranks = list(ranks)
        self.backend = backend
        self.timeout = timeout
        self.nccl = nccl                # an _nccl.NcclGroup for CUDA tensors, or None
        self._index = {g: i for i, g in enumerate(self.ranks)}
        # the cross-rank shape/dtype check's own communicator, and what it has seen (_check)
        self.debug = debug_level()
        self.check_comm = dup(comm, timeout, "init_process_group") if comm.Get_size() > 1 \
            else None
        self.seen = set()

    def rank(self):
        return self.comm.Get_rank()

    def size(self):
        return self.comm.Get_size()

    def group_rank(self, global_rank, what="rank"):
        try:
            return self._index[global_rank]
        except KeyError:
            raise ValueError(f"{what} {global_rank} is not part of this process group "
                             f"(its ranks are {self.ranks})") from None

    def name(self):
        return self.backend

    def __repr__(self):
        return f"ProcessGroup(backend={self.backend!r}, ranks={self.ranks})"


class _GroupMember:
    """PyTorch's ``GroupMember``: ``WORLD`` is the default group once initialised;
    ``NON_GROUP_MEMBER`` is what ``new_group`` returns to a rank outside the group."""
    WORLD = None
    NON_GROUP_MEMBER = object()


GroupMember = _GroupMember
_state = {"world": None, "groups": []}


def is_initialized():
    return _state["world"] is not None


def _world():
    pg = _state["world"]
    if pg is None:
        raise RuntimeError("Default process group has not been initialized, please make sure to "
                           "call init_process_group.")
    return pg


def resolve(group):
    """The ``ProcessGroup`` a collective's ``group=`` argument names."""
    if group is None or group is GroupMember.WORLD:
        return _world()
    if group is GroupMember.NON_GROUP_MEMBER:
        raise RuntimeError("this rank is not part of the process group it was given")
    return group


def dup(comm, timeout, what):
    """``comm.Dup()``, waited for under ``timeout`` (a rank that never comes raises)."""
    from ._wait import poll
    new, request = comm.Idup()
    poll(request, timeout, what)
    return new


def _env_int(*names):
    for n in names:
        v = os.environ.get(n)
        if v not in (None, ""):
            return int(v)
    return None


def init_process_group(backend=None, init_method=None, timeout=None, world_size=-1, rank=-1,
                       store=None, group_name="", pg_options=None, device_id=None):
    """Join this process to the default group (PyTorch's signature). ``backend``: "mpi",
    "gloo" (the same, on MPI) or "nccl" (NCCL through CuPy for CUDA tensors, MPI for the
    rest); None picks "mpi". ``init_method`` may be None or "env://"; ``world_size`` and
    ``rank`` default to the environment (or MPI's own under ``mpiexec``)."""
    if _state["world"] is not None:
        raise RuntimeError("trying to initialize the default process group twice!")
    backend = (backend or Backend.MPI).lower() if isinstance(backend, str) or backend is None \
        else str(backend).lower()
    if backend not in (Backend.MPI, Backend.GLOO, Backend.NCCL):
        raise ValueError(f"init_process_group: unknown backend {backend!r}; expected 'mpi', "
                         "'gloo' (runs on MPI) or 'nccl'")
    if init_method not in (None, "env://"):
        raise ValueError(f"init_process_group: init_method {init_method!r} is not supported; "
                         "use None or 'env://' (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT)")
    if timeout is None:
        timeout = default_pg_timeout
    seconds = timeout.total_seconds() if hasattr(timeout, "total_seconds") else float(timeout)
    MPI = mpi()
    world = MPI.COMM_WORLD
    want_size = world_size if world_size not in (None, -1) else _env_int("WORLD_SIZE")
    want_rank = rank if rank not in (None, -1) else _env_int("RANK")
    if world.Get_size() > 1:                # started by mpiexec
        if want_size is not None and want_size != world.Get_size():
            raise RuntimeError(f"init_process_group: world_size is {want_size} but mpiexec "
                               f"started {world.Get_size()} processes")
        if want_rank is not None and want_rank != world.Get_rank():
            raise RuntimeError(f"init_process_group: rank is {want_rank} but MPI says "
                               f"{world.Get_rank()}")
        comm = dup(world, seconds, "init_process_group")
    elif want_size is not None and want_size > 1:
        if want_rank is None:
            raise RuntimeError("init_process_group: WORLD_SIZE is set but RANK is not")
        from ._rendezvous import join
        comm = join(MPI, want_rank, want_size, seconds)
    else:
        comm = world.Dup()                  # a world of one: nothing to wait for
    size, me = comm.Get_size(), comm.Get_rank()
    os.environ.setdefault("RANK", str(me))
    os.environ.setdefault("WORLD_SIZE", str(size))
    os.environ.setdefault("LOCAL_RANK", str(me))
    nccl = None
    if backend == Backend.NCCL:
        from ._nccl import NcclGroup
        nccl = NcclGroup(comm, device_id)
        nccl.timeout = seconds
    pg = ProcessGroup(comm, range(size), Backend.MPI if backend == Backend.GLOO else backend,
                      seconds)
    pg.nccl = nccl
    _state["world"] = pg
    GroupMember.WORLD = pg
    if size > 1:
        from ._exit import install
        install(comm)


def destroy_process_group(group=None):
    """Free ``group``'s communicator, or (None) every group and the default one."""
    if group is None or group is GroupMember.WORLD:
        for pg in _state["groups"] + ([_state["world"]] if _state["world"] else []):
            _free(pg)
        _state["groups"] = []
        _state["world"] = None
        GroupMember.WORLD = None
        from ._exit import uninstall
        from ._monitor import report_destroyed
        uninstall()
        report_destroyed()
    elif group is not GroupMember.NON_GROUP_MEMBER:
        _free(group)
        if group in _state["groups"]:
            _state["groups"].remove(group)


def _free(pg):
    if pg.nccl is not None:
        pg.nccl.destroy()
        pg.nccl = None
    for name in ("check_comm", "comm"):
        comm = getattr(pg, name)
        if comm is not None:
            try:
                comm.Free()
            except Exception:   # noqa: BLE001 - already finalised at exit
                pass
            setattr(pg, name, None)


def get_rank(group=None):
    """This process's rank in ``group`` (the default group: the global rank); -1 when it is
    not a member."""
    if group is GroupMember.NON_GROUP_MEMBER:
        return -1
    return resolve(group).rank()


def get_world_size(group=None):
    if group is GroupMember.NON_GROUP_MEMBER:
        return -1
    return resolve(group).size()


def get_backend(group=None):
    return resolve(group).backend


def get_process_group_ranks(group):
    return list(resolve(group).ranks)


def get_global_rank(group, group_rank):
    return resolve(group).ranks[group_rank]


def get_group_rank(group, global_rank):
    return resolve(group).group_rank(global_rank)


def new_group(ranks=None, timeout=None, backend=None, pg_options=None,
              use_local_synchronization=False):
    """A group over ``ranks`` (global ranks; None: all). Every rank of the default group must
    call it, as in PyTorch; a rank outside ``ranks`` gets ``GroupMember.NON_GROUP_MEMBER``."""
    world = _world()
    ranks = list(range(world.size())) if ranks is None else sorted(int(r) for r in ranks)
    if len(set(ranks)) != len(ranks) or any(r < 0 or r >= world.size() for r in ranks):
        raise ValueError(f"new_group: ranks {ranks} must be distinct ranks below the world size "
                         f"{world.size()}")
    MPI = mpi()
    from ._wait import poll
    me = world.rank()
    member = me in ranks
    # MPI has no nonblocking Split: a polled barrier first, so that a missing rank raises at
    # the timeout instead of hanging here
    poll(world.comm.Ibarrier(), world.timeout, "new_group")
    comm = world.comm.Split(0 if member else MPI.UNDEFINED, ranks.index(me) if member else 0)
    if not member:
        return GroupMember.NON_GROUP_MEMBER
    seconds = world.timeout if timeout is None else timeout.total_seconds()
    pg = ProcessGroup(comm, ranks, backend or world.backend, seconds)
    if world.nccl is not None and (backend in (None, Backend.NCCL)):
        from ._nccl import NcclGroup
        pg.nccl = NcclGroup(comm, world.nccl.device_id)
        pg.nccl.timeout = seconds
    _state["groups"].append(pg)
    return pg
