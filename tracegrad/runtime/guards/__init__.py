"""Guards: what a compiled variant checks, or makes again, before it is reused.

``free.py`` records the plain Python values a trace read from outside its arguments
(globals, closure cells, attribute chains, module attributes), ``values.py`` says which values
are plain and how they are kept and compared, ``user_code.py`` which functions are the
user's, ``chains.py`` the attribute chains rooted outside the call, and ``impure.py`` the
impure calls (``random``, ``time``, ...) drawn again on each reuse. The runtime imports
all it needs of guards from here.
"""
from .free import free_guards
from .impure import Draws, impure_calls, prepare
from .values import FreeGuard, plain, stale

__all__ = ["Draws", "FreeGuard", "free_guards", "impure_calls", "plain", "prepare", "stale"]
