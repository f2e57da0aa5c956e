"""Random programs, compiled against eager (a hypothesis property test).

A program is a small DAG over 1-3 float64 inputs whose shapes broadcast against
each other. Each step applies one op (elementwise, broadcasting binary, pow,
reductions, shape ops, indexing, cat/stack, matmul, softmax) or a data-dependent
``if v.sum() > 0: ... else: ...``; the generator tracks every value's shape
(and a bound on its magnitude), so a program is always valid. The same Python
function runs eagerly and through ``tracegrad.compile``; forward values,
gradients of a weighted sum of the outputs and second derivatives must agree,
over several calls with new input values (cache hits and data-dependent
retraces), and the compile count must follow the branch outcomes.

A failing example prints as Python source (``Program.__repr__``), e.g.::

    def program(v0, v1):        # v0: (3, 4), v1: (4,) no grad; values from seed 7
        v2 = tg.maximum(v0, v1)
        if v2.sum() > 0:
            v3 = tg.tanh(v2)
        else:
            v3 = -v2
        return (v3,)

(the inputs are uniform in [-2, 2), drawn by ``numpy.random.default_rng(seed)``).
Every call also checks the plain first-order gradients (the generated backward)
separately from the ``create_graph=True`` ones (the joint graph run through
eager ops), and a last call under ``no_grad`` checks the forward-only variant.

Inputs sit near no kink: while the eager reference runs, the steps with a kink
(relu, abs, maximum/minimum/where, amax, the branch) report how close their
operands came to it, and examples where float64 round-off could flip a side
are rejected. Exact ties (values that are bitwise equal, as after a broadcast)
are kept: eager and compiled must break them the same way.
"""
import itertools
import math
import os
import re

import numpy as np
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st

import tracegrad as tg
from tracegrad import _hooks

# TRACEGRAD_PROPERTY_EXAMPLES=5000 TRACEGRAD_PROPERTY_RANDOM=1 turn this into a longer fuzz run
MAX_EXAMPLES = int(os.environ.get("TRACEGRAD_PROPERTY_EXAMPLES", 300))
MAX_STEPS = int(os.environ.get("TRACEGRAD_PROPERTY_STEPS", 8))
MAX_BOUND = 1e4           # magnitude bound of any value the generator lets a program make
NEAR = 1e-7               # relative distance to a kink below which an example is rejected
CALLS = 4                 # calls per example: values A, B, A again, -A

# probing the eager reference run -------------------------------------------------------------


class _Probe:
    """Collects, during the eager reference run only, branch outcomes and kink margins."""

    def __init__(self):
        self.on, self.outcomes, self.near_kink = False, [], False

    def start(self):
        self.on, self.outcomes, self.near_kink = True, [], False

    def stop(self):
        self.on = False

    @property
    def active(self):
        return self.on and _hooks.tracer is None

    def kink(self, d, scale):
        """``d``: distances from a kink (0 = on it). Exact zeros are deterministic, fine."""
        d = np.abs(np.asarray(d, dtype=np.float64))
        tol = NEAR * (1.0 + float(np.max(np.abs(scale), initial=0.0)))
        if np.any((d > 0) & (d < tol)):
            self.near_kink = True


PROBE = _Probe()


def _np(t):
    return t.detach().cpu()._data


def _probe_diff(a, b):
    if PROBE.active:
        x, y = np.broadcast_arrays(_np(a), _np(b))
        PROBE.kink(x - y, np.maximum(np.abs(x), np.abs(y)))


def _probe_zero(a):
    if PROBE.active:
        PROBE.kink(_np(a), _np(a))


def _probe_amax(a, dim):
    if PROBE.active:
        x = _np(a)
        m = np.max(x, axis=dim, keepdims=True)
        gap = m - x
        PROBE.kink(gap, x)


# ops: the steps with a kink report to the probe first ------------------------------------------

def _relu(a):
    _probe_zero(a)
    return tg.relu(a)


def _abs(a):
    _probe_zero(a)
    return tg.abs(a)


def _maximum(a, b):
    _probe_diff(a, b)
    return tg.maximum(a, b)


def _minimum(a, b):
    _probe_diff(a, b)
    return tg.minimum(a, b)


def _where(a, b):
    _probe_diff(a, b)
    return tg.where(a > b, a, b)


# name -> (source template, function, magnitude bound from the operand's bound)
UNARY = {
    "exp_tanh": ("tg.exp(tg.tanh({a}))", lambda a: tg.exp(tg.tanh(a)), lambda B: math.e),
    "tanh": ("tg.tanh({a})", lambda a: tg.tanh(a), lambda B: 1.0),
    "sigmoid": ("tg.sigmoid({a})", lambda a: tg.sigmoid(a), lambda B: 1.0),
    "sin": ("tg.sin({a})", lambda a: tg.sin(a), lambda B: 1.0),
    "neg": ("-{a}", lambda a: -a, lambda B: B),
    "abs": ("tg.abs({a})", _abs, lambda B: B),
    "relu": ("tg.relu({a})", _relu, lambda B: B),
    "sqrt": ("tg.sqrt({a} * {a} + 1)", lambda a: tg.sqrt(a * a + 1), lambda B: B + 1),
    "log": ("tg.log({a} * {a} + 1)", lambda a: tg.log(a * a + 1), lambda B: 2 * math.log1p(B)),
    "pow1": ("{a} ** 1", lambda a: a ** 1, lambda B: B),
    "pow2": ("{a} ** 2", lambda a: a ** 2, lambda B: B * B),
    "pow3": ("{a} ** 3", lambda a: a ** 3, lambda B: B ** 3),
    "pow0": ("{a} ** 0", lambda a: a ** 0, lambda B: 1.0),
    "pow_neg": ("tg.pow({a} * {a} + 1, -2)", lambda a: tg.pow(a * a + 1, -2), lambda B: 1.0),
    "scale": ("{a} * 0.5 + 1", lambda a: a * 0.5 + 1, lambda B: B * 0.5 + 1),
    "rsub": ("2 - {a}", lambda a: 2 - a, lambda B: B + 2),
    "rdiv": ("1 / ({a} * {a} + 1)", lambda a: 1 / (a * a + 1), lambda B: 1.0),
}

