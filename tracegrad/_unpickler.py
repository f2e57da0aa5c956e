"""The restricted unpickler behind ``load(weights_only=True)``: a pickle interpreter that can
build only data, never change the library it runs in.

It reads every opcode itself (as PyTorch's ``_weights_only_unpickler`` does) instead of
subclassing ``pickle.Unpickler``, whose C machinery checks nothing but ``find_class``: a
pickle that names an allowed global and then applies BUILD to it (``tracegrad.float32`` with
the state ``{"name": "PWNED"}``, ``Size`` with a new ``__repr__``) would otherwise rewrite the
library for the rest of the process. The rules:

- GLOBAL / STACK_GLOBAL yield only values of the allow-list (``find_class``); modules of the
  blocklist stay refused even when a user allow-lists something from them;
- REDUCE / NEWOBJ / NEWOBJ_EX call only allow-listed callables;
- an object is *ours* when this load created it: a container opcode's list, dict or set,
  or the result of calling an allowed callable that is not itself an allowed value;
- BUILD applies only to ours whose type is in ``buildable``; SETITEM(S) only to our dicts,
  APPEND(S) only to our lists, ADDITEMS only to our sets. So an allowed global, or anything
  the pickle did not create, can be read and referenced but never mutated;
- INST, OBJ, EXT1/2/4 and out-of-band buffers are refused, as in PyTorch.
Any failure, including one inside an allowed callable, raises ``WeightsUnpicklingError`` (an
``UnpicklingError``) naming the opcode and its byte offset; errors of ``persistent_load`` (the
caller's code: the archive, ``map_location``) pass through unchanged.
"""
import _compat_pickle
import codecs
import pickle
import pickletools
import reprlib
import struct
import types
from pickle import UnpicklingError

# never importable through the pickle, even if a user allow-lists something from them
BLOCKED_MODULES = ("sys", "os", "posix", "nt", "subprocess", "builtins.eval", "builtins.exec")


def canonical_name(module, name):
    """``module.name`` as Python 3 spells it: protocol 2 pickles written by Python 3
    (``torch.save``'s) name builtins the way Python 2 did."""
    if (module, name) in _compat_pickle.NAME_MAPPING:
        module, name = _compat_pickle.NAME_MAPPING[(module, name)]
    module = _compat_pickle.IMPORT_MAPPING.get(module, module)
    return module, name


class WeightsUnpicklingError(UnpicklingError):
    """What the restricted unpickler refused or could not read (not the caller's errors)."""


class _CallerError(Exception):
    """Carries an exception raised by ``persistent_load`` out of the opcode loop untouched."""


