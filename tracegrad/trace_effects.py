"""What a trace records besides its graph, as the ``Tracer``'s methods (``Effects``).

- ``abandon``: the trace stops recording part way and the call goes on eagerly (a store
  the graph cannot hold, an op whose size depends on data, an optimizer's first step);
- ``grad_written``: a ``.grad`` the call sets, which the variant sets after each run;
- ``scalar_input``: a number read afresh at every call (an optimizer's learning rate);
- ``baked``: a plain value the trace bakes in, checked before each reuse;
- ``replay_after``/``replay_store``: Python calls (a scheduler's step, a store to outside
  state) that the variant makes again after each run, with that run's tensors.
"""
import numpy as np

from . import _hooks
from .ir import Value
from .ops.core import Aval, op_error, user_frame
from .tensor import Tensor


class UnsupportedError(RuntimeError):
    """A construct that ``tracegrad.compile`` cannot record (names the user's line).

    Defined here, below ``trace``, because the effects raise it too; ``trace``
    re-exports it beside the ``Tracer``."""


def user_line():
    """``file:line`` of the innermost frame outside tracegrad."""
    f = user_frame()
    return f"{f.f_code.co_filename}:{f.f_lineno}" if f is not None else ""


class Effects:
    """The ``Tracer``'s methods for effects beyond the graph (see the module docstring);
    the state they keep is set up in ``Tracer.__init__``."""

    def abandon(self, reason, for_good=True):
        """Stop recording: the rest of the call runs eagerly, for real. What the trace run did
        so far is the eager run's own work (every op computed its real value), so nothing is
        undone, and the call ends as an eager call would. ``for_good``: later calls run
        eagerly too; otherwise they trace again (an optimizer's first step makes its state)."""
        if for_good and self.fullgraph:     # compile(fullgraph=True): the user's error
            self.unsupported_because(reason)
        if self.abandoned is None:
            self.abandoned = (reason, for_good)
        self.run_after()
        state = _hooks.state
        if state.tracer is self:    # still recording: eager from here, with this thread's
            if self._below_own:     # hooks as they were (or every thread's, inherited: a
                state.bind_hook = self._below       # forward-AD level opened from here on)
            else:
                state.__dict__.pop("bind_hook", None)
            state.tracer = None

    def module_called(self, module):
        """``module(...)`` inside the trace: its state (mode, settings, children, hooks) is
        guarded with the variant (``runtime.guards.modules``). A forward hook or pre-hook of
        the user's runs Python at every call (feature capture appends to a list), which a
        graph cannot repeat, so the call goes on eagerly from here."""
        if id(module) in self.modules:
            return
        self.modules[id(module)] = module
        for kind in ("_forward_pre_hooks", "_forward_hooks"):
            for entry in getattr(module, kind, {}).values():
                hook = entry[0]
                if not getattr(hook, "__module__", "").startswith("tracegrad."):
                    name = getattr(hook, "__qualname__", type(hook).__name__)
                    self.abandon(f"calls a {type(module).__name__} with the forward "
                                 f"{'pre-' if kind == '_forward_pre_hooks' else ''}hook "
                                 f"{name} at {user_line()}")
                    return

    def hook_registered(self):
        """A gradient hook registered on a tensor or a node: a compiled backward runs no
        Python hook, and a variant would not register it again, so the call goes on eagerly
        from here and the hook joins the eager graph, as it does without compile."""
        self.abandon(f"registers a gradient hook at {user_line()}")

    def grad_written(self, t, reads=False):
        """``t.grad`` is about to be set (``reads``: from the one it holds, by accumulation):
        the variant sets it after every run, and checks first that it starts from the same
        ``.grad`` where the trace read the old one."""
        if id(t) not in self.grads and (id(t) not in self.env or id(t) in self.external):
            self.grads[id(t)] = (t, t._grad)
            if reads:
                self.grad_reads.add(id(t))

    def scalar_input(self, get, name):
        """The number ``get()`` returns (an optimizer's learning rate, say) as a 0-d float64
        tensor that the variant reads afresh at every call, instead of a constant."""
        from .dtypes import float64
        t = Tensor._make(np.array(float(get()), np.float64))
        v = Value(Aval((), float64), name)
        self.captured.append((t, v))
        self.external.add(id(t))
        self.bind_value(t, v)
        self.scalars.append((t, get))
        self.hints[id(t)] = (name, None)
        return t

    def baked(self, what, store, key, test=None):
        """``store[key]``, a plain value the trace bakes in: the variant checks it each call.
        With ``test``, ``test(store[key])`` is what is baked and checked (a branch)."""
        value = store[key] if test is None else test(store[key])
        self.value_guards.append((what, store, key, value, user_line(), test))
        return value

    def replay_after(self, what, fn):
        """``fn()`` (pure Python state, e.g. a scheduler's step) is made by the variant after
        each of its runs, this call's included."""
        self.after.append((what, fn, (), False))

    def replay_store(self, what, fn, args, keys=()):
        """A store to outside state that the trace run has just made (``stores.py``): the
        variant makes it again after each later run, ``fn(*args)`` with that run's tensors
        in place of this run's. ``keys``: the state it writes, which the graph never reads."""
        self.replayed_keys.update(keys)
        self.after.append((what, fn, [("tensor", a) if isinstance(a, Tensor) else ("value", a)
                                      for a in args], True))

    def run_after(self):
        """Make the calls ``replay_after`` recorded and not yet made, once: the call goes on
        (or ends) without a variant, which would have made them."""
        pending = [fn for _, fn, _, done in self.after if not done]
        self.after = [entry for entry in self.after if entry[3]]
        with _hooks.suspended(bind_hook=self._below, tracer=None):
            for fn in pending:
                fn()

    def unsupported_because(self, reason):
        raise op_error("compile", f"the function {reason}, which a compiled graph cannot "
                                  "hold, and fullgraph=True asks for one graph. Move it out "
                                  "of the compiled function, or compile without fullgraph "
                                  "to run such calls eagerly.", UnsupportedError)

    def unreplayable_store(self, results):
        """Why a store the trace run made cannot be made by a variant, or None: a tensor that
        needs a gradient and is not among ``results`` (the result's tensors). A variant's
        copy of it would hang from no graph the user's backward reaches (its ``retain_grad``,
        its hooks, a backward from it), so the call runs eagerly, this one included."""
        returned = {id(self.value_of(t)) for t in results}
        for what, _, specs, _ in self.after:
            for kind, a in specs:
                if (kind == "tensor" and a._requires_grad and id(a) not in self.external
                        and id(self.value_of(a)) not in returned):
                    return (f"writes to {what} a tensor that needs a gradient and is not one "
                            "of its results")
        return None

    def _replays(self, outputs, n_results):
        """``after`` with each tensor a store wrote named as the variant finds it again:
        ("result", k), ("input", where) or ("output", k), a new output appended to
        ``outputs`` (``unreplayable_store`` has ruled out one that needs a gradient)."""
        after = []
        for what, fn, specs, done in self.after:
            resolved = []
            for kind, a in specs:
                if kind == "tensor":
                    if id(a) in self.external:
                        kind, a = "input", self._where(a)
                    else:
                        v = self.value_of(a)
                        k = next((k for k in range(n_results) if outputs[k] is v), None)
                        if k is None:
                            outputs.append(v)
                            k = len(outputs) - 1
                        kind, a = ("result" if k < n_results else "output"), k
                resolved.append((kind, a))
            after.append((what, fn, resolved, done))
        return after

    def _where(self, t):
        """An argument tensor by its position (each call has its own), any other by itself."""
        for i, a in enumerate(self.arg_tensors):
            if a is t:
                return i
        return t