BINARY = {
    "add": ("{a} + {b}", lambda a, b: a + b, lambda A, B: A + B),
    "sub": ("{a} - {b}", lambda a, b: a - b, lambda A, B: A + B),
    "mul": ("{a} * {b}", lambda a, b: a * b, lambda A, B: A * B),
    "div": ("{a} / ({b} * {b} + 1)", lambda a, b: a / (b * b + 1), lambda A, B: A),
    "maximum": ("tg.maximum({a}, {b})", _maximum, max),
    "minimum": ("tg.minimum({a}, {b})", _minimum, max),
    "where": ("tg.where({a} > {b}, {a}, {b})", _where, max),
}


# programs ---------------------------------------------------------------------------------------

class Step:
    """``v{out} = <text>`` (or a branch, over several lines); ``fn(env)`` computes it."""

    def __init__(self, out, lines, fn, shape, bound, branch=False):
        self.out, self.lines, self.fn = out, lines, fn
        self.shape, self.bound, self.branch = shape, bound, branch

    def __repr__(self):
        return "\n".join(self.lines)


class Program:
    """The steps over ``len(in_shapes)`` inputs; prints as the Python it runs."""

    def __init__(self, in_shapes, requires_grad, steps, outputs, seed, n_branches):
        self.in_shapes, self.requires_grad = in_shapes, requires_grad
        self.steps, self.outputs = steps, outputs
        self.seed, self.n_branches = seed, n_branches

    def __repr__(self):
        args = ", ".join(f"v{i}" for i in range(len(self.in_shapes)))
        shapes = ", ".join(f"v{i}: {s}" + ("" if rg else " no grad")
                           for i, (s, rg) in enumerate(zip(self.in_shapes, self.requires_grad)))
        body = "\n".join("    " + line for s in self.steps for line in s.lines)
        outs = "".join(f"v{i}, " for i in self.outputs)
        return (f"def program({args}):        # {shapes}; values from seed {self.seed}\n"
                f"{body}\n    return ({outs.rstrip(' ')})")

    def function(self):
        """The Python function that runs the steps (closures) over the inputs."""
        steps, outputs = self.steps, self.outputs

        def program(*inputs):
            env = list(inputs)
            for step in steps:
                env.append(step.fn(env))
            return tuple(env[i] for i in outputs)
        return program


def _unary_step(k, i, name, shapes, bounds):
    text, f, bnd = UNARY[name]
    return Step(k, [f"v{k} = " + text.format(a=f"v{i}")], lambda env: f(env[i]),
                shapes[i], bnd(bounds[i]))


@st.composite
def programs(draw):
    a, b = draw(st.sampled_from([(3, 4), (2, 3), (4, 2)]))
    shape_pool = [(a, b), (a, b), (b,), (1, b), (a, 1), (2, a, b), (2, 1, b), ()]
    n_in = draw(st.integers(1, 3))
    shapes = [tuple(draw(st.sampled_from(shape_pool))) for _ in range(n_in)]
    bounds = [2.0] * n_in
    steps = []
    n_steps = draw(st.integers(1, MAX_STEPS))
    n_branches = 0
    kinds = ["unary", "binary", "reduce", "shape", "index", "join", "matmul", "softmax",
             "branch"]         # "unary" is what a step falls back to when its op does not fit
    for _ in range(n_steps):
        k = len(shapes)
        kind = draw(st.sampled_from(kinds))
        i = k - 1 if draw(st.booleans()) else draw(st.integers(0, k - 1))   # chains, mostly
        s, B = shapes[i], bounds[i]
        step = None
        if kind == "binary":
            partners = [j for j in range(k) if _broadcasts(s, shapes[j])]
            j = draw(st.sampled_from(partners))
            name = draw(st.sampled_from(sorted(BINARY)))
            text, f, bnd = BINARY[name]
            if bnd(B, bounds[j]) <= MAX_BOUND:
                step = Step(k, [f"v{k} = " + text.format(a=f"v{i}", b=f"v{j}")],
                            lambda env, f=f, i=i, j=j: f(env[i], env[j]),
                            np.broadcast_shapes(s, shapes[j]), bnd(B, bounds[j]))
        elif kind == "reduce" and len(s) >= 1:
            step = _reduce_step(draw, k, i, s, B)
        elif kind == "shape":
            step = _shape_step(draw, k, i, s, B)
        elif kind == "index" and len(s) >= 1:
            step = _index_step(draw, k, i, s, B)
        elif kind == "join" and len(s) >= 1:
            step = _join_step(draw, k, i, shapes, bounds)
        elif kind == "matmul":
            step = _matmul_step(draw, k, i, shapes, bounds)
        elif kind == "softmax" and len(s) >= 1:
            d = draw(st.integers(-len(s), len(s) - 1))
            if draw(st.booleans()):
                step = Step(k, [f"v{k} = tg.softmax(v{i}, dim={d})"],
                            lambda env, i=i, d=d: tg.softmax(env[i], dim=d), s, 1.0)
            else:
                step = Step(k, [f"v{k} = tg.log_softmax(v{i}, dim={d})"],
                            lambda env, i=i, d=d: tg.log_softmax(env[i], dim=d), s,
                            2 * B + math.log(max(s[d], 1)) + 1)
        elif kind == "branch":
            c = draw(st.integers(0, k - 1))
            yes = draw(st.sampled_from(sorted(UNARY)))
            no = draw(st.sampled_from([n for n in sorted(UNARY) if n != yes]))
            ty, fy, by = UNARY[yes]
            tn, fn_, bn = UNARY[no]
            if max(by(B), bn(B)) <= MAX_BOUND:
                step = Step(k, [f"if v{c}.sum() > 0:",
                                f"    v{k} = " + ty.format(a=f"v{i}"),
                                "else:",
                                f"    v{k} = " + tn.format(a=f"v{i}")],
                            lambda env, c=c, i=i, fy=fy, fn_=fn_: _branch(env, c, i, fy, fn_),
                            s, max(by(B), bn(B)), branch=True)
                n_branches += 1
        if step is None:                # the drawn op did not fit: an always-valid one
            name = draw(st.sampled_from(sorted(UNARY)))
            if UNARY[name][2](B) > MAX_BOUND:
                name = "tanh"
            step = _unary_step(k, i, name, shapes, bounds)
        steps.append(step)
        shapes.append(tuple(int(n) for n in step.shape))
        bounds.append(step.bound)
    # outputs: the last value and, mostly, every other value no later step reads
    read = {int(m) for st_ in steps for m in re.findall(r"\bv(\d+)\b", " ".join(st_.lines))
            if int(m) != st_.out}
    last = len(shapes) - 1
    outputs = [v for v in range(n_in, last) if v not in read and draw(st.integers(0, 3))]
    outputs.append(last)
    requires_grad = [draw(st.integers(0, 4)) > 0 for _ in range(n_in)]
    if not any(requires_grad):
        requires_grad[-1] = True
    seed = draw(st.integers(0, 2 ** 32 - 1))
    prog = Program(shapes[:n_in], requires_grad, steps, outputs, seed, n_branches)
    prog.sizes = (a, b)         # the sizes the shapes were made of (for other sizes)
    return prog


