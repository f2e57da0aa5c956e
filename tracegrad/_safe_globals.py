"""The user's allow-list for ``load(weights_only=True)``, with PyTorch's API:
``add_safe_globals``, ``get_safe_globals``, ``clear_safe_globals`` and the ``safe_globals``
context manager (all re-exported by ``tracegrad.serialization``). It is process-wide, as in
PyTorch; the defaults (tensors, containers, dtypes, ...) live in ``serialization``.
"""
import threading

_user_globals = {}   # entry (an object or an (object, name) pair) -> its "module.qualname"
_user_lock = threading.Lock()


def _entry_name(entry):
    if isinstance(entry, tuple):
        if len(entry) != 2:
            raise ValueError(f"Expected tuple of length 2 (global, str of callable full path), "
                             f"but got tuple of length: {len(entry)}")
        if type(entry[1]) is not str:
            raise TypeError(f"Expected second item in tuple to be str of callable full path, "
                            f"but got: {type(entry[1])}")
        return entry[1]
    return f"{entry.__module__}.{entry.__qualname__}"


def add_safe_globals(safe_globals):
    """Let ``load(weights_only=True)`` admit these classes or functions (trusted by you): each
    is an object, found under its ``module.qualname``, or an ``(object, "module.name")`` pair
    for an object saved under another name. Instances of an allowed class that a load creates
    may be filled in (BUILD); the classes themselves are never changed by a load."""
    names = {entry: _entry_name(entry) for entry in safe_globals}
    with _user_lock:
        _user_globals.update(names)


def get_safe_globals():
    """The entries given to ``add_safe_globals`` (and active ``safe_globals`` blocks)."""
    with _user_lock:
        return list(_user_globals)


def clear_safe_globals():
    """Forget every entry given to ``add_safe_globals``; the defaults stay."""
    with _user_lock:
        _user_globals.clear()


class safe_globals:   # noqa: N801 - PyTorch's name for this context manager
    """``with safe_globals([MyClass]): load(f)``: ``add_safe_globals`` for the block only;
    on exit it removes the entries it added (those allowed before stay allowed)."""

    def __init__(self, safe_globals):
        self.safe_globals = list(safe_globals)
        self._added = []

    def __enter__(self):
        with _user_lock:
            self._added = [e for e in self.safe_globals if e not in _user_globals]
        add_safe_globals(self._added)

    def __exit__(self, *exc):
        with _user_lock:
            for entry in self._added:
                _user_globals.pop(entry, None)


def user_globals():
    """``"module.qualname" -> object`` for every entry now allowed by the user."""
    with _user_lock:
        return {name: (e[0] if isinstance(e, tuple) else e) for e, name in _user_globals.items()}
