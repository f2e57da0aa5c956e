"""Code generation: IR graphs to Python/NumPy modules and CUDA kernels.

Empty until the compiler lands; installed as ``tracegrad.codegen``.
"""
