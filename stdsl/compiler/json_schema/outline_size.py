"""Whether a pushdown's plain bodies are large enough to outline its containers at once, and the cheap signs of it.

The count (`outline_pays`) is read off the plain bodies, or off the outlined ones with each outlined member's call
counted as its body written in its place (`plain_size_reaches`), so that a schema with many declared members
(`declared_members`) need not lower its plain bodies only to measure and drop them.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from stdsl.compiler import ir
from stdsl.compiler.automata.chains import CHAIN_FROM, EMBEDDED_FROM
from stdsl.compiler.automata.nfa import estimated_states
from stdsl.compiler.deadline import check_deadline
from stdsl.compiler.pushdown.grammar import CALL_BASE

OUTLINE_FROM = 30_000
"""A plain grammar whose bodies' NFAs would have about this many states together (`outline_pays`) is outlined at
once when the caller lets the compiler choose: the subset construction costs some microseconds of Python per
state (0.2-1.5 s on the MaskBench schemas past it), while outlined bodies are each a member's language with its
containers as calls, compiled once however often they occur: 1.7-5.3x faster on five of the eight schemas of
`benchmarks/results/outline_choice.md`.  Below it the plain grammar is about as fast or faster (`o53885`, 21,400
by this count: 0.25 s plain, 0.28 s outlined).  A schema whose outlined members meet an L(1) conflict pays for the
outlined try and is built plain (`o79009` 0.24 -> 0.32 s there)."""

MANY_MEMBERS_FROM = 150
"""A schema declaring this many members (`declared_members`) or more lowers its outlined bodies first and measures
the plain ones from them (`plain_size_reaches`).  Of the 1,606 MaskBench schemas that reach the choice, 38 of the 98
whose plain bodies pass `OUTLINE_FROM` declare this many (the Kubernetes ones with 420-470 members lowered their
plain bodies in about 0.1 s, a quarter of their compile, only to measure them), and 6 of the 1,508 below it, which
lower both, the outlined ones first (0.02-0.05 s: `benchmarks/results/outline_at_once_tail57.md`)."""

DATA_KEYWORDS = ("enum", "const", "default", "examples")


def outline_pays(*bodies: ir.Node) -> bool:
    """Whether `bodies` need at least `OUTLINE_FROM` NFA states together outside their long counted chains.

    Counted as `nfa.estimated_states` counts (each distinct node once, a counted repetition's item once per copy),
    except that a repetition of `CHAIN_FROM` copies or more counts one copy and an automaton of `EMBEDDED_FROM`
    states or more one state: both are laid out whole (`automata.chains`), at a cost outlining does not change.
    `estimated_states` counts those whole, so its sum bounds this count from above: below `OUTLINE_FROM` it
    decides at once (the bodies' DFAs ask for it anyway and find it kept on the nodes), and only larger bodies are
    walked again (`_outline_size`, stopping at `OUTLINE_FROM`)."""
    if sum(estimated_states(body) for body in bodies) < OUTLINE_FROM:
        return False
    return _outline_size(bodies, {}) >= OUTLINE_FROM


def plain_size_reaches(bodies: Sequence[ir.Node], inlined: Mapping[int, ir.Node]) -> bool:
    """`outline_pays` of the plain bodies, counted on outlined `bodies` whose calls of the symbols in `inlined`
    count as the body each calls, written in its place (walked once however often it is called, as the plain
    lowering writes a schema met twice once).  The outlined grammar is lowered anyway once this holds."""
    return _outline_size(bodies, inlined) >= OUTLINE_FROM


def declared_members(schema: Any, enough: int = MANY_MEMBERS_FROM) -> int:
    """The members the `properties` of `schema` declare, over the whole document (definitions included, instance
    data not), counted up to `enough`: a sign, costing no lowering, that its plain bodies may be large."""
    count = walked = 0
    pending = [schema]
    while pending and count < enough:
        node = pending.pop()
        walked += 1
        if walked & 65535 == 0:
            check_deadline("counting the declared members")
        if isinstance(node, dict):
            members = node.get("properties")
            if isinstance(members, dict):
                count += len(members)
            pending.extend(value for key, value in node.items() if key not in DATA_KEYWORDS)
        elif isinstance(node, list):
            pending.extend(node)
    return count


def _outline_size(bodies: Sequence[ir.Node], inlined: Mapping[int, ir.Node]) -> int:
    """The count `outline_pays` compares with `OUTLINE_FROM`, walked up to there, with the calls of the symbols
    in `inlined` counted as their bodies (`plain_size_reaches`)."""
    sizes: dict[int, int] = {}
    total = 0
    for body in bodies:
        total += _size(body, inlined, sizes)
        if total >= OUTLINE_FROM:
            break
    return total


def _size(node: ir.Node, inlined: Mapping[int, ir.Node], sizes: dict[int, int]) -> int:
    """`node`'s count for `_outline_size` (walked up to `OUTLINE_FROM`), kept in `sizes` by node.  A module function,
    not a closure that calls itself: that would be a reference cycle holding the bodies until the collector runs."""
    known = sizes.get(id(node))
    if known is not None:
        return known
    total = 0
    for count, part in enumerate(_parts(node, inlined), 1):
        if isinstance(part, ir.Embedded):
            total += 1 if len(part.accepting) >= EMBEDDED_FROM else len(part.accepting)
        elif isinstance(part, ir.Repeat):
            copies = 1 if part.max is not None and part.max >= CHAIN_FROM else (
                part.min + 1 if part.max is None else part.max)
            total += 1 + max(copies, 1) * (1 + _size(part.item, inlined, sizes))
        else:
            total += 1
        if total >= OUTLINE_FROM:
            break
        if count & 16383 == 0:
            check_deadline("sizing the pushdown bodies")
    sizes[id(node)] = total
    return total


def _parts(node: ir.Node, inlined: Mapping[int, ir.Node]) -> Iterator[ir.Node]:
    """`ir.distinct_nodes(node, into_repeats=False)`, with a call of a symbol in `inlined` walked as its body
    (a byte set of such calls alone is not counted itself: the body stands in its place)."""
    if not inlined:
        yield from ir.distinct_nodes(node, into_repeats=False)
        return
    seen: set[int] = set()
    pending = [node]
    while pending:
        current = pending.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        if type(current) is ir.ByteSet and current.ranges and current.ranges[-1][1] >= CALL_BASE:
            symbols = [symbol for lo, hi in current.ranges if hi >= CALL_BASE
                       for symbol in range(max(lo, CALL_BASE), hi + 1)]
            pending.extend(inlined[symbol] for symbol in symbols if symbol in inlined)
            if all(symbol in inlined for symbol in symbols) and current.ranges[0][0] >= CALL_BASE:
                continue
        yield current
        if isinstance(current, (ir.Seq, ir.Alt)):
            pending.extend(current.items)
