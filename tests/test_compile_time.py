"""Compile time grows linearly with the program: counted work, never timed.

An ``nn.LSTMCell`` unrolled over T steps is compiled at two lengths; the work the
compiler does that used to grow with the square of the program (the fuse pass's cycle
checks walking every earlier value, a parse of every generated statement) is counted
and must grow like the program. The pieces that make it so (the unit graph of
``passes/reach.py``, the canonical statement text of ``codegen/python.py``, the namer's
suffixes) are checked against the plain computation they replace.
"""
import ast
import random

import pytest

import tracegrad as tg
from tracegrad.codegen import python as py
from tracegrad.ir import Namer
from tracegrad.passes import pipeline
from tracegrad.passes.fuse import fuse
from tracegrad.passes.reach import UnitGraph


@pytest.fixture(autouse=True)
def _check_statements(monkeypatch):
    """Every statement made canonical is also parsed on its own, and must agree."""
    monkeypatch.setattr(py, "CHECK", True)


def _compile_unrolled(steps, monkeypatch):
    """Compile (and run once) an LSTM cell unrolled ``steps`` times; returns the counts:
    traced ops, nodes fused, units the fuse pass's cycle checks visited, statements
    parsed and statements emitted."""
    counts = {"fused": 0, "visits": 0}

    def counting_fuse(graph):
        counts["fused"] += len(graph.nodes)
        return fuse(graph, counts)
    monkeypatch.setattr(pipeline, "fuse", counting_fuse)
    monkeypatch.setattr(py, "_shapes", {})      # count this module's parses from nothing
    statements = []
    canonical = py.canonical
    monkeypatch.setattr(py, "canonical", lambda s: statements.append(s) or canonical(s))
    parses = py.parses
    tg.manual_seed(0)
    cell = tg.nn.LSTMCell(3, 4)

    def unrolled(xs, h, c):
        for t in range(steps):
            h, c = cell(xs[t], (h, c))
        return h.sum()
    f = tg.compile(unrolled)
    f(tg.randn(steps, 2, 3), tg.zeros(2, 4), tg.zeros(2, 4)).backward()
    counts["ops"] = len(f._variants[0].joint.nodes)
    counts["parses"] = py.parses - parses
    counts["statements"] = len(statements)
    return counts


def test_work_grows_linearly_with_the_unrolled_length(monkeypatch):
    short = _compile_unrolled(8, monkeypatch)
    long = _compile_unrolled(32, monkeypatch)
    assert long["fused"] > 3.5 * short["fused"]         # the program did grow 4x
    # the cycle checks visit a bounded number of units per node fused (a walk of every
    # earlier value, as before, made this ratio grow with T: about 4x here)
    per_node = [c["visits"] / c["fused"] for c in (short, long)]
    assert per_node[1] <= 1.5 * per_node[0] + 0.5, per_node
    # one parse per distinct statement shape: as many for 32 steps as for 8, though
    # there are 4x the statements (a parse of every statement made parses == statements)
    assert long["statements"] > 3.5 * short["statements"]
    assert long["parses"] <= short["parses"] + 5, (short, long)
    assert long["parses"] < long["statements"] / 10


# the unit graph against plain reachability ---------------------------------------------------

def _reaches(preds, starts, targets):
    """Plain search: whether a unit in ``starts`` is in ``targets`` or depends on one."""
    seen, stack = set(), list(starts)
    while stack:
        u = stack.pop()
        if u in targets:
            return True
        if u not in seen:
            seen.add(u)
            stack.extend(preds[u])
    return False


def _check_levels(g):
    for u, ps in g.preds.items():
        for p in ps:
            assert g.level[p] < g.level[u]
            assert u in g.succs[p]


