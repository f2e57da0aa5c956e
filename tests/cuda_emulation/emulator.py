"""Test doubles that run the CUDA renderer's kernels on the CPU, through ``cuda_emu.h``.

``build(source)`` compiles a ``.cu`` module's text with g++ as C++20 (``cuda_emu.h``
first) and adds one ``tg_launch_<kernel>(grid, block, args)`` a kernel; ``EmuRawModule``
stands in for ``cupy.RawModule`` (``get_function(name)`` gives a callable with
``RawKernel``'s call form ``kernel(grid, block, args)``), and ``fake_cupy()`` for the
CuPy module, with NumPy arrays in place of CuPy's. Nothing here runs on a GPU: it checks
what the kernels compute, not how fast.
"""
import ctypes
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
import types

import numpy as np

HEADER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "cuda_emu.h")
CXX = shutil.which("g++")
_DIR = tempfile.mkdtemp(prefix="tracegrad-cuda-emu-")
_built = {}


def build(source):
    """The shared library of ``source`` (a CUDA module's text), built once per text."""
    key = hashlib.sha1(source.encode()).hexdigest()[:16]
    if key in _built:
        return _built[key]
    names = re.findall(r'extern "C" __global__ void (\w+)\(', source)
    wrappers = [f'extern "C" void tg_launch_{n}(unsigned grid, unsigned block, void **args) '
                f'{{ tg_emu::launch({n}, grid, block, args); }}' for n in names]
    path = os.path.join(_DIR, key)
    with open(path + ".cpp", "w") as f:
        f.write(f'#include "{HEADER}"\n\n{source}\n\n' + "\n".join(wrappers) + "\n")
    res = subprocess.run([CXX, "-std=c++20", "-O1", "-w", "-shared", "-fPIC", "-pthread",
                          path + ".cpp", "-o", path + ".so"], capture_output=True, text=True)
    if res.returncode:
        raise RuntimeError(f"g++ failed on the emulated CUDA source:\n{res.stderr[-4000:]}")
    lib = _built[key] = ctypes.CDLL(path + ".so")
    return lib


class EmuKernel:
    """One kernel of an emulated module, called as ``cupy.RawKernel`` is:
    ``kernel(grid, block, args, shared_mem=0)``, ``args`` arrays (NumPy here) and NumPy
    scalars of the parameters' types."""

    def __init__(self, lib, name):
        self.fn = getattr(lib, f"tg_launch_{name}")
        self.fn.restype = None
        self.fn.argtypes = [ctypes.c_uint, ctypes.c_uint, ctypes.c_void_p]
        self.launches = []      # (grid, block) of each call, for tests that look

    def __call__(self, grid, block, args, shared_mem=0):
        values = []
        for a in args:
            if isinstance(a, np.ndarray):
                values.append(ctypes.c_void_p(a.ctypes.data))
            elif isinstance(a, (np.int64, int)):
                values.append(ctypes.c_longlong(int(a)))
            else:
                raise TypeError(f"an emulated kernel takes arrays and int64s, got {type(a)}")
        ptrs = (ctypes.c_void_p * max(1, len(values)))(
            *[ctypes.cast(ctypes.pointer(v), ctypes.c_void_p) for v in values])
        self.launches.append((tuple(grid), tuple(block)))
        self.fn(int(grid[0]), int(block[0]), ptrs)


class EmuRawModule:
    """A test double of ``cupy.RawModule(code=...)``: the module built by g++ through
    ``cuda_emu.h``; ``modules`` lists every one made, for tests that look."""
    modules = []

    def __init__(self, code, options=(), **_):
        self.code, self.options = code, options
        self.lib = build(code)
        self.functions = {}
        EmuRawModule.modules.append(self)

    def get_function(self, name):
        if name not in self.functions:
            self.functions[name] = EmuKernel(self.lib, name)
        return self.functions[name]


class _Device:
    """``cupy.cuda.Device``: one device, 0."""

    def __init__(self, index=0):
        self.id = index

    def use(self):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def fake_cupy():
    """A stand-in for the ``cupy`` module: NumPy's functions (NumPy arrays stand in for
    CuPy's), ``RawModule`` the emulated one, and one device (``cuda.Device``,
    ``cuda.runtime``)."""
    mod = types.ModuleType("cupy")
    mod.RawModule = EmuRawModule
    mod.ndarray = np.ndarray
    runtime = types.SimpleNamespace(getDevice=lambda: 0, getDeviceCount=lambda: 1)
    mod.cuda = types.SimpleNamespace(Device=_Device, runtime=runtime)
    mod.__getattr__ = lambda name: getattr(np, name)
    return mod


def run(lib, name, grid, block, args):
    """Launch kernel ``name`` of ``lib`` (from ``build``) on ``grid`` blocks of ``block``."""
    EmuKernel(lib, name)((grid,), (block,), args)
