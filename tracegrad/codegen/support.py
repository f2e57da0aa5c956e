"""What generated modules import besides NumPy: guard failures and primitive
implementations for ops that have no one-line NumPy template."""
import threading
from sys import getrefcount as _getrefcount

import numpy as np

from tracegrad import dtypes  # noqa: F401 - generated code names dtypes in params
from tracegrad.parallel import get_num_threads
from tracegrad.ops.core import PRIMITIVES
from tracegrad.symbolic import substitute


class GuardFailure(Exception):
    """A data-dependent guard of a compiled variant did not hold: retrace."""

    def __init__(self, index):
        super().__init__(index)
        self.index = index

    def __str__(self):      # the runtime retraces on it; seen by a user only if that fails
        return (f"guard {self.index} of a compiled variant failed: a value the trace read from "
                f"a tensor (.item(), bool(), float(), .tolist()) is not what it was when traced")


def same_value(got, expected):
    """Whether ``got`` (a ``tolist()``) is the value a guard saw when traced: NaN is NaN, and
    ``0.0`` is not ``-0.0`` (a value the trace baked in keeps its sign in the results:
    ``x * v``, ``1 / v``), which ``!=`` would not tell."""
    if type(got) is list:
        return type(expected) is list and len(got) == len(expected) and all(
            same_value(a, b) for a, b in zip(got, expected))
    if type(got) is float and type(expected) is float:
        if got != got or expected != expected:
            return got != got and expected != expected
        return got == expected and (got != 0.0 or str(got) == str(expected))
    return got == expected


class _Primitives:
    """``P.gather`` is the primitive named "gather" (a live view: custom ones appear too)."""

    def __getattr__(self, name):
        try:
            return PRIMITIVES[name]
        except KeyError:
            raise AttributeError(name) from None


P = _Primitives()


# fused groups ---------------------------------------------------------------------------------

class Outputs:
    """Large output arrays of a compiled function's groups, reused from call to call.

    Fresh memory this large comes from the system a page at a time, zeroed when first
    written: 3 ms for a 40 MB result here, as long as a fused pass over it. So
    ``take(name, shape, dtype)`` (a group's output ``name``) hands back an array an earlier
    call made there that nothing refers to any more (no result, view, tensor or saved value
    holds it: its reference count says so), else a new one, and keeps up to ``KEEP`` of them
    for later calls. Its old contents are never read: the group writes every element. Each
    thread has arrays of its own, so two threads never take the same one."""
    KEEP = 2        # a loop that holds the previous call's result while it makes the next

    def __init__(self):
        self._local = threading.local()

    def take(self, name, shape, dtype):
        pools = self._local.__dict__.setdefault("pools", {})
        kept = pools.setdefault(name, [])
        for a, other in zip(kept, held(kept)):
            if not other:
                return a
        a = np.empty(shape, dtype)
        if len(kept) < self.KEEP:
            kept.append(a)
        return a


def held(arrays):
    """For each of ``arrays`` (a list), whether anything besides the list refers to it (a
    result, a view, a tensor, a value saved for backward): its reference count says so."""
    return [count != _UNHELD for count in _counts(arrays)]


def _counts(arrays):
    return [_getrefcount(a) for a in arrays]


_UNHELD = _counts([object()])[0]    # the count of an object only a list refers to


# A dynamic workspace keeps buffer sets for the sizes it saw last, up to this many bytes in
# all (a training loop's few batch sizes, or W2's 64, reuse their buffers; past the budget
# the oldest size's are dropped and made again when it comes back).
SIZES_BUDGET = 64 << 20


