"""Epsilon closures of an NFA's states, memoized: a search that stops at closures already found, or where it grows
long, every state's closure found once from those of its epsilon targets.

A closure is kept as the frozenset of its important states (those with byte edges, and the accepting state).  Most
closures are a few states (a body of `Github_ultra---o48404`: 59,000 closures asked for, about 10 states each), which
a plain search finds fastest; it takes a closure already found as a whole instead of walking under it.  A search
that expands more than `SEARCHED_STATES` states is given up for Tarjan's order over the epsilon graph, which
closes each state it reaches once as the union of its targets' closures, the states of a cycle sharing one:
`Github_ultra---o46322`'s body asks for 4,000 closures of about 100 states along chains of optional items, which a
search per closure walked again for every state above them.
"""

from __future__ import annotations

from stdsl.compiler.automata.nfa import NFA

SEARCHED_STATES = 64
"""States a plain search for one closure expands before Tarjan's order takes over: over the closures that the six
largest subset constructions of the full MaskBench set's tail ask for, 16 to 160 were as fast as a plain search
where closures are short (a fifth faster than without taking found ones whole) and as Tarjan's order on the long
chains (five times faster than a plain search)."""


class EpsilonClosures:
    """The closures of `nfa`'s states, found on demand: `memo[s]` is the closure of `s` once found (None before)."""

    def __init__(self, nfa: NFA) -> None:
        self.nfa = nfa
        self.memo: list[frozenset[int] | None] = [None] * nfa.num_states
        self.number: list[int] = []
        """Tarjan's visit number of each state searched (0: not yet; made on the first such search); a state
        numbered and not closed is on the stack of the search under way."""
        self.low: list[int] = []
        self.count = 0

    def of(self, state: int) -> frozenset[int]:
        """The important states in the epsilon closure of `state`, memoized.  A state without epsilon moves (most of
        them: a literal's bytes) is its own closure, found without a search; others are searched for, taking
        closures already found as they are, and where that expands more than `SEARCHED_STATES` states, found in
        Tarjan's order (`_search`)."""
        memo = self.memo
        cached = memo[state]
        if cached is not None:
            return cached
        nfa = self.nfa
        eps, edges, accept = nfa.eps, nfa.edges, nfa.accept
        if not eps[state]:
            result = frozenset((state,)) if edges[state] or state == accept else frozenset()
            memo[state] = result
            return result
        seen = {state}
        stack = [state]
        found: list[int] = []
        parts: list[frozenset[int]] = []
        budget = SEARCHED_STATES
        while stack:
            current = stack.pop()
            if edges[current] or current == accept:
                found.append(current)
            targets = eps[current]
            if targets:
                budget -= 1
                if budget < 0:
                    self._search(state)
                    return memo[state]  # type: ignore[return-value]
                for target in targets:
                    if target not in seen:
                        seen.add(target)
                        known = memo[target]
                        if known is None:
                            stack.append(target)
                        else:
                            parts.append(known)
        result = frozenset(found).union(*parts) if parts else frozenset(found)
        memo[state] = result
        return result

    def _search(self, root: int) -> None:
        """Close every state that `root` reaches by epsilon moves and that is not closed yet: Tarjan's strongly
        connected components of the epsilon graph, each closed when it is complete (its targets outside it are)."""
        if not self.number:
            self.number = [0] * self.nfa.num_states
            self.low = [0] * self.nfa.num_states
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
