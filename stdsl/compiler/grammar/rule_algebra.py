"""Rewrites of rule bodies as IR over rule symbols: substitution, left / right recursion as iteration, ε removal.

A rule body is ordinary IR in which a use of rule i is the symbol `RULE_BASE + i` (a byte set past
255, as the pushdown's call symbols are). Every rewrite here keeps the language: `a = a·A | B` is
`B A*`, `a = A·a | B` is `A* B` (Arden's rule), and a nullable nonterminal `a` is `a' | ε` with
`a'` its body without the empty string.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from stdsl.compiler import ir
from stdsl.compiler.deadline import check_deadline

RULE_BASE = 256


def rule_symbol(index: int) -> ir.Node:
    """The IR leaf standing for a use of rule `index`."""
    return ir.ByteSet(((RULE_BASE + index, RULE_BASE + index),))


def symbol_of(node: ir.Node) -> int | None:
    """The rule index a leaf stands for, or None for anything else."""
    if isinstance(node, ir.ByteSet) and len(node.ranges) == 1 and node.ranges[0][0] >= RULE_BASE:
        return node.ranges[0][0] - RULE_BASE
    return None


def _is_plain_literal(node: ir.Node) -> bool:
    return "_literal" in node.__dict__


class RuleUses:
    """The rules each node uses (memoized by node identity: bodies share subtrees)."""

    def __init__(self, plain: Iterable[ir.Node] = ()) -> None:
        """`plain`: nodes known to use no rule (`RuleTable.plain`), never walked."""
        self._keep: list[ir.Node] = list(plain)
        self._memo: dict[int, frozenset[int]] = {id(node): frozenset() for node in self._keep}
        self.known = self._memo.get
        """The uses found so far by node id (`known(id(node), default)`): those of every node under one asked, read
        without a call of this object (a rule's body of literal bytes has a node per byte)."""

    def __call__(self, node: ir.Node) -> frozenset[int]:
        """The rules `node` uses, children first on an explicit stack (bodies inline chains hundreds deep)."""
        found = self._memo.get(id(node))
        if found is not None:
            return found
        stack = [node]
        while stack:
            current = stack[-1]
            if id(current) in self._memo:
                stack.pop()
                continue
            children = self._children(current)
            pending = [child for child in children if id(child) not in self._memo]
            if pending:
                stack.extend(pending)
                continue
            stack.pop()
            if isinstance(current, ir.ByteSet):
                index = symbol_of(current)
                uses: frozenset[int] = frozenset() if index is None else frozenset((index,))
            else:
                uses = frozenset().union(*(self._memo[id(child)] for child in children))
            self._memo[id(current)] = uses
            self._keep.append(current)
        return self._memo[id(node)]

    @staticmethod
    def _children(node: ir.Node) -> tuple[ir.Node, ...]:
        """The sub-nodes whose uses make up `node`'s (none for a leaf or a plain literal)."""
        if isinstance(node, ir.Repeat):
            return (node.item,)
        if isinstance(node, (ir.Seq, ir.Alt)) and not _is_plain_literal(node):
            return tuple(node.items)
        return ()


def substitute(node: ir.Node, replace: Callable[[int], ir.Node | None], uses: RuleUses) -> ir.Node:
    """`node` with each use of rule i replaced by `replace(i)` (None: kept)."""
    return _Substitution(replace, uses).walk(node)


class _Substitution:
    """`substitute`'s walk, each node rewritten once.  A class, not a closure that calls itself: that would be a
    reference cycle holding the rewritten nodes until the collector ran."""

    def __init__(self, replace: Callable[[int], ir.Node | None], uses: RuleUses) -> None:
        self.replace, self.uses = replace, uses
        self.memo: dict[int, ir.Node] = {}

    def walk(self, current: ir.Node) -> ir.Node:
        if not self.uses(current):
            return current
        done = self.memo.get(id(current))
        if done is not None:
            return done
        check_deadline("rewriting grammar rules")
        known = self.uses.known
        if isinstance(current, ir.ByteSet):
            index = symbol_of(current)
            result = current if index is None else (self.replace(index) or current)
        elif isinstance(current, ir.Repeat):
            result = ir.repeat(self.walk(current.item), current.min, current.max)
        elif isinstance(current, ir.Seq):
            result = ir.seq(*(self.walk(item) if known(id(item), True) else item for item in current.items))
        elif isinstance(current, ir.Alt):
            result = ir.alt(*(self.walk(item) if known(id(item), True) else item for item in current.items))
        else:
            result = current
        self.memo[id(current)] = result
        return result


def split_head(node: ir.Node, rule: int, uses: RuleUses) -> tuple[ir.Node, ir.Node]:
    """(A, B) with L(node) = rule·A ∪ B, taking out the uses of `rule` that stand first."""
    if rule not in uses(node):
        return ir.NOTHING, node
    if symbol_of(node) == rule:
        return ir.EMPTY, ir.NOTHING
    if isinstance(node, ir.Alt):
        parts = [split_head(item, rule, uses) for item in node.items]
        return ir.alt(*(a for a, _ in parts)), ir.alt(*(b for _, b in parts))
    if isinstance(node, ir.Seq):
        first, rest = node.items[0], ir.seq(*node.items[1:])
        head, other = split_head(first, rule, uses)
        return ir.seq(head, rest), ir.seq(other, rest)
    if isinstance(node, ir.Repeat):
        head, other = split_head(node.item, rule, uses)
        rest = ir.repeat(node.item, max(node.min - 1, 0), None if node.max is None else node.max - 1)
        without = ir.seq(other, rest)
        return ir.seq(head, rest), (without if node.min > 0 else ir.alt(ir.EMPTY, without))
    return ir.NOTHING, node


def split_tail(node: ir.Node, rule: int, uses: RuleUses) -> tuple[ir.Node, ir.Node]:
    """(A, B) with L(node) = A·rule ∪ B, taking out the uses of `rule` that stand last."""
    if rule not in uses(node):
        return ir.NOTHING, node
    if symbol_of(node) == rule:
        return ir.EMPTY, ir.NOTHING
    if isinstance(node, ir.Alt):
        parts = [split_tail(item, rule, uses) for item in node.items]
        return ir.alt(*(a for a, _ in parts)), ir.alt(*(b for _, b in parts))
    if isinstance(node, ir.Seq):
        rest, last = ir.seq(*node.items[:-1]), node.items[-1]
        tail, other = split_tail(last, rule, uses)
        return ir.seq(rest, tail), ir.seq(rest, other)
    if isinstance(node, ir.Repeat):
        tail, other = split_tail(node.item, rule, uses)
        rest = ir.repeat(node.item, max(node.min - 1, 0), None if node.max is None else node.max - 1)
        without = ir.seq(rest, other)
        return ir.seq(rest, tail), (without if node.min > 0 else ir.alt(ir.EMPTY, without))
    return ir.NOTHING, node


def without_self_recursion(body: ir.Node, rule: int, uses: RuleUses) -> ir.Node | None:
    """The body of `rule` with its uses of itself first (left recursion) or last (right recursion) turned into
    iteration, or None when a use of itself would remain."""
    flat = _iterated(body, rule, uses, keep_calls=False)
    return None if rule in uses(flat) else flat


def self_recursion_as_iteration(body: ir.Node, rule: int, uses: RuleUses) -> ir.Node:
    """The body of a nonterminal with its first (or else last) uses of itself turned into iteration; its other
    uses of itself stay calls."""
    return _iterated(body, rule, uses, keep_calls=True)


def _iterated(body: ir.Node, rule: int, uses: RuleUses, keep_calls: bool) -> ir.Node:
    if rule not in uses(body):
        return body
    head, other = split_head(body, rule, uses)
    if head != ir.NOTHING and (keep_calls or rule not in uses(head) | uses(other)):
        return ir.seq(other, ir.star(head))
    tail, other = split_tail(body, rule, uses)
    if tail != ir.NOTHING and (keep_calls or rule not in uses(tail) | uses(other)):
        return ir.seq(ir.star(tail), other)
    return body


class Nullable:
    """Whether a node matches the empty string, given which rules do (memoized by identity)."""

    def __init__(self, nullable_rules: set[int]) -> None:
        self.rules = nullable_rules
        self._memo: dict[int, bool] = {}
        self._keep: list[ir.Node] = []

    def __call__(self, node: ir.Node) -> bool:
        found = self._memo.get(id(node))
        if found is not None:
            return found
        if isinstance(node, ir.ByteSet):
            result = symbol_of(node) in self.rules
        elif isinstance(node, ir.Repeat):
            result = node.min == 0 or self(node.item)
        elif isinstance(node, ir.Seq):
            result = all(self(item) for item in node.items)
        elif isinstance(node, ir.Alt):
            result = any(self(item) for item in node.items)
        elif isinstance(node, ir.EmbeddedGrammar):
            result = node.nullable
        else:
            result = bool(node.accepting[0])
        self._memo[id(node)] = result
        self._keep.append(node)
        return result


def nonempty_part(node: ir.Node, nullable: Nullable) -> ir.Node | None:
    """The language of `node` without the empty string (None: an embedded automaton that would need cutting)."""
    if not nullable(node):
        return node
    if isinstance(node, ir.Alt):
        parts = [nonempty_part(item, nullable) for item in node.items]
        return None if any(p is None for p in parts) else ir.alt(*(p for p in parts if p is not None))
    if isinstance(node, ir.Seq):
        if not node.items:
            return ir.NOTHING
        first, rest = node.items[0], ir.seq(*node.items[1:])
        head, tail = nonempty_part(first, nullable), nonempty_part(rest, nullable)
        if head is None or tail is None:
            return None
        return ir.alt(ir.seq(head, rest), tail)
    if isinstance(node, ir.Repeat):
        item = nonempty_part(node.item, nullable)
        if item is None:
            return None
        return ir.seq(item, ir.repeat(node.item, 0, None if node.max is None else node.max - 1))
    if isinstance(node, ir.ByteSet):
        return node
    return None


def productive_rules(bodies: list[ir.Node], uses: RuleUses) -> set[int]:
    """The rules that match at least one string (least fixed point over the bodies): each body is read once, and
    again only when a rule it uses is found productive; what is found to match something stays known."""
    users: dict[int, list[int]] = {}
    for index, body in enumerate(bodies):
        for used in uses(body):
            users.setdefault(used, []).append(index)
    productive: set[int] = set()
    matching: set[int] = set()
    pending = list(range(len(bodies) - 1, -1, -1))
    queued = set(pending)
    while pending:
        index = pending.pop()
        queued.discard(index)
        check_deadline("checking grammar rules")
        if index not in productive and _matches_something(bodies[index], productive, uses, matching, {}):
            productive.add(index)
            for user in users.get(index, ()):
                if user not in productive and user not in queued:
                    pending.append(user)
                    queued.add(user)
    return productive


def _matches_something(node: ir.Node, productive: set[int], uses: RuleUses, matching: set[int],
                       memo: dict[int, bool]) -> bool:
    """Whether `node` matches a string, given the `productive` rules; `matching` holds the ids of nodes found to
    (kept across calls: more productive rules never make a node match nothing), `memo` this call's answers."""
    if id(node) in matching:
        return True
    found = memo.get(id(node))
    if found is not None:
        return found
    if isinstance(node, ir.ByteSet):
        index = symbol_of(node)
        result = index is None or index in productive
    elif not uses(node):
        result = not isinstance(node, ir.Alt) or bool(node.items)
    elif isinstance(node, ir.Repeat):
        result = node.min == 0 or _matches_something(node.item, productive, uses, matching, memo)
    elif isinstance(node, ir.Seq):
        result = all(id(item) in matching or _matches_something(item, productive, uses, matching, memo)
                     for item in node.items)
    elif isinstance(node, ir.Alt):
        result = any(id(item) in matching or _matches_something(item, productive, uses, matching, memo)
                     for item in node.items)
    else:
        result = True
    if result:
        matching.add(id(node))
    else:
        memo[id(node)] = False
    return result
