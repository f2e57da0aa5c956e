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
"""
import functools
import inspect
import operator
import os
import sys
import threading
import time
import warnings
import weakref

from numpy import ndarray

from tracegrad.codegen.support import GuardFailure
from tracegrad import _hooks
from tracegrad.autograd import grad_mode
from tracegrad.tensor import Tensor
from tracegrad.symbolic import MARKS, Specialize
from tracegrad.trace import Tracer, UnsupportedError
from tracegrad.transform import instrument

from . import cuda_tier, tiers
from .events import phase
from .dynamic import DynamicDims
from .guards import Draws, free_guards, impure_calls, prepare, stale
from .variant import build

_gm = grad_mode._state
DEFAULT_MAX_VARIANTS = 8
_ALL = weakref.WeakSet()      # every compiled function, for tracegrad.compiler.reset()


def reset_all():
    """``tracegrad.compiler.reset()``: every compiled function forgets its variants."""
    for f in list(_ALL):
        f.reset()


class CompiledFunction:
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
        # nested in another trace, or inside vmap (a draw hook is set: its rules run the ops,
        # on batched tensors a variant cannot take): inline it
        if self._eager or _hooks.tracer is not None or _hooks.state.draw_hook is not None:
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
        out = v.run(tensors + v.captured, first=True)
        if v.unreplayable:      # this call's stores were made; later calls could not make them
            self._run_eagerly_because(v.unreplayable, True)
        return out

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

    def _call_eagerly(self, *args, **kwargs):
        """The function itself; a module without its compiled call (``Module.compile``)."""
        if self._module is not None:
            return self._module._call_impl(*args, **kwargs)
        return self._fn(*args, **kwargs)

    def _readable(self, path):
        """``arg0_1`` -> ``batch_1`` when the first parameter is called ``batch``."""
        if path.startswith("arg"):
            head, _, rest = path[3:].partition("_")
            if head.isdigit() and int(head) < len(self._params):
                return self._params[int(head)] + ("_" + rest if rest else "")
        return path

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

    # inspection ------------------------------------------------------------------------------
    def _latest(self):
        if self._last is None:
            raise RuntimeError(f"compile: {self._label} has not been called yet; call it once "
                               "to trace and compile it")
        return self._last

    @property
    def code(self):
        """The generated forward and backward source of the variant last run."""
        return self._latest().code

    @property
    def kernels(self):
        """The fused kernels of the variant last run, as kernel IR (printing shows it),
        each marked with the tier it runs on."""
        return KernelList(self._latest())

    @property
    def graph(self):
        """The IR of the variant last run, forward then backward, as text."""
        return self._latest().graph_text()

    @property
    def graph_ir(self):
        """The IR graphs of the variant last run: ``[("forward", g), ("backward", g)]``."""
        v = self._latest()
        return [("forward", v.forward_graph)] + (
            [("backward", v.backward_graph)] if v.backward_graph is not None else [])

    def explain(self):
        """What was compiled, what hit the cache, and why it retraced, in words."""
        s = self.stats
        lines = [f"{self._label}: compiled {s['compiles']} time(s) "
                 f"({s['compile_seconds'] * 1000:.1f} ms in all), {s['cache_hits']} cache "
                 f"hit(s), {s['fallbacks']} eager fallback call(s)."]
        for i, v in enumerate(self._variants):
            sig, grad, inference = v.signature
            mode = _mode_name(grad, inference)
            metas = _tensor_metas(sig)
            if v.sym_dims:      # a dynamic variant: its shapes in symbols (x: f32[s0, 784])
                ins = v.traced_graph.inputs
                metas = [("T", ins[k].aval.shape) + m[2:] for k, m in enumerate(metas)]
            shapes = ", ".join(f"{p}: {_fmt_meta(m)}" for p, m in zip(v.paths, metas))
            lines.append(f"  variant {i} ({mode}): {shapes or 'no tensor arguments'}")
            if metas:
                lines.append("    " + _dims_words(v))
            if v.captured:
                lines.append(f"    reads {len(v.captured)} captured tensor(s): "
                             + ", ".join(src[0] for src in v.sources))
            for gd in list(v.free) + list(v.impure) + list(v.guards):
                lines.append(f"    guard: {gd.describe()}")
            for what, _, _, store in v.after:
                lines.append(f"    after each run, replays: {what}" if store else
                             f"    after each run, makes the call it made when traced: {what}")
            if v.backward_graph is not None:
                from tracegrad.passes.partition import saved_and_recomputed
                saved, recomputed = saved_and_recomputed(v.forward_graph, v.backward_graph,
                                                         v.n_residuals, v.namer)
                nbytes = sum(entry[2] for entry in saved)
                extra = sum(entry[2] for entry in saved if not entry[3])
                lines.append(f"    saves {v.n_residuals} value(s) for backward ({nbytes} bytes, "
                             f"{extra} beyond the inputs)"
                             + (", named as in .graph and .code:" if saved else ""))
                for name, type_, size, is_input in saved:
                    lines.append(f"      {name}: {type_}, {size} bytes"
                                 + (" (an input)" if is_input else ""))
                if recomputed:      # the first 20 names say enough
                    more = f", ... ({len(recomputed) - 20} more)" if len(recomputed) > 20 else ""
                    lines.append(f"    backward recomputes {len(recomputed)} value(s) from "
                                 "them: " + ", ".join(recomputed[:20]) + more)
            groups = [g for graph in (v.forward_graph, v.backward_graph) if graph is not None
                      for g in graph.groups]
            if groups:
                ops = sum(len(g.nodes) for g in groups)
                lines.append(f"    {len(groups)} fused group(s) of {ops} ops; "
                             f"{v.workspace_bytes} bytes of buffers kept between calls")
                lines.append(f"    kernels: {_tier_words(v, self.backend)}")
        for r in s["retrace_reasons"]:
            lines.append(f"  retraced because {r}")
        for r in s["eager_runs"]:
            lines.append(f"  one call ran eagerly part way: {r}")
        if self._eager:
            lines.append(f"  now running eagerly ({self._eager_reason})")
        return "\n".join(lines)

    def __repr__(self):
        return f"<compiled {self._label}>"

    def __get__(self, obj, objtype=None):      # decorating a method
        return self if obj is None else functools.partial(self, obj)


class _RanEagerly(Exception):
    """A trace that stopped recording part way (``Tracer.abandon``): the call is done."""

    def __init__(self, result, reason, for_good):
        super().__init__(reason)
        self.result, self.reason, self.for_good = result, reason, for_good


class KernelList(list):
    """A variant's kernels (``kernel.Kernel``); ``str`` prints each one's IR and tier."""

    def __init__(self, variant):
        super().__init__(variant.kernel_ir)
        self.variant = variant

    def __str__(self):
        v = self.variant
        skipped = v.cuda_skipped if v.device == "cuda" else v.c_skipped
        return "\n".join(f"{k}\n  tier: {_tier_of(v, k.name)}"
                         + (f" ({skipped[k.name]})" if k.name in skipped else "")
                         for k in self)

    __repr__ = __str__


def _tier_of(v, name):
    if name in v.cuda_kernels:
        return "cuda"
    if v.device == "cuda":
        return "numpy (CuPy's calls)"
    return "c" if name in v.c_kernels else "numpy"


def _tier_words(v, backend):
    n = len(v.kernel_ir)
    if v.device == "cuda":
        kept = len(v.cuda_kernels)
        return (f"{kept} of {n} on the CUDA tier" + (f", {n - kept} as CuPy calls"
                                                      if kept < n else ""))
    if v.tier == "c":
        kept = len(v.c_kernels)
        return (f"{kept} of {n} on the C tier (built in {v.c_seconds:.2f} s)"
                + (f", {n - kept} on NumPy" if kept < n else ""))
    if backend == "numpy":
        return f"{n} on the NumPy tier (backend='numpy')"
    return f"{n} on the NumPy tier" + (" (the C build is under way)"
                                      if getattr(v, "c_thread", None) is not None
                                      and v.c_thread.is_alive() else "")


# signatures --------------------------------------------------------------------------------

_ARGS_KWARGS = (tuple, 2)     # the signature's first entry: the (args, kwargs) pair


def _flatten(x, path, tensors, paths, sig):
    """Collect tensors (with a readable path each, unless ``paths`` is None) and a hashable
    signature of ``x``."""
    if isinstance(x, Tensor):
        tensors.append(x)
        if paths is not None:
            paths.append(path or "arg")
        sig.append(("T", x._data.shape, x.dtype, _where_data(x._data), x._requires_grad))
    elif isinstance(x, (tuple, list)):
        sig.append((type(x), len(x)))
        if path == "":          # the top level: (args, kwargs)
            args, kwargs = x
            for i, a in enumerate(args):
                _flatten(a, f"arg{i}", tensors, paths, sig)
            for k, a in kwargs.items():
                sig.append(("kw", k))
                _flatten(a, k, tensors, paths, sig)
            return
        for i, a in enumerate(x):
            _flatten(a, None if paths is None else f"{path}_{i}", tensors, paths, sig)
    elif isinstance(x, dict):
        sig.append((type(x), tuple(x)))
        for k, a in x.items():
            _flatten(a, None if paths is None else f"{path}_{k}", tensors, paths, sig)
    elif x is None or isinstance(x, (bool, int, float, str, complex, bytes)):
        sig.append((type(x), x))
    else:
        sig.append(("obj", type(x), id(x)))


def _on_gpu(array):
    """The signature's place of a GPU array: its type and device index (a variant's kernels,
    constants and buffers live on one device)."""
    return (type(array), array.device.id)


def _where_data(array):
    """Where a tensor's data lives, as signatures say it: ``np.ndarray`` on the CPU (free),
    ``(array type, device index)`` on a GPU."""
    return ndarray if type(array) is ndarray else _on_gpu(array)


def _tensor_metas(sig):
    return [s for s in sig if type(s) is tuple and s and s[0] == "T"]


def _dims_words(v):
    """Which dims a variant keeps static and which dynamic, in words."""
    if not v.sym_dims:
        return "static in every dim (specialised to these sizes)"
    dyn = v.sizes.dims(lambda name, d: f"dim {d} of {name}")
    checked = "" if v.sizes.verified else " (so far for these sizes only: not yet checked " \
                                             "against a trace at another size)"
    return "dynamic: " + "; ".join(f"{s} = {', '.join(w)}" for s, w in dyn.items()) \
        + "; every other dim static" + checked


def _fmt_meta(m):
    _, shape, dtype, kind, rg = m
    return f"{dtype.name}[{', '.join(map(str, shape))}]" + (" requires_grad" if rg else "")


# the fields of a tensor's signature entry ("T", shape, dtype, _where_data, requires_grad)
_TENSOR_FIELDS = (("shape", lambda s: "[" + ", ".join("dynamic" if n is None else str(n)
                                                      for n in s) + "]"), ("dtype", lambda d: d.name),
                  ("device", lambda where: "cpu" if where is ndarray else f"cuda:{where[1]}"),
                  ("requires_grad", bool))


def _mode_name(grad, inference):
    return "inference mode" if inference else ("grad mode" if grad else "no_grad")


def _difference(old, key, paths):
    """Why ``key`` does not match the variant ``old``, in words."""
    osig, ograd, oinf = old.signature
    sig, grad, inf = key
    if (grad, inf) != (ograd, oinf):
        return f"grad mode changed: {_mode_name(ograd, oinf)} -> {_mode_name(grad, inf)}"
    if len(osig) != len(sig):
        return "the structure of the arguments changed"
    ti = 0
    for a, b in zip(osig, sig):
        is_t = type(b) is tuple and b and b[0] == "T"
        name = paths[ti] if is_t and ti < len(paths) else "an argument"
        if is_t:
            ti += 1
        if a == b:
            continue
        if a[0] == "training":
            return "a module switched between train() and eval()"
        if is_t and type(a) is tuple and a and a[0] == "T":
            for i, (what, fmt) in enumerate(_TENSOR_FIELDS, 1):
                if a[i] != b[i]:
                    return f"{what} of {name} changed: {fmt(a[i])} -> {fmt(b[i])}"
        if type(a) is tuple and type(b) is tuple and len(a) == 2 and a[0] is b[0]:
            return f"a scalar argument changed: {a[1]!r} -> {b[1]!r}"
        return "the structure of the arguments changed"
    return "the arguments changed"


# captured tensors --------------------------------------------------------------------------

def _is_module(fn):
    return hasattr(fn, "named_parameters") and hasattr(type(fn), "forward") and callable(fn)


def _param_names(fn, skip_self):
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return []
    names = []
    for p in params[1:] if skip_self else params:
        if p.kind not in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            break
        names.append(p.name)
    return names


def _meta(t):
    d = t._data
    return (d.shape, t.dtype, ndarray if type(d) is ndarray else _on_gpu(d), t._requires_grad)


def _source_of(t, module, fn):
    """(name, getter) for where the function found the captured tensor ``t``."""
    if module is not None:
        for kind in ("named_parameters", "named_buffers"):
            for name, p in getattr(module, kind)():
                if p is t:
                    get = operator.attrgetter(name)
                    return (name, lambda get=get: get(module))
    fn = getattr(fn, "__func__", fn)
    code = getattr(fn, "__code__", None)
    if code is not None and fn.__closure__:
        for name, cell in zip(code.co_freevars, fn.__closure__):
            try:
                if cell.cell_contents is t:
                    return (name, lambda cell=cell: cell.cell_contents)
            except ValueError:
                pass
    g = getattr(fn, "__globals__", {})
    for name, val in g.items():
        if val is t:
            return (name, lambda name=name: g.get(name))
    return ("a tensor reached through an object", None)


def _captured_name(t, module, fn):
    """The name a captured tensor's value is built with: where it was found (``0.weight``
    becomes ``_0_weight``), or None."""
    name = _source_of(t, module, fn)[0]
    return name.replace(".", "_") if name and " " not in name else None


def _stale(v):
    """Why variant ``v`` no longer fits what it read besides the arguments, or None."""
    return _captured_changed(v) or stale(v.free)


def _captured_changed(v):
    for t, meta, (name, get) in zip(v.captured, v.captured_meta, v.sources):
        if get is not None and get() is not t:
            return f"the captured tensor {name} was replaced by another object"
        if _meta(t) != meta:
            return f"the captured tensor {name} changed shape, dtype, device or requires_grad"
    return None


def _unwritten(guards, keys):
    """``guards`` less those on the state that replayed stores write (``counter``,
    ``cfg.steps``, ``self.calls``): the graph never reads it, and it changes every call."""
    if not keys:
        return guards
    names = set()
    for k in keys:
        names |= {f"the global {k}", f"the closure variable {k}", f"the attribute {k}"}
    attrs = {f"the attribute {k.partition('.')[2]} of " for k in keys if "." in k}
    return [g for g in guards
            if g.what not in names and not any(g.what.startswith(a) for a in attrs)]


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
