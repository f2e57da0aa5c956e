"""The front end: rewrite the user's function with gast before tracing.

After every assignment to a plain name (``h = ...``, ``a, b = ...``,
``h += ...``, ``for h in ...``) the rewrite inserts a call that gives the
assigned tensor's IR value that name, so the IR and the generated code say
``hidden`` and ``d_hidden`` rather than ``t7``. Line numbers and the file name
are kept, so each recorded node knows the user's ``file:line``; guards are
recorded where ``bool()``, ``item()``, ``int()`` or ``float()`` run on a traced
tensor (``Tensor`` reports them to the active tracer), at the line the frame
shows.

Before::                              After::

    def f(x, w):                          def f(x, w):
        h = x @ w                             h = x @ w
        return h.sum()                        __tracegrad__.name(h, 'h')
                                              return h.sum()

Calls whose result changes from call to call (``random.randint(4, 6)``, ``time.time()``,
``os.environ["X"]``: the modules in ``IMPURE``) are routed through the helper too::

    for i in range(random.randint(4, 6)):   for i in range(__tracegrad__.impure(0, random.randint)(4, 6)):

While a trace runs, the helper makes the call and records it (site, arguments, result) on
the tracer; the runtime draws the same calls again before it reuses a variant (see
``runtime/guards/impure.py``). ``reads`` finds, in the same source, where each free name is first
read and the attribute chains (``cfg.scale``, ``self.cfg.p``, ``HP["lr"]``) the runtime
guards.

Functions without retrievable source (REPL lambdas, builtins, C functions)
are traced as they are: ``instrument`` returns None.

Modules: ``rewrite`` (``instrument``, ``reads``), ``source`` (what a function's names
stand for), ``impure`` (which calls are impure, their sites and recorded calls), ``helper``
(the ``__tracegrad__`` object the rewritten function calls).
"""
from .helper import HELPER
from .impure import GENERATORS, IMPURE, ImpureCall, ImpureSite, impure_name
from .rewrite import instrument, reads
from .source import source_names

__all__ = ["instrument", "reads", "source_names", "impure_name", "ImpureCall", "ImpureSite",
           "IMPURE", "GENERATORS", "HELPER"]
