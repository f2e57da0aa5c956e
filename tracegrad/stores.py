"""Stores to state outside the function, found in its source before a trace.

A trace records tensor ops; it cannot record that the function appended to a global list,
counted calls in ``cfg.steps`` or set ``self.hidden``. A compiled variant would run such a
store once, when traced, and never again. The front end therefore marks, in the user's
function, every statement that may write outside its locals:

- assignments (``=``, ``+=``, ``del``) to a name declared ``global`` or ``nonlocal``;
- assignments to an attribute or item of an object the function did not make itself
  (a parameter, a global, a closure variable): ``cfg.steps += 1``, ``CACHE[k] = v``;
- calls of a container's mutating methods on such an object: ``log.append(x)``,
  ``d.update(...)``, ``s.add(...)``.

Before each one the rewrite calls ``__tracegrad__.store(index, obj)``::

    history.append(loss)    ->    __tracegrad__.store(0, history)
                                  history.append(loss)

While a trace runs, the helper stops the recording there (``Tracer.abandon``): the store
and the rest of the call run eagerly, as they would without ``compile``, and later calls
run eagerly too, after one warning that names the store and its line. A tensor written
in place (``x[0] = 1``, ``x.grad = g``) is not such a store: the trace records it.

The check is by name: an object reached through a local alias of outside state
(``s = self.state; s["k"] = v``) is not seen, nor are stores inside functions the user's
function calls.
"""
import copy
import os

import gast

MUTATORS = frozenset({"append", "extend", "insert", "pop", "remove", "clear", "update",
                      "setdefault", "popitem", "add", "discard", "appendleft", "extendleft",
                      "sort", "reverse", "__setitem__", "__delitem__"})


class StoreSite:
    """One statement that writes outside the function: ``what`` it writes, ``where``, and
    ``replay``, the statement as a function of the locals it reads (set by ``instrument``),
    or None where the function also reads what the statement writes (``conflict``)."""
    __slots__ = ("what", "where", "replay", "conflict", "keys")

    def __init__(self, what, where, conflict, keys):
        self.what, self.where, self.conflict, self.replay = what, where, conflict, None
        self.keys = keys        # the state it writes: "counter", "cfg.steps", "LOG"

    def __str__(self):
        return f"{self.what} at {self.where}"


def _root(node):
    """The name an attribute/item chain starts from, or None."""
    while isinstance(node, (gast.Attribute, gast.Subscript)):
        node = node.value
    return node.id if isinstance(node, gast.Name) else None


def _plain_chain(node):
    """Whether ``node`` is ``a``, ``a.b``, ``a.b.c``: safe to evaluate twice."""
    while isinstance(node, gast.Attribute):
        node = node.value
    return isinstance(node, gast.Name)


def _text(node):
    try:
        return gast.unparse(node)
    except Exception:       # noqa: BLE001 - a description only
        return "an outside object"


