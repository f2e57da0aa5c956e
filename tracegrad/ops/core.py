"""The primitive table's machinery: ``Primitive``, ``bind``, in-place ops, views.

A primitive is declared once, in one block, with everything both faces need:

    mul = Primitive("mul", args=("self", "other"),
        impl=lambda xp, a, b: xp.multiply(a, b),
        dtype=promote, shape=broadcast,
        vjp=(lambda g, a, b, out: g * b,      # d/d self
             lambda g, a, b, out: g * a),     # d/d other
        saves=("self", "other"), np="{self} * {other}",
        np_out="np.multiply({self}, {other}, out={out})", c="{self} * {other}")

Templates are format strings whose slots are the primitive's ``args`` and params:
``np`` is a NumPy expression (a statement of the generated driver), ``np_out`` the
same computed into the array ``{out}`` by ufunc calls (a fused kernel's form; a
tuple of calls when it takes several, and then ``{out}`` is never one of the
operands), ``c`` one C expression shared by the C and CUDA renderers (``cuda``
overrides it where CUDA differs). A reduction declares its ``Combiner`` once
(``reduce=``): how parts combine, from what identity, in what accumulator dtype.

``bind(prim, *args, **params)`` runs it eagerly: the implementation on the
arrays, the dtype rule for PyTorch's result type, and, when grad mode is on
and an input requires grad, a backward node whose ``apply`` calls the VJP
rules with tracegrad tensors (so the same rules build a create_graph graph).
Broadcasting is undone once, here, by ``sum_to_shape``; rules never do it.

Forward mode (``autograd.forward_ad``) reads an optional JVP rule beside the VJP rule:
``jvp=`` is one rule per arg, ``rule(t, *inputs, out, **params)`` giving that arg's share
of the output tangent from its tangent ``t`` (the shares are summed, broadcast to the
output's shape there, as JAX's ``defjvp``), or ``LINEAR`` for a primitive linear in its
tensor args, whose JVP is the primitive applied to the tangents. A primitive without one
gets a JVP derived exactly from its VJP rule (``forward_ad``). ``bind`` itself does
nothing for forward mode: an open dual level interposes through the bind hooks
(``_hooks``), which ``bind`` already checks, so eager ops pay nothing while none is open.

The declaration also says what users call. ``public=True`` (or a name) generates the
function ``exp(input)`` / ``mul(input, other)`` that binds the primitive and puts it in
the declaring module's namespace; ``method=True`` makes it ``Tensor.exp`` too and
``inplace_method="exp_"`` generates ``Tensor.exp_``. Functions with logic of their own
(``add`` with ``alpha``, ``clamp``, the reductions' ``dim``) are written by hand and say
``@method`` where they are defined (``declare.py``). At declaration each VJP rule is
checked against ``saves``: what it reads must be what eager autograd keeps for it.
"""
import linecache
import os
import sys
import warnings

import numpy as np

from .. import _hooks, dtypes
from ..autograd import grad_mode
from ..autograd.anomaly_mode import _Anomaly, forward_stack
from ..autograd.graph import FREED_ERROR, Node, SavedTensor, _seq, grad_accumulator
from ..tensor import Tensor
from ..dtypes import result_type
from .declare import check_vjp_reads, install_method, out_is_positional
from .rules import float_promote

_gm = grad_mode._state
_hook_state = _hooks.state
_HOOKS = _hooks.INSTALLED
_PKG_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Frames from these places are tracegrad's own: the package (its code generator and runtime
# included), and the modules it generates.
INTERNAL = (_PKG_DIR + os.sep, "<tracegrad:")
PRIMITIVES = {}


class Aval:
    """An abstract value: what the shape/dtype rules and the IR know of a tensor."""
    __slots__ = ("shape", "dtype")

    def __init__(self, shape, dtype):
        self.shape, self.dtype = tuple(shape), dtype

    @property
    def ndim(self):
        return len(self.shape)

    def __repr__(self):
        return f"Aval({self.shape}, {self.dtype})"

    def __eq__(self, other):
        return isinstance(other, Aval) and (self.shape, self.dtype) == (other.shape, other.dtype)

    def __hash__(self):
        return hash((self.shape, self.dtype))


