"""The eager fallback of a compiled function: when, and why, it runs the function itself.

A function that calls something whose results change from call to call (``random``,
``time``), one traced past ``max_variants`` times, or a trace that stopped recording part
way (``_RanEagerly``) runs eagerly, after one warning that names the reason.
``CompiledFunction`` takes these methods from ``EagerFallback``.
"""
import warnings


class _RanEagerly(Exception):
    """A trace that stopped recording part way (``Tracer.abandon``): the call is done."""

    def __init__(self, result, reason, for_good):
        super().__init__(reason)
        self.result, self.reason, self.for_good = result, reason, for_good


class EagerFallback:
    """The eager fallback's methods; the state (``_eager``, ``_eager_reason``, ``stats``,
    ``_stopped``) is ``CompiledFunction``'s."""

    def _call_eagerly(self, *args, **kwargs):
        """The function itself; a module without its compiled call (``Module.compile``)."""
        if self._module is not None:
            return self._module._call_impl(*args, **kwargs)
        return self._fn(*args, **kwargs)

    def _run_eagerly_for(self, calls):
        self._eager = True
        self._eager_reason = f"it calls {', '.join(calls)}, whose results change from call to call"
        self.stats["fallbacks"] += 1
        warnings.warn(
            f"tracegrad.compile: {self._label} calls {', '.join(calls)}, whose results change "
            "from call to call; a trace would freeze the first call's, so it runs eagerly. "
            "Call these outside the compiled function and pass their results as arguments to "
            "compile the rest.", RuntimeWarning, stacklevel=3)

    def _run_eagerly_because(self, reason, for_good):
        """A trace that stopped recording part way: with ``for_good`` (or "again", and the
        same reason stopped an earlier trace: state made on a first call, as a cached mask,
        stops only that one) every call from now on runs eagerly, after one warning naming
        the reason. Whether it did."""
        if for_good == "again":
            for_good = reason in self._stopped
            self._stopped.add(reason)
        if not for_good or self._eager:
            return bool(for_good)
        self._eager = True
        self._eager_reason = reason
        warnings.warn(f"tracegrad.compile: {self._label} {reason}, which a compiled graph "
                      "cannot hold: the call runs eagerly from there, and later calls run "
                      "eagerly.", RuntimeWarning, stacklevel=4)
        return True

    def _fall_back(self, reason):
        self._eager = True
        self._eager_reason = "too many variants"
        self.stats["fallbacks"] += 1
        warnings.warn(
            f"tracegrad.compile: {self._label} was traced {len(self._variants)} times (the limit "
            f"is {self.max_variants}); running it eagerly from now on. The last retrace was "
            f"caused by: {reason}. If a guard keeps failing, move that value-dependent code out "
            "of the compiled function or pass max_variants= to compile.", RuntimeWarning,
            stacklevel=3)
