"""The ONNX form of each IR primitive: elementwise math, reductions, shapes and indexing.

``EMIT[op](b, n)`` writes IR node ``n`` into builder ``b`` and returns the ONNX name of its
result. A primitive missing here has no ONNX form and ``export`` says so, naming the op
and the user's line (``_ops_nn.py`` adds convolution, pooling, resampling and padding,
``_ops_index.py`` indexing and writes through views).
Operands are cast to the dtype the primitive computes in (``Builder.operands``), so mixed
dtypes and Python scalars need no care in the rules below.
"""
import numpy as np

from .. import dtypes
from ..symbolic import SymInt
from ._builder import INT64_MAX


EMIT = {}


def emits(*ops):
    def register(fn):
        for op in ops:
            EMIT[op] = fn
        return fn
    return register


# elementwise ---------------------------------------------------------------------------------

_UNARY = {"exp": "Exp", "log": "Log", "sqrt": "Sqrt", "sin": "Sin", "cos": "Cos", "tanh": "Tanh",
          "sigmoid": "Sigmoid", "erf": "Erf", "abs": "Abs", "neg": "Neg", "floor": "Floor",
          "ceil": "Ceil", "relu": "Relu", "sign": "Sign", "isnan": "IsNaN", "isinf": "IsInf",
          "logical_not": "Not", "linalg_det": "Det"}
_BINARY = {"add": "Add", "sub": "Sub", "mul": "Mul", "div": "Div", "maximum": "Max",
           "minimum": "Min", "pow": "Pow", "eq": "Equal", "lt": "Less", "le": "LessOrEqual",
           "gt": "Greater", "ge": "GreaterOrEqual"}
_BITWISE = {"bitwise_and": ("And", "BitwiseAnd"), "bitwise_or": ("Or", "BitwiseOr"),
            "bitwise_xor": ("Xor", "BitwiseXor"), "bitwise_not": ("Not", "BitwiseNot")}


@emits(*_UNARY)
def _unary(b, n):
    return b.op(_UNARY[n.op], b.operands(n), hint=n.out.name)


@emits(*_BINARY)
def _binary(b, n):
    return b.op(_BINARY[n.op], b.operands(n), hint=n.out.name)


@emits("ne")
def _ne(b, n):
    return b.op("Not", [b.op("Equal", b.operands(n))], hint=n.out.name)


@emits(*_BITWISE)
def _bitwise(b, n):
    logical, bitwise = _BITWISE[n.op]
    if n.out.dtype is dtypes.bool:
        return b.op(logical, b.operands(n), hint=n.out.name)
    need(b, n, 18)
    return b.op(bitwise, b.operands(n), hint=n.out.name)


@emits("where")
def _where(b, n):
    return b.op("Where", b.operands(n), hint=n.out.name)


@emits("stop_gradient", "clone")
def _alias(b, n):
    return b.read(n.inputs[0])


@emits("convert")
def _convert(b, n):      # a change of device only is nothing in ONNX
    x = n.inputs[0]
    return b.read(x) if x.dtype is n.out.dtype else b.cast(b.read(x), n.out.dtype)


@emits("fmod", "remainder")
def _fmod(b, n):
    a, d = b.operands(n)
    if n.op == "remainder" and not n.out.dtype.is_floating_point:
        return b.op("Mod", [a, d], hint=n.out.name)      # the integer Mod is Python's
    r = b.op("Mod", [a, d], fmod=1, hint=n.out.name)
    return r if n.op == "fmod" else _python_mod(b, n, r, d)


def _python_mod(b, n, r, d):
    """fmod's ``r`` moved to the sign of the divisor ``d`` (Python's and PyTorch's ``%``)."""
    zero = b.scalar(0, n.out.dtype)
    differ = b.op("Xor", [b.op("Less", [d, zero]), b.op("Less", [r, zero])])
    fix = b.op("And", [b.op("Not", [b.op("Equal", [r, zero])]), differ])
    return b.op("Where", [fix, b.op("Add", [r, d]), r], hint=n.out.name)


