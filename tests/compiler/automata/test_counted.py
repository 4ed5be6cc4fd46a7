"""Counted repetition built from its body's DFA (a counter product) accepts what the expanded copies accept: the
same minimal DFA, and the same answers as Python `re` on random strings and mutations of accepted ones."""

from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import given, reject, settings
from hypothesis import strategies as st

from stdsl.compiler import ir
from stdsl.compiler.automata import build, counted
from stdsl.compiler.automata.automaton import Automaton
from stdsl.compiler.automata.build import build_automaton
from stdsl.compiler.automata.counted import counted_table
from stdsl.compiler.automata.determinize import determinize
from stdsl.compiler.automata.minimization.minimize import minimize, trim
from stdsl.compiler.automata.nfa import build_nfa
from stdsl.compiler.json_schema.to_ir import schema_to_ir
from stdsl.compiler.regex.parser import parse_regex
from stdsl.errors import StateBudgetError
from tests.compiler.automata.counted_regexes import ATOMS, counted_regexes

COUNTED_ATOMS = (*ATOMS, "(?:ab|a)", "[^a]")
"""The shared atoms and two whose end reads a following byte."""


def counted_cases() -> st.SearchStrategy[str]:
    """Random counted regexes, with slightly larger bounds than the NFA tests draw."""
    return counted_regexes(atoms=COUNTED_ATOMS, most_low=7, most_span=9)


RE_ATOMS = tuple(atom for atom in COUNTED_ATOMS if atom not in ("a*", "b?"))
"""Atoms Python's backtracking `re` matches in bounded time when nested two deep (no star, no empty match)."""
RE_TEXT = 12
"""The longest text `re` judges: ambiguous bodies nested in counts backtrack through every way to split a text."""


def re_cases() -> st.SearchStrategy[str]:
    """Random counted regexes `re` can judge quickly on short texts: two levels deep over `RE_ATOMS`."""
    return counted_regexes(depth=2, atoms=RE_ATOMS, most_low=7, most_span=9)


def _expanded(node: ir.Node) -> tuple[np.ndarray, np.ndarray]:
    """The minimal DFA (byte table, accepting) of `node` with every counted repetition expanded into copies."""
    dfa = determinize(build_nfa(node))
    return minimize(dfa.byte_table(), dfa.accepting)


def _direct(node: ir.Node, monkeypatch: pytest.MonkeyPatch) -> Automaton:
    """The automaton of `node` with every counted repetition of two or more copies built from its body's DFA."""
    monkeypatch.setattr(build, "COUNTED_DIRECT_FROM", 2)
    return build_automaton(node)


@settings(max_examples=60, deadline=None)
@given(pattern=counted_cases())
def test_direct_repeats_are_the_expanded_minimal_dfa(pattern: str) -> None:
    node = parse_regex(pattern)
    try:
        expected = _expanded(node)
    except StateBudgetError:
        reject()
    with pytest.MonkeyPatch.context() as patch:
        got = _direct(node, patch)
    # Past `MINIMIZE_UP_TO` states an automaton is only trimmed (either way it is built), so compare minimal forms.
    table, accepting = minimize(got.transitions, got.accepting)
    assert np.array_equal(table, expected[0]), pattern
    assert np.array_equal(accepting, expected[1]), pattern


@settings(max_examples=60, deadline=None)
@given(pattern=re_cases(), texts=st.lists(st.text(alphabet="abcxyé", max_size=RE_TEXT), max_size=6),
       data=st.data())
def test_direct_repeats_match_re(pattern: str, texts: list[str], data: st.DataObject) -> None:
    with pytest.MonkeyPatch.context() as patch:
        try:
            automaton = _direct(parse_regex(pattern), patch)
        except StateBudgetError:
            reject()
    oracle = re.compile(pattern)
    for text in texts + [t for t in _mutations(_accepted(automaton, data), data) if len(t) <= RE_TEXT]:
        assert automaton.accepts(text.encode()) == bool(oracle.fullmatch(text)), (pattern, text)


def _accepted(automaton: Automaton, data: st.DataObject) -> str | None:
    """A random accepted string: a walk that stops at an accepting state (None if the walk dies undecoded)."""
    state, out = 0, bytearray()
    for _ in range(RE_TEXT):
        if automaton.accepting[state] and data.draw(st.booleans()):
            break
        live = np.flatnonzero(automaton.transitions[state] >= 0)
        if len(live) == 0:
            break
        byte = int(data.draw(st.sampled_from(live.tolist())))
        out.append(byte)
        state = int(automaton.transitions[state, byte])
    try:
        return out.decode() if automaton.accepting[state] else None
    except UnicodeDecodeError:
        return None


def _mutations(text: str | None, data: st.DataObject) -> list[str]:
    """`text` and a few edits of it: one character dropped, doubled or replaced."""
    if text is None:
        return []
    out = [text]
    for _ in range(3):
        if not text:
            break
        at = data.draw(st.integers(0, len(text) - 1))
        edit = data.draw(st.sampled_from(["drop", "double", "replace"]))
        if edit == "drop":
            out.append(text[:at] + text[at + 1:])
        elif edit == "double":
            out.append(text[:at] + text[at] + text[at:])
        else:
            out.append(text[:at] + data.draw(st.sampled_from("abxé")) + text[at + 1:])
    return out


@settings(max_examples=80, deadline=None)
@given(body=st.sampled_from(["a", "ab|a", "[a-c]d?x", "é|ab", "xy|x|zz", "\\w\\w", "a*b", "(?:ba)*c", "(?:ab)+c|d"]),
       low=st.integers(0, 12), extra=st.integers(0, 12), unbounded=st.booleans())
