"""``bind``: a primitive applied eagerly, with its autograd record.

``bind(prim, *args, **params)`` hands the call to the thread's bind hook where one is
installed (a tracer, the profiler, an open dual level, a vmap), else runs ``apply_plain``:
the implementation on the arrays, PyTorch's result dtype (skipped where the operands share
one dtype the primitive keeps), and, when grad mode is on and an input requires grad, the
backward node (``_record``). This is the eager hot path: every line counts per op.
"""
import warnings

import numpy as np

from .. import _hooks
from ..autograd import grad_mode
from ..autograd.graph import SavedTensor, grad_accumulator
from ..tensor import Tensor
from .op_errors import _explain_failure, op_error

_gm = grad_mode._state
_hook_state = _hooks.state
_HOOKS = _hooks.INSTALLED
_ANY_DTYPE, _FLOAT_DTYPE = "any", "floating"     # Primitive.keeps_dtype


# floating-point events -----------------------------------------------------------
# NumPy reports log(0), 1/0, exp(1000), 0/0 as RuntimeWarnings; PyTorch computes inf and nan
# silently, and so does tracegrad, without touching the NumPy settings of the user's own code.
# np.errstate around every op would cost 0.2 to 1.3 us (a ContextVar set and reset, plus the
# context manager), too much for an elementwise op, so two ways are used:
# - elementwise primitives call ufuncs directly from tracegrad's modules: NumPy attributes
#   their warnings to those modules, and one warnings filter ignores NumPy's floating-point
#   messages from modules named tracegrad* (the package, and the tracegrad_generated_* drivers
#   of compiled code). ``apply_plain`` keeps it first in ``warnings.filters`` with one identity
#   check (a user's simplefilter("always") or "error", or a catch_warnings block that restores
#   the list from before the import, would otherwise shadow or drop it);
# - the other computing primitives (reductions, pooling, ...) reach ufuncs through NumPy's
#   Python-level helpers, whose warnings name NumPy's modules, where a filter cannot tell them
#   from the user's own calls: their implementations run under NumPy's quiet error state, set
#   as np.errstate sets it (``_quietly``, applied when the primitive is declared; compiled
#   code calls the same implementations).
# A user's np.seterr(all="raise") is met by running the implementation again, quietly.
# Anomaly mode finds NaNs by looking at the values, not through these warnings.
_FP_MESSAGES = r"(divide by zero|overflow|underflow|invalid value) encountered in"
# kinds whose implementations call ufuncs from tracegrad's modules (matmul: np.matmul), or
# compute nothing (shape, source, random): the filter alone keeps them quiet, for free
_FILTER_QUIETS = ("elementwise", "matmul", "shape", "source", "random")
_quiet_filter = None        # the filter's tuple as it sits in warnings.filters


def _keep_quiet_filter():
    """Put the quiet filter first in ``warnings.filters`` (again)."""
    global _quiet_filter
    warnings.filterwarnings("ignore", message=_FP_MESSAGES, category=RuntimeWarning,
                            module=r"tracegrad")
    _quiet_filter = warnings.filters[0]


try:    # np.errstate's own state (NumPy >= 2), set without the context manager's cost
    from numpy._core._ufunc_config import _extobj_contextvar, _make_extobj
    _QUIET_STATE = _make_extobj(all="ignore")
    _quiet_enter, _quiet_exit = _extobj_contextvar.set, _extobj_contextvar.reset
except ImportError:         # NumPy 1.x: a thread's error state is set through np.seterr
    _QUIET_STATE = {"all": "ignore"}
    _quiet_enter = lambda state: np.seterr(**state)     # noqa: E731 - returns the old state
    _quiet_exit = lambda old: np.seterr(**old)          # noqa: E731


def _quietly(impl):
    """``impl`` run under NumPy's quiet error state, the caller's given back after."""
    def quiet_impl(*args, **kwargs):
        token = _quiet_enter(_QUIET_STATE)
        try:
            return impl(*args, **kwargs)
        finally:
            _quiet_exit(token)
    quiet_impl.__wrapped__ = impl
    quiet_impl.__name__ = quiet_impl.__qualname__ = getattr(impl, "__name__", "impl")
    return quiet_impl


_keep_quiet_filter()


def _xp(arrays):
    for a in arrays:
        if a is not None and not isinstance(a, (np.ndarray, int, float, bool, np.generic)) \
                and hasattr(a, "device"):
            from ..device import cupy
            return cupy()
    return np


def _device_xp(prim, args, arrays):
    """CuPy for an op whose tensors include a cuda one, after PyTorch's same-device check
    (``device.one_device``; CPU-only calls never come here)."""
    from ..device import DeviceMismatch, one_device
    try:
        return one_device(args, arrays, prim.kind == "elementwise")
    except DeviceMismatch as e:
        raise op_error(prim.name, str(e)) from None


