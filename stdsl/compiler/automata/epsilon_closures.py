"""Epsilon closures of an NFA's states, each found once from the closures of its epsilon targets.

A closure is kept as the frozenset of its important states (those with byte edges, and the accepting state).  A
search from one state per closure walked the same epsilon chains again for every state above them (a body of
`Github_ultra---o48404`: 66,000 closures of about 10 states over 76,000 states with epsilon moves); here the states
are visited once, in Tarjan's order over the epsilon graph, and a state's closure is the union of its targets'
(shared as the same object where it adds nothing to its one target's), the states of a cycle sharing one closure.
"""

from __future__ import annotations

from stdsl.compiler.automata.nfa import NFA


class EpsilonClosures:
    """The closures of `nfa`'s states, found on demand: `memo[s]` is the closure of `s` once found (None before)."""

    def __init__(self, nfa: NFA) -> None:
        self.nfa = nfa
        self.memo: list[frozenset[int] | None] = [None] * nfa.num_states
        self.number = [0] * nfa.num_states
        """Tarjan's visit number of each state searched (0: not yet); a state numbered and not closed is on the
        stack of the search under way."""
        self.low = [0] * nfa.num_states
        self.count = 0

    def of(self, state: int) -> frozenset[int]:
        """The important states in the epsilon closure of `state`.  A state without epsilon moves (most of them: a
        literal's bytes) is its own closure, found without a search."""
        cached = self.memo[state]
        if cached is not None:
            return cached
        nfa = self.nfa
        if not nfa.eps[state]:
            result = frozenset((state,)) if nfa.edges[state] or state == nfa.accept else frozenset()
            self.memo[state] = result
            return result
        self._search(state)
        return self.memo[state]  # type: ignore[return-value]

    def _search(self, root: int) -> None:
        """Close every state that `root` reaches by epsilon moves and that is not closed yet: Tarjan's strongly
        connected components of the epsilon graph, each closed when it is complete (its targets outside it are)."""
        eps, memo, number, low = self.nfa.eps, self.memo, self.number, self.low
        count = self.count + 1
        number[root] = low[root] = count
        pending = [root]
        path = [root]
        positions = [0]
        while path:
            state = path[-1]
            targets = eps[state]
            position = positions[-1]
            while position < len(targets):
                target = targets[position]
                position += 1
                if memo[target] is not None or not eps[target]:
                    continue
                seen = number[target]
                if not seen:
                    positions[-1] = position
                    count += 1
                    number[target] = low[target] = count
                    pending.append(target)
                    path.append(target)
                    positions.append(0)
                    break
                if seen < low[state]:
                    low[state] = seen
            else:
                path.pop()
                positions.pop()
                reach = low[state]
                if path and reach < low[path[-1]]:
                    low[path[-1]] = reach
                if reach == number[state]:
                    if pending[-1] == state:
                        pending.pop()
                        memo[state] = self._joined((state,))
                    else:
                        at = len(pending) - 1 - pending[::-1].index(state)
                        component = pending[at:]
                        del pending[at:]
                        closed = self._joined(component)
                        for member in component:
                            memo[member] = closed
        self.count = count

    def _joined(self, component: list[int] | tuple[int]) -> frozenset[int]:
        """The closure of a strongly connected component whose epsilon targets outside it are closed: its important
        states and those closures (the one target's closure itself where the component adds nothing to it)."""
        nfa = self.nfa
        eps, edges, accept, memo = nfa.eps, nfa.edges, nfa.accept, self.memo
        found: list[int] = []
        parts: list[frozenset[int]] = []
        for member in component:
            if edges[member] or member == accept:
                found.append(member)
            for target in eps[member]:
                closed = memo[target]
                if closed is not None:
                    parts.append(closed)
                elif not eps[target]:
                    if edges[target] or target == accept:
                        found.append(target)
        if not found:
            if len(parts) == 1:
                return parts[0]
            return frozenset().union(*parts)
        return frozenset(found).union(*parts)
