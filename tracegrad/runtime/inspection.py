"""What a compiled function made, in words: its code, kernels and graphs, and ``explain()``.

``CompiledFunction`` takes these from ``Inspection``; they read the variant last run
(``_last``), every variant (``_variants``) and ``stats``.
"""
from .signatures import _fmt_meta, _mode_name, _tensor_metas


class Inspection:
    """The inspection properties and ``explain()`` of a compiled function."""

    def _latest(self):
        if self._last is None:
            raise RuntimeError(f"compile: {self._label} has not been called yet; call it once "
                               "to trace and compile it")
        return self._last

    @property
    def code(self):
        """The generated forward and backward source of the variant last run."""
        return self._latest().code

    @property
    def kernels(self):
        """The fused kernels of the variant last run, as kernel IR (printing shows it),
        each marked with the tier it runs on."""
        return KernelList(self._latest())

    @property
    def graph(self):
        """The IR of the variant last run, forward then backward, as text."""
        return self._latest().graph_text()

    @property
    def graph_ir(self):
        """The IR graphs of the variant last run: ``[("forward", g), ("backward", g)]``."""
        v = self._latest()
        return [("forward", v.forward_graph)] + (
            [("backward", v.backward_graph)] if v.backward_graph is not None else [])

    def explain(self):
        """What was compiled, what hit the cache, and why it retraced, in words."""
        s = self.stats
        lines = [f"{self._label}: compiled {s['compiles']} time(s) "
                 f"({s['compile_seconds'] * 1000:.1f} ms in all), {s['cache_hits']} cache "
                 f"hit(s), {s['fallbacks']} eager fallback call(s)."]
        for i, v in enumerate(self._variants):
            sig, grad, inference = v.signature
            mode = _mode_name(grad, inference)
            metas = _tensor_metas(sig)
            if v.sym_dims:      # a dynamic variant: its shapes in symbols (x: f32[s0, 784])
                ins = v.traced_graph.inputs
                metas = [("T", ins[k].aval.shape) + m[2:] for k, m in enumerate(metas)]
            shapes = ", ".join(f"{p}: {_fmt_meta(m)}" for p, m in zip(v.paths, metas))
            lines.append(f"  variant {i} ({mode}): {shapes or 'no tensor arguments'}")
            if metas:
                lines.append("    " + _dims_words(v))
            if v.captured:
                lines.append(f"    reads {len(v.captured)} captured tensor(s): "
                             + ", ".join(src[0] for src in v.sources))
            for gd in list(v.free) + list(v.impure) + list(v.guards):
                lines.append(f"    guard: {gd.describe()}")
            for what, _, _, store in v.after:
                lines.append(f"    after each run, replays: {what}" if store else
                             f"    after each run, makes the call it made when traced: {what}")
            if v.backward_graph is not None:
                from tracegrad.passes.partition import saved_and_recomputed
                saved, recomputed = saved_and_recomputed(v.forward_graph, v.backward_graph,
                                                         v.n_residuals, v.namer)
                nbytes = sum(entry[2] for entry in saved)
                extra = sum(entry[2] for entry in saved if not entry[3])
                lines.append(f"    saves {v.n_residuals} value(s) for backward ({nbytes} bytes, "
                             f"{extra} beyond the inputs)"
                             + (", named as in .graph and .code:" if saved else ""))
                for name, type_, size, is_input in saved:
                    lines.append(f"      {name}: {type_}, {size} bytes"
                                 + (" (an input)" if is_input else ""))
                if recomputed:      # the first 20 names say enough
                    more = f", ... ({len(recomputed) - 20} more)" if len(recomputed) > 20 else ""
                    lines.append(f"    backward recomputes {len(recomputed)} value(s) from "
                                 "them: " + ", ".join(recomputed[:20]) + more)
            groups = [g for graph in (v.forward_graph, v.backward_graph) if graph is not None
                      for g in graph.groups]
            if groups:
                ops = sum(len(g.nodes) for g in groups)
                lines.append(f"    {len(groups)} fused group(s) of {ops} ops; "
                             f"{v.workspace_bytes} bytes of buffers kept between calls")
                lines.append(f"    kernels: {_tier_words(v, self.backend)}")
            lines += [f"    {line}" for line in _graph_words(v)]
        for r in s["retrace_reasons"]:
            lines.append(f"  retraced because {r}")
        for r in s["eager_runs"]:
            lines.append(f"  one call ran eagerly part way: {r}")
        if self._eager:
            lines.append(f"  now running eagerly ({self._eager_reason})")
        return "\n".join(lines)


def _graph_words(v):
    """How a CUDA variant's forward and backward run: replaying a CUDA graph, or not and why."""
    lines = []
    for part, fn, off in (("forward", v.forward, getattr(v, "graph_off", None)),
                          ("backward", v.backward, getattr(v, "backward_graph_off", None))):
        if fn is None or not hasattr(v, "on_device"):      # not a CUDA variant
            continue
        off = off or getattr(fn, "off", None)
        if off is not None:
            lines.append(f"{part}: runs without a CUDA graph: {off}")
        elif hasattr(fn, "replays"):
            lines.append(f"{part}: replays a CUDA graph ({fn.replays} replay(s) so far, "
                         f"{len(fn.slots)} recording(s) kept; {fn.held} call(s) ran without "
                         f"one while callers held every recording's lent results)")
    return lines


class KernelList(list):
    """A variant's kernels (``kernel.Kernel``); ``str`` prints each one's IR and tier."""

    def __init__(self, variant):
        super().__init__(variant.kernel_ir)
        self.variant = variant

    def __str__(self):
        v = self.variant
        skipped = v.cuda_skipped if v.device == "cuda" else v.c_skipped
        return "\n".join(f"{k}\n  tier: {_tier_of(v, k.name)}"
                         + (f" ({skipped[k.name]})" if k.name in skipped else "")
                         for k in self)

    __repr__ = __str__


def _tier_of(v, name):
    if name in v.cuda_kernels:
        return "cuda"
    if v.device == "cuda":
        return "numpy (CuPy's calls)"
    return "c" if name in v.c_kernels else "numpy"


def _tier_words(v, backend):
    n = len(v.kernel_ir)
    if v.device == "cuda":
        kept = len(v.cuda_kernels)
        return (f"{kept} of {n} on the CUDA tier" + (f", {n - kept} as CuPy calls"
                                                      if kept < n else ""))
    if v.tier == "c":
        kept = len(v.c_kernels)
        return (f"{kept} of {n} on the C tier (built in {v.c_seconds:.2f} s)"
                + (f", {n - kept} on NumPy" if kept < n else ""))
    if backend == "numpy":
        return f"{n} on the NumPy tier (backend='numpy')"
    return f"{n} on the NumPy tier" + (" (the C build is under way)"
                                      if getattr(v, "c_thread", None) is not None
                                      and v.c_thread.is_alive() else "")


def _dims_words(v):
    """Which dims a variant keeps static and which dynamic, in words."""
    if not v.sym_dims:
        return "static in every dim (specialised to these sizes)"
    dyn = v.sizes.dims(lambda name, d: f"dim {d} of {name}")
    checked = "" if v.sizes.verified else " (so far for these sizes only: not yet checked " \
                                             "against a trace at another size)"
    return "dynamic: " + "; ".join(f"{s} = {', '.join(w)}" for s, w in dyn.items()) \
        + "; every other dim static" + checked