class Workspace:
    """Buffers one compiled function reuses from call to call, so that its groups neither
    allocate nor page-fault fresh memory per call. ``kernels``: kernel name -> (copies,
    [(shape, dtype), ...]), one copy per thread; ``slots``: name -> (shape, dtype), arrays
    that carry a value from one group to a later one. ``take`` hands out a set not in use
    (a call running in another thread gets a set of its own); ``give`` returns it. ``xp``:
    the array module the buffers are made by (CuPy for a CUDA variant), NumPy if None."""

    def __init__(self, kernels=None, slots=None, sized=None, xp=None):
        self.kernels, self.slots = kernels or {}, slots or {}
        self.xp = xp or np
        self.dropped = frozenset()  # kernels that need no scratch (see ``drop``)
        self._free = []
        # a dynamic shape: ``sized(*sizes)`` gives (kernels, slots) for the call's sizes, and
        # buffer sets are pooled per sizes (the last few sizes seen)
        self.sized, self._by_size, self._kept = sized, {}, 0

    def take(self, sizes=None):
        if sizes is None:
            return self._free.pop() if self._free else _Buffers(self.kernels, self.slots,
                                                                self.xp, self.dropped)
        pool = self._by_size.pop(sizes, None)
        if pool is None:
            pool = []
        self._by_size[sizes] = pool         # the most recent size last
        if pool:
            return pool.pop()
        buffers = _Buffers(*self.sized(*sizes), self.xp, self.dropped)
        buffers.sizes = sizes
        self._kept += buffers.nbytes
        while self._kept > SIZES_BUDGET and len(self._by_size) > 1:
            oldest = next(iter(self._by_size))      # the size seen longest ago
            self._kept -= sum(b.nbytes for b in self._by_size.pop(oldest))
        code = self.sized.__code__
        buffers.size_of = dict(zip(code.co_varnames[:code.co_argcount], sizes))
        return buffers

    def give(self, buffers):
        if self.sized is None:
            self._free.append(buffers)
            return
        pool = self._by_size.get(buffers.sizes)
        if pool is None:        # its size was dropped while it was in use
            self._kept -= buffers.nbytes
        else:
            pool.append(buffers)

    def drop(self, names):
        """Make no scratch from now on for the kernels ``names``: their NumPy tier was
        replaced by kernels that take none (the CUDA tier's)."""
        self.dropped = self.dropped | frozenset(names)
        self._free.clear()

    def nbytes(self):
        """Bytes of one set of buffers."""
        return buffer_bytes(self.kernels, self.slots, self.dropped)


def buffer_bytes(kernels, slots, dropped=()):
    """Bytes of one set of a workspace's buffers: ``kernels``' scratch but the ``dropped``
    ones', and ``slots``."""
    total = sum(copies * sum(_nbytes(s, d) for s, d in specs)
                for name, (copies, specs) in kernels.items() if name not in dropped)
    return total + sum(_nbytes(s, d) for s, d in slots.values())


def _nbytes(shape, dtype):
    return int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize


class _Buffers:
    def __init__(self, kernels, slots, xp=np, dropped=()):
        nbytes = 0
        for name, (copies, specs) in kernels.items():
            if name in dropped:
                continue
            sets = [[xp.empty(s, d) for s, d in specs] for _ in range(copies)]
            setattr(self, name, sets)
            nbytes += sum(a.nbytes for b in sets for a in b)
        for name, (shape, dtype) in slots.items():
            setattr(self, name, xp.empty(shape, dtype))
            nbytes += getattr(self, name).nbytes
        self.nbytes = nbytes


_pool = None


def run_chunks(kernel, args, scratch, *, rows, step, sliced, trim, combine):
    """Call ``kernel`` over rows ``[0, rows)`` in chunks of ``step`` rows.

    ``args`` are the kernel's inputs and output arrays; those marked in ``sliced`` are
    passed as the chunk's rows, the rest whole. ``scratch`` holds one list of buffers per
    thread (chunks are dealt round-robin, thread 0 being the caller); those marked in
    ``trim`` are cut to the rows of a short last chunk. The kernel's results, partial
    reductions over each chunk's rows, are combined by ``combine`` (per result, the ufunc
    of its primitive's ``Combiner``: "add", "maximum", ...) in chunk order, so the result
    does not depend on the number of threads (``set_num_threads``).
    """
    starts = range(0, rows, step)
    partials = [None] * len(starts)
    threads = min(len(scratch), get_num_threads())

    def work(t):
        buffers = scratch[t]
        for k in range(t, len(starts), threads):
            lo = starts[k]
            hi = min(lo + step, rows)
            part = [a[lo:hi] if s else a for a, s in zip(args, sliced)]
            if hi - lo != step:
                buffers = [b[:hi - lo] if cut else b for b, cut in zip(scratch[t], trim)]
            partials[k] = kernel(*part, *buffers)
    if threads > 1:
        futures = [_executor().submit(work, t) for t in range(1, threads)]
        work(0)
        for f in futures:
            f.result()
    else:
        work(0)
    return tuple(getattr(np, c).reduce(np.stack([p[i] for p in partials]), axis=0)
                 for i, c in enumerate(combine))


def _executor():
    global _pool
    if _pool is None:
        import concurrent.futures
        import os
        _pool = concurrent.futures.ThreadPoolExecutor(max(1, (os.cpu_count() or 1) - 1),
                                                      thread_name_prefix="tracegrad-chunks")
    return _pool


