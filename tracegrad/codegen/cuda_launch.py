"""The CUDA tier's kernels, called as the generated driver calls every tier's.

``CudaModule(source)`` compiles one variant's ``.cu`` source once, as a
``cupy.RawModule`` (NVRTC through CuPy, which caches the binary on disk);
``CudaKernel`` runs one of its kernels under the call contract of ``support.CKernel``:
``kernel(inputs..., outputs..., ws)`` writes the outputs and returns the results of the
reductions over the rows (arrays it allocates), the sizes of a dynamic shape read from
the workspace (``ws.size_of``). How a kernel is launched is its ``cuda.Launch``: blocks,
threads, the parts buffers, and the ``<name>_combine`` kernel that folds them.
CuPy is imported here only when a module is built (``tracegrad.device.cupy()``).
"""
import numpy as np

from tracegrad.symbolic import substitute

from .cuda import THREADS


class CudaModule:
    """One variant's kernels, compiled once: ``function(name)`` is a ``cupy.RawKernel``."""

    def __init__(self, source):
        from tracegrad.device import cupy       # (``tracegrad.device`` is the class)
        self.cp = cupy()
        self.source = source
        self.module = self.cp.RawModule(code=source)

    def function(self, name):
        return self.module.get_function(name)


class CudaKernel:
    """A kernel of the CUDA tier (see the module docstring). ``dtypes_``: the inputs' and
    outputs' dtypes (NumPy); ``partials``: the reductions' ``(shape, dtype)``, shapes in
    size symbols for a dynamic variant. Inputs that are not C-contiguous CuPy arrays of
    their dtype are made so first (a copy); outputs must be."""

    def __init__(self, module, launch, dtypes_, partials, n_inputs):
        self.cp, self.launch = module.cp, launch
        self.fn = module.function(launch.name)
        self.combine = module.function(launch.combine) if launch.combine else None
        self.dtypes, self.partials = tuple(np.dtype(d) for d in dtypes_), tuple(partials)
        self.n_inputs = n_inputs

    def __call__(self, *args):
        cp, launch = self.cp, self.launch
        arrays = []
        for k, (a, dt) in enumerate(zip(args, self.dtypes)):    # the workspace is not used
            if type(a) is not cp.ndarray or a.dtype != dt or not a.flags.c_contiguous:
                if k >= self.n_inputs:      # a copy of an output would lose the results
                    raise TypeError(f"CUDA kernel {launch.name}: output {k - self.n_inputs} "
                                    f"must be a C-contiguous {dt} CuPy array")
                a = cp.ascontiguousarray(cp.asarray(a), dtype=dt)
            arrays.append(a)
        sizes = args[-1].size_of if launch.symbols else {}
        symbols = [np.int64(sizes[s]) for s in launch.symbols]
        grid, block = launch.grid(sizes), launch.block(sizes)
        if not self.partials:
            self.fn((grid,), (block,), (*arrays, *symbols))
            return ()
        sets = launch.part_sets(sizes)
        parts = [cp.empty(sets * count, dtype=acc)
                 for count, (_, acc) in zip(launch.counts(sizes), launch.partials)]
        results = [cp.empty(substitute(shape, sizes), dtype=dt) for shape, dt in self.partials]
        self.fn((grid,), (block,), (*arrays, *parts, *symbols))
        self.combine((launch.combine_grid(sizes),), (THREADS,),
                     (*parts, *results, np.int64(sets), *symbols))
        return tuple(results)

    def __repr__(self):
        return f"<CUDA kernel {self.launch.name}>"