class Combiner:
    """How a reduction's partial results combine, declared once on its primitive.

    ``ufunc``: the NumPy ufunc that combines two parts (its ``reduce`` combines many);
    ``c``: the same as a C expression over ``{acc}`` and ``{x}``; ``identity(dtype)``: the
    value an accumulator starts from; ``widen``: float32 parts accumulate in float64 (so a
    sum of 10M float32 values stays within 1e-6 of NumPy's pairwise sum).
    """
    __slots__ = ("ufunc", "c", "identity", "widen")

    def __init__(self, ufunc, c, identity, widen):
        self.ufunc, self.c, self.identity, self.widen = ufunc, c, identity, widen

    def acc_dtype(self, dtype):
        """The dtype a kernel accumulates a ``dtype`` result in."""
        return dtypes.float64 if self.widen and dtype is dtypes.float32 else dtype


class Primitive:
    """One entry of the primitive table (see the module docstring).

    What users call, generated from the declaration (for a primitive whose public
    function is exactly ``bind(prim, *tensors)``, with args ``("self",)`` or
    ``("self", "other")``):

    ``public``: True (the primitive's name) or a name: the function ``name(input)`` or
        ``name(input, other)``, placed in the namespace of the module that declares the
        primitive (and, for the table's own modules, in ``tracegrad`` through
        ``tracegrad.ops``). ``doc`` is its docstring. It is ``self.function``.
    ``method``: True (the function's name) or a name: the same function as a ``Tensor``
        method.
    ``inplace_method``: a name such as ``"exp_"``: a ``Tensor`` method that writes the
        result into ``self`` through ``inplace`` (PyTorch's checks, the version bump, the
        rewritten history) and returns ``self``.
    ``helpers``: name -> object that generated code calls by name (erf's NumPy template
        calls ``_erf``): codegen puts them in a generated module's globals.
    """

    def __init__(self, name, impl, *, dtype, shape, args=("self",), vjp=None, saves=(),
                 node=None, np=None, np_out=None, c=None, cuda=None, operands=None,
                 reduce=None, exact=(), view=False, inplace=None, kind="other", public=None,
                 method=None,
                 inplace_method=None, doc=None, helpers=None, jvp=None):
        self.name = name
        # quiet like PyTorch (see "floating-point events"): reductions and the other
        # computing primitives run under NumPy's quiet error state
        self.impl = impl if kind in _FILTER_QUIETS or view else _quietly(impl)
        self.dtype = dtype              # dtype(*operands, **params) -> dtype
        # the rule gives operands of one dtype that dtype back: for any dtype (promote), for
        # floating ones (float_promote); bind then skips it (see apply_plain)
        self.keeps_dtype = (_ANY_DTYPE if dtype is result_type else
                            _FLOAT_DTYPE if dtype is float_promote else None)
        self.shape = shape              # shape(*shapes, **params) -> tuple
        self.args = args
        self.vjp = vjp                  # one rule per arg, or None: not differentiable
        self.vjp_all = callable(vjp)    # or one function giving every arg's gradient
        self.jvp = jvp                  # forward mode: one rule per arg, LINEAR, or None:
        #                                 derived from vjp (autograd/forward_ad.py)
        self.saves = saves              # names from args, and "result" for the output
        self._save_idx = tuple(args.index(s) for s in saves if s != "result" and s[0] != "*")
        rest = [args.index(s) for s in saves if s[0] == "*"]
        self._save_rest = rest[0] if rest else None   # a variadic tail that is saved whole
        self.saves_result = "result" in saves
        self.np_template = np           # NumPy expression over the named slots
        self.np_out = np_out            # kernels: ufunc call(s) writing into {out}
        self.c_template = c             # elementwise: one C expression (C and CUDA)
        self.cuda_template = cuda or c  # elementwise: CUDA C, where it differs from C
        # operands(out_dtype, *operand dtypes) -> the dtype each operand is computed in
        # (kernels cast to it first); by default every operand takes the result's dtype
        self.operands = operands
        self.reduce = reduce            # reductions: their Combiner
        # args the rules compare with the result bit for bit (amax's ties): the backward
        # must read the very values the forward computed, saved, never computed again
        # (the C tier's vector exp and NumPy's differ in the last bit)
        self.exact = exact
        self.view = view                # output may share storage with args[0]
        self.inplace_impl = inplace     # impl writing into args[0], for no-grad in-place ops
        self.kind = kind                # "elementwise", "reduction", "shape", "other"
        self.helpers = dict(helpers or {})   # names generated code calls -> the objects
        # Elementwise rules read only saved values; other rules may read the shape and dtype
        # of an unsaved input, which they then receive as an Aval.
        self.reads_avals = kind != "elementwise"
        check_vjp_reads(self)
        self.out_positional = out_is_positional(self)
        cls_name = node or "".join(p.capitalize() for p in name.split("_")) + "Backward0"
        self.node_cls = type(cls_name, (PrimNode,), {"__slots__": ()}) if vjp else None
        self.public = name if public is True else public or None
        self.function = None
        if public or method or inplace_method:
            self._declare_api(method, inplace_method, doc)
        PRIMITIVES[name] = self

    def _declare_api(self, method, inplace_method, doc):
        """Generate the public function and the methods the declaration asks for."""
        if self.args not in (("self",), ("self", "other")):
            raise TypeError(f"Primitive {self.name!r}: public=, method= and inplace_method= "
                            f"generate f(input) or f(input, other), but its args are "
                            f"{self.args!r}: write its function by hand")
        module = _declaring_module()
        fn = _bind_function(self, self.public or self.name, doc)
        fn.__module__ = module["__name__"]
        self.function = fn
        if self.public:
            module[self.public] = fn
        if method:
            install_method(fn.__name__ if method is True else method, fn)
        if inplace_method:
            fn_ = _inplace_method(self, inplace_method)
            fn_.__module__ = module["__name__"]
            install_method(inplace_method, fn_)

    def shape_dtype(self, *avals, **params):
        """The output aval of this primitive over input avals (or Python scalars)."""
        shapes = [getattr(a, "shape", ()) for a in avals]
        return Aval(self.shape(*shapes, **params), self.dtype(*avals, **params))

    def __repr__(self):
        return f"<primitive {self.name}>"


