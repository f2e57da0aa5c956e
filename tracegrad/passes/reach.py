"""Which units depend on which, while fusion builds its groups.

A *unit* is a group being built (a draft, keyed by its id) or a node outside every
group (keyed by the node). ``UnitGraph`` keeps, for the units as they are now, the
direct dependencies both ways and a *level* per unit: one more than the highest level
of what it reads, so a unit that depends on another always has the higher level.

``depends(starts, targets)`` answers fusion's cycle question, whether a unit in
``starts`` is or depends on a unit in ``targets``, without walking the whole history
of the program: it searches back from ``starts`` and forward from ``targets`` at once,
each side only through units whose level lies between the two ends, and stops as soon
as either side runs out (no) or the two meet (yes). In an unrolled loop the answer is
found among the last steps' units, so fusing a program costs time in proportion to
its length, not to its square.

Units with their levels, ``x <- y`` where ``y`` reads ``x``; ``merge(g, b)`` makes
``b``'s members part of ``g``::

    a[1] <- b[2] <- g[3]          a[1] <- g[3]
    a[1] <- p[2]                  a[1] <- p[2]

``depends({p}, {g})`` is then answered by the levels alone: ``p`` lies below ``g``.

``add``, ``extend`` and ``merge`` keep the levels right; ``visits`` counts the units
the searches touched (a test checks that it grows linearly with the program).
"""


class UnitGraph:
    __slots__ = ("preds", "succs", "level", "visits")

    def __init__(self):
        self.preds, self.succs, self.level = {}, {}, {}
        self.visits = 0

    def add(self, unit, preds):
        """A new unit that reads ``preds`` (units); nothing reads it yet."""
        preds = set(preds)
        preds.discard(unit)
        self.preds[unit], self.succs[unit] = preds, set()
        for p in preds:
            self.succs[p].add(unit)
        self.level[unit] = 1 + max((self.level[p] for p in preds), default=0)

    def extend(self, unit, preds):
        """``unit`` now also reads ``preds`` (a node joined it); returns those of them it
        did not read before."""
        mine, new = self.preds[unit], set()
        top = 0
        for p in preds:
            if p != unit and p not in mine:
                mine.add(p)
                new.add(p)
                self.succs[p].add(unit)
                top = max(top, self.level[p])
        self._raise(unit, top + 1)
        return new

    def merge(self, keep, gone):
        """``gone``'s members join ``keep``: the unit ``keep`` reads and is read by what
        either did (fusion has checked that no path between the two runs outside them)."""
        level, preds, succs = self.level, self.preds, self.succs
        for p in preds.pop(gone):
            succs[p].discard(gone)
            if p != keep:
                preds[keep].add(p)
                succs[p].add(keep)
        for s in succs.pop(gone):
            preds[s].discard(gone)
            if s != keep:
                succs[keep].add(s)
                preds[s].add(keep)
        preds[keep].discard(gone)
        succs[keep].discard(gone)
        self._raise(keep, level.pop(gone))
        self._raise_users(keep)

    def _raise(self, unit, at_least):
        if self.level[unit] < at_least:
            self.level[unit] = at_least
            self._raise_users(unit)

    def _raise_users(self, unit):
        """Lift the levels of whatever depends on ``unit`` above it."""
        level, succs = self.level, self.succs
        stack = [unit]
        while stack:
            u = stack.pop()
            above = level[u] + 1
            for s in succs[u]:
                if level[s] < above:
                    level[s] = above
                    stack.append(s)

    def depends(self, starts, targets):
        """Whether a unit in ``starts`` is in ``targets`` or depends on one of them."""
        starts, targets = set(starts), set(targets)
        if starts & targets:
            return True
        if not starts:
            return False
        level, preds, succs = self.level, self.preds, self.succs
        low = min(level[t] for t in targets)        # what depends on a target lies above
        high = max(level[s] for s in starts)        # what a start depends on lies below
        if high <= low:
            return False
        back, ahead = starts, targets
        back_stack, ahead_stack = list(starts), list(targets)
        while back_stack and ahead_stack:
            self.visits += 2
            for p in preds[back_stack.pop()]:
                if p in ahead:
                    return True
                if level[p] > low and p not in back:
                    back.add(p)
                    back_stack.append(p)
            for s in succs[ahead_stack.pop()]:
                if s in back:
                    return True
                if level[s] < high and s not in ahead:
                    ahead.add(s)
                    ahead_stack.append(s)
        return False