@emits("div_rounding")
def _div_rounding(b, n):
    a, d = b.operands(n)
    mode, dtype = n.params["rounding_mode"], n.out.dtype
    if not dtype.is_floating_point:     # integer Div truncates; floor steps down on a remainder
        q = b.op("Div", [a, d])
        if mode != "floor":
            return q
        r = b.op("Mod", [a, d], fmod=1)
        zero = b.scalar(0, dtype)
        differ = b.op("Xor", [b.op("Less", [a, zero]), b.op("Less", [d, zero])])
        step = b.op("And", [b.op("Not", [b.op("Equal", [r, zero])]), differ])
        return b.op("Sub", [q, b.cast(step, dtype)], hint=n.out.name)
    if mode != "floor":
        q = b.op("Div", [a, d])
        return b.op("Where", [b.op("Less", [q, b.scalar(0, dtype)]), b.op("Ceil", [q]),
                              b.op("Floor", [q])], hint=n.out.name)
    # NumPy's floor_divide: (a - a mod b) / b, exact where floor(a / b) is not
    mod = _python_mod(b, n, b.op("Mod", [a, d], fmod=1), d)
    q = b.op("Round", [b.op("Div", [b.op("Sub", [a, mod]), d])])
    by_zero = b.op("Equal", [d, b.scalar(0, dtype)])
    return b.op("Where", [by_zero, b.op("Div", [a, d]), q], hint=n.out.name)


@emits("atan2")
def _atan2(b, n):
    y, x = b.operands(n)
    dtype = n.out.dtype
    zero, pi = b.scalar(0, dtype), b.scalar(np.pi, dtype)
    base = b.op("Atan", [b.op("Div", [y, x])])
    y_neg = b.op("Less", [y, zero])
    shift = b.op("Where", [y_neg, b.op("Neg", [pi]), pi])    # x < 0: a half turn toward y
    left = b.op("Add", [base, shift])
    half = b.op("Where", [y_neg, b.scalar(-np.pi / 2, dtype),
                          b.op("Where", [b.op("Greater", [y, zero]), b.scalar(np.pi / 2, dtype),
                                         zero])])
    on_axis = b.op("Where", [b.op("Less", [x, zero]), left, half])
    return b.op("Where", [b.op("Greater", [x, zero]), base, on_axis], hint=n.out.name)


@emits("rsqrt")
def _rsqrt(b, n):
    x, = b.operands(n)
    return b.op("Reciprocal", [b.op("Sqrt", [x])], hint=n.out.name)


@emits("log1p", "expm1")
def _log1p_expm1(b, n):      # ONNX has neither: written out, exact to float rounding near 0
    x, = b.operands(n)
    one = b.scalar(1, n.out.dtype)
    if n.op == "log1p":
        return b.op("Log", [b.op("Add", [x, one])], hint=n.out.name)
    return b.op("Sub", [b.op("Exp", [x]), one], hint=n.out.name)


@emits("trunc")
def _trunc(b, n):
    x, = b.operands(n)
    negative = b.op("Less", [x, b.scalar(0, n.out.dtype)])
    return b.op("Where", [negative, b.op("Ceil", [x]), b.op("Floor", [x])], hint=n.out.name)


@emits("round")
def _round(b, n):       # ONNX's Round is half to even, as PyTorch's
    x, = b.operands(n)
    decimals = n.params.get("decimals", 0)
    if not decimals:
        return b.op("Round", [x], hint=n.out.name)
    scale = b.scalar(10.0 ** decimals, n.out.dtype)
    return b.op("Div", [b.op("Round", [b.op("Mul", [x, scale])]), scale], hint=n.out.name)


