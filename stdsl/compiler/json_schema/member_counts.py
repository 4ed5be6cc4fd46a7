"""Objects whose member count must lie in `minProperties`..`maxProperties`, counted member by member.

Declared members come in schema order (each optional one may be absent) and then undeclared
ones; the count written so far is carried from member to member, so the language is exact.
Undeclared keys may repeat in the text and a repeated key is one property once parsed, so they
may only *lower* the count: toward a lower bound at most one undeclared member is counted
(objects that need two or more are valid but not produced, and a bound that only two or more
could reach is refused).  Counting up to a large bound copies the member automaton that many
times, so a `maxProperties` above `MAX_COUNTED_MEMBERS` that undeclared members could reach is refused.
"""

from __future__ import annotations

from stdsl.compiler import ir
from stdsl.compiler.ir import Node
from stdsl.errors import SchemaError

MAX_COUNTED_MEMBERS = 16


def counted_object(members: list[tuple[Node, bool]], extra: Node, comma: Node, braces: tuple[Node, Node],
                   empty: Node, low: int, high: int | None, path: str) -> Node:
    """An object of the declared `members` (member node, required) and `extra` members with low..high members.

    Each member node is `"name":value` without separator; `comma` separates members, `braces` are the
    opening and closing tokens and `empty` is the empty object.
    """
    if extra != ir.NOTHING and high is not None and high > MAX_COUNTED_MEMBERS:
        raise SchemaError(f"'maxProperties' above {MAX_COUNTED_MEMBERS} beside additional or pattern properties "
                          "is not supported (the member count would be counted that far)", f"{path}/maxProperties")
    if extra != ir.NOTHING and low > len(members) + 1:
        raise SchemaError("'minProperties' that only two or more additional properties could reach is not "
                          "supported (their keys may repeat in the text)", f"{path}/minProperties")
    cap = high if high is not None else max(low, 1)
    counted = _CountedMembers(members, extra, comma, low, high, cap)
    body = ir.seq(braces[0], counted.rest(0, 0), braces[1])
    return ir.alt(body, empty) if low == 0 and not any(required for _, required in members) else body


class _CountedMembers:
    """`counted_object`'s members from a given one on, after a given count written, each built once.  A class, not
    closures that call each other: those would be a reference cycle holding the nodes until the collector ran."""

    def __init__(self, members: list[tuple[Node, bool]], extra: Node, comma: Node, low: int, high: int | None,
                 cap: int) -> None:
        self.members, self.extra, self.comma = members, extra, comma
        self.low, self.high, self.cap = low, high, cap
        self.memo: dict[tuple[int, int], Node] = {}

    def extras(self, written: int) -> Node:
        """Undeclared members after `written` members, keeping the total in range."""
        extra, comma = self.extra, self.comma
        least = max(self.low - written, 0)
        most = None if self.high is None else self.high - written
        if extra == ir.NOTHING or least > 1 or (most is not None and most < max(least, 1)):
            return ir.EMPTY if least == 0 and written > 0 else ir.NOTHING
        if written == 0:
            return ir.seq(extra, ir.repeat(ir.seq(comma, extra), 0, None if most is None else most - 1))
        return ir.repeat(ir.seq(comma, extra), least, most)

    def rest(self, index: int, written: int) -> Node:
        """The members from `index` on after `written` members (capped where more no longer matters)."""
        key = (index, min(written, self.cap))
        if key in self.memo:
            return self.memo[key]
        if index == len(self.members):
            node = self.extras(written)
        else:
            member, required = self.members[index]
            separator = self.comma if written > 0 else ir.EMPTY
            take = ir.seq(separator, member, self.rest(index + 1, written + 1)) \
                if self.high is None or written < self.high else ir.NOTHING
            node = take if required else ir.alt(take, self.rest(index + 1, written))
        self.memo[key] = node
        return node
