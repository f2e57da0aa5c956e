"""The pass pipeline, in order, as a script.

``forward_only`` serves calls that need no gradient (``no_grad``,
``inference_mode``, nothing requires grad); ``forward_backward`` derives the
backward and splits the joint graph. ``dump(stage, graph)``, when given,
sees the graph after each pass (``TRACEGRAD_DUMP`` writes them out).
"""
import os

from ..ir import verify

VERIFY = False      # tests switch this on: verify(graph) after every pass
from .autodiff import autodiff
from .cse import cse
from .dce import dce
from .fuse import fuse
from .memplan import memplan
from .partition import partition
from .simplify import simplify
from .stack_steps import stack_steps
from .sizes import sizes


def optimize(graph, dump=None, check=None):
    check = VERIFY if check is None else check
    stages = [("simplify", simplify),              # identities, constant folding
              ("cse", cse),                        # one node per distinct computation
              ("dce", dce),                        # drop what no output needs
              ("stack", stack_steps)]              # many small GEMMs summed: one GEMM
    while stages:
        stage, run = stages.pop(0)
        before, graph = graph, run(graph)
        if stage == "stack" and graph is not before:
            stages += [("cse", cse),               # the stacked steps shared
                       ("dce", dce)]               # the per-step terms dropped
        if check:
            verify(graph)
        if dump:
            dump(stage, graph)
    return graph


def schedule(graph, name, dump=None, check=None):
    """A graph ready for codegen: fused groups and, for them, a memory plan.
    ``TRACEGRAD_FUSE=0`` leaves every node a statement of its own (to compare)."""
    check = VERIFY if check is None else check
    if os.environ.get("TRACEGRAD_FUSE", "1") == "0":
        return graph
    for stage, run in (("sizes", sizes),           # symbolic scalars as 0-d values
                       ("fuse", fuse),             # elementwise chains and reductions as groups
                       ("memplan", memplan)):      # where group outputs live; buffer reuse
        graph = run(graph)
        if check:
            verify(graph)
        if dump:
            dump(f"{name}-{stage}", graph)
    return graph


def forward_only(graph, dump=None, check=None):
    return schedule(optimize(graph, dump, check), "forward", dump, check)


def forward_backward(graph, wrt, seeds, dump=None, check=None, written=(), names=None):
    """``(forward, backward, joint, grad_index, hints)``: see ``autodiff`` and ``partition``;
    ``written``: positions of inputs the forward writes in place (saving them costs);
    ``names`` and ``hints``: name hints for values, given and found (see ``autodiff``)."""
    check = VERIFY if check is None else check
    # reverse mode with the primitives' VJP rules
    joint, grad_index, hints = autodiff(graph, wrt, seeds, names)
    if check:
        verify(joint)
    if dump:
        dump("autodiff", joint)
    joint = optimize(joint, dump, check)
    # a forward that returns what the backward needs, and that backward
    forward, backward, _ = partition(joint, len(graph.inputs), len(graph.outputs), written)
    if check:
        verify(forward)
        verify(backward)
    if dump:
        dump("forward", forward)
        dump("backward", backward)
    forward = schedule(forward, "forward", dump, check)
    backward = schedule(backward, "backward", dump, check)
    return forward, backward, joint, grad_index, hints
