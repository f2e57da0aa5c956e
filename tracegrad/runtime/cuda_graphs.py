"""CUDA graphs for a compiled step: a variant's launches recorded once, replayed by one call.

A whole compiled training step on the GPU makes hundreds of launches (its kernels, CuPy's
calls, cuBLAS's products), each a few microseconds of Python and driver on the host, while
the GPU waits; a graph launches all of them with one call (``Graphed``).

Which (``unwanted`` says why not): a variant's forward and its backward on the CUDA tier,
each on its own, with static shapes; a forward with no random draws (a replay would draw
the same numbers) and no guard on a value inside the step (SGD's momentum read afresh: a
host read). ``TRACEGRAD_CUDA_GRAPHS=0`` turns graphs off. A whole training step (a forward
that writes parameters, optimizer state and ``.grad`` in place) is replayed too: on an H200
the gpt_small, dcgan and vae steps replayed as eager trains (tests/test_cuda_graphs.py),
and gpt_small's step took 0.99 ms replayed against 6.40 ms without a graph.

How: calls 1 and 2 run as they are: CuPy loads the kernels, the workspaces fill, and the
inputs whose arrays move from call to call show themselves. Call 3 records the function on
a stream of its own (allocations from a memory pool of its own) and launches the recording;
later calls launch it again.

- Inputs: an array that stayed put over calls 1 and 2 (a parameter, an optimizer's state)
  is read where it is; one that moved (a batch), and a host
  array (a learning rate, a step count), is copied into a buffer the graph reads, before
  each launch. A later call whose fixed input moved records again with that input copied
  (at most ``MAX_CAPTURES`` times, then the function runs without a graph).
- Outputs: the new values of the tensors the step writes go into them inside the graph (a
  host one, the step count, is copied back after the launch). An output of
  ``LEND_BYTES`` or more that the recording allocated (a gradient, a value saved for
  backward) is handed out as it is, with no copy; a launch would overwrite it, so while a
  caller still holds one (its reference count says so), the next call launches another
  recording of the same function (up to ``MAX_SLOTS``; beyond that it runs without a
  graph). Smaller outputs are copied out after each launch, so holding them costs nothing.
- Matrix products: CuPy refuses cuBLAS while a stream records, so while recording, the
  generated code's ``matmul`` of float32 and float64 calls cuBLAS itself (``_gemm``,
  through ctypes) on a handle of the graph's.
- Anything else recording refuses (a host synchronisation, another library) leaves the
  variant without a graph; ``Graphed.off`` says why.
"""
import ctypes
import os
import sys

import numpy as np

WARM_CALLS = 2
MAX_CAPTURES = 4    # recordings after fixed inputs moved, before the variant gives graphs up
MAX_SLOTS = 3       # recordings replayed in turn while callers hold results lent earlier
LEND_BYTES = 1 << 20    # outputs this large are handed out from the graph's own memory


def unwanted(variant, part="forward"):
    """Why ``variant``'s (a CUDA one) ``part``, "forward" or "backward", runs without a graph,
    or None."""
    if os.environ.get("TRACEGRAD_CUDA_GRAPHS", "") == "0":
        return "TRACEGRAD_CUDA_GRAPHS=0"
    if variant.sizes is not None:
        return "its shapes are dynamic"
    code = variant.python_code
    if part == "backward":
        code = code[code.find("\ndef backward("):]
        if "GuardFailure(" in code:
            return "it checks a guard on a value (a host read a graph cannot make)"
        return None
    if any(n.op == "random" for n in variant.forward_graph.nodes):
        return "it draws random numbers (a replay would draw the same ones)"
    forward = code[code.find("\ndef forward("):code.find("\ndef backward(")]
    if "GuardFailure(" in forward:
        return "it checks a guard on a value inside the step (a host read a graph cannot make)"
    return None


def _key(a):
    """What the graph bakes of an input array: where it is and its layout."""
    if type(a) is np.ndarray:
        return ("host", a.shape, a.dtype.str)
    return (a.data.ptr, a.shape, a.strides, a.dtype.str)


def _refs(arrays):
    """How many references each of ``arrays`` has, compared with the count right after
    recording (more means a caller still holds it; the count is not ``support.held``'s,
    as the library that recorded may keep references of its own)."""
    return [sys.getrefcount(a) for a in arrays]


