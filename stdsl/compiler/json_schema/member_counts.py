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
    memo: dict[tuple[int, int], Node] = {}

    def extras(written: int) -> Node:
        """Undeclared members after `written` members, keeping the total in range."""
        least = max(low - written, 0)
        most = None if high is None else high - written
        if extra == ir.NOTHING or least > 1 or (most is not None and most < max(least, 1)):
            return ir.EMPTY if least == 0 and written > 0 else ir.NOTHING
        if written == 0:
            return ir.seq(extra, ir.repeat(ir.seq(comma, extra), 0, None if most is None else most - 1))
        return ir.repeat(ir.seq(comma, extra), least, most)

    def rest(index: int, written: int) -> Node:
        """The members from `index` on after `written` members (capped where more no longer matters)."""
        key = (index, min(written, cap))
        if key in memo:
            return memo[key]
        if index == len(members):
            node = extras(written)
        else:
            member, required = members[index]
            separator = comma if written > 0 else ir.EMPTY
            take = ir.seq(separator, member, rest(index + 1, written + 1)) \
                if high is None or written < high else ir.NOTHING
            node = take if required else ir.alt(take, rest(index + 1, written))
        memo[key] = node
        return node

    body = ir.seq(braces[0], rest(0, 0), braces[1])
    return ir.alt(body, empty) if low == 0 and not any(required for _, required in members) else body