def _bind_function(prim, name, doc):
    """``name(input[, other])``: the primitive applied to its arguments (``bind``, written
    out: these are the operators and functions every program calls)."""
    if len(prim.args) == 1:
        def fn(input):
            if _HOOKS.n:
                hook = _hook_state.bind_hook
                if hook is not None:
                    return hook(prim, (input,), {})
            return apply_plain(prim, (input,), {})
    else:
        def fn(input, other):
            if _HOOKS.n:
                hook = _hook_state.bind_hook
                if hook is not None:
                    return hook(prim, (input, other), {})
            return apply_plain(prim, (input, other), {})
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = doc or f"The ``{prim.name}`` primitive, elementwise."
    return fn


def _inplace_method(prim, name):
    """``Tensor.<name>(self[, other])``: the primitive's result written into ``self``."""
    if len(prim.args) == 1:
        def method(self):
            return inplace(prim, name, self)
    else:
        def method(self, other):
            return inplace(prim, name, self, other)
    method.__name__ = method.__qualname__ = name
    method.__doc__ = f"In-place ``{prim.public or prim.name}``: writes into ``self``, returns it."
    return method


_HELPERS = set()       # code objects of declaration helpers (``declaration_helper``)


def declaration_helper(fn):
    """Mark ``fn`` (``unary_float``, ``binary``...) as a helper that declares primitives for
    its caller: the functions they generate go to the caller's module, not the helper's."""
    _HELPERS.add(fn.__code__)
    return fn


def _declaring_module():
    """The globals of the module whose code declares a primitive: the first frame outside
    this module and outside the declaration helpers."""
    f = sys._getframe(1)
    while f.f_globals is globals() or f.f_code in _HELPERS:
        f = f.f_back
    return f.f_globals


_ANY_DTYPE, _FLOAT_DTYPE = "any", "floating"     # Primitive.keeps_dtype
LINEAR = "linear"   # Primitive.jvp of a primitive linear in its tensor args: f(tangents)
_PLAIN = ()     # PrimNode.apply: the inputs need no reduction nor cast (see _record)


