"""Impure calls in a compiled function: found, and made again before a variant is reused.

Impure calls (``random.randint``, ``time.time``, ``os.environ[...]``, ``numpy.random``,
``secrets``, ``uuid``: ``transform.IMPURE``) written in the compiled function's own source
are routed by the front end through a helper that records each call (site, arguments,
result) on the trace. Before a variant is reused, ``Draws`` makes its recorded calls again,
lazily and in order, with the recorded arguments (draws are shared between the variants
tried in one call), and the variant fits only when every result is the same. The states of
``random`` and ``numpy.random`` are saved before the first draw: a retrace (or an eager
fallback) starts from them, so it draws what eager would, and a chosen variant that made
fewer calls than were drawn has them rewound and redrawn, so the generators end where eager
leaves them. A call whose result never repeats (``time.time()`` feeding a number) therefore
retraces every call until ``max_variants``, then the function runs eagerly with a warning
naming the call: slow, never stale. Sources without state (the clock, the environment) are
read once more when a call retraces. A recorded call whose arguments or result are not
plain, or that changed an argument in place (``random.shuffle``), cannot be checked
(``prepare`` names it): the function runs eagerly from then on, after one warning naming it.

Impure calls the front end cannot route (in a helper reached by name, in a function
without source, a function of an impure module passed as a value) keep the conservative
rule: ``impure_calls`` lists them and the function runs eagerly, after one warning naming
the call. Not covered: functions reached only through objects (``self.helper()`` of a
plain object, a function stored in a list), and libraries.
"""
import dis
import os
import random
import sys
import types
from collections import Counter

import numpy as np

from tracegrad.transform import impure_name, instrument

from .values import _NOT_PLAIN, _thaw, freeze
from .user_code import user_functions


def impure_calls(fn, module=None):
    """``["random.randint at model.py:12", ...]``: the reads of impure modules in the code
    of ``fn`` and of the user's functions it reaches (``user_functions``) that the front end
    does not route through its helper (those are re-evaluated each call, see ``Draws``)."""
    found = []
    target = getattr(fn, "__func__", fn)
    for f in user_functions(fn, module):
        calls = _impure_in(f)
        if f is target and calls:
            instrumented = instrument(f)
            rewritten = Counter(str(s) for s in getattr(instrumented, "__tracegrad_sites__", ()))
            calls = list((Counter(calls) - rewritten).elements())
        found += calls
    return sorted(set(found))


def _impure_in(fn):
    """The impure reads in one function's code (nested code included), one per read."""
    code = getattr(fn, "__code__", None)
    if code is None:
        return []
    scope, found, stack = getattr(fn, "__globals__", {}), [], [code]
    cells = {}          # the closure's names, and what the code imports itself
    for name, cell in zip(code.co_freevars, fn.__closure__ or ()):
        try:
            cells[name] = cell.cell_contents
        except ValueError:
            pass
    while stack:
        c = stack.pop()
        stack.extend(k for k in c.co_consts if hasattr(k, "co_names"))
        chain, line, imported = [], c.co_firstlineno, None
        for ins in dis.get_instructions(c):
            line = ins.positions.lineno if ins.positions and ins.positions.lineno else line
            op = ins.opname
            if op == "IMPORT_NAME":         # import random (inside the function)
                imported = sys.modules.get(ins.argval.partition(".")[0])
                chain = []
                continue
            if op == "IMPORT_FROM" and isinstance(imported, types.ModuleType):
                imported = getattr(imported, ins.argval, None)
                continue
            if op.startswith("STORE") and imported is not None:
                cells[ins.argval] = imported
                imported = None
                continue
            if op == "LOAD_GLOBAL":
                chain = [(ins.argval, scope.get(ins.argval))]
            elif op in ("LOAD_FAST", "LOAD_DEREF", "LOAD_CLOSURE") and ins.argval in cells:
                chain = [(ins.argval, cells[ins.argval])]
            elif op in ("LOAD_ATTR", "LOAD_METHOD") and chain:
                owner = chain[-1][1]
                chain.append((ins.argval, getattr(owner, ins.argval, None)
                              if isinstance(owner, types.ModuleType) else None))
            else:
                chain = []
                continue
            what = impure_name(chain)
            if what:
                found.append(f"{what} at {os.path.basename(c.co_filename)}:{line}")
                chain = []
    return found