def _branch(env, c, i, yes, no):
    cond = env[c].sum()
    if PROBE.active:
        x = _np(env[c])
        PROBE.kink(np.array([float(_np(cond))]), np.sum(np.abs(x)))
        if float(_np(cond)) == 0.0:
            PROBE.near_kink = True
    taken = cond > 0
    if taken:
        out = yes(env[i])
    else:
        out = no(env[i])
    if PROBE.active:
        PROBE.outcomes.append(bool(_np(taken)))
    return out


def _broadcasts(s, t):
    try:
        np.broadcast_shapes(s, t)
        return True
    except ValueError:
        return False


def _reduce_step(draw, k, i, s, B):
    nd = len(s)
    op = draw(st.sampled_from(["sum", "mean", "amax", "logsumexp", "var"]))
    keep = draw(st.booleans())
    if op in ("sum", "mean") and draw(st.integers(0, 3)) == 0:
        text, f = f"v{i}.{op}()", (lambda env: getattr(env[i], op)())
        return Step(k, [f"v{k} = {text}"], f, (), B * math.prod(s))
    if draw(st.booleans()) and nd >= 2:
        dims = draw(st.sampled_from([c for r in range(1, nd + 1)
                                     for c in itertools.combinations(range(nd), r)]))
        dim = dims
    else:
        dim = draw(st.integers(-nd, nd - 1))
        dims = (dim % nd,)
    n = math.prod(s[d] for d in dims)
    if op == "var" and n < 2:
        op = "mean"
    out = tuple(1 if d in dims else s[d] for d in range(nd)) if keep else \
        tuple(s[d] for d in range(nd) if d not in dims)
    if op == "sum":
        text, f, bound = f"v{i}.sum(dim={dim}, keepdim={keep})", \
            (lambda env: env[i].sum(dim=dim, keepdim=keep)), B * n
    elif op == "mean":
        text, f, bound = f"v{i}.mean(dim={dim}, keepdim={keep})", \
            (lambda env: env[i].mean(dim=dim, keepdim=keep)), B
    elif op == "amax":
        def f(env):
            _probe_amax(env[i], dims)
            return tg.amax(env[i], dim=dim, keepdim=keep)
        text, bound = f"tg.amax(v{i}, dim={dim}, keepdim={keep})", B
    elif op == "logsumexp":
        text, f, bound = f"tg.logsumexp(v{i}, dim={dim}, keepdim={keep})", \
            (lambda env: tg.logsumexp(env[i], dim=dim, keepdim=keep)), B + math.log(n)
    else:
        text, f, bound = f"v{i}.var(dim={dim}, keepdim={keep})", \
            (lambda env: env[i].var(dim=dim, keepdim=keep)), 4 * B * B
    if bound > MAX_BOUND:
        return None
    return Step(k, [f"v{k} = {text}"], f, out, bound)


