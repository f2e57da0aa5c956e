"""The kernel IR: a fused group lowered to a small loop description that any backend renders.

``lower(group, ...)`` turns a ``Group`` of the IR into a ``Kernel``:

- ``domain``: the shape the kernel iterates over;
- ``inputs``: arrays read from outside, each with its index map (an element stride per
  domain axis, 0 where it broadcasts); on the CPU, a column slice of a matrix is read in
  the matrix (its row stride and first column), which the caller passes in its place;
- ``body``: SSA scalar ops in order, each with its dtype from the avals. An operand that
  its op computes in another dtype (an int added to a float, the operands of a comparison)
  is cast by an explicit ``convert`` op first, and Python scalars become ``Literal``s of
  the dtype they are computed in, so renderers never infer a type;
- ``Reduce`` ops: a reduction over some domain axes, with its accumulator dtype and its
  ``Combiner`` (declared once on the primitive). One whose axes include axis 0 *spans
  rows*: a renderer computes it in parts (chunks, threads) and combines them;
- ``outputs``: body values written to arrays the caller passes, and ``partials``: the
  spanning reductions, which the kernel returns;
- ``epilogue``: the group's ``after`` nodes, run on the partials once the pass is over.

It prints like this (``str(kernel)``)::

    kernel forward_fused0 [1000000] {
      in x: f32[1000000] strides (1,)
      in a: f32[1000000] strides (1,)
      c: f32 = mul x a                                  # w1.py:5
      ...
      out: f32[] = sum y  axes=(0,) acc=f64 combine=add  # w1.py:6
      partial (out)
    }
"""
import os

from tracegrad import dtypes
from tracegrad.ir import SHORT, Value, type_str
from tracegrad.symbolic import symbols_in as base_symbols_in
from tracegrad.passes.memplan import written


class Literal:
    """A scalar operand of ``dtype``."""
    __slots__ = ("value", "dtype")

    def __init__(self, value, dtype):
        self.value, self.dtype = value, dtype

    def __repr__(self):
        return repr(self.value)


class Input:
    """An array the kernel reads: its index map is one element stride per domain axis.
    ``source``: for a column slice of a matrix (an LSTM's gate of its [B, 4H]
    pre-activations), the matrix, named ``source_name``, which the caller passes instead:
    the kernel reads the slice in it, ``offset`` elements in and ``strides`` its rows apart,
    with no copy of the slice made for the call."""
    __slots__ = ("name", "value", "strides", "source", "source_name", "offset")

    def __init__(self, name, value, strides, source=None, source_name=None, offset=0):
        self.name, self.value, self.strides = name, value, strides
        self.source, self.source_name, self.offset = source, source_name, offset

    @property
    def dtype(self):
        return self.value.dtype

    @property
    def arg(self):
        """What the caller passes: the array itself, or the matrix it is a slice of."""
        return self.name if self.source is None else self.source_name

    def __str__(self):
        where = "" if self.source is None else f" in {self.source_name} at {self.offset}"
        return f"in {self.name}: {type_str(self.value.aval)} strides {self.strides}{where}"


class Op:
    """``name = op(*args, **params)``: one scalar op over the domain (or over a part of it,
    when its shape has 1s where the domain has more). ``prim`` is None for no primitive."""
    __slots__ = ("name", "op", "args", "params", "dtype", "shape", "site", "value")

    def __init__(self, name, op, args, params, dtype, shape, site="", value=None):
        self.name, self.op, self.args, self.params = name, op, tuple(args), dict(params)
        self.dtype, self.shape, self.site, self.value = dtype, tuple(shape), site, value

    @property
    def prim(self):
        from tracegrad.ops.core import PRIMITIVES
        return PRIMITIVES[self.op]

    @property
    def inputs(self):       # what expression emitters read of a node
        return self.args

    def operands(self):
        """The args that are names of arrays or earlier ops."""
        return [a for a in self.args if type(a) is str]

    def __str__(self):
        args = " ".join(a if type(a) is str else repr(a) for a in self.args)
        params = " ".join(f"{k}={_param(v)}" for k, v in sorted(self.params.items()))
        return _with_site(f"{self.name}: {_short(self.dtype)} = {self.op} {args}"
                          + (f"  {params}" if params else ""), self.site)


class Reduce(Op):
    """A reduction of ``args[0]`` over the domain ``axes``, accumulated in ``acc_dtype`` and
    combined by ``combiner``; ``spans``: the axes include axis 0."""
    __slots__ = ("axes", "keepdim", "acc_dtype", "combiner", "spans")

    def __init__(self, name, op, src, params, dtype, shape, combiner, site, value):
        super().__init__(name, op, (src,), params, dtype, shape, site, value)
        axes, keepdim = params["dims"], params["keepdim"]
        self.axes, self.keepdim, self.combiner = tuple(axes), keepdim, combiner
        self.acc_dtype = combiner.acc_dtype(dtype)
        self.spans = 0 in self.axes

    def __str__(self):
        return _with_site(f"{self.name}: {type_str(self.value.aval)} = {self.op} {self.args[0]}"
                          f"  axes={self.axes} acc={_short(self.acc_dtype)} "
                          f"combine={self.combiner.ufunc}", self.site)