@emits("pow_scalar")
def _pow_scalar(b, n):
    x, = b.operands(n)
    e = n.params["exponent"]
    if e in (2, 3) and not isinstance(e, bool):     # as eager computes them: by multiplying
        sq = b.op("Mul", [x, x])
        return sq if e == 2 else b.op("Mul", [sq, x], hint=n.out.name)
    if e == 0.5 and n.out.dtype.is_floating_point:
        return b.op("Sqrt", [x], hint=n.out.name)
    return b.op("Pow", [x, b.scalar(e, n.out.dtype)], hint=n.out.name)


@emits("clamp")
def _clamp(b, n):
    x, = b.operands(n)
    bounds = [b.scalar(n.params[k], n.out.dtype) if n.params[k] is not None else ""
              for k in ("min", "max")]
    while bounds and bounds[-1] == "":
        bounds.pop()
    return b.op("Clip", [x] + bounds, hint=n.out.name)


@emits("tanh_backward", "sigmoid_backward")
def _activation_grad(b, n):
    g, y = b.operands(n)
    one = b.scalar(1, n.out.dtype)
    if n.op == "tanh_backward":
        return b.op("Mul", [g, b.op("Sub", [one, b.op("Mul", [y, y])])], hint=n.out.name)
    return b.op("Mul", [b.op("Mul", [g, y]), b.op("Sub", [one, y])], hint=n.out.name)


@emits("matmul")
def _matmul(b, n):
    return b.op("MatMul", b.operands(n), hint=n.out.name)


# reductions ----------------------------------------------------------------------------------

def reduce(b, op_type, x, axes, keepdim, hint=None):
    """``op_type`` over ``axes``: the axes are an input from opset 18 (13 for ReduceSum)."""
    if not axes:
        return x
    if op_type == "ReduceSum" or b.opset >= 18:
        return b.op(op_type, [x, b.ints(axes)], keepdims=int(keepdim), hint=hint)
    return b.op(op_type, [x], axes=list(axes), keepdims=int(keepdim), hint=hint)


@emits("sum", "amax", "amin", "prod")
def _reduce(b, n):
    x = b.as_dtype(n.inputs[0], n.out.dtype)    # sum(dtype=...) and integer sums widen first
    kind = {"sum": "ReduceSum", "amax": "ReduceMax", "amin": "ReduceMin", "prod": "ReduceProd"}
    return reduce(b, kind[n.op], x, n.params["dims"], n.params["keepdim"], n.out.name)


@emits("any", "all")
def _any_all(b, n):
    x = n.inputs[0]
    truth = b.read(x) if x.dtype is dtypes.bool else b.op(
        "Not", [b.op("Equal", [b.read(x), b.scalar(0, x.dtype)])])
    as_int = b.cast(truth, dtypes.int64)
    out = reduce(b, "ReduceMax" if n.op == "any" else "ReduceMin", as_int, n.params["dims"],
                 n.params["keepdim"])
    return b.cast(out, dtypes.bool)


@emits("argmax", "argmin")
def _argmax(b, n):
    x, dim = b.read(n.inputs[0]), n.params["dim"]
    op_type = "ArgMax" if n.op == "argmax" else "ArgMin"
    if dim is None:         # over the flattened tensor, then shaped as the rule says
        flat = b.op("Reshape", [x, b.ints([-1])])
        out = b.op(op_type, [flat], axis=0, keepdims=0)
        return b.op("Reshape", [out, b.shape(n.out.shape)], hint=n.out.name)
    return b.op(op_type, [x], axis=dim, keepdims=int(n.params["keepdim"]), hint=n.out.name)


@emits("cumsum")
def _cumsum(b, n):
    x = b.as_dtype(n.inputs[0], n.out.dtype)
    return b.op("CumSum", [x, b.const(np.array(n.params["dim"], np.int64))], hint=n.out.name)


# shapes ---------------------------------------------------------------------------------------

@emits("reshape")
def _reshape(b, n):
    shape = n.out.shape
    attrs = {"allowzero": 1} if any(type(d) is not SymInt and d == 0 for d in shape) else {}
    return b.op("Reshape", [b.read(n.inputs[0]), b.shape(shape)], hint=n.out.name, **attrs)