class WeightsUnpickler:
    """``WeightsUnpickler(file, allowed=..., buildable=...).load()``: ``allowed`` maps
    ``"module.qualname"`` to the object GLOBAL may yield; ``buildable`` is the set of types
    whose instances created by this load accept BUILD. Subclasses override ``find_class`` and
    ``persistent_load`` as with ``pickle.Unpickler``."""

    def __init__(self, file, *, allowed, buildable=(), encoding="ASCII"):
        self.read, self.readline, self.tell = file.read, file.readline, file.tell
        self.allowed = dict(allowed)
        self.buildable = frozenset(buildable)
        self.encoding = encoding
        # identity sets: the allow-list's values, and those of them a pickle may call
        self._allowed_ids = {id(v) for v in self.allowed.values()}
        self._callable_ids = {id(v) for v in self.allowed.values() if _is_callable(v)}
        self.ours = {}   # id -> object created by this load (holding it keeps ids unique)

    # hooks ------------------------------------------------------------------------------
    def find_class(self, module, name):
        module, name = canonical_name(module, name)
        full = f"{module}.{name}"
        if any(full == b or full.startswith(b + ".") for b in BLOCKED_MODULES):
            raise UnpicklingError(f"Trying to load unsupported GLOBAL {full} whose module "
                                  f"{module} is blocked.")
        if full in self.allowed:
            return self.allowed[full]
        shown = full[len("builtins."):] if module == "builtins" else full
        raise UnpicklingError(
            f"Unsupported global: GLOBAL {full} was not an allowed global by default. Please "
            f"use `tracegrad.serialization.add_safe_globals([{shown}])` or the "
            f"`tracegrad.serialization.safe_globals([{shown}])` context manager to allowlist "
            f"this global if you trust this class/function.")

    def persistent_load(self, pid):
        raise UnpicklingError("unsupported persistent id encountered")

    # the loop ---------------------------------------------------------------------------
    def load(self):
        self.stack, self.metastack, self.memo = [], [], {}
        read, dispatch, stop, code = self.read, _DISPATCH, pickle.STOP[0], None
        try:
            while True:
                key = read(1)
                if not key:
                    raise UnpicklingError("pickle data was truncated (no STOP opcode)")
                code = key[0]
                if code == stop:
                    return self._pop()
                op = dispatch.get(code)
                if op is None:
                    raise UnpicklingError(f"Unsupported operand {code} ({key!r})")
                op(self)
        except _CallerError as e:
            raise e.__cause__ from None
        except UnpicklingError as e:
            raise WeightsUnpicklingError(f"{e} ({self._where(code)})") from None
        except Exception as e:   # a malformed pickle, or an allowed callable given bad args
            raise WeightsUnpicklingError(f"malformed pickle ({self._where(code)}): "
                                         f"{type(e).__name__}: {e}") from e

    def _where(self, code):
        """Where reading stopped: the failing opcode's name and the stream position after it
        (kept out of the loop, which it would slow by a tenth)."""
        return f"opcode {_NAMES.get(code, code)}, stopped at byte {self.tell()}"

    # helpers ----------------------------------------------------------------------------
    def _counted(self, fmt):
        """The bytes after a length field packed as ``fmt``."""
        return self._exact(struct.unpack(fmt, self._exact(struct.calcsize(fmt)))[0])

    def _exact(self, n):
        if n < 0:
            raise UnpicklingError(f"negative length {n}")
        data = self.read(n)
        if len(data) != n:
            raise UnpicklingError("pickle data was truncated")
        return data

    def _line(self):
        data = self.readline()
        if not data.endswith(b"\n"):
            raise UnpicklingError("pickle data was truncated")
        return data[:-1]

    def _pop(self):
        if not self.stack:
            raise UnpicklingError("pickle stack underflow")
        return self.stack.pop()

    def _top(self):
        if not self.stack:
            raise UnpicklingError("pickle stack underflow")
        return self.stack[-1]

    def _pop_mark(self):
        if not self.metastack:
            raise UnpicklingError("could not find MARK")
        items, self.stack = self.stack, self.metastack.pop()
        return items

    def _mine(self, obj):
        """Record ``obj`` as created by this load, unless it is an allowed global itself (a
        constructor may hand back a cached instance)."""
        if id(obj) not in self._allowed_ids:
            self.ours[id(obj)] = obj
        return obj

    def _owned(self, obj, kinds, what):
        """``obj`` if this load created it and it is one of ``kinds``; else the refusal."""
        if isinstance(obj, kinds) and self.ours.get(id(obj)) is obj:
            return obj
        origin = ("an allowed global" if id(obj) in self._allowed_ids
                  else "an object this load created" if self.ours.get(id(obj)) is obj
                  else "an object this load did not create")
        raise UnpicklingError(f"{what}, but got {_describe(obj)} ({origin})")

    def _call(self, func, args):
        if id(func) not in self._callable_ids:
            raise UnpicklingError(f"Trying to call reduce for unrecognized function "
                                  f"{_describe(func)}: only allow-listed classes and "
                                  f"functions can be called")
        if not isinstance(args, tuple):
            raise UnpicklingError(f"arguments of {_describe(func)} must be a tuple, got "
                                  f"{type(args).__name__}")
        return self._mine(func(*args))

    def _new(self, cls, args, kwargs):
        if not isinstance(cls, type) or id(cls) not in self._callable_ids:
            raise UnpicklingError(f"Can only create new objects of classes allowlisted via "
                                  f"`add_safe_globals`, but got {_describe(cls)}")
        if not isinstance(args, tuple) or not isinstance(kwargs, dict):
            raise UnpicklingError("NEWOBJ arguments must be a tuple and a dict")
        return self._mine(cls.__new__(cls, *args, **kwargs))

    def _persistent(self, pid):
        try:
            return self.persistent_load(pid)
        except Exception as e:
            raise _CallerError() from e

    def _decode_str(self, data):
        return data if self.encoding == "bytes" else data.decode(self.encoding, "strict")


def _is_callable(obj):
    """Classes and functions: the allowed globals a pickle may call (not data such as dtypes,
    nor callable instances)."""
    return isinstance(obj, (type, types.FunctionType, types.BuiltinFunctionType))


def _describe(obj):
    if isinstance(obj, type):
        return f"class {obj.__module__}.{obj.__qualname__}"
    try:
        r = reprlib.repr(obj)
    except Exception:   # an error message must not fail on a broken __repr__
        r = object.__repr__(obj)
    return f"{r} (a {type(obj).__module__}.{type(obj).__qualname__})"