def test_counted_table_is_the_expansion(body: str, low: int, extra: int, unbounded: bool) -> None:
    """The counted table is the expansion's language, and trim (a trim searching both ways leaves it as it is: the
    copies of a start no move enters are not laid out; a start that is entered is kept, and reached)."""
    high = None if unbounded else max(low + extra, 1)
    built = counted_table(build_automaton(parse_regex(body)), low, high, 100_000)
    assert built is not None, body
    table, accepting, byte_class = built
    trimmed = trim(table, accepting)
    assert np.array_equal(trimmed[0], table) and np.array_equal(trimmed[1], accepting)
    got = minimize(table[:, byte_class], accepting)
    expected = _expanded(ir.repeat(parse_regex(body), low, high))
    assert np.array_equal(got[0], expected[0]) and np.array_equal(got[1], expected[1])


@pytest.mark.parametrize("body", ["a+", "[ab]+", "(?:ab)*c?", "a|aa", "xy|x|yz"])
def test_a_body_whose_end_reads_its_start_is_expanded(body: str) -> None:
    assert counted_table(build_automaton(parse_regex(body)), 2, 9, 100_000) is None


def test_a_counter_past_the_state_budget_is_expanded() -> None:
    body = build_automaton(parse_regex("[a-z]"))
    assert counted_table(body, 0, 500, 100) is None
    assert counted_table(body, 0, 500, 1100) is not None


def test_a_length_bound_beside_a_pattern_is_built_from_one_character(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[int, int | None]] = []
    original = build.counted_table

    def counting(body: Automaton, low: int, high: int | None, max_states: int) -> object:
        calls.append((low, high))
        return original(body, low, high, max_states)

    monkeypatch.setattr(build, "counted_table", counting)
    name = {"type": "string", "minLength": 2, "maxLength": 300, "pattern": "^[a-zé]+$"}
    schema = {"type": "object", "properties": {"name": name}, "required": ["name"], "additionalProperties": False}
    automaton = build_automaton(schema_to_ir(schema))
    assert (2, 300) in calls
    for length, valid in ((1, False), (2, True), (300, True), (301, False)):
        assert automaton.accepts(b'{"name":"' + "é".encode() * length + b'"}') == valid, length
    assert not automaton.accepts(b'{"name":"' + b"ab1" + b'"}')


def _counted_table_before(body: Automaton, low: int, high: int | None, max_states: int
                          ) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """`counted_table` as it was before o9787's compile (issue 36): every item's rows from `np.where` over int64
    temporaries; the oracle of its table."""
    table = np.asarray(body.class_transitions, dtype=np.int64)
    accepting = np.asarray(body.accepting, dtype=bool)
    start_live = table[0] >= 0
    if accepting[0]:
        if start_live.any():
            return None
        low = 0
    if (high is None or high > 1) and (table[accepting][:, start_live] >= 0).any():
        return None
    layers = max(low - 1, 0) + 1 if high is None else high
    size = table.shape[0]
    if 1 + layers * size > max_states:
        return None
    skipped = 0 if (table == 0).any() else 1  # the start has no copy in an item when no move enters it
    kept = size - skipped
    index = np.arange(layers)
    following = np.minimum(index + 1, layers - 1) if high is None else index + 1
    jumps = accepting[skipped:, None] & start_live[None, :]
    inner = table[skipped:] >= 0
    counted = np.empty((1 + layers * kept, table.shape[1]), dtype=np.int64)
    counted[0] = np.where(start_live, 1 + table[0] - skipped, -1)
    rows = counted[1:]
    step = max(1, (1 << 16) // size)
    for lo in range(0, layers, step):
        at, ahead_of = index[lo:lo + step], following[lo:lo + step]
        within = 1 - skipped + at[:, None, None] * kept + table[None, skipped:, :]
        ahead = 1 - skipped + ahead_of[:, None, None] * kept + table[0][None, None, :]
        ahead_open = jumps[None, :, :] & (ahead_of < layers)[:, None, None]
        rows[lo * kept:(lo + len(at)) * kept] = np.where(inner[None], within,
                                                         np.where(ahead_open, ahead, -1)).reshape(-1, table.shape[1])
    accepts = np.concatenate([[low == 0], (accepting[None, skipped:] & (index + 1 >= low)[:, None]).reshape(-1)])
    return counted, accepts, np.asarray(body.byte_class)


@settings(max_examples=80, deadline=None)
@given(body=st.sampled_from(["a", "ab|a", "[a-c]d?x", "é|ab", "xy|x|zz", "\\w\\w", "a*b", "(?:ba)*c", "(?:ab)+c|d"]),
       low=st.integers(0, 12), extra=st.integers(0, 12), unbounded=st.booleans(), rows=st.sampled_from([1, 7, 1 << 16]))
def test_counted_table_is_the_table_built_before(body: str, low: int, extra: int, unbounded: bool, rows: int) -> None:
    """Items written as the first item's rows shifted (a few items or all between deadline checks) give the table
    the int64 `np.where` layout gave, move for move (its dtype aside)."""
    high = None if unbounded else max(low + extra, 1)
    automaton = build_automaton(parse_regex(body))
    kept = counted.LAYER_ROWS
    counted.LAYER_ROWS = rows
    try:
        built = counted_table(automaton, low, high, 100_000)
    finally:
        counted.LAYER_ROWS = kept
    expected = _counted_table_before(automaton, low, high, 100_000)
    assert built is not None and expected is not None
    assert all(np.array_equal(got, want) for got, want in zip(built, expected))
