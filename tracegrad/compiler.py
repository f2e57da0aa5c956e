"""``tracegrad.compiler``: process-wide controls of ``tracegrad.compile``."""


def reset():
    """Clear every compiled function's cache of variants (and any eager fallback): each
    traces again on its next call. Built C libraries stay on disk, so a variant traced
    again that has the same kernels loads them instead of compiling."""
    from tracegrad.runtime.compiled import reset_all     # the runtime loads lazily
    reset_all()


from tracegrad.symbolic import mark_dynamic, mark_static  # noqa: E402,F401 - as torch._dynamo's