def _factorings(n, parts):
    if parts == 1:
        return [(n,)]
    return [(d,) + rest for d in range(1, n + 1) if n % d == 0
            for rest in _factorings(n // d, parts - 1)]


def _shape_step(draw, k, i, s, B):
    nd = len(s)
    ops = ["reshape", "unsqueeze", "broadcast_to"]
    if nd >= 2:
        ops += ["permute", "transpose"]
    if 1 in s:
        ops += ["squeeze", "expand"]
    op = draw(st.sampled_from(ops))
    line = None
    if op == "reshape":
        parts = draw(st.integers(1, 3))
        new = draw(st.sampled_from(_factorings(math.prod(s), parts)))
        if draw(st.booleans()):            # one inferred dimension
            shown = tuple(-1 if p == 0 else n for p, n in enumerate(new))
        else:
            shown = new
        line, f = f"v{i}.reshape{shown}", (lambda env: env[i].reshape(*shown))
        if len(shown) == 1:
            line = f"v{i}.reshape({shown[0]})"
    elif op == "unsqueeze" and nd <= 3:
        d = draw(st.integers(-nd - 1, nd))
        line, f = f"v{i}.unsqueeze({d})", (lambda env: env[i].unsqueeze(d))
        dd = d % (nd + 1)
        new = s[:dd] + (1,) + s[dd:]
    elif op == "broadcast_to" and nd <= 3:
        new = tuple(draw(st.sampled_from([1, 2, 3])) if n == 1 else n for n in s)
        if draw(st.booleans()):
            new = (2,) + new
        line, f = f"tg.broadcast_to(v{i}, {new})", (lambda env: tg.broadcast_to(env[i], new))
    elif op == "permute":
        perm = tuple(draw(st.permutations(range(nd))))
        line, f = f"v{i}.permute{perm}", (lambda env: env[i].permute(*perm))
        new = tuple(s[p] for p in perm)
    elif op == "transpose":
        d0, d1 = draw(st.integers(-nd, nd - 1)), draw(st.integers(-nd, nd - 1))
        line, f = f"v{i}.transpose({d0}, {d1})", (lambda env: env[i].transpose(d0, d1))
        new = list(s)
        new[d0], new[d1] = new[d1], new[d0]
        new = tuple(new)
    elif op == "squeeze":
        ones = [d for d in range(nd) if s[d] == 1]
        if draw(st.booleans()):
            line, f = f"v{i}.squeeze()", (lambda env: env[i].squeeze())
            new = tuple(n for n in s if n != 1)
        else:
            d = draw(st.sampled_from(ones))
            line, f = f"v{i}.squeeze({d})", (lambda env: env[i].squeeze(d))
            new = s[:d] + s[d + 1:]
    elif op == "expand":
        new = tuple(draw(st.sampled_from([1, 2, 3])) if n == 1 else n for n in s)
        shown = tuple(-1 if n == m and draw(st.booleans()) else n for n, m in zip(new, s))
        line, f = f"v{i}.expand{shown}", (lambda env: env[i].expand(*shown))
        if len(shown) == 1:
            line = f"v{i}.expand({shown[0]})"
    if line is None:
        return None
    return Step(k, [f"v{k} = {line}"], f, new, B)


def _index_step(draw, k, i, s, B):
    options = [("[0]", lambda t: t[0], s[1:]), ("[-1]", lambda t: t[-1], s[1:])]
    if s[0] >= 2:
        options.append(("[1:]", lambda t: t[1:], (s[0] - 1,) + s[1:]))
        options.append(("[::2]", lambda t: t[::2], ((s[0] + 1) // 2,) + s[1:]))
    if len(s) >= 2 and s[1] >= 2:
        options.append(("[:, 1:]", lambda t: t[:, 1:], (s[0], s[1] - 1) + s[2:]))
        options.append(("[..., 0]", lambda t: t[..., 0], s[:-1]))
    text, g, new = draw(st.sampled_from(options))
    return Step(k, [f"v{k} = v{i}{text}"], lambda env: g(env[i]), new, B)


def _join_step(draw, k, i, shapes, bounds):
    s = shapes[i]
    nd = len(s)
    if draw(st.booleans()):     # cat along a dim where the other shapes agree
        d = draw(st.integers(0, nd - 1))
        partners = [j for j in range(len(shapes)) if len(shapes[j]) == nd and all(
            shapes[j][e] == s[e] for e in range(nd) if e != d)]
        j = draw(st.sampled_from(partners))
        dim = d - nd if draw(st.booleans()) else d
        new = s[:d] + (s[d] + shapes[j][d],) + s[d + 1:]
        return Step(k, [f"v{k} = tg.cat([v{i}, v{j}], dim={dim})"],
                    lambda env: tg.cat([env[i], env[j]], dim=dim), new,
                    max(bounds[i], bounds[j]))
    if nd >= 3:
        return None
    partners = [j for j in range(len(shapes)) if shapes[j] == s]
    j = draw(st.sampled_from(partners))
    dim = draw(st.integers(-nd - 1, nd))
    dd = dim % (nd + 1)
    new = s[:dd] + (2,) + s[dd:]
    return Step(k, [f"v{k} = tg.stack([v{i}, v{j}], dim={dim})"],
                lambda env: tg.stack([env[i], env[j]], dim=dim), new, max(bounds[i], bounds[j]))


def _matmul_shape(s, t):
    if not s or not t:
        return None
    try:
        return np.matmul(np.zeros(s), np.zeros(t)).shape
    except ValueError:
        return None


def _matmul_step(draw, k, i, shapes, bounds):
    s = shapes[i]
    partners = [j for j in range(len(shapes)) if _matmul_shape(s, shapes[j]) is not None]
    if partners:
        j = draw(st.sampled_from(partners))
        inner = s[-1]
        bound = bounds[i] * bounds[j] * inner
        if bound > MAX_BOUND:
            return None
        return Step(k, [f"v{k} = v{i} @ v{j}"], lambda env: env[i] @ env[j],
                    _matmul_shape(s, shapes[j]), bound)
    if len(s) >= 2:            # a Gram matrix always fits
        bound = bounds[i] ** 2 * s[-1]
        if bound > MAX_BOUND:
            return None
        new = s[:-1] + (s[-2],)
        return Step(k, [f"v{k} = v{i} @ v{i}.transpose(-2, -1)"],
                    lambda env: env[i] @ env[i].transpose(-2, -1), new, bound)
    return None


# running and comparing ---------------------------------------------------------------------------

def _values(prog, call):
    rng = np.random.default_rng(prog.seed + (call % 3 == 1))   # A, B, A, -A
    vals = [rng.uniform(-2, 2, s) for s in prog.in_shapes]
    return [-v for v in vals] if call == 3 else vals


def _zeros_for_missing(got, want, what):
    """Whether exactly one side is missing and the other is a second-order gradient of
    zeros (a tuple of them, or one): eager gives relu's second derivative as zeros (its
    threshold_backward node, as PyTorch's), compiled relu's gradient has no graph."""
    if (got is None) == (want is None) or "second-order" not in what:
        return False
    present = got if got is not None else want
    items = present if isinstance(present, (tuple, list)) else (present,)
    return all(x is None or not _np(x).any() for x in items)


def _both_exist(g, w, kind):
    """Both results exist or neither (or ``_zeros_for_missing``)."""
    return (g is None) == (w is None) or _zeros_for_missing(g, w, kind)


def _assert_like_eager(got, want, where):
    """Compiled results (``_run``'s outputs and gradients of each order) equal eager's."""
    for kind, g, w in zip(("output", "grad", "create_graph grad", "second-order grad"),
                          got, want):
        assert _both_exist(g, w, kind), f"{where}{kind}s exist"
        if g is None or w is None:
            continue
        for n, (a, b) in enumerate(zip(g or (), w or ())):
            _close(a, b, f"{where}{kind} {n}")


def _run(fn, arrays, requires_grad):
    inputs = [tg.tensor(a, dtype=tg.float64, requires_grad=rg)
              for a, rg in zip(arrays, requires_grad)]
    xs = [x for x in inputs if x.requires_grad]
    outs = fn(*inputs)
    rng = np.random.default_rng(7)
    loss = None
    for o in outs:
        w = tg.tensor(rng.standard_normal(o.shape), dtype=tg.float64)
        if o.requires_grad:
            loss = (o * w).sum() if loss is None else loss + (o * w).sum()
    if loss is None:
        return outs, None, None, None
    # first order twice: plain (a compiled function runs its generated backward) and with
    # create_graph (it evaluates the joint graph through differentiable eager ops)
    plain = tg.autograd.grad(loss, xs, retain_graph=True, allow_unused=True)
    grads = tg.autograd.grad(loss, xs, create_graph=True, allow_unused=True)
    live = [g for g in grads if g is not None and g.requires_grad]
    grads2 = None
    if live:
        total = live[0].pow(2).sum()
        for g in live[1:]:
            total = total + g.pow(2).sum()
        grads2 = tg.autograd.grad(total, xs, allow_unused=True)
    return outs, plain, grads, grads2


def _eager(fn, arrays, prog, other_sizes=False):
    """Eager's results (``_run``) with the probe watching for kinks; with ``other_sizes``, a
    program that cannot run at these sizes (a reshape to fixed sizes) is left."""
    PROBE.start()
    try:
        return _run(fn, arrays, prog.requires_grad)
    except (RuntimeError, ValueError, IndexError):
        if not other_sizes:
            raise
        assume(False)
    finally:
        PROBE.stop()


def _close(got, want, what):
    if _zeros_for_missing(got, want, what):
        return
    assert (got is None) == (want is None), f"{what}: None vs not None"
    if got is None:
        return
    a, b = _np(got), _np(want)
    assert a.shape == b.shape and a.dtype == b.dtype, \
        f"{what}: {a.shape} {a.dtype} vs {b.shape} {b.dtype}"
    scale = 1.0 + float(np.max(np.abs(b), initial=0.0))
    np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-9 * scale, equal_nan=True,
                               err_msg=what)


@settings(max_examples=MAX_EXAMPLES, deadline=None, database=None,
          derandomize=not os.environ.get("TRACEGRAD_PROPERTY_RANDOM"),
          suppress_health_check=[HealthCheck.function_scoped_fixture,
                                 HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(prog=programs())
def test_random_programs_compile_like_eager(prog, backend):
    """On both tiers (``backend``): compile() without one takes the fixture's."""
    _check_program(prog)


@settings(max_examples=MAX_EXAMPLES // 3, deadline=None, database=None,
          derandomize=not os.environ.get("TRACEGRAD_PROPERTY_RANDOM"),
          suppress_health_check=[HealthCheck.function_scoped_fixture,
                                 HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(prog=programs())
def test_random_programs_compile_like_eager_in_chunks(prog):
    """The same with every fused group of 4 elements or more run in chunks of 2 elements'
    rows on 2 threads, so the chunked path sees every program shape."""
    from tracegrad.codegen import fused
    saved = fused.CHUNK_MIN, fused.CHUNK_ELEMS, fused.THREADS
    fused.CHUNK_MIN, fused.CHUNK_ELEMS, fused.THREADS = 4, 2, 2
    try:
        _check_program(prog)
    finally:
        fused.CHUNK_MIN, fused.CHUNK_ELEMS, fused.THREADS = saved


@settings(max_examples=MAX_EXAMPLES // 4, deadline=None, database=None,
          derandomize=not os.environ.get("TRACEGRAD_PROPERTY_RANDOM"),
          suppress_health_check=[HealthCheck.function_scoped_fixture,
                                 HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(prog=programs())
def test_random_programs_traced_with_symbolic_sizes(prog, backend):
    """``dynamic=True``: every dim of size 2 or more is traced symbolic (or specialised where
    the program needs it as a constant); outputs and gradients are eager's, on both tiers."""
    fn = prog.function()
    compiled = tg.compile(fn, dynamic=True)
    arrays = _values(prog, 0)
    want = _eager(fn, arrays, prog)
    assume(not PROBE.near_kink)
    got = _run(compiled, arrays, prog.requires_grad)
    _assert_like_eager(got, want, "")
    assert compiled.stats["fallbacks"] == 0, compiled.stats
    event("symbolic" if any(v.sym_dims for v in compiled._variants) else "specialised")


def _resized(prog, grow):
    """The program's inputs with its sizes ``a`` and ``b`` grown by ``grow`` where a dim
    reads as one of them unambiguously (not 1 or 2, which the shape pool also uses as
    constants), drawn from the program's seed; None when no dim changes."""
    a, b = prog.sizes
    new = {d: d + grow for d in (a, b) if d > 2 and a != b}
    shapes = [tuple(new.get(d, d) for d in s) for s in prog.in_shapes]
    if shapes == list(prog.in_shapes):
        return None
    rng = np.random.default_rng(prog.seed + 7 * grow)
    return [rng.uniform(-2, 2, s) for s in shapes]


@settings(max_examples=MAX_EXAMPLES // 4, deadline=None, database=None,
          derandomize=not os.environ.get("TRACEGRAD_PROPERTY_RANDOM"),
          suppress_health_check=[HealthCheck.function_scoped_fixture,
                                 HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(prog=programs())
def test_random_programs_at_several_sizes(prog, backend):
    """The same compiled program called at its sizes and at two larger ones (automatic
    dynamic: the second size traces symbolic sizes, checked against the first; the third
    reuses or retraces): every call gives eager's outputs and gradients, on both tiers.
    Programs whose eager run fails at another size (a reshape to fixed sizes) are left."""
    fn = prog.function()
    compiled = tg.compile(fn)
    for k, arrays in enumerate([_values(prog, 0), _resized(prog, 2), _resized(prog, 5)]):
        assume(arrays is not None)
        want = _eager(fn, arrays, prog, other_sizes=True)
        assume(not PROBE.near_kink)
        got = _run(compiled, arrays, prog.requires_grad)
        _assert_like_eager(got, want, f"size {k}: ")
    assert compiled.stats["fallbacks"] == 0, compiled.stats
    event("dynamic" if any(v.sym_dims for v in compiled._variants) else "static")


def _check_program(prog):
    fn = prog.function()
    compiled = tg.compile(fn)
    seen = set()
    for call in range(CALLS):
        arrays = _values(prog, call)
        want = _eager(fn, arrays, prog)
        outcome = tuple(PROBE.outcomes)
        if call == 0:
            assume(not PROBE.near_kink)
        elif PROBE.near_kink:     # a later value set sits on a kink: stop checking here
            break
        assert len(outcome) == prog.n_branches
        before = dict(compiled.stats)
        got = _run(compiled, arrays, prog.requires_grad)
        assert len(got[0]) == len(want[0])
        _assert_like_eager(got, want, f"call {call}: ")
        for n, (a, b) in enumerate(zip(got[0], want[0])):
            assert a.requires_grad == b.requires_grad, f"call {call}: requires_grad of {n}"
        stats = compiled.stats
        if outcome in seen:
            assert stats["cache_hits"] == before["cache_hits"] + 1, (call, stats)
            assert stats["compiles"] == before["compiles"], (call, stats)
        else:
            assert stats["compiles"] == before["compiles"] + 1, (call, stats)
            if call:
                assert "guard failed" in stats["retrace_reasons"][-1], stats
            seen.add(outcome)
        assert stats["compiles"] <= len(seen) + 1 and stats["fallbacks"] == 0, stats
    event(f"{compiled.stats['compiles']} compile(s), {compiled.stats['cache_hits']} cache hit(s)")
    # the forward-only variant: a new signature (grad mode), traced again, same values
    arrays = _values(prog, 0)
    with tg.no_grad():
        want = fn(*[tg.tensor(a, dtype=tg.float64, requires_grad=rg)
                    for a, rg in zip(arrays, prog.requires_grad)])
        n = compiled.stats["compiles"]
        got = compiled(*[tg.tensor(a, dtype=tg.float64, requires_grad=rg)
                         for a, rg in zip(arrays, prog.requires_grad)])
    assert compiled.stats["compiles"] == n + 1
    assert "grad mode" in compiled.stats["retrace_reasons"][-1], compiled.stats
    assert len(got) == len(want)
    for k, (a, b) in enumerate(zip(got, want)):
        assert not a.requires_grad
        _close(a, b, f"no_grad output {k}")



# programs that read values from outside their arguments -----------------------------------------
#
# The same programs, with steps that read a global float, a config object's fields, a user
# module's attribute and a settings module's attribute; the program is compiled from its
# printed source (so the front end sees every read), and between calls the test changes those
# values. A stale result (a value baked at the first trace) fails the comparison with eager.

class _Gain(tg.nn.Module):
    """A user module whose attribute a program reads (``LAYER.gain``)."""

    def __init__(self):
        super().__init__()
        self.gain = 1.0


SETTINGS = [   # per setting: G_SCALE, CFG.scale, CFG.shift, LAYER.gain, SETTINGS_MOD.factor
    (0.5, 1.0, 0.0, 1.0, 2.0),
    (-1.5, 1.0, 0.0, 1.0, 2.0),
    (0.5, 2.0, -1.0, 1.0, 2.0),
    (0.5, 1.0, 0.0, -0.5, 2.0),
    (0.5, 1.0, 0.0, 1.0, 0.25),
]

FREE = {   # name -> (source template, function of (namespace, operand), bound factor)
    "global": ("{a} * G_SCALE", lambda ns, a: a * ns["G_SCALE"]),
    "config": ("{a} * CFG.scale + CFG.shift",
               lambda ns, a: a * ns["CFG"].scale + ns["CFG"].shift),
    "module": ("{a} * LAYER.gain", lambda ns, a: a * ns["LAYER"].gain),
    "settings": ("{a} * SETTINGS_MOD.factor", lambda ns, a: a * ns["SETTINGS_MOD"].factor),
}


def _namespace():
    import types
    mod = types.ModuleType("tracegrad_test_settings")
    mod.factor = 2.0
    return {"tg": tg, "G_SCALE": 0.5, "CFG": types.SimpleNamespace(scale=1.0, shift=0.0),
            "LAYER": _Gain(), "SETTINGS_MOD": mod}


def _apply_setting(ns, k):
    g, scale, shift, gain, factor = SETTINGS[k]
    ns["G_SCALE"] = g
    ns["CFG"].scale, ns["CFG"].shift = scale, shift
    ns["LAYER"].gain = gain
    ns["SETTINGS_MOD"].factor = factor


@st.composite
def programs_reading_outside_values(draw):
    prog = draw(programs())
    ns = _namespace()
    shapes = list(prog.in_shapes) + [s.shape for s in prog.steps]
    bounds = [2.0] * len(prog.in_shapes) + [s.bound for s in prog.steps]
    steps, outputs = list(prog.steps), list(prog.outputs)
    for _ in range(draw(st.integers(1, 3))):
        k = len(shapes)
        i = draw(st.integers(0, k - 1))
        name = draw(st.sampled_from(sorted(FREE)))
        text, f = FREE[name]
        steps.append(Step(k, [f"v{k} = " + text.format(a=f"v{i}")],
                          lambda env, f=f, i=i: f(ns, env[i]), shapes[i], bounds[i] * 2 + 1))
        shapes.append(shapes[i])
        bounds.append(bounds[i] * 2 + 1)
        outputs.append(k)
    out = Program(prog.in_shapes, prog.requires_grad, steps, outputs, prog.seed,
                  prog.n_branches)
    order = draw(st.permutations(range(len(SETTINGS))))
    return out, ns, [0] + [s for s in order if s] + [0]


_SOURCES = itertools.count()


def _compiled_from_source(prog, ns):
    """``prog`` compiled from its printed source, executed in ``ns`` (registered with
    linecache so the front end reads it like a file's)."""
    import linecache
    source = repr(prog) + "\n"
    filename = f"<tracegrad-property-{next(_SOURCES)}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    exec(compile(source, filename, "exec"), ns)
    return tg.compile(ns["program"])


@settings(max_examples=MAX_EXAMPLES // 3, deadline=None, database=None,
          derandomize=not os.environ.get("TRACEGRAD_PROPERTY_RANDOM"),
          suppress_health_check=[HealthCheck.function_scoped_fixture,
                                 HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(case=programs_reading_outside_values())
def test_random_programs_reading_globals_and_attributes_that_change(case):
    prog, ns, order = case
    fn = prog.function()
    compiled = _compiled_from_source(prog, ns)
    seen = set()
    for call, setting in enumerate(order):
        _apply_setting(ns, setting)
        arrays = _values(prog, call % 2)
        want = _eager(fn, arrays, prog)
        if call == 0:
            assume(not PROBE.near_kink)
        elif PROBE.near_kink:
            break
        state = (setting, call % 2, tuple(PROBE.outcomes))
        before = dict(compiled.stats)
        got = _run(compiled, arrays, prog.requires_grad)
        _assert_like_eager(got, want, f"call {call} (setting {setting}): ")
        stats = compiled.stats
        if state in seen:
            assert stats["compiles"] == before["compiles"], (call, stats)
        seen.add(state)
        assert stats["fallbacks"] == 0, stats
    event(f"{compiled.stats['compiles']} compile(s) over {len(order)} calls")


# programs with special constants and zero-size inputs -------------------------------------------
#
# Steps that write inf, -inf, nan, -0.0 and float64's extremes into a program, as Python numbers
# in its ops and as tensors it makes (``full``, ``tensor``, ``*_like``, an empty ``zeros`` to
# ``cat``), over inputs whose values include such numbers too and whose shapes may have a dim of
# size 0. Compiled must equal eager where it matters bit for bit: the shapes, where NaNs and
# infinities land, the sign of every zero of the outputs; finite values to round-off.

SPECIAL_NUMBERS = [math.inf, -math.inf, math.nan, -0.0, 0.0, 1.7976931348623157e308, 5e-324,
                   2.2250738585072014e-308, -1.5]

# name -> source template over an operand ``{a}`` and a number ``{c}``
SPECIAL_STEPS = {
    "mul": "{a} * {c}",
    "add": "{a} + {c}",
    "rsub": "{c} - {a}",
    "div": "{a} / {c}",
    "where": "tg.where({a} > 0, {a}, {c})",
    "masked_fill": "{a}.masked_fill({a} < 0, {c})",
    "full": "{a} + tg.full({shape}, {c}, dtype={a}.dtype)",
    "maximum": "tg.maximum({a}, tg.full_like({a}, {c}))",
    "tensor": "{a} * tg.tensor({row}, dtype={a}.dtype)",
    "zeros_like": "{a} + tg.zeros_like({a})",
    "ones_like": "{a} * tg.ones_like({a})",
    "pow": "{a} ** {c}",
    "neg": "-{a}",
    "tanh": "tg.tanh({a})",
    "exp": "tg.exp({a})",
    "relu": "tg.relu({a})",
    "abs": "tg.abs({a})",
    "softmax": "tg.softmax({a}, dim={d})",
    "float32": "{a}.float()",       # then float32 kernels: literals rounded to float32
    "cat_empty": "tg.cat([{a}, tg.zeros({empty}, dtype={a}.dtype)], dim=0)",
    "sum": "{a}.sum(dim={d})",
    "mean": "{a}.mean(dim={d})",
}


def _special_literal(c):
    return {math.inf: "math.inf", -math.inf: "-math.inf"}.get(c, "math.nan" if c != c else repr(c))


@st.composite
def programs_with_special_values(draw):
    a, b = draw(st.sampled_from([(3, 4), (2, 3)]))
    pool = [(a, b), (0, b), (a, 0), (0,), (b,), (), (2, 0, b), (1, b)]
    n_in = draw(st.integers(1, 2))
    shapes = [draw(st.sampled_from(pool)) for _ in range(n_in)]
    steps = []
    for _ in range(draw(st.integers(1, 6))):
        k = len(shapes)
        i = k - 1 if draw(st.booleans()) else draw(st.integers(0, k - 1))
        s = shapes[i]
        name = draw(st.sampled_from(sorted(SPECIAL_STEPS)))
        c = draw(st.sampled_from(SPECIAL_NUMBERS))
        row = [draw(st.sampled_from(SPECIAL_NUMBERS)) for _ in range(s[-1] if s else 0)]
        d = draw(st.integers(-len(s), len(s) - 1)) if s else None
        if name in ("sum", "mean", "cat_empty", "tensor", "softmax") and not s:
            name = "neg"
        new = s
        if name in ("sum", "mean"):
            new = s[:d % len(s)] + s[d % len(s) + 1:]
        elif name == "cat_empty":
            new = s
        text = SPECIAL_STEPS[name].format(
            a=f"v{i}", c=_special_literal(c), shape=s, d=d, empty=(0,) + tuple(s[1:]),
            row="[" + ", ".join(map(_special_literal, row)) + "]")
        source = f"v{k} = {text}"
        code = compile(text, "<special step>", "eval")
        steps.append(Step(k, [source], lambda env, code=code, i=i: eval(
            code, {"tg": tg, "math": math, f"v{i}": env[i]}), new, math.inf))
        shapes.append(new)
    outputs = [len(shapes) - 1] + [v for v in range(n_in, len(shapes) - 1)
                                   if draw(st.integers(0, 2)) == 0]
    requires_grad = [draw(st.booleans()) for _ in range(n_in)]
    if not any(requires_grad):
        requires_grad[0] = True
    specials = draw(st.lists(st.sampled_from(SPECIAL_NUMBERS), max_size=4))
    prog = Program(shapes[:n_in], requires_grad, steps, outputs,
                   draw(st.integers(0, 2 ** 32 - 1)), 0)
    prog.specials = specials        # written into the inputs' first elements
    return prog


def _special_values(prog, call):
    rng = np.random.default_rng(prog.seed + call)
    arrays = []
    for s in prog.in_shapes:
        v = rng.uniform(-2, 2, s)
        flat = v.reshape(-1)
        n = min(len(prog.specials), flat.size)
        flat[:n] = prog.specials[:n]
        arrays.append(v)
    return arrays


def _same_special(got, want, what, signs):
    """Shapes, dtypes, NaN and infinity positions equal; with ``signs`` the sign of every zero
    too; finite values to float64 round-off."""
    if _zeros_for_missing(got, want, what):
        return
    assert (got is None) == (want is None), f"{what}: None vs not None"
    if got is None:
        return
    a, b = _np(got), _np(want)
    assert (a.shape, a.dtype) == (b.shape, b.dtype), f"{what}: {a.shape} {a.dtype} vs " \
                                                     f"{b.shape} {b.dtype}"
    assert np.array_equal(np.isnan(a), np.isnan(b)), f"{what}: NaNs {a!r} vs {b!r}"
    inf = np.isinf(b)
    assert np.array_equal(np.isinf(a), inf) and np.array_equal(a[inf], b[inf]), \
        f"{what}: infinities {a!r} vs {b!r}"
    fin = np.isfinite(b)
    scale = 1.0 + float(np.max(np.abs(b[fin]), initial=0.0))
    np.testing.assert_allclose(a[fin], b[fin], rtol=1e-9, atol=1e-9 * scale, err_msg=what)
    if signs:
        zero = (a == 0) & (b == 0)
        assert np.array_equal(np.signbit(a[zero]), np.signbit(b[zero])), \
            f"{what}: signs of zeros {a!r} vs {b!r}"


@settings(max_examples=MAX_EXAMPLES // 5, deadline=None, database=None,
          derandomize=not os.environ.get("TRACEGRAD_PROPERTY_RANDOM"),
          suppress_health_check=[HealthCheck.function_scoped_fixture,
                                 HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(prog=programs_with_special_values())
def test_random_programs_with_special_values_and_empty_inputs(prog, backend):
    """On both tiers: two calls (the second from the cache), outputs and gradients of every
    order against eager; the outputs' zeros keep their signs."""
    fn = prog.function()
    compiled = tg.compile(fn)
    with np.errstate(all="ignore"):
        for call in range(2):
            arrays = _special_values(prog, call)
            want = _run(fn, arrays, prog.requires_grad)
            got = _run(compiled, arrays, prog.requires_grad)
            for kind, g, w in zip(("output", "grad", "create_graph grad", "second-order grad"),
                                  got, want):
                assert _both_exist(g, w, kind), f"call {call}: {kind}s exist"
                if g is None or w is None:
                    continue
                for n, (x, y) in enumerate(zip(g or (), w or ())):
                    _same_special(x, y, f"call {call}: {kind} {n}", signs=kind == "output")
    assert compiled.stats["compiles"] == 1 and compiled.stats["fallbacks"] == 0, compiled.stats
    event("zero-size" if any(0 in s for s in prog.in_shapes) else "sized")


# several dynamic dims, changing one at a time ---------------------------------------------------

def _resized_apart(prog, grow_a, grow_b):
    """The program's inputs with ``a`` grown by ``grow_a`` and ``b`` by ``grow_b``, each
    where a dim reads as it unambiguously; None when a and b cannot be told apart."""
    a, b = prog.sizes
    if a == b or min(a, b) <= 2:
        return None
    new = {a: a + grow_a, b: b + grow_b}
    shapes = [tuple(new.get(d, d) for d in s) for s in prog.in_shapes]
    rng = np.random.default_rng(prog.seed + 11 * grow_a + grow_b)
    return [rng.uniform(-2, 2, s) for s in shapes]


@settings(max_examples=MAX_EXAMPLES // 6, deadline=None, database=None,
          derandomize=not os.environ.get("TRACEGRAD_PROPERTY_RANDOM"),
          suppress_health_check=[HealthCheck.function_scoped_fixture,
                                 HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(prog=programs(), dynamic=st.sampled_from([None, True]))
def test_random_programs_with_two_dynamic_sizes_changing_apart(prog, dynamic, backend):
    """``a`` and ``b`` (dims of one input or of several) change one at a time, then together:
    every call gives eager's results and the function never falls back to eager."""
    fn = prog.function()
    compiled = tg.compile(fn, dynamic=dynamic)
    for grow in [(0, 0), (2, 0), (2, 3), (5, 1), (1, 4)]:
        arrays = _resized_apart(prog, *grow)
        assume(arrays is not None)
        want = _eager(fn, arrays, prog, other_sizes=True)
        assume(not PROBE.near_kink)
        _assert_like_eager(_run(compiled, arrays, prog.requires_grad), want, f"sizes {grow}: ")
    assert compiled.stats["fallbacks"] == 0, compiled.explain()
