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

``bind(prim, *args, **params)`` (``binding``) runs it eagerly: the implementation on the
arrays, the dtype rule for PyTorch's result type, and, when grad mode is on
and an input requires grad, a backward node whose ``apply`` calls the VJP
rules with tracegrad tensors (so the same rules build a create_graph graph).
Broadcasting is undone once, by ``sum_to_shape`` in the backward node (``prim_node``);
rules never do it.

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
import sys

from .. import _hooks, dtypes
from ..dtypes import result_type
from .binding import _ANY_DTYPE, _FILTER_QUIETS, _FLOAT_DTYPE, _quietly, apply_plain
from .declare import check_vjp_reads, install_method, out_is_positional
from .inplace_views import inplace
from .prim_node import PrimNode
from .rules import float_promote
# The machinery lives in modules of its own; its names stay importable from ``core``:
# ``binding`` (bind and its fast paths), ``prim_node`` (the backward node, ``Aval``,
# ``sum_to_shape``), ``inplace_views`` (in-place ops and views; ``forward_inplace`` and
# ``batched_inplace`` are set there, not here), ``op_errors`` (``op_error``, ``user_frame``).
from ..autograd.graph import grad_accumulator  # noqa: F401
from ..tensor import Tensor  # noqa: F401
from .binding import _xp, bind  # noqa: F401
from .inplace_views import (  # noqa: F401
    _inplace, _rebase_view, apply_view_steps, check_inplace, refresh_view,
)
from .op_errors import _PKG_DIR, INTERNAL, op_error, user_frame, user_site  # noqa: F401
from .prim_node import Aval, sum_to_shape, to_copy  # noqa: F401

_hook_state = _hooks.state
_HOOKS = _hooks.INSTALLED
PRIMITIVES = {}


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


LINEAR = "linear"   # Primitive.jvp of a primitive linear in its tensor args: f(tangents)


__all__ = ["Primitive", "Aval", "LINEAR", "bind", "inplace", "sum_to_shape", "op_error",
           "PRIMITIVES", "grad_accumulator"]
