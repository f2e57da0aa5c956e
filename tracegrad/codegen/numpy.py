"""A graph to a Python/NumPy function.

One statement per node, from the primitive's NumPy template where it has one
and otherwise a call of its implementation (``P.gather.impl(np, ...)``);
values named after the user's variables; a comment with the user's
``file:line: source`` where the source line changes; ``del`` after a value's
last use; the data-dependent guards checked right where their value is
computed; constants and numbers written so that they evaluate to exactly their
values (``np.inf``, ``-np.nan``, ``-0.0``, int64's extremes; a zero-size array
by its shape, which ``tolist()`` would lose). For example::

    def forward(x, w):
        # model.py:12: h = torch.tanh(x @ w)
        t0 = np.matmul(x, w)
        h = np.tanh(t0)
        del t0
        ...
        return loss, h
"""
import linecache
import math
import os

import numpy as np

from tracegrad import dtypes
from tracegrad.ir import Const, Value
from tracegrad.ops.core import Primitive
from tracegrad.symbolic import ATOMS, SymInt, Specialize, symbols_in

from . import fused, kernel
from . import python as py
from .support import GuardFailure, P, same_value

# Ops whose result dtype is always the aval's, whatever NumPy would do.
_DTYPE_EXACT = {"constant", "random", "stop_gradient", "convert", "clone"}
_INLINE_LIMIT = 64      # constants up to this many elements are written as literals