class PrimNode(Node):
    """The backward node of one primitive application."""
    __slots__ = ("prim", "params", "saved", "in_meta")

    def __init__(self, next_functions, out_meta, prim, params, in_meta, saved):
        # Node.__init__'s fields, set here: one call less on the hot path
        self.next_functions, self._out_meta, self._seq = next_functions, out_meta, next(_seq)
        self._pre_hooks = self._post_hooks = self._tensor_pre_hooks = self._retain_grad = None
        self._anomaly_trace = forward_stack() if _Anomaly.enabled else None
        self._metadata = None
        self.prim, self.params, self.in_meta, self.saved = prim, params, in_meta, saved

    def apply(self, grads):
        saved = self.saved
        if saved is None:
            raise RuntimeError(FREED_ERROR)
        g = grads[0]
        prim = self.prim
        in_meta = self.in_meta
        last = saved[-1]
        out = last.unpack(self) if last is not None else None
        if in_meta is None:     # elementwise, its tensor inputs all like the output (_record)
            om = self._out_meta[0]
            if g is not None and g._data.dtype is om[1] and g._data.shape == om[0]:
                in_meta = _PLAIN    # nothing to undo
            else:               # a gradient of another dtype or shape reached the node
                in_meta = [om[:2] if s is None or type(s) is SavedTensor else None
                           for s in saved[:-1]]
        ins = []
        for s in saved[:-1]:
            ins.append(s.unpack(self) if type(s) is SavedTensor else s)
        if prim.reads_avals:    # an unsaved input: its shape and dtype, which rules may read
            for i, (s, m) in enumerate(zip(saved, in_meta)):
                if s is None and m is not None:
                    ins[i] = Aval(m[0], dtypes.from_numpy(m[1]))
        nexts = self.next_functions
        params = self.params
        if prim.vjp_all:         # one rule for all inputs (variadic primitives)
            raw = prim.vjp(g, *ins, out=out, **params)
        elif prim.out_positional and not params:    # the commonest call, the cheapest way
            raw = []
            for rule, (fn, _) in zip(prim.vjp, nexts):
                raw.append(None if fn is None or rule is None else rule(g, *ins, out))
        else:
            raw = []
            for rule, (fn, _) in zip(prim.vjp, nexts):
                raw.append(None if fn is None or rule is None else rule(g, *ins, out=out,
                                                                         **params))
        if in_meta is _PLAIN:
            return raw
        res = []
        for r, (fn, _), meta in zip(raw, nexts, in_meta):
            if r is None or fn is None:
                res.append(None)
                continue
            data = r._data
            if data.shape != meta[0]:
                r = sum_to_shape(r, meta[0])
            if data.dtype is not meta[1] and data.dtype != meta[1]:
                r = to_copy(r, dtype=dtypes.from_numpy(meta[1]))
            res.append(r)
        return res

    def release(self):
        self.saved = None

    def __getattr__(self, name):
        if name.startswith("_saved_"):
            key = name[7:]
            if self.saved is None:
                raise RuntimeError(FREED_ERROR)
            if key == "result" and self.prim.saves_result:
                return self.saved[-1].unpack(self)
            if key in self.prim.args and key in self.prim.saves:
                s = self.saved[self.prim.args.index(key)]
                return s.unpack(self) if type(s) is SavedTensor else s
            if key in self.params:
                return self.params[key]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")


# errors -----------------------------------------------------------------------

def user_frame():
    """The innermost frame outside tracegrad (the user's code), or None."""
    f = sys._getframe(1)
    while f is not None and f.f_code.co_filename.startswith(INTERNAL):
        f = f.f_back
    return f


def user_site():
    """``file:line: source`` of the innermost frame outside tracegrad, or ''."""
    f = user_frame()
    if f is None:
        return ""
    src = linecache.getline(f.f_code.co_filename, f.f_lineno).strip()
    return f"{f.f_code.co_filename}:{f.f_lineno}" + (f": {src}" if src else "")


def op_error(op, message, exc_type=RuntimeError):
    """An error that names the op and the user's source line."""
    site = user_site()
    return exc_type(f"{op}: {message}" + (f"\n  (at {site})" if site else ""))


def _explain_failure(prim, args, params, exc):
    """Turn a failure inside an implementation into an error naming the op."""
    if isinstance(exc, (TypeError, IndexError)) and str(exc).startswith(prim.name + ":"):
        return exc
    from ..device import mixed_devices      # a CPU op handed a cuda tensor fails in NumPy
    mixed = mixed_devices([a for a in args if isinstance(a, Tensor)])
    if mixed:
        return op_error(prim.name, mixed)
    try:
        prim.shape_dtype(*args, **params)       # the rules raise PyTorch's wording
    except (RuntimeError, IndexError, TypeError, ValueError) as rule_exc:
        msg = str(rule_exc)
        return op_error(prim.name, msg, type(rule_exc) if not isinstance(rule_exc, ValueError)
                        else RuntimeError)
    etype = exc if isinstance(exc, type) else type(exc)
    etype = etype if etype in (IndexError, TypeError) else RuntimeError
    return op_error(prim.name, str(exc), etype)


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


