"""``Builder``: the ONNX graph being written, one IR node at a time.

It owns the names (every ONNX tensor name unique, IR values named after the user's
variables where the trace knew them), the initializers (parameters, constants and the
scalars a node reads, each array stored once), and the sizes: a dynamic dim of an input
is read from the graph at run time (``Shape`` and ``Gather``), and a size expression over
such dims (``2*s0``, ``(s0 + 1)//2``) becomes int64 arithmetic on them, so reshape
targets, slice bounds and broadcast shapes follow the batch the model is run with.
"""
import numpy as np

from .. import dtypes
from ..ir import Value
from ..symbolic import ATOMS, SymInt

INT64_MAX = np.iinfo(np.int64).max


class Builder:
    def __init__(self, onnx, opset):
        self.onnx, self.helper, self.opset = onnx, onnx.helper, opset
        self.nodes, self.initializers = [], []
        self.env = {}           # IR value -> ONNX tensor name
        self.used = set()       # every tensor name given out
        self.site = ""          # the user's file:line of the IR node being written
        self.symbols = {}       # size symbol -> (input name, dim): where it is read
        self.dim_names = {}     # size symbol -> the name the user gave that dim
        self.max_of = {}        # pool_argmax value -> (input value, maps, MaxPool output)
        self._consts = {}       # (dtype, shape, bytes) -> initializer name
        self._dims = {}         # Poly -> name of its int64[1] tensor
        self._node_count = 0

    # names ----------------------------------------------------------------------------------
    def unique(self, hint):
        base = "".join(c if c.isalnum() or c in "_.:/" else "_" for c in str(hint or "t"))
        name, i = base, 1
        while name in self.used:
            name, i = f"{base}_{i}", i + 1
        self.used.add(name)
        return name

    def read(self, v):
        """The ONNX name of IR value ``v``."""
        name = self.env.get(v)
        if name is None:
            raise RuntimeError(f"tracegrad.onnx: internal error: {v} was read before it was "
                               "written")
        return name

    # nodes ----------------------------------------------------------------------------------
    def op(self, op_type, inputs, outputs=1, hint=None, out=None, **attrs):
        """Append one ONNX node; its output name (or names, for ``outputs`` > 1); ``out``:
        a name reserved already (a graph output's)."""
        outs = [out] if out else [self.unique(hint or op_type.lower()) for _ in range(outputs)]
        self._node_count += 1
        node = self.helper.make_node(op_type, list(inputs), outs,
                                     name=f"{op_type}_{self._node_count}", **attrs)
        if self.site:
            node.doc_string = self.site
        self.nodes.append(node)
        return outs[0] if outputs == 1 else outs

    def cast(self, name, dtype):
        return self.op("Cast", [name], to=self.tensor_type(dtype))

    def tensor_type(self, dtype):
        try:
            return self.helper.np_dtype_to_tensor_dtype(np.dtype(dtype.np))
        except (KeyError, TypeError, ValueError, AttributeError):
            raise unsupported_dtype(dtype, self.site) from None

    # constants ------------------------------------------------------------------------------
    def const(self, array, hint="const"):
        """An initializer holding ``array`` (the same array is stored once)."""
        a = np.array(array, order="C")
        key = (a.dtype.str, a.shape, a.tobytes())
        name = self._consts.get(key)
        if name is None:
            name = self._consts[key] = self.unique(hint)
            self.initializers.append(self.onnx.numpy_helper.from_array(a, name))
        return name

    def scalar(self, value, dtype):
        """A 0-d constant of tracegrad ``dtype``; a size that is symbolic is computed."""
        if type(value) is SymInt:
            n = self.op("Reshape", [self.dim(value), self.const(np.array([], np.int64))])
            return n if dtype is dtypes.int64 else self.cast(n, dtype)
        return self.const(np.array(value, dtype.np), "scalar")

    def ints(self, values, hint="ints"):
        return self.const(np.array(values, np.int64).reshape(-1), hint)

    # sizes ----------------------------------------------------------------------------------
    def dim(self, n):
        """An int64[1] tensor holding size ``n``: a constant, or computed from the inputs."""
        if type(n) is not SymInt:
            return self.ints([int(n)], "dim")
        return self._poly(n.poly)

    def shape(self, dims):
        """An int64[k] tensor holding the sizes ``dims`` (one Concat where any is dynamic)."""
        if not any(type(d) is SymInt for d in dims):
            return self.ints([int(d) for d in dims], "shape")
        if not dims:
            return self.ints([], "shape")
        return self.op("Concat", [self.dim(d) for d in dims], axis=0, hint="shape")

    def _poly(self, poly):
        name = self._dims.get(poly)
        if name is not None:
            return name
        total = None
        for mono, coef in poly.terms:
            term = None
            for atom in mono:
                part = self._atom(atom)
                term = part if term is None else self.op("Mul", [term, part])
            if term is None:
                term = self.ints([coef])
            elif coef != 1:
                term = self.op("Mul", [term, self.ints([coef])])
            total = term if total is None else self.op("Add", [total, term])
        name = self._dims[poly] = total if total is not None else self.ints([0])
        return name

    def _atom(self, atom):
        if atom in ATOMS:           # a floor division or remainder of sizes (never negative)
            kind, a, b = ATOMS[atom]
            return self.op("Div" if kind == "//" else "Mod", [self._poly(a), self._poly(b)])
        name = self._dims.get(atom)
        if name is None:
            if atom not in self.symbols:
                raise RuntimeError(f"tracegrad.onnx: internal error: the size {atom} is read "
                                   "from no input")
            where, d = self.symbols[atom]
            shape = self.op("Shape", [where], hint=f"{where}_shape")
            name = self._dims[atom] = self.op("Gather", [shape, self.ints([d])], axis=0,
                                              hint=f"{self.dim_names.get(atom, atom)}")
        return name

    # operands -------------------------------------------------------------------------------
    def operands(self, n):
        """The ONNX names of ``n``'s inputs, each in the dtype the primitive computes it in
        (its ``operands`` rule; by default the result's dtype), scalars as constants."""
        avals = [v.aval if type(v) is Value else v for v in n.inputs]
        rule = n.prim.operands
        wanted = rule(n.out.dtype, *avals) if rule else [n.out.dtype] * len(avals)
        return [self.as_dtype(v, w.dtype if hasattr(w, "shape") else w)
                for v, w in zip(n.inputs, wanted)]

    def as_dtype(self, v, dtype):
        if type(v) is Value:
            name = self.read(v)
            if isinstance(dtype, dtypes.dtype) and v.dtype is not dtype:
                return self.cast(name, dtype)
            return name
        if not isinstance(dtype, dtypes.dtype):
            dtype = dtypes.from_numpy(np.asarray(v).dtype)
        return self.scalar(v, dtype)

    # types ----------------------------------------------------------------------------------
    def value_info(self, name, aval, dim_names=None):
        """A ValueInfoProto for ``aval``: sizes as numbers, dynamic ones by name."""
        dims = []
        for i, d in enumerate(aval.shape):
            if dim_names and i in dim_names:
                dims.append(dim_names[i])
            elif type(d) is SymInt:
                dims.append(self.size_name(d.poly))
            else:
                dims.append(int(d))
        return self.helper.make_tensor_value_info(name, self.tensor_type(aval.dtype), dims)

    def size_name(self, poly):
        """A dynamic size as text in the user's names (``batch``, ``2*batch``)."""
        if len(poly.terms) == 1 and poly.terms[0][1] == 1 and len(poly.terms[0][0]) == 1:
            atom = poly.terms[0][0][0]
            if atom in self.dim_names:
                return self.dim_names[atom]
        text = str(poly)
        for sym, user in sorted(self.dim_names.items(), key=lambda kv: -len(kv[0])):
            text = text.replace(sym, user)
        return text


def unsupported_dtype(dtype, site):
    from . import OnnxExporterError
    return OnnxExporterError(f"tracegrad.onnx.export: the dtype {dtype} has no ONNX tensor type"
                             + (f" (at {site})" if site else ""))


__all__ = ["Builder", "INT64_MAX"]
