"""The CUDA language: the C renderer's walk over the kernel IR as a grid-stride loop.

It shares the primitives' C expressions with the C language (``Primitive.cuda_template``
where a primitive overrides one) and overrides only the loop: one thread an element.
Kernels with reductions are not rendered for CUDA yet (``Unsupported``).
"""
import math

from .cstyle import Language, Unsupported, _Writer
from .kernel import Reduce


class CUDA(Language):
    """The GPU target: the primitives' C expressions (``Primitive.cuda_template`` where a
    primitive overrides one), rendered by the same walk as a grid-stride loop, one thread an
    element. Kernels with reductions are not rendered for CUDA yet (``Unsupported``)."""

    def template(self, prim):
        return prim.cuda_template

    def render_kernel(self, kernel, site_comment=None):
        return _CudaWriter(self, kernel, site_comment or (lambda s: None)).render()


class _CudaWriter(_Writer):
    """The walk for CUDA: each thread computes elements ``e``, ``e + stride``, ...::

        extern "C" __global__ void forward_fused0(const float *__restrict__ x_, ...) {
          for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < 12;
               e += gridDim.x * (long long)blockDim.x) {
            const long long o = e / 3, j = e % 3;
            const float x = x_[o * 3 + j];
            ...
    """

    def render(self):
        self.plan()
        k, lang = self.k, self.lang
        if any(isinstance(op, Reduce) for op in k.body):
            raise Unsupported("reductions are not rendered for CUDA yet")
        params = [f"const {lang.ctype(i.dtype)} *__restrict__ {self.c(i.name)}_"
                  for i in k.inputs]
        params += [f"{lang.ctype(op.dtype)} *__restrict__ {self.c(op.name)}_"
                   for op in k.outputs]
        ops = {op.name: op for op in k.body}
        inner, total = self.shape[-1], math.prod(self.shape)
        self.emit(f"// {k.label}: {k.op_names()}; one pass over "
                  f"[{','.join(map(str, k.domain))}]")
        self.open(f'extern "C" __global__ void {k.name}({", ".join(params)})')
        self.open(f"for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; "
                  f"e < {total}; e += gridDim.x * (long long)blockDim.x)")
        self.emit(f"const long long o = e / {inner}, j = e % {inner};")
        self.base = self.row_bases("o")
        self.stride = {name: s[-1] for name, s in self.maps.items()}
        self.stored = {}
        self.points(self.closure([op.name for op in k.outputs], ops), ops)
        for w in k.outputs:
            self.emit(f"{self.c(w.name)}_[{self.index(w.name)}] = {self.c(w.name)};")
        self.close()
        self.close()
        return "\n".join(self.lines)
