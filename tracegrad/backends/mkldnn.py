"""``tracegrad.backends.mkldnn``: oneDNN, which tracegrad never calls (``is_available()`` is
False); ``enabled`` and ``deterministic`` are settable flags that change nothing."""
enabled = True
deterministic = False


def is_available():
    return False