from ctypes import addressof as _addressof, c_char as _c_char  # noqa: E402 - the C tier's
from weakref import ref as _weakref  # noqa: E402 - CKernel's remembered arguments

# the C tier --------------------------------------------------------------------------------

class CKernel:
    """A kernel of the C tier, called as its NumPy tier is: ``kernel(inputs..., outputs...,
    ws)`` returns the partial results (arrays it allocates). Arrays that are not
    C-contiguous in the dtype the kernel was built for are made so first (a copy); the
    kernel runs on ``get_num_threads()`` threads.

    A compiled training step makes dozens of these calls on a few small arrays each, so the
    call's own cost is on the step's critical path. Most arguments are the same arrays call
    after call (workspace slots, parameters, optimizer state): their addresses are kept,
    with a weak reference that tells the same array from a new one (a freed array's id is
    reused), and an argument not seen last time goes through ``_pointer``, which checks,
    copies where needed, and remembers it."""

    def __init__(self, fn, dtypes_, partials, n_inputs, symbols=()):
        import ctypes
        fn.restype = None
        fn.argtypes = [ctypes.c_void_p] * (len(dtypes_) + len(partials)) \
            + [ctypes.c_int64] * len(symbols) + [ctypes.c_int]
        # NumPy's built-in dtypes are singletons, so ``a.dtype is dt`` is the fast test
        self.fn, self.dtypes = fn, tuple(np.dtype(d) for d in dtypes_)
        self.partials = tuple((shape, np.dtype(dt)) for shape, dt in partials)
        self.n_inputs = n_inputs
        self.symbols = tuple(symbols)   # a dynamic shape: its sizes, read from the workspace
        # per argument, (weak reference, address) of the array it was at the last call
        self._seen = [None] * len(self.dtypes)

    def __call__(self, *args):
        keep = []       # copies made for the call: alive until the kernel has returned
        ptrs, seen = [], self._seen
        for k, (a, dt) in enumerate(zip(args, self.dtypes)):
            last = seen[k]
            # the array this argument was last time (a workspace slot, a parameter, optimizer
            # state): its address is known. It cannot have moved: NumPy refuses to resize
            # (reallocate) an array that has a weak reference
            if last is not None and last[0]() is a and a.dtype is dt:
                ptrs.append(last[1])
            else:
                ptrs.append(self._pointer(k, a, dt, keep))
        if self.symbols:
            sizes = args[-1].size_of        # the call's workspace knows the call's sizes
            parts = tuple(np.empty(substitute(shape, sizes), dt) for shape, dt in self.partials)
            self.fn(*ptrs, *[_address(p) for p in parts], *[sizes[s] for s in self.symbols],
                    get_num_threads())
            return parts
        if not self.partials:
            self.fn(*ptrs, get_num_threads())
            return ()
        parts = tuple(np.empty(shape, dt) for shape, dt in self.partials)
        self.fn(*ptrs, *[_address(p) for p in parts], get_num_threads())
        return parts

    def _pointer(self, k, a, dt, keep):
        """The address of argument ``k``, made a C-contiguous array of the kernel's dtype
        (a copy, appended to ``keep``) where it is not one (a NumPy scalar: an optimizer's
        learning rate, a transposed weight); an output cannot be copied. A writable array
        taken as it is is remembered (weakly: a temporary is freed as before) for the next
        call."""
        if type(a) is np.ndarray and a.dtype is dt and a.flags.c_contiguous:
            try:    # from_buffer refuses a read-only array (a failed try costs 1 us: a
                    # strided view, a gate's columns, is sent to the copy below directly)
                address = _addressof(_c_char.from_buffer(a))
            except (TypeError, ValueError):
                pass
            else:
                self._seen[k] = (_weakref(a), address)
                return address
        if type(a) is not np.ndarray or a.dtype != dt or not a.flags.c_contiguous:
            if k >= self.n_inputs:      # a copy of an output would lose the results
                raise TypeError(f"C kernel output {k - self.n_inputs} must be a "
                                f"C-contiguous {np.dtype(dt)} array")
            a = np.ascontiguousarray(a, dtype=dt)
            keep.append(a)
        return _address(a)


def _address(a):
    """The address of ``a``'s data: through the buffer protocol (0.25 us) where the array is
    writable, else ``a.ctypes`` (1.4 us, which builds an object each time)."""
    try:
        return _addressof(_c_char.from_buffer(a))
    except (TypeError, ValueError):     # read-only, or no elements
        return a.ctypes.data