# eager application ----------------------------------------------------------------

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
    on_gpu = record = volatile = False
    dt, same = None, True     # the tensors' dtype; whether all args are tensors of that dtype
    for a in args:
        if isinstance(a, Tensor):
            d = a._data
            arrays.append(d)
            if a._requires_grad or a._volatile:
                record = True
                if a._volatile:
                    volatile = True
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
    if volatile:      # a deprecated volatile Variable among the inputs: no history downstream
        t._volatile = True
    elif record and _gm.grad_enabled and prim.vjp is not None and dt.is_floating_point:
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


def sum_to_shape(g, shape):
    """Undo broadcasting: sum ``g`` down to ``shape`` (the adjoint of broadcast_to)."""
    from . import reduce_ops, shape_ops
    lead = g.ndim - len(shape)
    if lead < 0:    # an assigned value may have leading 1s that NumPy drops: y[0] = w[None]
        return shape_ops.reshape(sum_to_shape(g, shape[-lead:]), shape)
    dims = tuple(range(lead)) + tuple(
        i + lead for i, s in enumerate(shape) if s == 1 and g.shape[i + lead] != 1)
    if dims:
        g = reduce_ops.sum(g, dims, keepdim=True)
    if lead:
        g = shape_ops.reshape(g, shape)
    return g


def to_copy(t, dtype=None, device=None, copy=False):
    from .elementwise import convert
    return convert(t, dtype=dtype, device=device, copy=copy)


# in-place ops and views ----------------------------------------------------------

def check_inplace(target, name):
    if _gm.grad_enabled and target._requires_grad:
        if target._grad_fn is None and target._base is None:
            raise op_error(name, "a leaf Variable that requires grad is being used in an in-place "
                                 "operation.")
        if target._base is not None and target._base._requires_grad \
                and target._base._grad_fn is None:
            raise op_error(name, "a view of a leaf Variable that requires grad is being used in an "
                                 "in-place operation.")
    if target.is_inference() and not _gm.inference:     # a view of one counts too
        raise op_error(name, "Inplace update to inference tensor outside InferenceMode is not "
                             "allowed. You can make a clone to get a normal tensor before doing "
                             "inplace update.")


def inplace(prim, name, target, *others, **params):
    """Run ``prim(target, *others)`` and write the result into ``target``.

    The autograd history is rewritten as PyTorch does: ``target`` gets the op's
    node (with its old value as input), and when ``target`` is a view its base
    gets a node that scatters the new view value into the old base.
    """
    if batched_inplace is not None:     # a vmap is active: a batched tensor may take part
        done = batched_inplace(prim, name, target, others, params)
        if done is not None:
            return done
    if _hooks.tracer is not None:       # inside tracegrad.compile: record it functionally
        _hooks.tracer.inplace(prim, target, others, params,
                              lambda: _inplace(prim, name, target, *others, **params))
        return target
    if forward_inplace is not None:     # a dual level is open: the tangent is written too
        return forward_inplace(prim, name, target, others, params, _inplace)
    return _inplace(prim, name, target, *others, **params)


# ``autograd.forward_ad`` sets this while a dual level is open (the bind hook does not see an
# in-place write: ``_inplace`` binds the op to a private copy of the target's history)
forward_inplace = None
# ``tracegrad._vmap`` sets this while a vmap runs: an in-place op on a batched tensor is
# computed by the batching rules and written into the physical tensor; None when none takes
# part (the op then goes on as usual)
batched_inplace = None


