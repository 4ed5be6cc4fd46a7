"""Random regexes for property tests: quantified pieces joined by concatenation and alternation, and, where asked,
whole groups quantified again (the shape the automata tests against Python's `re` and reference constructions
draw from; each test picks its own pieces, quantifiers and size)."""

from __future__ import annotations

from collections.abc import Sequence

from hypothesis import strategies as st


def quantified_regexes(pieces: Sequence[str], quantifiers: Sequence[str], max_leaves: int,
                       groups_quantified: bool = True) -> st.SearchStrategy[str]:
    """Regexes of `(?:piece)quantifier` leaves, concatenated and alternated, with `(?:...)quantifier` around
    groups too when `groups_quantified`."""
    leaves = st.tuples(st.sampled_from(list(pieces)), st.sampled_from(list(quantifiers))).map(
        lambda t: f"(?:{t[0]}){t[1]}")

    def extend(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
        joined = [st.tuples(inner, inner).map("".join), st.tuples(inner, inner).map("|".join)]
        if groups_quantified:
            joined.append(st.tuples(inner, st.sampled_from(list(quantifiers))).map(lambda t: f"(?:{t[0]}){t[1]}"))
        return st.one_of(*joined)

    return st.recursive(leaves, extend, max_leaves=max_leaves)