_NAMES = {op.code.encode("latin-1")[0]: op.name for op in pickletools.opcodes}


def _utf8(data):
    return str(data, "utf-8", "surrogatepass")


def _int_line(data):
    # protocol 0 writes booleans as I00 and I01
    return {b"00": False, b"01": True}[data] if data in (b"00", b"01") else int(data)


def _quoted(u):
    data = u._line()
    if len(data) < 2 or data[0] != data[-1] or data[0] not in b"\"'":
        raise UnpicklingError("the STRING opcode argument must be quoted")
    return u._decode_str(codecs.escape_decode(data[1:-1])[0])


# opcodes that push one value decoded from the stream: none can reach an existing object
_VALUES = {
    pickle.NONE: lambda u: None,
    pickle.NEWTRUE: lambda u: True,
    pickle.NEWFALSE: lambda u: False,
    pickle.EMPTY_TUPLE: lambda u: (),
    pickle.BININT: lambda u: struct.unpack("<i", u._exact(4))[0],
    pickle.BININT1: lambda u: u._exact(1)[0],
    pickle.BININT2: lambda u: struct.unpack("<H", u._exact(2))[0],
    pickle.INT: lambda u: _int_line(u._line()),
    pickle.LONG: lambda u: int(u._line().rstrip(b"L")),
    pickle.LONG1: lambda u: pickle.decode_long(u._counted("<B")),
    pickle.LONG4: lambda u: pickle.decode_long(u._counted("<i")),
    pickle.FLOAT: lambda u: float(u._line()),
    pickle.BINFLOAT: lambda u: struct.unpack(">d", u._exact(8))[0],
    pickle.STRING: _quoted,
    pickle.BINSTRING: lambda u: u._decode_str(u._counted("<i")),
    pickle.SHORT_BINSTRING: lambda u: u._decode_str(u._counted("<B")),
    pickle.UNICODE: lambda u: str(u._line(), "raw-unicode-escape"),
    pickle.SHORT_BINUNICODE: lambda u: _utf8(u._counted("<B")),
    pickle.BINUNICODE: lambda u: _utf8(u._counted("<I")),
    pickle.BINUNICODE8: lambda u: _utf8(u._counted("<Q")),
    pickle.SHORT_BINBYTES: lambda u: u._counted("<B"),
    pickle.BINBYTES: lambda u: u._counted("<I"),
    pickle.BINBYTES8: lambda u: u._counted("<Q"),
    pickle.FROZENSET: lambda u: frozenset(u._pop_mark()),
    pickle.TUPLE: lambda u: tuple(u._pop_mark()),
    # new containers, so ours to fill
    pickle.BYTEARRAY8: lambda u: u._mine(bytearray(u._counted("<Q"))),
    pickle.EMPTY_LIST: lambda u: u._mine([]),
    pickle.EMPTY_DICT: lambda u: u._mine({}),
    pickle.EMPTY_SET: lambda u: u._mine(set()),
    pickle.LIST: lambda u: u._mine(u._pop_mark()),
    pickle.DICT: lambda u: u._mine(_pairs(u._pop_mark(), "DICT")),
    # the memo hands back what was stored: ours or an allowed global, unchanged
    pickle.GET: lambda u: u.memo[int(u._line())],
    pickle.BINGET: lambda u: u.memo[u._exact(1)[0]],
    pickle.LONG_BINGET: lambda u: u.memo[struct.unpack("<I", u._exact(4))[0]],
    pickle.DUP: lambda u: u._top(),
    # globals and calls: allow-listed only
    pickle.GLOBAL: lambda u: u.find_class(u._line().decode("utf-8"), u._line().decode("utf-8")),
    pickle.STACK_GLOBAL: lambda u: _stack_global(u, u._pop(), u._pop()),
    pickle.NEWOBJ: lambda u: _newobj(u, {}, u._pop()),
    pickle.NEWOBJ_EX: lambda u: _newobj(u, u._pop(), u._pop()),
    pickle.PERSID: lambda u: u._persistent(u._line().decode("ascii")),
    pickle.BINPERSID: lambda u: u._persistent(u._pop()),
}


def _pairs(items, what):
    if len(items) % 2:
        raise UnpicklingError(f"{what} needs an even number of items")
    return dict(zip(items[::2], items[1::2]))


def _stack_global(u, name, module):
    if type(name) is not str or type(module) is not str:
        raise UnpicklingError("STACK_GLOBAL requires str")
    return u.find_class(module, name)


