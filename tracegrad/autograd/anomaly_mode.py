"""Anomaly mode: remember where each backward node was made, and fail on NaN.

While enabled, every node records the forward stack that created it; an error
raised by a backward node is followed by that stack, and a backward node that
produces NaN raises naming itself.
"""
import traceback
import warnings


class _Anomaly:
    enabled = False
    check_nan = True


def is_anomaly_enabled():
    return _Anomaly.enabled


def is_anomaly_check_nan_enabled():
    return _Anomaly.check_nan


def forward_stack():
    """The user's stack at node creation, without tracegrad's own frames."""
    frames = [f for f in traceback.extract_stack()[:-1] if "/tracegrad/" not in f.filename]
    return "".join(traceback.format_list(frames))


def report(node):
    trace = getattr(node, "_anomaly_trace", None)
    if trace:
        warnings.warn(
            f"Error detected in {node.name()}. Traceback of forward call that caused the error:\n"
            + trace, UserWarning, stacklevel=2)


class detect_anomaly:
    """Context manager (and decorator) that turns anomaly detection on."""

    def __init__(self, check_nan=True):
        self.check_nan = check_nan
        self.prev = None
        warnings.warn(
            "Anomaly Detection has been enabled. This mode will increase the runtime "
            "and should only be enabled for debugging.", stacklevel=2)

    def __enter__(self):
        self.prev = (_Anomaly.enabled, _Anomaly.check_nan)
        _Anomaly.enabled, _Anomaly.check_nan = True, self.check_nan

    def __exit__(self, *exc):
        _Anomaly.enabled, _Anomaly.check_nan = self.prev

    def __call__(self, fn):
        def wrapper(*args, **kwargs):
            with self:
                return fn(*args, **kwargs)
        wrapper.__wrapped__ = fn
        return wrapper


class set_detect_anomaly:
    """Sets anomaly detection on or off at once; as a context manager, restores it on exit."""

    def __init__(self, mode, check_nan=True):
        self.prev = (_Anomaly.enabled, _Anomaly.check_nan)
        _Anomaly.enabled, _Anomaly.check_nan = bool(mode), check_nan

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        _Anomaly.enabled, _Anomaly.check_nan = self.prev
