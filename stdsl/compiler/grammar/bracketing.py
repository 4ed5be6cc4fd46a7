"""Bracketed parts of recursive rules as rules of their own: the nonterminals a pushdown can call by one byte.

In `factor: NAME "(" args ")"`, calling `factor` clashes with the bytes `NAME` reads around it; the
part `"(" args ")"` opens and closes with bytes of its own. For every run of items that use a rule
of the same cycle, the part from the last item before it that reads at least one byte (and uses no
rule) to the first such item after it becomes a new rule; the language is unchanged.
"""

from __future__ import annotations

from collections.abc import Callable

from stdsl.compiler import ir
from stdsl.compiler.deadline import check_deadline
from stdsl.compiler.grammar.rule_algebra import Nullable, RuleUses, rule_symbol


def bracket_parts(body: ir.Node, cycle: frozenset[int], uses: RuleUses,
                  new_rule: Callable[[ir.Node], int]) -> ir.Node:
    """`body` with each bracketed part that uses a rule of `cycle` replaced by a use of `new_rule(part)`."""
    return _Bracketing(body, cycle, uses, new_rule).walk(body)


class _Bracketing:
    """`bracket_parts`' walk of one body.  A class, not a closure that calls itself: that would be a reference cycle
    holding the grammar's rules until the collector ran."""

    def __init__(self, body: ir.Node, cycle: frozenset[int], uses: RuleUses,
                 new_rule: Callable[[ir.Node], int]) -> None:
        self.body, self.cycle, self.uses, self.new_rule = body, cycle, uses, new_rule
        self.empty = Nullable(set())

    def boundary(self, item: ir.Node) -> bool:
        return not self.uses(item) and not self.empty(item)

    def walk(self, node: ir.Node) -> ir.Node:
        uses, cycle, walk = self.uses, self.cycle, self.walk
        if not (uses(node) & cycle):
            return node
        check_deadline("bracketing grammar rules")
        if isinstance(node, ir.Alt):
            return ir.alt(*(walk(item) for item in node.items))
        if isinstance(node, ir.Repeat):
            return ir.repeat(walk(node.item), node.min, node.max)
        if not isinstance(node, ir.Seq):
            return node
        items = [walk(item) for item in node.items]
        out: list[ir.Node] = []
        index = 0
        while index < len(items):
            if not (uses(items[index]) & cycle):
                out.append(items[index])
                index += 1
                continue
            end = index
            while end + 1 < len(items) and uses(items[end + 1]) & cycle:
                end += 1
            opening = next((k for k in range(len(out) - 1, -1, -1) if self.boundary(out[k])), None)
            closing = next((k for k in range(end + 1, len(items)) if self.boundary(items[k])), None)
            if opening is None or closing is None or (opening == 0 and closing == len(items) - 1
                                                      and node is self.body):
                out.extend(items[index:end + 1])
                index = end + 1
                continue
            part = ir.seq(*out[opening:], *items[index:closing + 1])
            del out[opening:]
            out.append(rule_symbol(self.new_rule(part)))
            index = closing + 1
        return ir.seq(*out)