def _newobj(u, kwargs, args):
    return u._new(u._pop(), args, kwargs)


def _tuple_n(n):
    def op(u):
        if len(u.stack) < n:
            raise UnpicklingError("pickle stack underflow")
        u.stack[-n:] = [tuple(u.stack[-n:])]
    return op


def _mark(u):
    u.metastack.append(u.stack)
    u.stack = []


def _proto(u):
    if u._exact(1)[0] > pickle.HIGHEST_PROTOCOL:
        raise UnpicklingError("unsupported pickle protocol")


def _reduce(u):
    args = u._pop()
    u.stack[-1] = u._call(u._top(), args)


def _memo_put(index):
    def op(u):
        u.memo[index(u)] = u._top()
    return op


def _pop(u):
    if u.stack:
        u.stack.pop()
    else:
        u._pop_mark()


# the opcodes that mutate an object: only ours, of the right kind ----------------------------
def _append(u):
    item = u._pop()
    u._owned(u._top(), list, "Can only APPEND to lists").append(item)


def _appends(u):
    items = u._pop_mark()
    u._owned(u._top(), list, "Can only APPENDS to lists").extend(items)


def _setitem(u):
    value, key = u._pop(), u._pop()
    u._owned(u._top(), dict, "Can only SETITEM for dicts")[key] = value


def _setitems(u):
    items = u._pop_mark()
    if len(items) % 2:
        raise UnpicklingError("SETITEMS needs an even number of items")
    target = u._owned(u._top(), dict, "Can only SETITEMS for dicts")
    for i in range(0, len(items), 2):   # item by item: Counter.update would add counts
        target[items[i]] = items[i + 1]


def _additems(u):
    items = u._pop_mark()
    u._owned(u._top(), set, "Can only ADDITEMS to sets").update(items)


def _build(u):
    state = u._pop()
    inst = u._owned(u._top(), tuple(u.buildable), "Can only BUILD instances of OrderedDict or "
                    "of classes allowlisted via `add_safe_globals` that this load created")
    if type(inst) not in u.buildable:   # a subclass of an allowed class is not allowed itself
        raise UnpicklingError(f"Can only BUILD instances of allowlisted classes, but got "
                              f"{_describe(inst)}")
    setstate = getattr(type(inst), "__setstate__", None)
    if setstate is not None:
        setstate(inst, state)
        return
    slots = None
    if isinstance(state, tuple) and len(state) == 2:
        state, slots = state
    for part in (state, slots):
        if part and not isinstance(part, dict):
            raise UnpicklingError(f"BUILD state must be a dict, got {type(part).__name__}")
        for k in part or ():
            # an instance attribute must not replace a method or a special name of its class
            if not isinstance(k, str) or k.startswith("__") or callable(getattr(type(inst), k,
                                                                                 None)):
                raise UnpicklingError(f"BUILD cannot set the attribute {k!r} of "
                                      f"{_describe(inst)}")
    if state:
        inst.__dict__.update(state)
    for k, v in (slots or {}).items():
        setattr(inst, k, v)


def _pusher(value):
    def op(u):
        v = value(u)          # first: it may pop a MARK and so replace u.stack
        u.stack.append(v)
    return op


_DISPATCH = {code[0]: _pusher(f) for code, f in _VALUES.items()}
_DISPATCH.update({
    pickle.PROTO[0]: _proto,
    pickle.FRAME[0]: lambda u: u._exact(8),   # framing batches reads; the pickle is in memory
    pickle.MARK[0]: _mark,
    pickle.POP[0]: _pop,
    pickle.POP_MARK[0]: lambda u: u._pop_mark(),
    pickle.TUPLE1[0]: _tuple_n(1), pickle.TUPLE2[0]: _tuple_n(2), pickle.TUPLE3[0]: _tuple_n(3),
    pickle.PUT[0]: _memo_put(lambda u: int(u._line())),
    pickle.BINPUT[0]: _memo_put(lambda u: u._exact(1)[0]),
    pickle.LONG_BINPUT[0]: _memo_put(lambda u: struct.unpack("<I", u._exact(4))[0]),
    pickle.MEMOIZE[0]: _memo_put(lambda u: len(u.memo)),
    pickle.REDUCE[0]: _reduce,
    pickle.APPEND[0]: _append, pickle.APPENDS[0]: _appends,
    pickle.SETITEM[0]: _setitem, pickle.SETITEMS[0]: _setitems,
    pickle.ADDITEMS[0]: _additems, pickle.BUILD[0]: _build,
})