class Emitter:
    """Builds the functions of one generated module and the globals they need."""

    def __init__(self):
        self.env = {"np": np, "P": P, "dtypes": dtypes, "GuardFailure": GuardFailure}
        self.helpers = {}           # name -> object: what primitives' templates call
        self.globals_used = {}      # name -> object, for module globals beyond the imports
        self.kernels = []           # sources of fused groups' kernel functions
        self.kernel_ir = []         # their kernel IR (kernel.Kernel), for the other tiers
        self.workspaces = {}        # module global -> (kernel scratch, slots), see support
        self.symbols = {}           # size symbol -> its value in the trace (the probes use it)
        self.device = "cpu"         # "cuda": the module's np is CuPy (a CUDA variant)
        self._ids = {}
        self._probe, self._probe_size = {}, 0   # the dtype probes' globals (needs_cast)
        self._probed = {}       # _probe_key -> needs_cast's answer

    def global_for(self, obj, prefix):
        key = id(obj)
        name = self._ids.get(key)
        if name is None:
            name = self._ids[key] = f"_{prefix}{len(self._ids)}"
            self.globals_used[name] = obj
            self.env[name] = obj
        return name

    # rendering of params and scalars -----------------------------------------------------------
    def scalar(self, x):
        if isinstance(x, dtypes.dtype):
            return f"np.{x.np.name}" if x.np.name != "bool" else "np.bool_"
        if isinstance(x, np.generic):       # a NumPy scalar keeps its type (NEP 50 promotion)
            return f"{_np_type(x.dtype)}({literal(x.item())})"
        return literal(x)

    def param(self, v, for_template=False):
        if isinstance(v, dtypes.dtype):
            return self.scalar(v) if for_template else f"dtypes.{v.name}"
        if isinstance(v, tuple):
            inner = ", ".join(self.param(x, for_template) for x in v)
            return f"({inner}{',' if len(v) == 1 else ''})"
        if isinstance(v, dict):
            return "{" + ", ".join(f"{k!r}: {self.param(v[k], for_template)}"
                                   for k in v) + "}"
        if isinstance(v, Primitive):
            return f"P.{v.name}"
        if isinstance(v, Const):
            return self.global_for(v.array, "const")
        if hasattr(v, "manual_seed"):       # a Generator
            return self.global_for(v, "generator")
        if v is Ellipsis:
            return "..."
        if v is None or isinstance(v, (bool, int, float, str)):
            return self.scalar(v)
        return self.global_for(v, getattr(v, "__name__", type(v).__name__) + "_")

    def index_key(self, spec, index_names):
        parts = []
        for s in spec:
            if s is None:
                parts.append("None")
            elif s is Ellipsis:
                parts.append("...")
            elif type(s) is tuple and s[0] == "s":
                a, b, c = ("" if x is None else str(x) for x in s[1:])
                parts.append(f"{a}:{b}" + (f":{c}" if c else ""))
            elif type(s) is tuple and s[0] == "t":
                parts.append(index_names[s[1]])
            else:
                parts.append(str(s))
        return ", ".join(parts) if parts else "()"

    # one node --------------------------------------------------------------------------------
    def expression(self, node, arg):
        """Python source computing ``node`` given ``arg(v)``, the source of an input."""
        prim, params, op = node.prim, node.params, node.op
        args = [arg(v) for v in node.inputs]
        if op == "constant":
            return self.constant(params["value"].array)
        if op == "random":
            return self.random(params)
        template = prim.np_template
        if self.device != "cpu" and op in fused.ON_DEVICE_VIA_IMPL:
            template = None
        named = dict(zip(prim.args, args))
        for name, obj in prim.helpers.items():     # declared on the primitive (erf's _erf)
            self.helpers[name] = self.env[name] = obj
        if callable(template):      # a template that chooses its source by the params
            return template(**named, **params)
        if template is not None:
            kw = {k: self.param(v, for_template=True) for k, v in params.items()}
            if op == "index":
                kw["spec"] = self.index_key(params["spec"], args[1:])
            if op == "cat":     # PyTorch's legacy empties, shape (0,), join any rank: skipped
                kw["args"] = ", ".join(a for a, v in zip(args, node.inputs)
                                       if getattr(v, "shape", None) != (0,)) or ", ".join(args)
            try:
                return template.format(**named, **kw)
            except (KeyError, IndexError):
                pass
        kw = "".join(f", {k}={self.param(v)}" for k, v in params.items())
        return f"P.{op}.impl(np{''.join(', ' + a for a in args)}{kw})"

    def constant(self, a):
        # a CUDA variant's constants are module globals, copied to the GPU once (a literal
        # would be a host-to-device copy at every call, which a CUDA graph cannot record)
        if a.size > _INLINE_LIMIT or (self.device == "cuda" and a.size):
            return f"{self.global_for(a, 'const')}"
        if a.size == 0:         # ``tolist()`` of a (0, 5, 0) array is ``[]``: the dims go
            return f"np.empty({a.shape!r}, dtype={_np_type(a.dtype)})"
        return f"np.array({literal(a.tolist())}, dtype={_np_type(a.dtype)})"

    def random(self, p):
        gen = self.global_for(p["generator"], "generator")
        shape = self.param(tuple(p["shape"]))
        draw = {"uniform": f"random({shape})", "normal": f"standard_normal({shape})",
                "integers": f"integers({p.get('low', 0)}, {p.get('high', 1)}, {shape})"}
        return f"{gen}.rng.{draw[p['dist']]}.astype({self.scalar(p['dtype'])})"

    def needs_cast(self, node, source, arg_avals):
        """Whether NumPy computes ``source`` in another dtype than the node's aval."""
        if node.op in _DTYPE_EXACT or node.prim.kind == "shape":
            return False
        # the answer depends on the op, its params and its operands' types, not on the
        # names in ``source``: an unrolled loop's nodes are probed once per kind
        key = _probe_key(node)
        known = self._probed.get(key) if key is not None else None
        if known is None:
            got = self._probe_dtype(source, arg_avals)
            known = got is not None and got != node.out.aval.dtype.np
            if key is not None:
                self._probed[key] = known
        return known

    def _probe_dtype(self, source, arg_avals):
        """The dtype NumPy gives ``source`` on arrays of ``arg_avals`` (None on an error)."""
        # the probe's globals: the module's, kept from call to call (copying them for each
        # node would cost the number of globals per node); names of ``env`` are only ever
        # added, each bound once, so a new one is all that can change
        env = self._probe
        if self._probe_size != len(self.env):
            env.update(self.env)
            self._probe_size = len(self.env)
        local = dict(self.symbols)
        for n, aval in arg_avals.items():
            local[n] = np.zeros((1,) * len(aval.shape), aval.dtype.np)
        shadowed = {k: env[k] for k in local if k in env}
        env.update(local)
        try:
            with np.errstate(all="ignore"):
                return np.asarray(eval(source, env)).dtype
        except Exception:       # noqa: BLE001 - a probe only; the real call will tell
            return None
        finally:
            for k in local:
                del env[k]
            env.update(shadowed)


def _probe_key(node):
    """What ``needs_cast``'s answer for ``node`` depends on (None: not hashable)."""
    try:
        key = (node.op, tuple(sorted(node.params.items())), node.out.aval.dtype,
               tuple((v.aval.dtype, v.aval.shape) if type(v) is Value else (type(v), repr(v))
                     for v in node.inputs))
        hash(key)
    except TypeError:
        return None
    return key