def _inplace(prim, name, target, *others, **params):
    check_inplace(target, name)
    differentiable = target._requires_grad or any(
        isinstance(o, Tensor) and o._requires_grad for o in others)
    recording = _gm.grad_enabled and prim.vjp is not None and (
        differentiable or (target._base is not None and target._base._requires_grad))
    dt = target.dtype
    try:
        res_dt = prim.dtype(target, *others, **params)
    except (RuntimeError, TypeError) as e:
        raise op_error(name, str(e)) from None
    if res_dt.is_floating_point and not dt.is_floating_point or (
            res_dt is not dtypes.bool and dt is dtypes.bool):
        raise op_error(name, f"result type {res_dt.name.capitalize()} can't be cast to the desired "
                             f"output type {dt.name.capitalize()}")
    if not recording and prim.inplace_impl is not None:
        if not warnings.filters or warnings.filters[0] is not _quiet_filter:
            _keep_quiet_filter()    # quiet like PyTorch, as in apply_plain
        arrays = [o._data if isinstance(o, Tensor) else o for o in others]
        try:
            shape = prim.shape(target.shape, *[getattr(o, "shape", ()) for o in others], **params)
            if tuple(shape) != target.shape:
                raise RuntimeError(f"output with shape {list(target.shape)} doesn't match the "
                                   f"broadcast shape {list(shape)}")
            xp = np
            if type(target._data) is not np.ndarray:    # the same-device check (GPU path)
                both = [target._data] + arrays
                xp = _device_xp(prim, (target,) + others, both)
                arrays = both[1:]
            prim.inplace_impl(xp, target._data, *arrays, **params)
        except Exception as exc:  # noqa: BLE001
            raise _explain_failure(prim, (target,) + others, params, exc) from None
        target._vc.value += 1
        if target._base is not None:
            target._view_version = target._vc.value
        return target
    old_data = target._data
    if recording and 0 in prim._save_idx:
        old_data = old_data.copy()    # the node saves the value from before the write
    old_fn = target.grad_fn
    old = Tensor._make(old_data, grad_fn=old_fn, requires_grad=target._requires_grad)
    old._output_nr = target._output_nr
    # The node is recorded apart from computing ``new``, because it must not save the private
    # ``new`` as its result: PyTorch saves ``target`` itself (after the write, below), so that a
    # later in-place write to it is caught, and a saved_tensors_hooks pack hook runs once.
    prev, _gm.grad_enabled = _gm.grad_enabled, False
    try:
        new = bind(prim, old, *others, **params)
    finally:
        _gm.grad_enabled = prev
    if recording and differentiable and res_dt.is_floating_point and not new._volatile:
        _record(prim, new, (old,) + others, params, save_result=False)   # inputs before the write
    if new.shape != target.shape:
        raise op_error(name, f"output with shape {list(target.shape)} doesn't match the broadcast "
                             f"shape {list(new.shape)}")
    try:
        target._data[...] = new._data
    except ValueError as exc:
        raise op_error(name, str(exc)) from None
    target._vc.value += 1
    node = new._grad_fn
    if node is not None:
        if target._base is None:
            _move_retain_grad(target, old_fn, node)
            target._grad_fn, target._output_nr, target._requires_grad = node, 0, True
        else:
            _rebase_view(target, new)
        if prim.saves_result:
            node.saved[-1] = SavedTensor(target, is_output=True)
    if target._base is not None:
        target._view_version = target._vc.value
    return target


def _move_retain_grad(t, old_fn, new_fn):
    """``t`` is about to get ``new_fn`` as its grad_fn: its retain_grad goes along, as PyTorch's
    ``update_tensor_hooks_on_new_gradfn`` moves it (tensor hooks stay on the old node)."""
    if not t._retains_grad:
        return
    kept = old_fn._retain_grad if old_fn is not None else None
    if kept:
        ref = kept.get(t._output_nr)
        if ref is not None and ref() is t:
            del kept[t._output_nr]
            if not kept:
                old_fn._retain_grad = None    # the engine's fast path checks for None
    new_fn._set_retain_grad(0, t)


def _rebase_view(view, new_value):
    """After an in-place write through ``view``, give its base a CopySlices history."""
    from .index_ops import view_scatter
    base = view._base
    old_base = Tensor._make(base._data, grad_fn=base.grad_fn, requires_grad=base._requires_grad)
    old_base._output_nr = base._output_nr
    new_base = view_scatter(old_base, new_value, view._view_steps)
    _move_retain_grad(base, old_base._grad_fn, new_base._grad_fn)
    base._grad_fn, base._output_nr, base._requires_grad = new_base._grad_fn, 0, True
    fresh = apply_view_steps(base, view._view_steps)._grad_fn
    _move_retain_grad(view, view._grad_fn, fresh)
    view._grad_fn, view._output_nr, view._requires_grad = fresh, 0, True


def apply_view_steps(x, steps):
    for prim, params in steps:
        x = bind(prim, x, **params)
    return x


def refresh_view(view):
    """A view whose base was written in place takes its history from the base anew."""
    base = view._base
    view._view_version = view._vc.value
    if base._requires_grad and _gm.grad_enabled:
        fresh = apply_view_steps(base, view._view_steps)._grad_fn
        _move_retain_grad(view, view._grad_fn, fresh)
        view._grad_fn, view._output_nr, view._requires_grad = fresh, 0, True


__all__ = ["Primitive", "Aval", "LINEAR", "bind", "inplace", "sum_to_shape", "op_error",
           "PRIMITIVES", "grad_accumulator"]
