"""What the sweeps over PyTorch's databases share (``opinfo_sweep``, ``moduleinfo_sweep``,
``optiminfo_sweep``): the pytest parameters of (entry, stage), with the KNOWN failures as
xfail, an error's one-line outcome, and the counts their ``main`` prints."""
import sys

import pytest


def params(entries, stages, known):
    """One ``pytest.param(name, stage)`` per entry and stage, xfail (not strict) with its
    reason where ``known`` has one."""
    out = []
    for name in entries:
        for stage in stages:
            reason = known.get((name, stage))
            marks = [pytest.mark.xfail(reason=reason, strict=False)] if reason else []
            out.append(pytest.param(name, stage, marks=marks, id=f"{name}-{stage}"))
    return out


def failure(error, width=200):
    """``'fail: <type>: <first line>'`` for an entry whose check raised ``error``."""
    first_line = (str(error).splitlines() or [""])[0]
    return f"fail: {type(error).__name__}: {first_line[:width]}"


def report(table, stages, outcome, known, kinds):
    """Print, per stage, how many entries of ``table`` (name -> (info, cls)) have each
    outcome of ``kinds``, and the failing ones that ``known`` does not list (``-v``: every
    failure's reason). Entries named on the command line narrow the table."""
    only = [a for a in sys.argv[1:] if not a.startswith("-")]
    for stage in stages:
        outcomes = {name: outcome(info, cls, stage) for name, (info, cls) in table.items()
                    if not only or name in only}
        failing = sorted(n for n, o in outcomes.items() if o.startswith("fail"))
        counts = {kind: sum(o.startswith(kind) for o in outcomes.values()) for kind in kinds}
        print(f"\n{stage}: " + ", ".join(f"{k} {v}" for k, v in counts.items()))
        untriaged = [name for name in failing if (name, stage) not in known]
        print(f"  failing, not in KNOWN ({len(untriaged)}): " + ", ".join(untriaged))
        if "-v" in sys.argv:
            for name in failing:
                print(f"    {name}: {outcomes[name]}")
