"""Which rules must be pushdown nonterminals: the cycles of the rule graph and the choices that break them.

Every rule on no cycle is inlined into its callers. In a strongly connected component, a set of
rules made nonterminals (calls) must leave the other rules without a cycle among them, except a
rule's own left or right recursion, which becomes iteration. The choices are listed smallest
first, so the first one that passes the pushdown's L(1) checks makes the fewest calls.
"""

from __future__ import annotations

from itertools import combinations

from stdsl.compiler.deadline import check_deadline

MAX_ENUMERATED_COMPONENT = 12
MAX_CHOICES = 24


def is_cyclic(component: list[int], graph: list[set[int]]) -> bool:
    """Whether a component holds a cycle (more than one rule, or a rule that uses itself)."""
    return len(component) > 1 or component[0] in graph[component[0]]


def _acyclic_without(members: list[int], removed: set[int], graph: list[set[int]]) -> bool:
    """Whether the rules of `members` not in `removed` have no cycle among them (self-uses aside)."""
    rest = [m for m in members if m not in removed]
    inside = set(rest)
    indegree = {m: 0 for m in rest}
    for m in rest:
        for succ in graph[m]:
            if succ in inside and succ != m:
                indegree[succ] += 1
    ready = [m for m in rest if indegree[m] == 0]
    seen = 0
    while ready:
        node = ready.pop()
        seen += 1
        for succ in graph[node]:
            if succ in inside and succ != node:
                indegree[succ] -= 1
                if indegree[succ] == 0:
                    ready.append(succ)
    return seen == len(rest)


def nonterminal_choices(component: list[int], graph: list[set[int]], required: set[int]) -> list[frozenset[int]]:
    """Sets of rules of a cyclic component to make nonterminals, smallest first (rules earlier in `component`,
    which is in definition order, preferred), each containing `required` (rules whose own recursion is
    neither first nor last) and leaving the rest acyclic; the whole component comes last."""
    choices: list[frozenset[int]] = []
    optional = [m for m in component if m not in required]
    if len(component) <= MAX_ENUMERATED_COMPONENT:
        for size in range(len(optional) + 1):
            for extra in combinations(optional, size):
                check_deadline("choosing grammar nonterminals")
                chosen = set(required) | set(extra)
                if _acyclic_without(component, chosen, graph):
                    choices.append(frozenset(chosen))
                    if len(choices) >= MAX_CHOICES:
                        return choices
    else:
        chosen = set(required)
        while not _acyclic_without(component, chosen, graph):
            check_deadline("choosing grammar nonterminals")
            rest = [m for m in component if m not in chosen]
            inside = set(rest)
            chosen.add(max(rest, key=lambda m: len(graph[m] & inside) * sum(m in graph[o] for o in rest)))
        choices.append(frozenset(chosen))
    whole = frozenset(component)
    if whole not in choices:
        choices.append(whole)
    return choices
