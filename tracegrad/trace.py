"""Trace by running: execute a function on real tensors while recording its IR.

While a ``Tracer`` is active every primitive call (``ops.core.bind``) both
computes its value and appends a node, so Python control flow sees real data.
The tracer keeps a map from the tensors it has seen to their current IR value:

- arguments become the graph's first inputs;
- a tensor the function reads without receiving it (a parameter, a global, a
  closure variable) becomes a *captured* input, read afresh at every call;
- creation functions inside the function become constants, random ones stay
  ``random`` nodes (a fresh draw every call);
- ``bool()``, ``item()``, ``int()``, ``float()``, ``tolist()`` record a guard:
  the site, the value node and what was seen, checked again by the generated
  code;
- in-place ops are functionalised: the target's value is replaced by the op's
  result, a write through a view replaces its base's value by a
  ``view_scatter``, and other views of that base are recomputed from the base
  when next read. Writes to arguments or captured tensors become extra graph
  outputs that the runtime writes back at the end of the forward;
- ``no_grad`` blocks, ``detach()`` and ``.data`` become ``stop_gradient``.

The trace run itself leaves no trace on the user's tensors: written arguments
and captured tensors get their data back, and random generators their state.
"""
import contextlib

import numpy as np

from . import _hooks
from .autograd import grad_mode
from .device import CPU, to_device
from .ir import Const, Graph, Node, Value, infer_aval
from .ops.core import Aval, op_error
from .symbolic import Specialize, SymInt, concrete, symbols_in
from .tensor import Tensor
from .trace_effects import Effects, UnsupportedError, user_line

_gm = grad_mode._state


class Guard:
    """A data-dependent decision: ``kind`` "bool" compares truth, "value" the value itself."""
    __slots__ = ("value", "kind", "expected", "site")

    def __init__(self, value, kind, expected, site):
        self.value, self.kind, self.expected, self.site = value, kind, expected, site

    def describe(self):
        what = "bool(...)" if self.kind == "bool" else "the value"
        return f"{what} at {self.site or '<unknown>'} was {self.expected!r} when traced"


class Traced:
    """What a trace produced, for the passes and the runtime."""

    # effects beyond the graph (see Tracer.finish); none for a graph traced by other means
    grad_sets = grad_checks = scalars = value_guards = after = ()
    hints = {}
    n_extra = 0             # outputs after the mutations: new .grad values, stored tensors
    replayed_keys = frozenset()
    modules = ()            # the modules the function called (their state is guarded)

    def __init__(self, graph, arg_tensors, captured, guards, mutations, out_tree, shape_env=None,
                 sym_dims=()):
        self.graph = graph                # inputs: args then captured; outputs: results, writes
        self.shape_env = shape_env        # symbolic.ShapeEnv of a dynamic trace, else None
        self.sym_dims = list(sym_dims)    # [(argument index, dim, SymInt)]: where sizes come from
        self.arg_tensors = arg_tensors    # the argument tensors, in input order
        self.captured = captured          # the captured tensors, in input order
        self.guards = guards              # [Guard]
        self.mutations = mutations        # [tensor] written back from the trailing outputs
        self.out_tree = out_tree          # (result structure with OutputRef leaves, count)


