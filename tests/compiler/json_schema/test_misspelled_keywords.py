"""The misspelling hint for unknown keywords (`resolve.misspelled_keyword`) is difflib's, though difflib is imported
only for keys its cheap bounds cannot rule out (issue 36: a fresh process's compile)."""

from __future__ import annotations

import difflib

from hypothesis import given, settings
from hypothesis import strategies as st

from stdsl.compiler.json_schema.resolve import CONSTRAINING_KEYWORDS, MISSPELLING_CUTOFF, misspelled_keyword


def _difflib_hint(key: str) -> str | None:
    """The hint as it was computed before: difflib over every key."""
    close = difflib.get_close_matches(key.lower(), list(CONSTRAINING_KEYWORDS), n=1, cutoff=MISSPELLING_CUTOFF)
    return CONSTRAINING_KEYWORDS[close[0]] if close else None


def _edits(keyword: str) -> st.SearchStrategy[str]:
    """`keyword` with a few characters dropped, doubled, swapped or replaced (near misses and far ones)."""
    def mutate(draw_ops: list[tuple[int, int, str]]) -> str:
        text = list(keyword)
        for op, position, char in draw_ops:
            if not text:
                break
            at = position % len(text)
            if op == 0:
                del text[at]
            elif op == 1:
                text.insert(at, char)
            elif op == 2 and at + 1 < len(text):
                text[at], text[at + 1] = text[at + 1], text[at]
            else:
                text[at] = char
        return "".join(text)

    ops = st.lists(st.tuples(st.integers(0, 3), st.integers(0, 64), st.sampled_from("aeiouxyzAEMLT_-$")),
                   max_size=6)
    return ops.map(mutate)


KEYS = st.one_of(st.sampled_from(sorted(CONSTRAINING_KEYWORDS.values())).flatmap(_edits),
                 st.text(alphabet=st.characters(codec="utf-8"), max_size=24))


@settings(max_examples=400, deadline=None)
@given(KEYS)
def test_the_hint_is_difflibs(key: str) -> None:
    assert misspelled_keyword(key) == _difflib_hint(key)


def test_known_misspellings_are_named() -> None:
    assert misspelled_keyword("minimun") == "minimum"
    assert misspelled_keyword("maxLenght") == "maxLength"
    assert misspelled_keyword("requried") == "required"
    assert misspelled_keyword("description") is None
