"""Runtime for compiled functions: guards, variant cache, compiled backward.

Empty until the compiler lands; installed as ``tracegrad.runtime``.
"""