def literal(x):
    """Python source that evaluates to exactly ``x``, a scalar or nested lists of them:
    infinities and NaNs by NumPy's names (``repr`` writes a bare ``inf``, no Python name),
    with their sign (``-np.nan`` too); ``-0.0`` and ints of any size are their ``repr``."""
    if type(x) is list:
        return f"[{', '.join(map(literal, x))}]"
    if type(x) is tuple:
        return f"({', '.join(map(literal, x))}{',' if len(x) == 1 else ''})"
    if isinstance(x, float) and not math.isfinite(x):
        return ("-" if math.copysign(1.0, x) < 0 else "") + \
            ("np.nan" if math.isnan(x) else "np.inf")
    return repr(x)


def _np_type(dt):
    return "np.bool_" if dt == np.bool_ else f"np.{np.dtype(dt).name}"


def site_comment(site):
    if not site:
        return None
    path, _, line = site.rpartition(":")
    text = linecache.getline(path, int(line)).strip() if line.isdigit() else ""
    return f"{os.path.basename(path)}:{line}" + (f": {text}" if text else "")


def emit_function(em, graph, fname, namer, guards=(), doc=None):
    """Source of one function computing ``graph`` and returning all its outputs;
    ``guards``: (value, kind, expected, index) checked where the value is computed.
    A fused group becomes a kernel function (added to ``em.kernels``) and a call."""
    returned = graph.outputs
    params = [namer(v) for v in graph.inputs]
    units = graph.units()
    # on the CPU a kernel reads a column slice in the matrix it slices (passed in its place)
    slices = {n.out: n for n in graph.nodes if n.op == "index"} if em.device == "cpu" else {}
    columns = {g: kernel.column_slices(g, slices) for g in graph.groups
               if slices and fused.plan_chunks(g.domain) is None}
    last_use = {}
    for i, (group, nodes) in enumerate(units):
        for n in nodes:
            for v in n.inputs:
                if type(v) is Value:
                    last_use[v] = i
        for m, _ in columns.get(group, {}).values():
            last_use[m] = i
    keep = set(returned) | set(graph.inputs)
    returned_set = set(returned)
    guard_at = {}
    for g in guards:
        guard_at.setdefault(g[0], []).append(g)
    body, prev_site = [], None
    sizes = size_sources(graph, namer)
    for sym, src in sizes:
        body.append((None, py.assign(sym, py.expr(src))))
        em.symbols[sym] = 2
    ws = "ws" if graph.groups else None
    if ws:
        key = f"({''.join(s + ', ' for s, _ in sizes)})" if sizes else ""
        body.append((None, py.stmt(f"{ws} = _{fname}_workspace.take({key})")))
    kernels, number = {}, {g: k for k, g in enumerate(graph.groups)}
    slot_of = graph.plan.slot_of if graph.plan else None
    for v in graph.inputs:
        _check_guards(em, body, namer, guard_at.get(v, ()))
    for i, (group, nodes) in enumerate(units):
        if group is not None:
            k = number[group]
            kir = kernel.lower(group, f"{fname}_fused{k}", f"fused{k}", namer,
                               columns.get(group))
            src, plan = fused.emit_kernel(em, kir, namer, site_comment)
            em.kernels.append(src)
            em.kernel_ir.append(kir)
            kernels[kir.name] = fused.workspace_spec(plan)
            for comment, stmt in fused.emit_call(em, plan, namer, ws, f"fused{k}", slot_of,
                                                 returned_set):
                body.append((comment, py.stmt(stmt)))
            prev_site = None
            for n in group.after:
                prev_site = _emit_node(em, n, namer, body, prev_site)
        else:
            prev_site = _emit_node(em, nodes[0], namer, body, prev_site)
        for n in nodes:
            _check_guards(em, body, namer, guard_at.get(n.out, ()))
        defined = {n.out for n in nodes}
        dead = [namer(v) for n in nodes for v in n.values()
                if last_use.get(v) == i and v not in keep and v not in defined]
        if group is None:
            dead += [namer(n.out) for n in nodes if n.out not in last_use and n.out not in keep]
        if dead:
            body.append((None, py.release(sorted(set(dead)))))
    if ws:
        em.workspaces[f"_{fname}_workspace"] = (kernels, graph.plan.slots if graph.plan else {},
                                                [s for s, _ in sizes])
        body.append((None, py.stmt(f"_{fname}_workspace.give({ws})")))
    body.append((None, py.return_([namer(v) for v in returned]) if returned
                 else py.stmt("return ()")))
    return py.function(fname, params, body, doc)