@emits("permute")
def _permute(b, n):
    return b.op("Transpose", [b.read(n.inputs[0])], perm=list(n.params["dims"]),
                hint=n.out.name)


@emits("broadcast_to")
def _broadcast_to(b, n):
    return b.op("Expand", [b.read(n.inputs[0]), b.shape(n.out.shape)], hint=n.out.name)


@emits("cat")
def _cat(b, n):
    parts = [b.as_dtype(v, n.out.dtype) for v in n.inputs
             if not (v.shape == (0,) and n.out.ndim != 1)]     # PyTorch's legacy empty tensors
    return b.op("Concat", parts, axis=n.params["dim"], hint=n.out.name)


@emits("tril", "triu")
def _tri(b, n):
    need(b, n, 14)
    k = b.const(np.array(n.params["diagonal"], np.int64))
    return b.op("Trilu", [b.read(n.inputs[0]), k], upper=int(n.op == "triu"), hint=n.out.name)


@emits("roll")
def _roll(b, n):
    x, shape = b.read(n.inputs[0]), n.inputs[0].shape
    for shift, dim in zip(n.params["shifts"], n.params["dims"]):
        size = shape[dim]
        if type(size) is not SymInt:
            shift = shift % size if size else 0
        if not shift:
            continue
        # out = x[-shift:] ++ x[:-shift], for either sign of shift
        tail = slice_(b, x, [dim], [-shift], [INT64_MAX])
        head = slice_(b, x, [dim], [0], [-shift])
        x = b.op("Concat", [tail, head], axis=dim)
    return x


@emits("gather")
def _gather(b, n):
    x, index = b.read(n.inputs[0]), b.read(n.inputs[1])
    return b.op("GatherElements", [x, index], axis=n.params["dim"], hint=n.out.name)


def slice_(b, x, axes, starts, ends, steps=None):
    ins = [x, b.shape(starts), b.shape(ends), b.ints(axes)]
    if steps and any(s != 1 for s in steps):
        ins.append(b.ints(steps))
    return b.op("Slice", ins)


# sources ---------------------------------------------------------------------------------------

@emits("constant")
def _constant(b, n):
    return b.const(n.params["value"].array, n.out.name or "const")


@emits("size")
def _size(b, n):
    return b.scalar(n.params["value"], n.out.dtype)


@emits("random")
def _random(b, n):
    dist, p = n.params["dist"], n.params
    if dist not in ("uniform", "normal"):
        raise unsupported(n, f"random integers ({dist})")
    op_type = "RandomUniform" if dist == "uniform" else "RandomNormal"
    attrs = {"dtype": b.tensor_type(n.out.dtype)}
    if any(type(d) is SymInt for d in n.out.shape):      # the shape of this call
        like = b.op("ConstantOfShape", [b.shape(n.out.shape)])
        return b.op(op_type + "Like", [like], hint=n.out.name, **attrs)
    return b.op(op_type, [], shape=[int(d) for d in n.out.shape], hint=n.out.name, **attrs)


# errors ----------------------------------------------------------------------------------------

def need(b, n, opset):
    if b.opset < opset:
        raise unsupported(n, f"its ONNX form needs opset {opset} or later (this export uses "
                             f"{b.opset}); pass opset_version={opset}")


def unsupported(n, why=None):
    from . import OnnxExporterError
    where = f" at {n.site}" if n.site else ""
    reason = why or "it has no ONNX form in tracegrad's exporter"
    return OnnxExporterError(
        f"tracegrad.onnx.export: cannot export the op '{n.op}'{where}: {reason}. Compute it "
        "outside the exported module (before or after), or replace it with ops that have an "
        "ONNX form.")


__all__ = ["EMIT", "emits", "need", "unsupported", "reduce", "slice_"]