# re-evaluating impure calls ------------------------------------------------------------------

def prepare(records):
    """Give each recorded call (``transform.ImpureCall``) its ``key`` (site and frozen
    arguments) and ``frozen`` result; return the names of those that cannot be replayed:
    arguments or result not plain, or an argument changed in place."""
    bad = []
    for r in records:
        args = freeze((tuple(r.args), r.kwargs))
        r.key = (r.site, args)
        r.frozen = freeze(r.result)
        if r.mutated or args is _NOT_PLAIN or r.frozen is _NOT_PLAIN:
            bad.append(str(r.site))
    return sorted(set(bad))


def _stateful(fn):
    """``(get_state, set_state)`` of the generator ``fn`` draws from, or None (the clock,
    the environment: nothing to rewind)."""
    owner = getattr(fn, "__self__", None)
    if owner is not None and owner is getattr(random, "_inst", None):
        return "random", random.getstate, random.setstate
    if getattr(fn, "__module__", None) == "random" and not isinstance(owner, random.Random):
        return "random", random.getstate, random.setstate
    if owner is not None and owner is getattr(np.random.mtrand, "_rand", None):
        return "numpy", np.random.get_state, np.random.set_state
    if isinstance(owner, (random.Random, np.random.RandomState)):      # a generator object
        return ("object", id(owner)), owner.getstate if isinstance(owner, random.Random) \
            else owner.get_state, owner.setstate if isinstance(owner, random.Random) \
            else owner.set_state
    if isinstance(owner, np.random.Generator):
        bits = owner.bit_generator
        return ("object", id(owner)), (lambda: bits.state), \
            (lambda state: setattr(bits, "state", state))
    return None


_RAISED = object()


class Draws:
    """One call's fresh results of the impure calls, drawn lazily and shared by the variants
    tried for the call. ``fit(records)`` draws the calls a variant recorded (with their
    recorded arguments), in order, and says why they differ, or None; ``settle`` leaves the
    generators as if exactly the chosen variant's calls had been made (as eager would);
    ``rewind`` puts them back to where they were before the first draw (before a retrace,
    so the trace draws what eager would)."""
    __slots__ = ("made", "saved")

    def __init__(self):
        self.made, self.saved = [], {}

    def _draw(self, r):
        fn = r.site.resolve()
        state = _stateful(fn)
        if state is not None and state[0] not in self.saved:
            self.saved[state[0]] = (state[2], state[1]())
        try:
            return freeze(fn(*r.args, **r.kwargs))
        except Exception:       # noqa: BLE001 - it raises now: the trace will show it
            return _RAISED

    def fit(self, records):
        made = self.made
        for k, r in enumerate(records):
            if k < len(made) and made[k][0] != r.key:
                self.rewind()           # another call here: draw along these calls afresh
                return self.fit(records)
            if k == len(made):
                made.append((r.key, self._draw(r)))
            got = made[k][1]
            if type(got) is not type(r.frozen) or got != r.frozen:
                now = "raises" if got is _RAISED else f"returned {_thaw(got)!r}"
                return f"{r.call_text()} at {r.site.where} {now}, not {r.result!r} as when traced"
        return None

    def settle(self, records):
        if len(self.made) <= len(records) or not self.saved:
            return
        for set_state, state in self.saved.values():
            set_state(state)
        for r in records:
            fn = r.site.resolve()
            if _stateful(fn) is not None:
                fn(*r.args, **r.kwargs)

    def rewind(self):
        for set_state, state in self.saved.values():
            set_state(state)
        self.made, self.saved = [], {}

