"""``CompiledFunction``: guards, the variant cache, retracing and the eager fallback.

A call is keyed by its *signature*: the argument structure, each tensor's
shape, dtype, device and requires_grad, the value of every other argument,
and the grad and inference modes. Each signature holds up to a few variants
that differ in data-dependent guards; a variant also checks that its captured
tensors are still the objects its sources (module attributes, globals,
closure cells) hold, with the same metadata. A call that fits no variant is
traced again; the reason is kept in ``stats["retrace_reasons"]`` and logged
under ``TRACEGRAD_LOG=recompiles``. Past ``max_variants`` the function runs
eagerly, after one warning that names the guard that kept failing.

Here are the calling path, tracing and building a variant; the signature is
``signatures.py``'s, the captured tensors' checks ``captured.py``'s, the eager fallback
``eager.py``'s and ``explain()`` with the other inspection ``inspection.py``'s.
"""
import functools
import os
import sys
import threading
import time
import weakref

from numpy import ndarray

from tracegrad.codegen.support import GuardFailure
from tracegrad import _hooks
from tracegrad.autograd import forward_ad, grad_mode
from tracegrad.tensor import Tensor
from tracegrad.symbolic import MARKS, Specialize
from tracegrad.trace import Tracer, UnsupportedError, map_structure
from tracegrad.transform import instrument

from . import cuda_tier, tiers
from .captured import (_captured_name, _is_module, _meta, _param_names, _source_of, _stale,
                       _unwritten)
from .dynamic import DynamicDims
from .eager import EagerFallback, _RanEagerly
from .events import phase
from .guards import Draws, free_guards, impure_calls, prepare
from .inspection import Inspection
from .signatures import _ARGS_KWARGS, _difference, _flatten, _on_gpu
from .variant import build

_gm = grad_mode._state
DEFAULT_MAX_VARIANTS = 8
_ALL = weakref.WeakSet()      # every compiled function, for tracegrad.compiler.reset()


def reset_all():
    """``tracegrad.compiler.reset()``: every compiled function forgets its variants."""
    for f in list(_ALL):
        f.reset()


