"""Declared object members under `dependentRequired`, as one member chain that tracks presence, not one chain per
presence pattern.

Members are written in declared order.  Between two members the chain is in a state that says which presence
patterns of the members still to come are allowed, given those already written or skipped (the residual of the
allowed patterns, as in an ordered decision diagram), so equal residuals share their tail: the size grows with the
width of that diagram, not with the 2^k patterns of the k optional members the dependencies involve.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import product

from stdsl.compiler import ir
from stdsl.compiler.ir import Node

Pattern = tuple[bool, ...]
"""Presence of the involved optional members still to come, in declared order."""


def allowed_patterns(names: Sequence[str], required: set[str], deps: Mapping[str, Sequence[str]]
                     ) -> frozenset[Pattern]:
    """The presence patterns of the optional members `names` that meet `deps` beside the always present `required`:
    a present name's dependencies are all present (a dependency on a name neither here nor required never is)."""
    allowed = set()
    for choice in product((True, False), repeat=len(names)):
        present = required | {name for name, kept in zip(names, choice) if kept}
        if all(set(deps[name]) <= present for name in deps if name in present):
            allowed.add(choice)
    return frozenset(allowed)


def dependent_members(members: Sequence[tuple[str, Node, bool]], involved: set[str], allowed: frozenset[Pattern],
                      comma: Node) -> tuple[Node, bool]:
    """The declared members of an object written in order, at least one of them, with `comma` between: each
    `(name, "name":value node, required)`, the optional names in `involved` present only in the `allowed` patterns
    (over those names in member order).  Also whether writing none of them is allowed (no required member, and the
    pattern of all absent allowed)."""
    kinds = ["involved" if name in involved else "required" if is_required else "optional"
             for name, _, is_required in members]
    none_allowed = "required" not in kinds and tuple(False for _ in involved) in allowed
    return _DependentChain(members, kinds, comma).chain(False, 0, allowed), none_allowed


class _DependentChain:
    """`dependent_members`' members from a given one on, under the patterns left, each built once.  A class, not
    closures that call each other: those would be a reference cycle holding the nodes until the collector ran."""

    def __init__(self, members: Sequence[tuple[str, Node, bool]], kinds: list[str], comma: Node) -> None:
        self.members, self.kinds, self.comma = members, kinds, comma
        self.memo: dict[tuple[bool, int, frozenset[Pattern]], Node] = {}

    @staticmethod
    def split(patterns: frozenset[Pattern]) -> tuple[frozenset[Pattern], frozenset[Pattern]]:
        """The residual patterns once the next involved member is written, and once it is skipped."""
        return (frozenset(p[1:] for p in patterns if p[0]), frozenset(p[1:] for p in patterns if not p[0]))

    def chain(self, written: bool, index: int, patterns: frozenset[Pattern]) -> Node:
        """The members from `index` on; after one was `written` each is preceded by a comma, else the first is not
        and one must come."""
        key = (written, index, patterns)
        found = self.memo.get(key)
        if found is not None:
            return found
        if index == len(self.members):
            node = ir.EMPTY if written else ir.NOTHING
        else:
            member = self.members[index][1]
            lead = ir.seq(self.comma, member) if written else member
            kind = self.kinds[index]
            if kind == "required":
                node = ir.seq(lead, self.chain(True, index + 1, patterns))
            elif kind == "optional":
                node = ir.alt(ir.seq(lead, self.chain(True, index + 1, patterns)),
                              self.chain(written, index + 1, patterns))
            else:
                present, absent = self.split(patterns)
                node = ir.alt(ir.seq(lead, self.chain(True, index + 1, present)) if present else ir.NOTHING,
                              self.chain(written, index + 1, absent) if absent else ir.NOTHING)
        self.memo[key] = node
        return node