def _emit_node(em, n, namer, body, prev_site):
    """Append the statement computing ``n``; returns its site."""
    def arg(v):
        return namer(v) if type(v) is Value else em.scalar(v)
    src = em.expression(n, arg)
    avals = {namer(v): v.aval for v in n.inputs if type(v) is Value}
    if n.inputs and not avals and n.prim.kind == "elementwise":
        # Python numbers only (``add(2.0, 3.0)``): Python computes them, as eager's impl
        # does, and the result is a 0-d array of the aval's dtype, as eager's is
        src = f"np.asarray({src}, dtype={em.scalar(n.out.aval.dtype)})"
    elif em.needs_cast(n, src, avals):
        src = f"({src}).astype({em.scalar(n.out.aval.dtype)})"
    comment = site_comment(n.site) if n.site != prev_site else None
    body.append((comment, py.assign(namer(n.out), py.expr(src))))
    return n.site


def _check_guards(em, body, namer, guards):
    for v, kind, expected, index in guards:
        read = f"{namer(v)}.tolist()"
        if type(expected) is not list and getattr(getattr(v, "aval", None), "shape", ()) != ():
            read = f"{namer(v)}.reshape(()).tolist()"   # .item() of a one-element tensor
        if kind == "bool":
            test = f"bool({namer(v)}) is not {expected!r}"
        elif _plain(expected):
            test = f"{read} != {literal(expected)}"
        else:       # a NaN or a zero: ``!=`` cannot compare them
            em.helpers["same_value"] = em.env["same_value"] = same_value
            test = f"not same_value({read}, {literal(expected)})"
        body.append((None, py.stmt(f"if {test}:\n    raise GuardFailure({index})")))


def _plain(x):
    """Whether ``!=`` compares ``x`` to another value as a guard must (no NaN, no float 0)."""
    if type(x) is list:
        return all(map(_plain, x))
    return not (type(x) is float and (x != x or x == 0.0))


def workspace_source(kernels, slots, sizes=(), on_device=False):
    """Source of the ``Workspace(...)`` holding these kernels' scratch and these slots; with
    ``sizes`` (symbols), a workspace whose buffers are made per size (pooled by size);
    ``on_device``: its buffers are the module's ``np`` arrays (CuPy's in a CUDA variant)."""
    def specs(items):
        return "[" + ", ".join(f"({shape!r}, np.{np.dtype(dt).name})" for shape, dt in items) + "]"
    k = "{" + ", ".join(f"{name!r}: ({copies}, {specs(items)})"
                        for name, (copies, items) in kernels.items()) + "}"
    s = "{" + ", ".join(f"{name!r}: ({shape!r}, np.{np.dtype(dt).name})"
                        for name, (shape, dt) in slots.items()) + "}"
    xp = ", xp=np" if on_device else ""
    if sizes:
        return f"Workspace(sized=lambda {', '.join(sizes)}: ({k}, {s}){xp})"
    parts = ([f"kernels={k}"] if kernels else []) + ([f"slots={s}"] if slots else [])
    return f"Workspace({', '.join(parts)}{xp})"


def size_sources(graph, namer):
    """``[(symbol, source)]``: each size symbol ``graph`` uses and the input dim it is read
    from (``s0``, ``x.shape[0]``), in symbol order."""
    used = symbols_in([v.aval.shape for v in graph.inputs]
                      + [(n.out.aval.shape, n.inputs, n.params) for n in graph.nodes])
    if not used:
        return []
    found = {}
    for v in graph.inputs:
        for d, n in enumerate(v.aval.shape):
            if type(n) is SymInt and len(n.poly.terms) == 1:
                (mono, coeff), = n.poly.terms
                if coeff == 1 and len(mono) == 1 and mono[0] not in ATOMS:
                    found.setdefault(mono[0], f"{namer(v)}.shape[{d}]")
    missing = used - set(found)
    if missing:
        raise Specialize(missing, f"no input of the generated function has the size "
                                  f"{', '.join(sorted(missing))} as a dim")
    return [(s, found[s]) for s in sorted(used, key=lambda s: int(s[1:]))]