@pytest.mark.parametrize("seed", range(20))
def test_unit_graph_answers_as_a_full_search_does(seed):
    """Random units built as fusion builds them (new units, units that read more, merges
    of two units with no path between them outside), every question asked both ways."""
    rng = random.Random(seed)
    g, preds, next_id = UnitGraph(), {}, 0
    for _ in range(120):
        units = list(preds)
        op = rng.random()
        if op < 0.5 or len(units) < 3:
            reads = set(rng.sample(units, min(len(units), rng.randint(0, 3))))
            g.add(next_id, reads)
            preds[next_id] = set(reads)
            next_id += 1
        elif op < 0.75:         # a unit reads more: only what does not depend on it
            u = rng.choice(units)
            reads = {p for p in rng.sample(units, 3) if not _reaches(preds, {p}, {u})}
            g.extend(u, reads)
            preds[u] |= reads - {u}
        else:                   # a merge of a unit with one it reads directly and only so
            keep = rng.choice(units)
            if not preds[keep]:
                continue
            gone = rng.choice(sorted(preds[keep]))
            outside = (preds[keep] | preds[gone]) - {keep, gone}
            if _reaches(preds, outside, {keep, gone}):
                continue
            g.merge(keep, gone)
            preds[keep] = outside
            for u in preds:
                if gone in preds[u]:
                    preds[u] = (preds[u] - {gone}) | ({keep} if u != keep else set())
            del preds[gone]
        _check_levels(g)
        units = list(preds)
        for _ in range(5):
            starts = set(rng.sample(units, min(len(units), 2)))
            targets = set(rng.sample(units, 1))
            assert g.depends(starts, targets) == _reaches(preds, starts, targets)


# the canonical statement text against parsing each statement ---------------------------------

STATEMENTS = [
    "buf0, buf1, = ws.forward_fused0[0]",
    "a, = f(x)",
    "t9 = np.add(t6, t1, out=buf0)",
    "t3 = np.where(t2,t3 ,0)",
    "y = (x)*(2.50) + 1E-5",
    "z = x[:,None] * -1",
    "z = x[::2, ..., 0x1F]",
    "s = {'a': 1, \"b\": [1,2,]}",
    "s = f'{x!r:>{w}}' + 'a{b}c'",
    "if not (bool(d) is not True):\n    raise GuardFailure(3)",
    "if t.tolist() != [1.0, -np.inf, np.nan]:\n    raise GuardFailure(0)",
    "out = P.index.impl(np, x, spec=(None, ('s', 0, 2, None)), dims={})",
    "α = β_1 + _Q",
    "del a, b",
    "return (a,)",
    "q = lambda v: v if v is None else not v",
    "u = a and b or c in d",
    "k = 1_000 + 3j + .5 + 7.",
    "x = np.float32(1e+300) ** 2",
    "w = b'x' + rb'\\d' + u'\\'quoted\\''",
]


@pytest.mark.parametrize("source", STATEMENTS)
def test_canonical_text_is_what_a_parse_gives(source, monkeypatch):
    monkeypatch.setattr(py, "_shapes", {})
    want = ast.unparse(ast.parse(source).body[0])
    assert py.canonical(source) == want
    assert py.canonical(source) == want         # again, from the kept shape


def test_statements_of_one_shape_are_parsed_once(monkeypatch):
    monkeypatch.setattr(py, "_shapes", {})
    parses = py.parses
    got = [py.stmt(f"t{i} = np.multiply(t{i - 1}, w_{i}, out=buf{i % 3})")
           for i in range(1, 200)]
    assert got[41] == "t42 = np.multiply(t41, w_42, out=buf0)"
    assert py.parses - parses == 1


def test_namer_suffixes_are_the_first_free_ones():
    """The namer resumes its search per base; the names are those a search from the start
    gives."""
    rng = random.Random(0)
    taken = {"c_2", "h_1_1", "x"}
    namer, used = Namer(taken=set(taken)), set(taken)
    for _ in range(300):
        hint = rng.choice(["c", "h", "h_1", "c_1", "x", "d_h"])
        name, i = hint, 1
        while name in used:
            name, i = f"{hint}_{i}", i + 1
        used.add(name)
        assert namer.fresh(hint) == name