class _Slot:
    """One recording: its ``graph``, the memory ``pool`` it allocated from, the ``buffers``
    its moving inputs are copied into, and ``plan``, where each output comes from:
    ``("input", i)``, ``("lend", j)`` (``lent[j]``, the graph's own buffer, handed out as it
    is) or ``("copy", array)`` (a buffer the graph writes, copied out after each launch)."""

    def free(self):
        """Whether no caller still holds an output this recording lent: a launch would
        overwrite it."""
        return _refs(self.lent) == self.base


class Graphed:
    """A generated function ``fn`` (a variant's forward or backward) on GPU ``index``, run
    through a CUDA graph once warm (see the module docstring). ``mutated``: the arguments
    whose new values are its outputs from ``n_results`` on. ``replays`` counts launches of
    recordings, ``held`` the calls run without one because callers held every recording's
    lent outputs."""

    def __init__(self, fn, cp, index, namespace, n_results, mutated=()):
        self.fn, self.cp, self.index = fn, cp, index
        self.namespace = namespace
        self.n_results = n_results
        self.mutated = list(mutated)
        self.calls = self.captures = self.replays = self.held = 0
        self.seen, self.moving = None, set()
        self.slots, self.retired, self.baked = [], [], {}
        self.off = None
        self.__wrapped__ = fn

    def __call__(self, *arrays):
        cp = self.cp
        with cp.cuda.Device(self.index):
            if self.off is not None:
                return self._plain(arrays)
            try:
                keys = [_key(a) for a in arrays]
            except AttributeError:      # None, a Python number: nothing a graph can read
                self.off = "an argument is not an array"
                return self._plain(arrays)
            self.calls += 1
            if self.calls <= WARM_CALLS:
                if self.seen is not None:
                    self.moving |= {i for i, (k, s) in enumerate(zip(keys, self.seen))
                                    if k != s}
                self.seen = keys
                return self._plain(arrays)
            if self.slots:
                moved = {i for i, k in self.baked.items() if keys[i] != k}
                if moved:
                    self.moving |= moved
                    self._retire()
            slot = next((s for s in self.slots if s.free()), None)
            if slot is None:
                if not self.slots and self.captures >= MAX_CAPTURES:
                    self.off = f"its inputs kept moving ({MAX_CAPTURES} recordings)"
                    return self._plain(arrays)
                if len(self.slots) >= MAX_SLOTS:
                    self.held += 1
                    return self._plain(arrays)
                try:
                    slot = self._capture(arrays, keys)
                except Exception as e:      # noqa: BLE001 - what recording refused
                    self.off = f"recording failed ({type(e).__name__}: {e}){_where(e)}"
                    self._retire()
                    return self._plain(arrays)
                slot.base = _refs(slot.lent)
                self.slots.append(slot)
            return self._launch(slot, arrays)

    def _plain(self, arrays):
        host = np.ndarray
        return self.fn(*[self.cp.asarray(a) if type(a) is host else a for a in arrays])

    def _retire(self):
        """Drop the recordings; their pools keep the memory of outputs callers still hold."""
        for slot in self.slots:
            slot.pool.free_all_blocks()
            self.retired.append(slot.pool)
        self.slots = []

    def _capture(self, arrays, keys):
        cp = self.cp
        if not self.slots:      # the first recording for these fixed inputs
            self.captures += 1
            self.baked = {i: k for i, k in enumerate(keys)
                          if k[0] != "host" and i not in self.moving}
        slot = _Slot()
        slot.buffers = {i: (cp.asarray(a) if type(a) is np.ndarray else a.copy())
                        for i, a in enumerate(arrays) if i not in self.baked}
        inputs = [slot.buffers.get(i, a) for i, a in enumerate(arrays)]
        slot.pool = pool = cp.cuda.MemoryPool()
        mine = []   # [start, end) of what the recording allocated: its outputs may be lent

        def malloc(nbytes):
            ptr = pool.malloc(nbytes)
            mine.append((ptr.ptr, ptr.ptr + nbytes))
            return ptr
        slot.stream = stream = cp.cuda.Stream(non_blocking=True)
        try:
            gemm = _Gemm(cp, stream)
        except ImportError:     # no CuPy's cuBLAS bindings: a product will refuse to record
            gemm = None
        ns = self.namespace
        real = ns["np"]
        cp.cuda.get_current_stream().synchronize()
        with stream, cp.cuda.using_allocator(malloc):
            ns["np"] = _Recording(real, gemm or real.matmul)
            stream.begin_capture()
            try:
                outs = self.fn(*inputs)
                first = self.n_results
                for j, i in enumerate(self.mutated):     # written tensors: inside the graph
                    if outs[first + j] is not inputs[i]:
                        cp.copyto(inputs[i], outs[first + j])
            finally:
                ns["np"] = real
                try:
                    graph, ended = stream.end_capture(), None
                except Exception as e:  # noqa: BLE001 - an error that broke the recording wins
                    graph, ended = None, e
        if ended is not None:
            raise ended
        slot.gemm, slot.graph = gemm, graph
        written = {self.n_results + j: i for j, i in enumerate(self.mutated)}
        slot.plan, slot.lent = [], []
        for k, o in enumerate(outs):
            src = written.get(k, next((i for i, a in enumerate(inputs) if o is a), None))
            if src is not None:
                slot.plan.append(("input", src))
            elif type(o) is not cp.ndarray:
                raise RuntimeError(f"output {k} is computed on the host ({type(o).__name__})")
            elif o.nbytes >= LEND_BYTES and any(s <= o.data.ptr < e for s, e in mine):
                slot.plan.append(("lend", len(slot.lent)))
                slot.lent.append(o)
            else:
                slot.plan.append(("copy", o))
        return slot

    def _launch(self, slot, arrays):
        cp = self.cp
        stream = cp.cuda.get_current_stream()
        for i, buf in slot.buffers.items():
            a = arrays[i]
            if type(a) is np.ndarray:
                buf.set(a, stream=stream)
            else:
                cp.copyto(buf, a)
        slot.graph.launch(stream)
        self.replays += 1
        outs = []
        for what, x in slot.plan:
            if what == "lend":
                outs.append(slot.lent[x])
                continue
            if what == "copy":
                outs.append(x.copy())
                continue
            a = arrays[x]
            buf = slot.buffers.get(x)
            if buf is not None and x in self.mutated:    # a copied input the step wrote
                if type(a) is np.ndarray:
                    a[...] = buf.get()
                else:
                    cp.copyto(a, buf)
            outs.append(a)
        return tuple(outs)


