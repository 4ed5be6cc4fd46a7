"""Quoted literals that a quoted text beside them already reads, dropped from a body's alternations before its subset
construction.

A string value that is any string or one of some named strings (tmlanguage's scope `name`: a free string beside 160
scope names) is an alternation of the quoted text and every quoted literal.  Its language is the text's, but the
subset construction keeps the literals' trie apart from the text's DFA, a state per (trie node, text state) at each
place the value may be read: tmlanguage's pattern body has 1,733 states, 613 without the literals (its subset
construction 92 -> 15 ms).  Dropping a literal that the text reads leaves the body's language as it was, so every
mask (a function of what may follow each prefix, and of how short its completions are) is the same; the body's
table is smaller.
"""

from __future__ import annotations

from stdsl.compiler import ir
from stdsl.compiler.pushdown.literal_keys import QUOTE, QUOTE_SET
from stdsl.compiler.pushdown.quoted_keys import may_be_quoted_text, quoted_text


def quoted_union(node: ir.Alt) -> bool:
    """Whether an alternation holds a quoted text (a quote, an expression, a quote) and a quoted literal: one whose
    literals `without_subsumed_literals` may drop."""
    return any(_text_of(item) is not None for item in node.items) and any(
        _quoted_literal(item) is not None for item in node.items)


def holds_quoted_union(node: ir.Node, memo: dict[int, bool]) -> bool:
    """Whether some alternation under `node` is a `quoted_union`, kept in `memo` by identity (a part shared by
    several bodies of a grammar is walked once)."""
    known = memo.get(id(node))
    if known is not None:
        return known
    found = False
    if isinstance(node, ir.Repeat):
        found = holds_quoted_union(node.item, memo)
    elif isinstance(node, (ir.Seq, ir.Alt)) and "_literal" not in node.__dict__:
        found = (isinstance(node, ir.Alt) and quoted_union(node)) or any(
            holds_quoted_union(item, memo) for item in node.items
            if type(item) is not ir.ByteSet and "_literal" not in item.__dict__)
    memo[id(node)] = found
    return found


def without_subsumed_literals(node: ir.Node, memo: dict[int, ir.Node]) -> ir.Node:
    """`node` with every quoted literal of an alternation dropped where a quoted text of that alternation reads the
    literal's bytes between its quotes; parts without such alternations are returned as they are, shared parts stay
    shared (`memo`, by identity)."""
    known = memo.get(id(node))
    if known is not None:
        return known
    result = node
    if isinstance(node, ir.Repeat):
        item = without_subsumed_literals(node.item, memo)
        if item is not node.item:
            result = ir.Repeat(item, node.min, node.max)
    elif isinstance(node, (ir.Seq, ir.Alt)) and "_literal" not in node.__dict__:
        items = [item if isinstance(item, ir.ByteSet) else without_subsumed_literals(item, memo)
                 for item in node.items]
        if isinstance(node, ir.Alt):
            items = _kept(items)
        if len(items) != len(node.items) or any(new is not old for new, old in zip(items, node.items)):
            result = (ir.Seq(tuple(items)) if isinstance(node, ir.Seq)
                      else items[0] if len(items) == 1 else ir.Alt(tuple(items)))
    memo[id(node)] = result
    return result


def _kept(items: list[ir.Node]) -> list[ir.Node]:
    """An alternation's items less its quoted literals that one of its quoted texts (with a DFA: `quoted_text`)
    reads."""
    texts = [text for item in items if (text := _text_of(item)) is not None and may_be_quoted_text(text)]
    automata = [(automaton.transitions.tolist(), automaton.accepting.tolist())
                for text in texts if (automaton := quoted_text(text)) is not None]
    if not automata:
        return items
    return [item for item in items
            if (inner := _quoted_literal(item)) is None or not any(_reads(table, accepting, inner)
                                                                   for table, accepting in automata)]


def _text_of(node: ir.Node) -> ir.Node | None:
    """The expression between the quotes of a quoted text, or None."""
    if (not isinstance(node, ir.Seq) or "_literal" in node.__dict__ or len(node.items) != 3
            or node.items[0] is not QUOTE_SET or node.items[2] is not QUOTE_SET):
        return None
    inner = node.items[1]
    return None if isinstance(inner, (ir.ByteSet, ir.Embedded, ir.EmbeddedGrammar)) else inner


def _quoted_literal(node: ir.Node) -> bytes | None:
    """The bytes between the quotes of a quoted literal, or None."""
    if not isinstance(node, ir.Seq):
        return None
    data = ir.literal_bytes(node)
    if data is None or len(data) < 2 or data[0] != QUOTE or data[-1] != QUOTE:
        return None
    return data[1:-1]


def _reads(table: list[list[int]], accepting: list[bool], data: bytes) -> bool:
    """Whether a DFA (start 0, -1 dead) accepts `data`."""
    state = 0
    for byte in data:
        state = table[state][byte]
        if state < 0:
            return False
    return accepting[state]
