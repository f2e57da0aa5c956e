"""How a CUDA graph's outputs reach the caller (``runtime/cuda_graphs.Graphed``), without a GPU.

A replayed graph writes into the buffers it was recorded with. ``Graphed`` lends large
outputs as they are and launches another recording while a caller still holds one, so the
ways that could hand out a stale or overwritten result are checked here with a small CuPy
double whose "graph" is the same: recording keeps each call with the arrays it wrote, a
launch runs them again into those same arrays.
"""
import contextlib
import itertools

import numpy as np
import pytest

from tracegrad.runtime import cuda_graphs


class _Array:
    """A NumPy array standing for a device one: ``data.ptr`` is where its memory is."""

    def __init__(self, a, keep=None):
        self.a, self._keep = a, keep
        self.shape, self.dtype, self.strides = a.shape, a.dtype, a.strides
        self.nbytes = a.nbytes
        self.data = type("Ptr", (), {"ptr": a.ctypes.data})()

    def copy(self):
        return _CP.empty_like(self, _CP.run(lambda out: np.copyto(out, self.a), self))


class _Graph:
    def __init__(self, calls):
        self.calls = calls

    def launch(self, stream=None):
        for call in self.calls:
            call()


class _Stream:
    def __init__(self, non_blocking=False):
        self.calls = None

    def synchronize(self):
        pass

    def begin_capture(self):
        self.calls = []
        _CP.recording = self

    def end_capture(self):
        _CP.recording = None
        return _Graph(self.calls)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


class _Pool:
    def __init__(self):
        self.blocks = []

    def malloc(self, nbytes):
        block = np.empty(max(nbytes, 1), np.uint8)
        self.blocks.append(block)
        return type("Mem", (), {"ptr": block.ctypes.data, "block": block})()

    def free_all_blocks(self):
        pass


class _Cuda:
    MemoryPool = _Pool
    Stream = _Stream

    @staticmethod
    def Device(index=0):      # noqa: N802 - CuPy's name
        return contextlib.nullcontext()

    @staticmethod
    def get_current_stream():
        return _Stream()

    @staticmethod
    @contextlib.contextmanager
    def using_allocator(malloc):
        _CP.allocator = malloc
        try:
            yield
        finally:
            _CP.allocator = None


class _CuPy:
    """The calls ``Graphed`` and the test's functions make: each computes at once, and while
    a stream records, it is kept (with the arrays it reads and writes) for the graph."""
    ndarray = _Array
    cuda = _Cuda
    matmul = None
    recording = allocator = None

    def empty(self, shape, dtype):
        dtype = np.dtype(dtype)
        if self.allocator is None:
            return _Array(np.empty(shape, dtype))
        mem = self.allocator(int(np.prod(shape)) * dtype.itemsize)
        return _Array(mem.block[:int(np.prod(shape)) * dtype.itemsize].view(dtype)
                      .reshape(shape), keep=mem)

    def empty_like(self, x, fill=None):
        out = self.empty(x.shape, x.dtype)
        if fill is not None:
            fill(out)
        return out

    def run(self, write, *arrays):
        """A call that writes its result with ``write(out array)``, kept while recording."""
        def fill(out):
            call = lambda: write(out.a)      # noqa: E731
            call()
            if self.recording is not None:
                self.recording.calls.append(call)
        return fill

    def multiply(self, x, y):
        return self.empty_like(x, self.run(lambda out: np.multiply(x.a, y.a, out=out)))

    def sum(self, x):
        out = self.empty((), x.dtype)
        self.run(lambda o: np.copyto(o, x.a.sum()))(out)
        return out

    def copyto(self, dst, src):
        self.run(lambda o: np.copyto(o, src.a))(dst)

    def asarray(self, a):
        return a


_CP = _CuPy()


@pytest.fixture
def product(monkeypatch):
    """A Graphed ``f(x, w) = (x * w, sum(x * w))`` and a maker of device arrays."""
    monkeypatch.setattr(cuda_graphs, "_Gemm", _no_gemm)
    namespace = {"np": _CP}

    def f(x, w):
        lib = namespace["np"]
        y = lib.multiply(x, w)
        return y, lib.sum(y)
    graphed = cuda_graphs.Graphed(f, _CP, 0, namespace, n_results=2)
    rng = np.random.default_rng(0)
    alive = []      # every array made stays alive: a new one never takes a freed one's place

    def make(n=4096):
        alive.append(_Array(rng.standard_normal(n).astype(np.float32)))
        return alive[-1]
    return graphed, make


def _no_gemm(cp, stream):
    raise ImportError("no cuBLAS in the double")


def _check(got, x, w):
    want = x.a * w.a
    np.testing.assert_array_equal(got[0].a, want)
    np.testing.assert_allclose(float(got[1].a), want.sum(), rtol=1e-5)


def _check_all_held(f, make, calls):
    """``calls`` calls of ``f`` on new inputs, every result held to the end, then each one
    checked: no later call wrote into an earlier result."""
    w = make()
    held = []
    for _ in range(calls):
        x = make()
        held.append((f(x, w), x, w))
    for h in held:
        _check(*h)


def test_a_large_output_is_lent_and_one_recording_serves_a_caller_that_lets_go(product,
                                                                            monkeypatch):
    monkeypatch.setattr(cuda_graphs, "LEND_BYTES", 1024)
    f, make = product
    w = make()
    for _ in range(8):
        x = make()      # moves: copied into the graph's buffer
        got = f(x, w)
        _check(got, x, w)
        del got
    assert f.off is None and f.replays == 6 and len(f.slots) == 1 and f.held == 0
    (what, _), _ = f.slots[0].plan
    assert what == "lend"


def test_holding_the_last_result_alternates_two_recordings(product, monkeypatch):
    monkeypatch.setattr(cuda_graphs, "LEND_BYTES", 1024)
    f, make = product
    w = make()
    previous = None
    for _ in range(9):
        x = make()
        got = f(x, w)
        _check(got, x, w)
        if previous is not None:    # the call did not write into what the caller held
            _check(*previous)
        previous = (got, x, w)
    assert f.replays == 7 and len(f.slots) == 2 and f.held == 0


def test_results_held_for_ever_are_never_overwritten(product, monkeypatch):
    monkeypatch.setattr(cuda_graphs, "LEND_BYTES", 1024)
    f, make = product
    _check_all_held(f, make, 10)
    assert len(f.slots) == cuda_graphs.MAX_SLOTS
    assert f.replays == cuda_graphs.MAX_SLOTS and f.held == 10 - 2 - cuda_graphs.MAX_SLOTS


def test_small_outputs_are_copied_so_one_recording_serves_callers_that_hold_them(product):
    f, make = product       # 16 KiB outputs, under LEND_BYTES
    _check_all_held(f, make, 8)
    assert f.replays == 6 and len(f.slots) == 1
    assert [what for what, _ in f.slots[0].plan] == ["copy", "copy"]


def test_a_fixed_input_that_moves_is_recorded_again(product, monkeypatch):
    monkeypatch.setattr(cuda_graphs, "LEND_BYTES", 1024)
    f, make = product
    ws = [make(), make()]
    x = make()
    for w in itertools.chain([ws[0]] * 4, [ws[1]] * 3):
        got = f(x, w)
        _check(got, x, w)
        del got
    assert f.captures == 2 and f.replays == 5 and len(f.retired) == 1