def _where(error):
    """`` at file:line`` of the last frame of ``error``'s traceback in tracegrad or the
    generated code (not CuPy's): the call that recording refused."""
    import os
    import traceback
    home = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ours = [f for f in traceback.extract_tb(error.__traceback__)
            if f.filename.startswith(home) and not f.filename.endswith("cuda_graphs.py")
            or f.filename.startswith("<")]
    if not ours:
        return ""
    f = ours[-1]
    where = os.path.relpath(f.filename, os.path.dirname(home)) if f.filename.startswith(home) \
        else f.filename
    return f" at {where}:{f.lineno} ({f.line or f.name})"


class _Recording:
    """CuPy as the generated code sees it while a graph records: its ``matmul`` is
    ``_Gemm``'s, its ``concatenate`` and ``stack`` join at most ``JOIN`` arrays a call,
    everything else is CuPy's own. (CuPy joins more than 8 small arrays by one kernel that
    reads a table of their addresses, made on the host and copied over: a host-to-device
    copy, which recording refuses. The H200 showed it in a GPT step's gradient clipping.)"""
    JOIN = 8

    def __init__(self, cp, gemm):
        self._cp, self.matmul = cp, gemm

    def __getattr__(self, name):
        return getattr(self._cp, name)

    def concatenate(self, arrays, axis=0, out=None, **kwargs):
        arrays, n = list(arrays), self.JOIN
        while len(arrays) > n:
            arrays = [self._cp.concatenate(arrays[i:i + n], axis=axis, **kwargs)
                      for i in range(0, len(arrays), n)]
        return self._cp.concatenate(arrays, axis=axis, out=out, **kwargs)

    def stack(self, arrays, axis=0, out=None, **kwargs):
        arrays = list(arrays)
        if len(arrays) <= self.JOIN:
            return self._cp.stack(arrays, axis=axis, out=out, **kwargs)
        axis = axis % (arrays[0].ndim + 1) if arrays else axis
        return self.concatenate([self._cp.expand_dims(a, axis) for a in arrays], axis=axis,
                                out=out, **kwargs)


_LIB = {}
_ONE = {np.dtype(np.float32): np.array(1, np.float32), np.dtype(np.float64): np.array(1.0)}
_ZERO = {np.dtype(np.float32): np.array(0, np.float32), np.dtype(np.float64): np.array(0.0)}