def bind(prim, *args, **params):
    """Apply ``prim`` eagerly to tensors (and Python scalars), recording autograd."""
    if _HOOKS.n:               # some thread has a hook: is it this one?
        hook = _hook_state.bind_hook
        if hook is not None:    # a tracer or profiler is active in this thread
            return hook(prim, args, params)
    return apply_plain(prim, args, params)


def apply_plain(prim, args, params):
    """``bind`` without interposition."""
    arrays = []
    on_gpu = record = False
    dt, same = None, True     # the tensors' dtype; whether all args are tensors of that dtype
    for a in args:
        if isinstance(a, Tensor):
            d = a._data
            arrays.append(d)
            if a._requires_grad:
                record = True
            if type(d) is not np.ndarray:
                on_gpu = True
            if dt is None:
                dt = a.dtype
            elif a.dtype is not dt:
                same = False
        else:
            arrays.append(a)
            same = False
    xp = np if not on_gpu else _device_xp(prim, args, arrays)
    filters = warnings.filters      # quiet like PyTorch (see "floating-point events" above)
    if not filters or filters[0] is not _quiet_filter:
        _keep_quiet_filter()
    try:
        # an op that keeps its operands' one dtype needs no rule for it (most ops, most calls)
        if not (same and prim.keeps_dtype and dt is not None
                and (dt.is_floating_point or prim.keeps_dtype is _ANY_DTYPE)):
            dt = prim.dtype(*args, **params)
        out = prim.impl(xp, *arrays, **params)
    except FloatingPointError:      # the user's np.seterr(all="raise"): PyTorch never raises
        with np.errstate(all="ignore"):
            out = prim.impl(xp, *arrays, **params)
    except Exception as exc:   # noqa: BLE001 - re-raised with the op's name
        raise _explain_failure(prim, args, params, exc) from None
    if type(out) is not np.ndarray and xp is np and not hasattr(out, "__cuda_array_interface__"):
        out = np.asarray(out)       # a NumPy scalar; a cuda array is a copy to the device
    want = dt.np
    if out.dtype is not want and out.dtype != want:
        out = out.astype(want)
    t = Tensor._make(out, dtype=dt)
    if record and _gm.grad_enabled and prim.vjp is not None and dt.is_floating_point:
        _record(prim, t, args, params)
    if prim.view:
        src = args[0]
        if xp.may_share_memory(out, src._data):
            t._vc = src._vc
            t._base = src._base if src._base is not None else src
            t._view_steps = (src._view_steps or ()) + ((prim, params),)
            t._view_version = src._vc.value
    return t


def _record(prim, out, args, params, save_result=True):
    data = out._data
    shape, dtype = data.shape, data.dtype
    # in_meta: per input its (shape, dtype), for the backward to reduce a broadcast gradient
    # and cast it back; None (nothing to undo) for an elementwise op whose tensor inputs all
    # have the output's shape and dtype, the commonest case
    plain = prim.kind == "elementwise"
    next_functions = []
    saved = [None] * (len(args) + 1)
    for i, a in enumerate(args):
        if isinstance(a, Tensor):
            if a._base is not None:
                next_functions.append(a._grad_edge())
            elif a._grad_fn is not None:
                next_functions.append((a._grad_fn, a._output_nr))
            elif a._requires_grad:
                next_functions.append((grad_accumulator(a), 0))
            else:
                next_functions.append((None, 0))
            if plain:
                d = a._data
                plain = d.dtype is dtype and d.shape == shape
        else:
            next_functions.append((None, 0))
            saved[i] = a
    in_meta = None if plain else [(a._data.shape, a._data.dtype) if isinstance(a, Tensor)
                                  else None for a in args]
    save = prim._save_idx
    if prim._save_rest is not None:
        save = save + tuple(range(prim._save_rest, len(args)))
    for i in save:
        a = args[i]
        if isinstance(a, Tensor):
            saved[i] = SavedTensor(a)
    out_meta = None
    if plain:       # the first input's node describes the same shape and dtype: share its meta
        fn = next_functions[0][0]
        if fn is not None and args[0]._base is None:
            out_meta = fn._out_meta
            if len(out_meta) != 1 or out_meta[0][2] is not None or out_meta[0][1] is not dtype \
                    or out_meta[0][0] != shape:
                out_meta = None
    node = prim.node_cls(tuple(next_functions), out_meta or ((shape, dtype, None),), prim,
                         params, in_meta, saved)
    out._grad_fn = node
    out._requires_grad = True
    if save_result and prim.saves_result:
        saved[-1] = SavedTensor(out, is_output=True)


# The bottom of every stack of bind hooks (``_hooks.bind_hook_installed``): set from here,
# as ``_hooks`` sits below the op layer.
_hooks.apply_plain = apply_plain
