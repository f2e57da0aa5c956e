"""Probe: what CUDA graph capture through CuPy allows, and what a replay saves.

Run on a GPU machine; prints one line per question:

1. 24 small elementwise CuPy ops on a (32, 128) array: eager ms against graph replay ms.
2. cuBLAS's ``cublasSgemm_v2`` called through ctypes on a handle of our own whose stream was
   set before the capture: does it capture, is the replay right? (``cupy.matmul`` and
   CuPy's own ``cublas.sgemm`` refuse capture: they set the handle's stream on every call,
   and that raises while the stream captures.)
3. Allocation during capture from a private ``MemoryPool``: does it capture and replay?
4. A tracegrad compiled W1 step (forward + ``autograd.grad``) captured whole: does it
   capture, is the replay right, and eager against replay ms.
"""
import time
import traceback

import numpy as np


def timed(fn, reps=200):
    import cupy as cp
    for _ in range(10):
        fn()
    cp.cuda.Device().synchronize()
    t0 = time.perf_counter()
    for _ in range(reps):
        fn()
    cp.cuda.Device().synchronize()
    return (time.perf_counter() - t0) / reps * 1e3


def capture(fn, pool):
    import cupy as cp
    s = cp.cuda.Stream(non_blocking=True)
    with s, cp.cuda.using_allocator(pool.malloc):
        fn()                    # warm up on this stream (allocations, handles, modules)
        s.synchronize()
        s.begin_capture()
        out = fn()
        g = s.end_capture()
    return s, g, out


def elementwise():
    import cupy as cp
    a = cp.random.standard_normal((32, 128), dtype=cp.float32)

    def f():
        x = a
        for k in range(12):
            x = cp.tanh(x * 1.01 + 0.01)
        return x
    pool = cp.cuda.MemoryPool()
    s, g, out = capture(f, pool)

    def replay():
        g.launch(s)
    replay()
    s.synchronize()
    ok = bool(cp.allclose(out, f()))
    print(f"1. 24 elementwise ops: eager {timed(f):.3f} ms, replay {timed(replay):.3f} ms, "
          f"replay right: {ok}")


def libcublas():
    """The cuBLAS library CuPy loaded (ctypes), found in this process's memory map."""
    import ctypes
    with open("/proc/self/maps") as f:
        paths = {line.split()[-1] for line in f if "libcublas.so" in line
                 and "Lt" not in line.split()[-1]}
    return ctypes.CDLL(sorted(paths)[0])


def gemm():
    import ctypes
    import cupy as cp
    from cupy_backends.cuda.libs import cublas
    m, k, n = 32, 784, 128
    A = cp.random.standard_normal((m, k), dtype=cp.float32)
    B = cp.random.standard_normal((k, n), dtype=cp.float32)
    C = cp.empty((m, n), dtype=cp.float32)
    (A @ B).sum()       # CuPy loads cuBLAS
    lib = libcublas()
    sgemm = lib.cublasSgemm_v2
    vp, i = ctypes.c_void_p, ctypes.c_int
    sgemm.argtypes = [vp, i, i, i, i, i, vp, vp, i, vp, i, vp, vp, i]
    handle = cublas.create()
    one, zero = np.array(1, np.float32), np.array(0, np.float32)

    def f():            # row-major C = A @ B is column-major C^T = B^T A^T
        status = sgemm(handle, 0, 0, n, m, k, one.ctypes.data, B.data.ptr, n, A.data.ptr, k,
                       zero.ctypes.data, C.data.ptr, n)
        assert status == 0, f"cublasSgemm_v2 returned {status}"
        return C
    s = cp.cuda.Stream(non_blocking=True)
    cublas.setStream(handle, s.ptr)
    with s:
        f()
        s.synchronize()
        direct_ok = bool(cp.allclose(C, A @ B, rtol=1e-4, atol=1e-3))
        C[...] = 0
        s.synchronize()
        s.begin_capture()
        f()
        g = s.end_capture()
    g.launch(s)
    s.synchronize()
    ok = bool(cp.allclose(C, A @ B, rtol=1e-4, atol=1e-3))
    print(f"2. ctypes SGEMM ({lib._name}): right eagerly: {direct_ok}; "
          f"captured and replayed right: {ok}; "
          f"cupy.matmul {timed(lambda: A @ B):.3f} ms, direct {timed(f):.3f} ms, "
          f"replay {timed(lambda: g.launch(s)):.3f} ms")


def pool_capture():
    import cupy as cp
    a = cp.arange(1000, dtype=cp.float32)
    pool = cp.cuda.MemoryPool()

    def f():
        b = cp.empty_like(a)
        cp.multiply(a, 2, out=b)
        return b + 1
    s, g, out = capture(f, pool)
    out[...] = 0
    g.launch(s)
    s.synchronize()
    print(f"3. private pool: captured; replay right: {bool(cp.all(out == 2 * a + 1))}; "
          f"pool holds {pool.total_bytes()} bytes")


def tracegrad_step():
    import cupy as cp
    import tracegrad as tg
    rng = np.random.default_rng(0)
    args = [tg.from_numpy(rng.standard_normal(1_000_000).astype(np.float32)).cuda()
            .requires_grad_() for _ in range(3)]

    def w1(x, a, b):
        u = x * a + b
        return (0.5 * u * (1 + tg.tanh(0.7978845608 * (u + 0.044715 * u ** 3)))).sum()
    step = tg.compile(w1, backend="cuda")

    def f():
        loss = step(*args)
        return (loss,) + tuple(tg.autograd.grad(loss, args))
    eager = timed(f)
    pool = cp.cuda.MemoryPool()
    s, g, out = capture(f, pool)
    ref = [o.detach().cpu().numpy() for o in f()]
    for o in out:
        o._data[...] = 0
    g.launch(s)
    s.synchronize()
    ok = all(np.allclose(o.detach().cpu().numpy(), r, rtol=1e-5, atol=1e-5)
             for o, r in zip(out, ref))
    print(f"4. tracegrad W1_1M step captured whole; replay right: {ok}; eager {eager:.3f} ms, "
          f"replay {timed(lambda: g.launch(s)):.3f} ms")


if __name__ == "__main__":
    for probe in (elementwise, gemm, pool_capture, tracegrad_step):
        try:
            probe()
        except Exception:       # noqa: BLE001 - the probe's answer is the failure
            print(f"{probe.__name__}: FAILED\n{traceback.format_exc(limit=6)}")