def _cublas():
    """cuBLAS's functions, from the library CuPy loaded (found in this process's map)."""
    if not _LIB:
        with open("/proc/self/maps") as f:
            paths = sorted({line.split()[-1] for line in f
                            if "libcublas.so" in line and "libcublasLt" not in line})
        if not paths:
            raise RuntimeError("cuBLAS is not loaded")
        lib = ctypes.CDLL(paths[0])
        vp, i, ll = ctypes.c_void_p, ctypes.c_int, ctypes.c_longlong
        for t in "SD":
            f = getattr(lib, f"cublas{t}gemm_v2")
            f.argtypes = [vp, i, i, i, i, i, vp, vp, i, vp, i, vp, vp, i]
            _LIB[t] = f
            f = getattr(lib, f"cublas{t}gemmStridedBatched")
            f.argtypes = [vp, i, i, i, i, i, vp, vp, i, ll, vp, i, ll, vp, vp, i, ll, i]
            _LIB[t + "batched"] = f
    return _LIB


def _layout(x):
    """``(x, op, ld, batch stride)`` of a (count, rows, cols) array for cuBLAS's column-major
    view of it (``op`` 0: rows laid out contiguously, the transpose of what cuBLAS reads; 1:
    columns contiguous), copied to C order where it is neither."""
    count, rows, cols = x.shape
    item = x.itemsize
    sb, sr, sc = (s // item for s in x.strides)
    if (sc == 1 or cols == 1) and sr >= max(cols, 1):
        op, ld = 0, sr
    elif (sr == 1 or rows == 1) and sc >= max(rows, 1):
        op, ld = 1, sc
    else:
        x = x.copy()
        sb, op, ld = rows * cols, 0, max(cols, 1)
    return x, op, ld, (sb if count > 1 else 0)


class _Gemm:
    """``matmul`` through cuBLAS on a handle bound to the recording ``stream``: float32 and
    float64 operands of two or more dimensions; anything else goes to CuPy's (which
    refuses to record, so the variant runs without a graph)."""

    def __init__(self, cp, stream):
        from cupy_backends.cuda.libs import cublas
        self.cp, self.cublas = cp, cublas
        self.handle = cublas.create()
        cublas.setStream(self.handle, stream.ptr)
        with stream:        # before recording: CuPy loads cuBLAS, the handle makes its state
            for dt in _ONE:
                one = cp.ones((1, 1), dtype=dt)
                cp.matmul(one, one)
                self(one, one)
            stream.synchronize()

    def __del__(self):
        try:
            self.cublas.destroy(self.handle)
        except Exception:   # noqa: BLE001 - at exit the library may be gone
            pass

    def __call__(self, a, b, out=None):
        cp = self.cp
        if (out is not None or a.dtype != b.dtype or a.dtype not in _ONE or a.ndim < 2
                or b.ndim < 2 or a.shape[-1] != b.shape[-2]):
            return cp.matmul(a, b, out=out)
        batch = tuple(np.broadcast_shapes(a.shape[:-2], b.shape[:-2]))
        (m, k), n = a.shape[-2:], b.shape[-1]
        out = cp.empty(batch + (m, n), dtype=a.dtype)
        if out.size == 0:
            return out
        if k == 0:
            out[...] = 0
            return out
        count = int(np.prod(batch)) if batch else 1
        a3, b3 = (self._batch(x, batch, count) for x in (a, b))
        a3, op_a, ld_a, s_a = _layout(a3)
        b3, op_b, ld_b, s_b = _layout(b3)
        lib, t = _cublas(), "S" if a.dtype == np.float32 else "D"
        one, zero = _ONE[a.dtype].ctypes.data, _ZERO[a.dtype].ctypes.data
        # row-major C = A B is column-major C^T = B^T A^T
        if count == 1:
            status = lib[t](self.handle, op_b, op_a, n, m, k, one, b3.data.ptr, ld_b,
                            a3.data.ptr, ld_a, zero, out.data.ptr, n)
        else:
            status = lib[t + "batched"](self.handle, op_b, op_a, n, m, k, one, b3.data.ptr,
                                        ld_b, s_b, a3.data.ptr, ld_a, s_a, zero,
                                        out.data.ptr, n, m * n, count)
        if status != 0:
            raise RuntimeError(f"cublas{t}gemm returned status {status}")
        return out

    def _batch(self, x, batch, count):
        """``x`` as (count, rows, cols): one matrix for every batch entry where ``x`` has no
        batch dimensions of its own (batch stride 0), else broadcast and flattened."""
        if all(d == 1 for d in x.shape[:-2]):
            return x.reshape((1,) + x.shape[-2:])
        x = self.cp.broadcast_to(x, batch + x.shape[-2:])
        return x.reshape((count,) + x.shape[-2:])