class Kernel:
    """One fused group as the renderers see it (see the module docstring)."""

    def __init__(self, name, label, group, domain, inputs, body, outputs, partials):
        self.name, self.label, self.group = name, label, group
        self.domain, self.inputs, self.body = tuple(domain), tuple(inputs), tuple(body)
        self.outputs, self.partials = tuple(outputs), tuple(partials)
        self.epilogue = group.after

    def op_names(self):
        return " ".join(n.op for n in self.group.nodes)

    def __str__(self):
        lines = [f"kernel {self.name} [{','.join(map(str, self.domain))}] {{"]
        lines += [f"  {i}" for i in self.inputs]
        lines += [f"  {op}" for op in self.body]
        if self.outputs:
            lines.append(f"  out ({', '.join(op.name for op in self.outputs)})")
        if self.partials:
            lines.append(f"  partial ({', '.join(op.name for op in self.partials)})")
        if self.epilogue:
            lines.append(f"  then ({' '.join(n.op for n in self.epilogue)})")
        lines.append("}")
        return "\n".join(lines)


def kernel_symbols(k):
    """The size symbols a kernel's domain uses, in order (``s0``, ``s1``): a C kernel takes
    them as arguments after its arrays."""
    return sorted(base_symbols_in(k.domain), key=lambda s: int(s[1:]))


def strides(shape, domain):
    """Element strides of a C-contiguous array of ``shape`` read over ``domain`` (it
    broadcasts to it): 0 along the axes it broadcasts over."""
    shape = (1,) * (len(domain) - len(shape)) + tuple(shape)
    out, step = [], 1
    for n, d in zip(reversed(shape), reversed(domain)):
        out.append(step if n == d and n != 1 else 0)
        step *= n
    return tuple(reversed(out))


def lower(group, name, label, namer, columns=None):
    """The ``Kernel`` of ``group``; ``namer`` gives the values' names (the user's);
    ``columns``: input -> ``(matrix, first column)`` for the inputs it reads in the matrix
    they are column slices of (``column_slices``)."""
    domain = group.domain
    inputs = []
    for v in group.inputs:
        if columns and v in columns:
            m, first = columns[v]
            inputs.append(Input(namer(v), v, (m.shape[1], 1), m, namer(m), first))
        else:
            inputs.append(Input(namer(v), v, strides(v.shape, domain)))
    body, ops = [], {}
    for n in group.loop:
        if n.prim.kind == "reduction":
            src = ops.get(n.inputs[0]) or namer(n.inputs[0])
            op = Reduce(namer(n.out), n.op, src, n.params, n.out.dtype, n.out.shape,
                        n.prim.reduce, n.site, n.out)
        else:
            args = [_operand(v, want, namer, body, n.site)
                    for v, want in zip(n.inputs, _operand_dtypes(n))]
            op = Op(namer(n.out), n.op, args, n.params, n.out.dtype, n.out.shape, n.site, n.out)
        body.append(op)
        ops[n.out] = op.name
    by_value = {op.value: op for op in body if op.value is not None}
    outputs = [by_value[v] for v in written(group)]
    partials = [op for op in body if isinstance(op, Reduce) and op.spans]
    return Kernel(name, label, group, domain, inputs, body, outputs, partials)


def column_slices(group, slices):
    """``{input: (matrix, first column)}``: the inputs of ``group`` (over a static 2-D domain)
    that are ``slices`` of a static matrix taking whole rows' runs of columns, which a
    kernel can read in the matrix. ``slices``: value -> the ``index`` node that made it."""
    domain, out = group.domain, {}
    if len(domain) != 2 or not all(type(d) is int for d in domain):
        return out
    for v in group.inputs:
        n = slices.get(v)
        if n is None or tuple(v.shape) != tuple(domain):
            continue
        m, spec = n.inputs[0], n.params["spec"]
        if len(spec) != 2 or spec[0] != ("s", None, None, None) or type(spec[1]) is not tuple \
                or spec[1][0] != "s" or spec[1][3] not in (None, 1) or m.ndim != 2 \
                or not all(type(d) is int for d in m.shape) or m.shape[0] != domain[0]:
            continue
        first = slice(spec[1][1], spec[1][2]).indices(m.shape[1])[0]
        out[v] = (m, first)
    return out


def _operand_dtypes(node):
    """The dtype each operand of ``node`` is computed in."""
    operands = [v.aval if type(v) is Value else v for v in node.inputs]
    rule = node.prim.operands
    wanted = rule(node.out.dtype, *operands) if rule else [node.out.dtype] * len(operands)
    return [w.dtype if hasattr(w, "shape") else w for w in wanted]


def _operand(v, want, namer, body, site):
    """The arg for operand ``v`` computed in ``want``: its name, a cast of it, or a literal."""
    if type(v) is not Value:
        return Literal(v, want if isinstance(want, dtypes.dtype) else None)
    if not isinstance(want, dtypes.dtype) or v.dtype is want:
        return namer(v)
    cast = Op(namer.fresh(f"{namer(v)}_{want.name}"), "convert", (namer(v),),
              {"dtype": want, "device": None, "src_device": None}, want, v.shape, site)
    body.append(cast)
    return cast.name


def _short(dtype):
    return SHORT.get(dtype, dtype.name)


def _param(v):
    return v.name if isinstance(v, dtypes.dtype) else repr(v)


def _with_site(text, site):
    return f"{text:<48}  # {os.path.basename(site)}" if site else text
