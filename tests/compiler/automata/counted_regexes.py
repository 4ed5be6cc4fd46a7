"""Random regexes with nested counted repetitions (a hypothesis strategy the NFA and counted-repetition tests share)."""

from __future__ import annotations

from hypothesis import strategies as st

ATOMS = ["a", "b", "[ab]", "(?:ab|ba)", "a*", "b?", "[a-c]", "é", "(?:xy|x)"]


@st.composite
def counted_regexes(draw: st.DrawFn, depth: int = 3, atoms: tuple[str, ...] = tuple(ATOMS), most_low: int = 6,
                    most_span: int = 8) -> str:
    """Random regexes over `atoms` with nested counted repetitions `{low,high}`, `{high}` and `{low,}` (low at most
    `most_low`, high - low at most `most_span`)."""
    kind = draw(st.integers(0, 4)) if depth else 0
    deeper = counted_regexes(depth - 1, atoms, most_low, most_span) if depth else None
    if kind == 0 or deeper is None:
        return draw(st.sampled_from(atoms))
    if kind == 1:
        return draw(deeper) + draw(deeper)
    if kind == 2:
        return f"(?:{draw(deeper)}|{draw(deeper)})"
    low = draw(st.integers(0, most_low))
    high = low + draw(st.integers(0, most_span))
    bound = draw(st.sampled_from([f"{{{low},{high}}}", f"{{{high}}}", f"{{{low},}}"]))
    return f"(?:{draw(deeper)}){bound}"