class StoreMarker(gast.NodeTransformer):
    """Insert ``__tracegrad__.store(i, objs, args)`` before each statement of the function
    (not of its nested functions) that may write outside its locals: ``objs`` the objects it
    writes to, ``args`` the values of the locals it reads. ``sites`` collects a ``StoreSite``
    per statement, and ``replays`` a function definition per site (``__tracegrad_store_i__``,
    the statement over those locals), for the factory that ``instrument`` builds."""

    def __init__(self, names, fdef, filename, offset, helper):
        self.names, self.filename, self.offset, self.helper = names, filename, offset, helper
        self.top, self.sites, self.replays = fdef, [], []
        self.globals, self.nonlocals = set(), set()
        for node in gast.walk(fdef):
            if isinstance(node, gast.Global):
                self.globals.update(node.names)
            elif isinstance(node, gast.Nonlocal):
                self.nonlocals.update(node.names)
        self.declared = self.globals | self.nonlocals
        self.found = {}         # id(statement) -> [(description, object expression, key)]
        self.written = set()    # ids of the nodes inside store targets and receivers
        for stmt in self._statements(fdef):
            targets = self._targets(stmt)
            if targets:
                self.found[id(stmt)] = targets
                for _, obj, _ in targets:
                    if obj is not None:
                        self.written.update(id(n) for n in gast.walk(obj))
                for t in _store_targets(stmt):
                    self.written.update(id(n) for n in gast.walk(t))
        self.reads = self._reads(fdef)

    def _statements(self, node):
        for child in gast.iter_child_nodes(node):
            if isinstance(child, (gast.FunctionDef, gast.AsyncFunctionDef, gast.ClassDef,
                                  gast.Lambda)) and child is not self.top:
                continue
            if isinstance(child, gast.stmt):
                yield child
            yield from self._statements(child)

    def _outside(self, root):
        return root is not None and (root in self.declared or self.names.kind(root) is not None)

    def _targets(self, stmt):
        """(description, object expression or None, state key) per outside write of
        ``stmt``; the key names the state: ``counter``, ``cfg.steps``, or a root ``LOG``."""
        found = []
        for e in _store_targets(stmt):
            if isinstance(e, gast.Name) and e.id in self.declared:
                kind = "global" if e.id in self.globals else "outer"
                found.append((f"the {kind} variable {e.id}", None, e.id))
            elif isinstance(e, (gast.Attribute, gast.Subscript)) and self._outside(_root(e)):
                key = _text(e) if _plain_chain(e) else _root(e)
                found.append((_text(e), e.value, key))
        call = stmt.value if isinstance(stmt, (gast.Expr, gast.Assign)) else None
        if isinstance(call, gast.Call) and isinstance(call.func, gast.Attribute) \
                and call.func.attr in MUTATORS and self._outside(_root(call.func.value)):
            found.append((f"{_text(call.func.value)} (.{call.func.attr})", call.func.value,
                          _root(call.func.value)))
        return found

    def _reads(self, fdef):
        """The chains (``LOG``, ``cfg.steps``, ``self``) the function reads as values, outside
        store targets and receivers, with what each read does (used whole, or called)."""
        parents = {}
        for node in self._nodes(fdef):
            for child in gast.iter_child_nodes(node):
                parents[id(child)] = node
        owner = {}      # id(node) -> id of the innermost statement holding it
        for stmt in self._statements(fdef):
            for n in gast.walk(stmt):
                owner[id(n)] = id(stmt)
        reads = []
        for node in self._nodes(fdef):
            if id(node) in self.written or not isinstance(node, (gast.Name, gast.Attribute)) \
                    or not isinstance(getattr(node, "ctx", None), gast.Load):
                continue
            parent = parents.get(id(node))
            if isinstance(parent, gast.Attribute):
                continue            # not the whole chain
            if _plain_chain(node):
                called = isinstance(parent, gast.Call) and parent.func is node
                reads.append((_text(node), called, owner.get(id(node))))
        return reads

    def _nodes(self, node):
        yield node
        for child in gast.iter_child_nodes(node):
            if isinstance(child, (gast.FunctionDef, gast.AsyncFunctionDef, gast.Lambda)) \
                    and child is not self.top:
                continue
            if isinstance(child, gast.Call) and isinstance(child.func, gast.Attribute) \
                    and isinstance(child.func.value, gast.Name) \
                    and child.func.value.id == self.helper:
                continue        # the front end's own calls (naming values) read nothing
            yield from self._nodes(child)

    def _conflict(self, key, stmt):
        """A read of the state under ``key`` elsewhere in the function than in ``stmt``, or
        None: a trace bakes what it reads, so the store cannot be replayed after a run."""
        for text, called, where in self.reads:
            if where == id(stmt):
                continue
            if text == key or text.startswith(key + ".") or text.startswith(key + "["):
                return text
            base = text.rpartition(".")[0] if called else text
            if key.startswith(base + ".") or key.startswith(base + "["):
                return text         # the object, or a method of it, may read the state
        return None

    def _mark(self, stmt):
        targets = self.found.get(id(stmt))
        if not targets:
            return []
        where = f"{os.path.basename(self.filename)}:{stmt.lineno + self.offset}"
        conflict = next((c for c in (self._conflict(k, stmt) for _, _, k in targets) if c),
                        None)
        index = len(self.sites)
        self.sites.append(StoreSite(", ".join(w for w, _, _ in targets), where, conflict,
                                    [k for _, _, k in targets]))
        local = sorted({n.id for n in gast.walk(stmt) if isinstance(n, gast.Name)
                        and isinstance(n.ctx, gast.Load) and n.id not in self.declared
                        and self.names.kind(n.id) in (None, "param")})
        self.replays.append(self._replay(index, stmt, local))
        objs = []
        for _, obj, _ in targets:
            if obj is not None:
                objs.append(_copy_load(obj) if _plain_chain(obj) else _name(_root(obj)))
        call = gast.Expr(value=gast.Call(
            func=gast.Attribute(value=_name(self.helper), attr="store", ctx=gast.Load()),
            args=[gast.Constant(value=index, kind=None),
                  gast.Tuple(elts=objs, ctx=gast.Load()),
                  gast.Tuple(elts=[_name(n) for n in local], ctx=gast.Load())],
            keywords=[]))
        for n in gast.walk(call):
            gast.copy_location(n, stmt)
        return [call]

    def _replay(self, index, stmt, local):
        """``def __tracegrad_store_<index>__(<local>): <stmt>``, with its global/nonlocal
        declarations."""
        body = copy.deepcopy(stmt)
        names = {n.id for n in gast.walk(stmt) if isinstance(n, gast.Name)}
        decls = []
        if names & self.globals:
            decls.append(gast.Global(names=sorted(names & self.globals)))
        if names & self.nonlocals:
            decls.append(gast.Nonlocal(names=sorted(names & self.nonlocals)))
        fdef = gast.FunctionDef(
            name=f"__tracegrad_store_{index}__",
            args=gast.arguments(args=[gast.Name(id=n, ctx=gast.Param(), annotation=None,
                                                type_comment=None) for n in local],
                                posonlyargs=[], vararg=None, kwonlyargs=[], kw_defaults=[],
                                kwarg=None, defaults=[]),
            body=decls + [body], decorator_list=[], returns=None, type_comment=None,
            type_params=[])
        for n in gast.walk(fdef):
            gast.copy_location(n, stmt)
        return fdef

    def generic_visit(self, node):
        for field, old in gast.iter_fields(node):
            if isinstance(old, list) and old and isinstance(old[0], gast.stmt):
                new = []
                for stmt in old:
                    if isinstance(stmt, (gast.FunctionDef, gast.AsyncFunctionDef,
                                         gast.ClassDef)) and stmt is not self.top:
                        new.append(stmt)        # a nested scope: its own locals
                        continue
                    new += self._mark(stmt)
                    self.generic_visit(stmt)
                    new.append(stmt)
                setattr(node, field, new)
            elif isinstance(old, gast.AST) and not isinstance(old, gast.expr):
                self.generic_visit(old)
            elif isinstance(old, list):
                for item in old:
                    if isinstance(item, gast.AST) and not isinstance(item, gast.expr):
                        self.generic_visit(item)
        return node


def _store_targets(stmt):
    """The targets ``stmt`` assigns or deletes, tuples unpacked."""
    if isinstance(stmt, (gast.Assign, gast.Delete)):
        targets = stmt.targets
    elif isinstance(stmt, gast.AugAssign) or (isinstance(stmt, gast.AnnAssign)
                                              and stmt.value is not None):
        targets = [stmt.target]
    else:
        return []
    out = []
    for t in targets:
        out += t.elts if isinstance(t, (gast.Tuple, gast.List)) else [t]
    return out


def _name(n):
    return gast.Name(id=n, ctx=gast.Load(), annotation=None, type_comment=None)


def _copy_load(node):
    """A copy of ``a.b.c`` with every context Load (a target's object read as a value)."""
    if isinstance(node, gast.Name):
        return gast.Name(id=node.id, ctx=gast.Load(), annotation=None, type_comment=None)
    if isinstance(node, gast.Attribute):
        return gast.Attribute(value=_copy_load(node.value), attr=node.attr, ctx=gast.Load())
    raise TypeError(type(node).__name__)