class CompiledFunction(EagerFallback, Inspection):
    """The callable ``tracegrad.compile`` returns (see the module docstring)."""

    def __init__(self, fn, *, backend=None, dynamic=None, fullgraph=False,
                 max_variants=DEFAULT_MAX_VARIANTS):
        backend = tiers.choose(backend)
        self._fn = fn
        self._module = fn if _is_module(fn) else None
        target = type(fn).forward if self._module is not None else fn
        self._target = target
        self._label = getattr(target, "__qualname__", None) or type(fn).__name__
        self.backend, self.dynamic, self.fullgraph = backend, dynamic, fullgraph
        self.max_variants = max_variants
        self._cache = {}            # signature -> [Variant]
        self._locks = {}            # signature -> the lock its trace holds (threads wait)
        self._stopped = set()       # why traces stopped part way, once each ("again")
        self._locks_lock = threading.Lock()
        self._variants = []         # every variant, oldest first
        self._last = None
        self._eager = False
        self._instrumented = None
        self._params = _param_names(target, skip_self=self._module is not None)
        self._sizes = DynamicDims(dynamic)     # which dims are traced symbolic
        self._impure = impure_calls(target, self._module)  # a trace cannot replay: eager
        self._eager_reason = None
        self.stats = {"compiles": 0, "cache_hits": 0, "fallbacks": 0, "retrace_reasons": [],
                      "compile_seconds": 0.0, "eager_runs": []}
        functools.update_wrapper(self, target, updated=())
        _ALL.add(self)

    def __getstate__(self):
        """A pickle keeps what ``compile`` was given; the copy compiles on its first call."""
        return {"fn": self._fn, "backend": self.backend, "dynamic": self.dynamic,
                "fullgraph": self.fullgraph, "max_variants": self.max_variants}

    def __setstate__(self, state):
        # The function may be a module still being unpickled: set up at the first use.
        self.__dict__["_pending"] = state

    def __getattr__(self, name):
        state = self.__dict__.pop("_pending", None)
        if state is None:
            raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")
        fn = state.pop("fn")
        self.__init__(fn, **state)
        return getattr(self, name)

    def reset(self):
        """Forget every variant (and an eager fallback): the next call traces again."""
        self._cache.clear()
        self._variants.clear()
        self._last, self._eager = None, False

    # calling ---------------------------------------------------------------------------------
    def __call__(self, *args, **kwargs):
        # nested in another trace, inside vmap (a draw hook is set: its rules run the ops, on
        # batched tensors a variant cannot take) or in a forward-mode AD level (the tangents
        # are computed op by op, and a variant carries none): inline it
        if (self._eager or _hooks.tracer is not None or _hooks.state.draw_hook is not None
                or forward_ad._current_level >= 0):
            if self._eager:
                self.stats["fallbacks"] += 1
            return self._call_eagerly(*args, **kwargs)
        tensors, sig = [], [_ARGS_KWARGS]
        for a in args:      # _flatten's top level, inlined for the usual all-tensor call
            if isinstance(a, Tensor):
                tensors.append(a)
                d = a._data
                sig.append(("T", d.shape, a.dtype, ndarray if type(d) is ndarray else _on_gpu(d),
                            a._requires_grad))
            else:
                _flatten(a, None, tensors, None, sig)
        for k, a in kwargs.items():
            sig.append(("kw", k))
            _flatten(a, None, tensors, None, sig)
        if self._module is not None:    # train()/eval() changes what a module computes
            sig.append(("training", tuple(m.training for m in self._module.modules())))
        raw = sig
        if self._sizes.dyn or self.dynamic or MARKS:      # dynamic dims leave the key
            sig = self._sizes.key(sig, tensors)
        key = (tuple(sig), _gm.grad_enabled, _gm.inference)
        reason = tried = draws = None
        last = self._last
        if last is not None and last.signature == key:
            # The usual call runs the variant that ran last: try it first (a cache hit in the
            # loop below would find it at the same cost, after the others' checks).
            tried = _stale(last) if last.checks else None
            if tried is None and last.impure:   # its impure calls, drawn again: same results?
                draws = Draws()
                tried = draws.fit(last.impure)
            if tried is None:
                try:
                    out = last.run(tensors + last.captured if last.captured else tensors)
                except GuardFailure as e:
                    tried = "guard failed: " + last.guards[e.index].describe()
                else:
                    if draws is not None:
                        draws.settle(last.impure)
                    self.stats["cache_hits"] += 1
                    return out
        variants = self._cache.get(key)
        if variants:
            for v in variants:
                if v is last and tried is not None:
                    reason = tried      # it failed just now
                    continue
                why = _stale(v) if v.checks else None
                if why is None and v.impure:
                    draws = draws or Draws()
                    why = draws.fit(v.impure)
                if why:
                    reason = why
                    continue
                try:
                    out = v.run(tensors + v.captured)
                except GuardFailure as e:
                    reason = "guard failed: " + v.guards[e.index].describe()
                    continue
                if draws is not None:
                    draws.settle(v.impure)
                self.stats["cache_hits"] += 1
                self._last = v
                return out
        seen = len(variants) if variants else 0
        lock = self._signature_lock(key)
        if not lock.acquire(blocking=False):    # another thread traces this signature now:
            with lock:                          # wait for it, then look again
                pass
            return self(*args, **kwargs)
        if len(self._cache.get(key, ())) > seen:    # one was made since this call looked
            lock.release()
            return self(*args, **kwargs)
        try:
            return self._miss(args, kwargs, tensors, key, raw, variants, reason, draws)
        finally:
            lock.release()

    def _signature_lock(self, key):
        with self._locks_lock:
            lock = self._locks.get(key)
            if lock is None:
                lock = self._locks[key] = threading.Lock()
            return lock

    def _miss(self, args, kwargs, tensors, key, raw, variants, reason, draws):
        """No variant fits the call: trace it (or run eagerly past the limit)."""
        paths = []
        _flatten((args, kwargs), "", [], paths, [])
        if not variants and self._variants:
            reason = _difference(self._variants[-1], key, [self._readable(p) for p in paths])
        if draws is not None:       # eager, or the trace, draws from where the call began
            draws.rewind()
        if self._impure:
            self._run_eagerly_for(self._impure)
            return self._call_eagerly(*args, **kwargs)
        if len(self._variants) >= self.max_variants:
            self._fall_back(reason)
            return self._call_eagerly(*args, **kwargs)
        grown = self._sizes.grow(raw, key, self._variants, [self._readable(p) for p in paths]) \
            if self.dynamic is None else None
        if grown:       # a size-caused recompile: those dims are traced symbolic from now on
            reason = f"{reason}; {grown}" if reason else grown
            key = (tuple(self._sizes.key(raw, tensors)), _gm.grad_enabled, _gm.inference)
        try:
            v = self._compile(args, kwargs, tensors, paths, key, reason, raw)
        except _RanEagerly as done:     # the trace stopped recording part way: eager's result
            if not self._run_eagerly_because(done.reason, done.for_good):
                self.stats["eager_runs"].append(done.reason)
            return done.result
        self._last = v
        unreplayable = prepare(v.impure)
        if unreplayable:     # this call's trace is right; later calls cannot be checked
            self._run_eagerly_for(unreplayable)
        return v.run(tensors + v.captured, first=True)

    def _compile(self, args, kwargs, tensors, paths, key, reason, raw=None):
        if reason is not None:
            self.stats["retrace_reasons"].append(reason)
            _log_recompile(self._label, reason)
        start = time.perf_counter()
        cuda_tier.check(self.backend, tensors, self._label)
        names = [self._readable(p) for p in paths]
        while True:
            dynamic = self._sizes.dims(tensors)
            tracer = Tracer(name_captured=lambda t: _captured_name(t, self._module, self._target),
                            shape_env=self._sizes.shape_env(tensors) if dynamic else None)
            try:
                traced = self._trace(tracer, args, kwargs, tensors, names, dynamic)
                if traced.sym_dims:     # trusted for other sizes once two sizes agree
                    confirmed = self._sizes.check_generic(
                        traced, key, self._variants, dynamic,
                        fits=lambda v: not v.impure and not (v.checks and _stale(v)))
                    if confirmed is not None:
                        self.stats["size_checks"] = self.stats.get("size_checks", 0) + 1
                        return confirmed
                break
            except _RanEagerly:
                raise
            except (Specialize, Exception) as e:    # noqa: BLE001 - sizes needed as constants
                if not (isinstance(e, Specialize) or dynamic):
                    raise                   # a static trace's error is the user's
                why = self._sizes.specialize(_as_specialize(e, tracer), tracer.sym_dims, names)
                key = (tuple(self._sizes.key(raw, tensors)), key[1], key[2])
                self.stats["retrace_reasons"].append(why)
                _log_recompile(self._label, why)
        label = f"{self._label}_v{len(self._variants)}".replace(".", "_").replace("<", "") \
            .replace(">", "")
        try:
            v = self._build(traced, label, key, paths, args, kwargs, tracer)
        except (Specialize, Exception) as e:    # noqa: BLE001 - codegen needed a constant
            if not (isinstance(e, Specialize) or traced.sym_dims):
                raise
            why = self._sizes.specialize(_as_specialize(e, tracer), tracer.sym_dims, names)
            key = (tuple(self._sizes.key(raw, tensors)), key[1], key[2])
            return self._compile(args, kwargs, tensors, paths, key, why, raw)
        v.traced_graph, v.sym_dims, v.raw_sig = traced.graph, traced.sym_dims, raw
        if v.sizes is not None:
            v.sizes.verified = getattr(traced, "verified", False)
            if "guards" in os.environ.get("TRACEGRAD_LOG", ""):
                print(f"tracegrad.compile: guard: {v.sizes.describe()}", file=sys.stderr)
        self._cache.setdefault(key, []).append(v)
        self._variants.append(v)
        self.stats["compiles"] += 1
        self.stats["compile_seconds"] += time.perf_counter() - start
        return v

    def _build(self, traced, label, key, paths, args, kwargs, tracer):
        return build(traced, label, _gm.grad_enabled and not _gm.inference,
                  dump_ir=_ir_dumper(label), profile_name=self._label,
                  title=f"{self._label}{_where(self._target)}, variant {len(self._variants)}",
                  backend=self.backend, signature=key, paths=[self._readable(p) for p in paths],
                  sources=[traced.hints.get(id(t)) or _source_of(t, self._module, self._target)
                           for t in traced.captured],
                  captured=traced.captured, captured_meta=[_meta(t) for t in traced.captured],
                  free=_unwritten(free_guards(self._target, self._module, args, kwargs, traced,
                                              tracer.impure), traced.replayed_keys),
                  impure=tracer.impure)

    def _trace(self, tracer, args, kwargs, tensors, names, dynamic):
        """Run the function under ``tracer``; the arguments' ``dynamic`` dims symbolic."""
        tracer.fullgraph = self.fullgraph
        for i, (t, name) in enumerate(zip(tensors, names)):
            tracer.argument(t, name, dynamic.get(i, ()))
        fn = self._traceable()
        try:
            with phase(self._label, "trace", "compile"):
                result = tracer.run(fn, args, kwargs)
        except BaseException as e:
            # The trace run is an eager run: an exception of the user's leaves their tensors as
            # eager leaves them. A dynamic trace's is undone: it is traced again, specialised.
            if tracer.abandoned is None and (dynamic or isinstance(e, (Specialize,
                                                                       UnsupportedError))):
                tracer.restore()
            else:       # as eager: a scheduler stepped before the error has stepped
                tracer.run_after()
                if tracer.abandoned is not None and tracer.abandoned[1]:
                    self._run_eagerly_because(*tracer.abandoned)
            raise
        if tracer.abandoned is None and tracer.after:      # stores made: can a variant?
            returned = []
            map_structure(result, lambda x: returned.append(x) if isinstance(x, Tensor) else x)
            why = tracer.unreplayable_store(returned)
            if why is not None:     # the trace run, an eager run, is this call's too
                tracer.abandon(why)
        if tracer.abandoned is not None:    # the rest of the call ran eagerly: it is done
            raise _RanEagerly(result, *tracer.abandoned)
        tracer.restore()
        return tracer.finish(result)

    def _traceable(self):
        """The function to trace: the user's, rewritten by the front end when possible."""
        if self._instrumented is None:
            self._instrumented = instrument(self._target) or False
        if self._module is None:
            return self._instrumented or self._fn
        module, forward = self._module, self._instrumented
        if not forward:
            return module

        def call_module(*args, **kwargs):
            object.__setattr__(module, "forward", forward.__get__(module))
            try:
                return module._call_impl(*args, **kwargs)
            finally:
                try:
                    object.__delattr__(module, "forward")
                except AttributeError:
                    pass
        return call_module

    def _readable(self, path):
        """``arg0_1`` -> ``batch_1`` when the first parameter is called ``batch``."""
        if path.startswith("arg"):
            head, _, rest = path[3:].partition("_")
            if head.isdigit() and int(head) < len(self._params):
                return self._params[int(head)] + ("_" + rest if rest else "")
        return path

    def __repr__(self):
        return f"<compiled {self._label}>"

    def __get__(self, obj, objtype=None):      # decorating a method
        return self if obj is None else functools.partial(self, obj)


def _as_specialize(exc, tracer):
    """``exc`` as the ``Specialize`` it stands for: a dynamic trace or build that failed
    otherwise is made again with every size static (if it fails then too, the error is the
    user's and is raised from that trace)."""
    if isinstance(exc, Specialize):
        return exc
    return Specialize({str(size) for _, _, size in tracer.sym_dims},
                      f"symbolic sizes failed here ({type(exc).__name__}: {exc})")


def _log_recompile(label, reason):
    if "recompiles" in os.environ.get("TRACEGRAD_LOG", ""):
        print(f"tracegrad.compile: retracing {label}: {reason}", file=sys.stderr)


def _where(fn):
    code = getattr(fn, "__code__", None)
    if code is None:
        return ""
    return f" ({os.path.basename(code.co_filename)}:{code.co_firstlineno})"


def _ir_dumper(label):
    folder = os.environ.get("TRACEGRAD_DUMP")
    if not folder:
        return None
    from tracegrad.ir import print_graph
    os.makedirs(folder, exist_ok=True)

    def dump(stage, graph):
        with open(os.path.join(folder, f"{label}.{stage}.ir.txt"), "w") as f:
            f.write(print_graph(graph, stage) + "\n")
    return dump