class Tracer(Effects):
    """Records primitive calls into IR nodes (see the module docstring).

    With ``symbolic=True`` nothing is computed: every primitive returns a
    placeholder tensor of the right shape and dtype whose data is a read-only
    broadcast zero. ``passes.autodiff`` runs the VJP rules this way, so the very
    rules eager uses build the backward graph.
    """

    def __init__(self, symbolic=False, name_captured=None, shape_env=None):
        self.symbolic = symbolic
        self.shape_env = shape_env      # dynamic sizes (symbolic.ShapeEnv), or None
        self.sym_dims = []              # [(argument index, dim, SymInt)]
        self.name_captured = name_captured     # tensor -> the name of where it was found
        self.site = None        # when set, the site of every node added (autodiff: the forward's)
        self.nodes = []
        self.env = {}           # id(tensor) -> [tensor, value, version when recorded]
        self.by_data = {}       # id(array) -> the same entry: new tensors over a known array
        self.arg_inputs = []
        self.arg_tensors = []
        self.captured = []      # [(tensor, value)]
        self.guards = []
        self.undo = {}          # id(root tensor) -> (tensor, data copy, version)
        self.rngs = {}          # id(generator) -> (generator, state before the trace)
        self.external = set()   # ids of argument and captured tensors
        self.names = {}         # value -> the user's variable it was assigned to
        self.impure = []        # transform.ImpureCall: the impure calls made, in order
        self.abandoned = None   # (reason, for good): the rest of the call ran eagerly
        self.fullgraph = False  # compile(fullgraph=True): what would abandon raises instead
        self.grads = {}         # id(tensor) -> (tensor, its .grad before the trace's first write)
        self.grad_final = {}    # id(tensor) -> its .grad when the trace run ended
        self.grad_reads = set()     # ids of those whose first write added to the old .grad
        self.scalars = []       # [(0-d tensor, getter)]: numbers read afresh at every call
        self.value_guards = []  # [(what, store, key, value, site)]: plain values the trace baked
        self.after = []         # [(what, fn, args, done)]: calls replayed after a run
        self.hints = {}         # id(tensor) -> (name, getter): where a captured tensor lives
        self.modules = {}       # id(module) -> module: the modules the function called
        self.aliases = {}       # id(detached tensor) -> the tensor whose storage it shares
        self.replayed_keys = set()      # the outside state that replayed stores write

    # values -----------------------------------------------------------------------------
    def add(self, op, inputs, params, name=None):
        """Append ``op(*inputs, **params)`` and return its new value (no computation)."""
        out = Value(infer_aval(op, inputs, params), name)
        self.nodes.append(Node(op, inputs, params, out,
                               self.site if self.site is not None else user_line()))
        return out

    def bind_value(self, t, v):
        self.env[id(t)] = entry = [t, v, t._vc.value]
        self.by_data[id(t._data)] = entry

    def argument(self, t, name, dynamic=()):
        """The graph input for argument tensor ``t``; the dims in ``dynamic`` get symbolic
        sizes (those of size 0 or 1 stay static, as PyTorch's)."""
        shape = t._data.shape
        if dynamic and self.shape_env is not None:
            shape = tuple(self.shape_env.new_symbol(n, (len(self.arg_inputs), i))
                          if i in dynamic and n >= 2 else n for i, n in enumerate(shape))
            self.sym_dims += [(len(self.arg_inputs), i, n) for i, n in enumerate(shape)
                              if type(n) is SymInt]
        v = Value(Aval(shape, t.dtype), name)
        self.arg_inputs.append(v)
        self.arg_tensors.append(t)
        self.external.add(id(t))
        self.bind_value(t, v)
        return v

    def placeholder(self, v):
        """A tensor standing for ``v`` in symbolic mode."""
        zero = np.zeros((), v.aval.dtype.np)
        t = Tensor._make(np.broadcast_to(zero, v.aval.shape))
        self.bind_value(t, v)
        return t

    def shape_of(self, t):
        """``t``'s shape as the trace knows it: symbolic in the dynamic dims."""
        entry = self.env.get(id(t))
        if entry is not None and entry[0] is t:
            return entry[1].aval.shape
        return t._data.shape

    def value_of(self, t):
        entry = self.env.get(id(t))
        if entry is None:       # a new tensor over a known array (a saved output, an alias)
            known = self.by_data.get(id(t._data))
            if known is not None and known[0]._data is t._data and known[2] == known[0]._vc.value:
                self.bind_value(t, known[1])
                return known[1]
        if entry is None and self.symbolic:     # a tensor a rule made from data: a constant
            self.created(t)
            return self.env[id(t)][1]
        if entry is None:
            if t._base is not None and id(t._base) in self.env:
                return self._replay_view(t)
            name = self.name_captured(t) if self.name_captured else None
            v = Value(Aval(t.shape, t.dtype), name)     # a captured tensor
            self.captured.append((t, v))
            self.external.add(id(t))
            self.bind_value(t, v)
            return v
        if entry[2] != t._vc.value and t._base is not None and id(t._base) in self.env:
            return self._replay_view(t)     # its base was written since: read it anew
        return entry[1]

    def _replay_view(self, t):
        v = self.value_of(t._base)
        for prim, params in t._view_steps:
            v = self.add(prim.name, [v], params)
        self.bind_value(t, v)
        return v

    # the bind hook ----------------------------------------------------------------------
    def hook(self, prim, args, params, inner):
        ins = [self.value_of(a) if isinstance(a, Tensor) else a for a in args]
        if self.symbolic:
            return self.placeholder(self.add(prim.name, ins, params))
        if self.shape_env is not None:      # NumPy computes with the sizes of this call
            out = inner(prim, concrete(args), concrete(params))
        else:
            out = inner(prim, args, params)
        v = self.add(prim.name, ins, params)
        if not _gm.grad_enabled and any(isinstance(a, Tensor) and a._requires_grad for a in args):
            v = self.add("stop_gradient", [v], {})
        self.bind_value(out, v)
        return out

    # in-place ops -----------------------------------------------------------------------
    def inplace(self, prim, target, others, params, eager):
        """Run the eager in-place op for its real effect, and record it functionally."""
        tv = self.value_of(target)
        base = target._base
        bv = self.value_of(base) if base is not None else None
        ovs = [self.value_of(o) if isinstance(o, Tensor) else o for o in others]
        self._remember(base if base is not None else target)
        alias = self.aliases.get(id(target)) if base is None else None
        if alias is not None:
            self._remember(alias)
        if not self.symbolic:
            with self.suspended():
                eager()
        v = self.add(prim.name, [tv] + ovs, params)
        if v.aval.dtype is not target.dtype:
            v = self.add("convert", [v], {"dtype": target.dtype, "device": None,
                                          "src_device": target.device})
        if v.aval.shape != target.shape:
            v = self.add("broadcast_to", [v], {"shape": tuple(target.shape)})
        if not _gm.grad_enabled and v.aval.dtype.is_floating_point:
            v = self.add("stop_gradient", [v], {})
        if base is not None:
            self.bind_value(base, self.add("view_scatter", [bv, v],
                                           {"steps": target._view_steps}))
        if alias is not None and alias._data is target._data:    # written through .data
            self.bind_value(alias, v)
        self.bind_value(target, v)

    def assign_data(self, target, source):
        """``target.data = source`` or a raw copy: the target now holds the source's value."""
        self._remember(target)
        self.bind_value(target, self.add("stop_gradient", [self.value_of(source)], {}))

    def _remember(self, t):
        """Keep the data of an external tensor before its first write, to restore it."""
        if id(t) in self.external and id(t) not in self.undo:
            self.undo[id(t)] = (t, t._data.copy(), t._vc.value)

    # tensors made without a primitive --------------------------------------------------------
    def created(self, t, shape=None, fill=None):
        """A tensor made by a creation function; ``shape``, ``fill``: what ``zeros``/``full``
        were asked for (a symbolic shape becomes a broadcast fill, not a constant)."""
        if fill is not None and shape is not None and (symbols_in(shape) or t._data.size > 1):
            # a fill, as a broadcast scalar: of any size (a symbolic shape), and no array kept
            c = self.add("constant", [], {"value": Const(np.array(fill, t._data.dtype))})
            self.bind_value(t, self.add("broadcast_to", [c], {"shape": tuple(shape)}))
            return
        data = t._data      # a constant is kept on the host; a GPU variant moves it once
        host = data.copy() if type(data) is np.ndarray else to_device(data, CPU)
        self.bind_value(t, self.add("constant", [], {"value": Const(host)}))

    def drawn(self, t, generator, state_before, **params):
        if id(generator) not in self.rngs:
            self.rngs[id(generator)] = (generator, state_before)
        self.bind_value(t, self.add("random", [], dict(params, generator=generator)))

    def detached(self, src, out):
        """``out = src.detach()`` or ``src.data``: the same storage, so an in-place write to
        ``out`` is a write to ``src`` too (``p.data.add_(...)``, a hand-written update)."""
        self.bind_value(out, self.add("stop_gradient", [self.value_of(src)], {}))
        root = self.aliases.get(id(src), src)
        if root._base is None:
            self.aliases[id(out)] = root

    def custom_function(self, fn, args, kwargs, apply):
        """``fn.apply(*args)``: run it for real, record one node per tensor output."""
        from .custom_prim import custom_primitive, learn
        if kwargs:
            self.unsupported(f"{fn.__name__}.apply with keyword arguments")
        tensors = [a for a in args if isinstance(a, Tensor)]
        template = tuple(None if isinstance(a, Tensor) else a for a in args)
        ins = [self.value_of(t) for t in tensors]
        with self.suspended():
            result = apply()
        outs = result if isinstance(result, tuple) else (result,)
        for k, o in enumerate(outs):
            if isinstance(o, Tensor):
                prim = custom_primitive(fn, k)
                learn(prim, tensors, o)
                self.bind_value(o, self.add(prim.name, ins,
                                            {"fn": fn, "template": template, "index": k}))
        return result

    def guard(self, t, kind, seen):
        if self.symbolic:
            raise RuntimeError("a derivative rule read a tensor's value; rules must not branch "
                               "on data")
        self.guards.append(Guard(self.value_of(t), kind, seen, user_line()))

    def unsupported(self, what):
        raise op_error("compile", f"{what} is not supported inside a compiled function: it reads "
                                  "a tensor's data outside the traced computation. Use .item() "
                                  "for a scalar, or move this code out of the compiled function.",
                       UnsupportedError)

    def suspended(self):
        """Eager ops inside the block run as if no trace were active."""
        return _hooks.suspended(bind_hook=self._below, tracer=None)

    # running ---------------------------------------------------------------------------------
    @contextlib.contextmanager
    def active(self):
        """Record every primitive call made inside the block."""
        self._below = _hooks.bind_hook
        self._below_own = "bind_hook" in _hooks.state.__dict__     # else every thread's
        with _hooks.bind_hook_installed(self.hook), _hooks.suspended(tracer=self):
            yield self

    def run(self, fn, args, kwargs):
        """Call ``fn`` with the tracer active; return its result (real tensors)."""
        with self.active(), (self.shape_env.active() if self.shape_env is not None
                             else contextlib.nullcontext()):
            return fn(*args, **kwargs)

    def restore(self):
        """Undo the trace run's effects on the user's tensors, gradients and generators."""
        for key, (t, before) in self.grads.items():
            self.grad_final[key] = t._grad
            t._grad = before
        for t, data, version in self.undo.values():
            t._data[...] = data
        for gen, state in self.rngs.values():
            gen.set_state(state)

    def finish(self, result):
        """The traced graph for ``result`` (any structure of tensors and Python values)."""
        outputs = []

        def leaf(x):
            if isinstance(x, Tensor):
                outputs.append(self.value_of(x))
                return OutputRef(len(outputs) - 1)
            if type(x) is SymInt:       # a size returned: a constant of a specialised trace
                raise Specialize(symbols_in(x), "the function returns a size")
            return x
        tree = map_structure(result, leaf)
        n_results = len(outputs)
        mutations = []
        for t, _, _ in self.undo.values():
            outputs.append(self.value_of(t))
            mutations.append(t)
        grad_sets = []      # (where, index of its new value among the outputs, or None)
        grad_checks = []    # (where, the .grad the trace started from)
        for key, (t, before) in self.grads.items():
            where = self._where(t)
            if key in self.grad_reads:
                grad_checks.append((where, before))
            final = self.grad_final.get(key, t._grad)
            if final is before:
                continue        # untouched, or updated in place: a mutation above
            if final is None:
                grad_sets.append((where, None))
            else:
                outputs.append(self.value_of(final))
                grad_sets.append((where, len(outputs) - 1))
        after = self._replays(outputs, n_results)
        # The values the user's assignments named are built again with those names, so the
        # graph's values carry their names from construction on and nobody renames them.
        named = {v: Value(v.aval, n) for v, n in self.names.items()}

        def fix(v):
            return named.get(v, v) if type(v) is Value else v
        nodes = [Node(n.op, [fix(v) for v in n.inputs], n.params, fix(n.out), n.site)
                 for n in self.nodes]
        inputs = [fix(v) for v in self.arg_inputs + [v for _, v in self.captured]]
        guards = [Guard(fix(g.value), g.kind, g.expected, g.site) for g in self.guards]
        graph = Graph(inputs, nodes, [fix(v) for v in outputs])
        traced = Traced(graph, list(self.arg_tensors), [t for t, _ in self.captured], guards,
                        mutations, (tree, n_results), self.shape_env, self.sym_dims)
        traced.n_extra = len(outputs) - n_results - len(mutations)
        traced.grad_sets, traced.grad_checks = grad_sets, grad_checks
        traced.scalars, traced.value_guards = self.scalars, self.value_guards
        traced.after, traced.hints = after, self.hints
        traced.replayed_keys = self.replayed_keys
        traced.modules = list(self.modules.values())
        return traced


class OutputRef:
    """A tensor leaf of the traced result: the ``index``-th graph output."""
    __slots__ = ("index",)

    def __init__(self, index):
        self.index = index


def map_structure(x, fn):
    """Apply ``fn`` to the leaves of nested tuples, lists and dicts."""
    if isinstance(x, tuple) and not hasattr(x, "_fields"):
        return tuple(map_structure(y, fn) for y in x)
    if isinstance(x, tuple):                    # a named tuple
        return type(x)(*(map_structure(y, fn) for y in x))
    if isinstance(x, list):
        return [map_structure(y, fn) for y in x]
    if isinstance(x, dict):
        return type(x)((k, map_structure(v, fn)) for k, v in x.items())
    return fn(x)


__all__ = ["Tracer", "Traced", "Guard", "UnsupportedError", "OutputRef", "map_structure"]
