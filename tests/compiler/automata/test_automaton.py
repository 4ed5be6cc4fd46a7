"""Compiled automata accept exactly what `re.fullmatch` accepts, and their derived tables are right."""

from __future__ import annotations

import random
import re
import time
from collections import deque

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stdsl.compiler import ir
from stdsl.compiler.automata.automaton import Automaton
from stdsl.compiler.automata.build import build_automaton, compile_regex
from stdsl.errors import EmptyLanguageError, StateBudgetError

LITERALS = ["a", "b", "c", "é", "中", "😀", "\\.", "\\*", "\\\\", "-", " ", "0", "7", "_", "\\n", "\\t",
            "\\x41", "\\u00e9", "\\U0001F600"]
CLASSES = ["[abc]", "[a-c]", "[^a]", "[^ab\\n]", "[é-ü]", "[\\d_]", "[^\\w]", "[\\s,]", "[0-9a-fA-F]",
           "[]a]", "[a-]", "[^中]", "\\d", "\\w", "\\s", "\\D", "\\W", "\\S", "."]
QUANTIFIERS = ["*", "+", "?", "*?", "+?", "??", "{2}", "{0,2}", "{1,3}", "{2,}", "{,2}", "{1,2}?"]
ALPHABET = ["a", "b", "c", "A", "é", "ü", "中", "😀", ".", "*", "\\", "-", " ", "0", "7", "_", "\n", "\t",
            "٣", "\u2003", "\u00a0", ",", "x", "Ω", "\x00", "]"]

atoms = st.sampled_from(LITERALS + CLASSES)


def _compose(children: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    return st.one_of(
        st.tuples(children, children).map("".join),
        st.tuples(children, children).map("|".join),
        children.map(lambda c: f"({c})"),
        children.map(lambda c: f"(?:{c})"),
        children.map(lambda c: f"(?P<g>{c})"),
        st.tuples(children, st.sampled_from(QUANTIFIERS)).map(lambda t: f"(?:{t[0]}){t[1]}"),
        st.tuples(atoms, st.sampled_from(QUANTIFIERS)).map("".join),
    )


def _name_groups(pattern: str) -> str:
    parts = pattern.split("(?P<g>")
    return parts[0] + "".join(f"(?P<g{i}>{part}" for i, part in enumerate(parts[1:]))


patterns = st.recursive(atoms, _compose, max_leaves=6).map(_name_groups)


def _pieces(pattern: str) -> list[str]:
    return sorted({ch for ch in pattern if ch not in "()[]{}|?*+^$\\"}) + ALPHABET


def accepted_sample(automaton: Automaton, rng: random.Random, max_len: int = 12) -> bytes:
    """A random accepted byte string: a walk that heads for acceptance once it is long enough."""
    state, out = 0, bytearray()
    distance = automaton.min_bytes_to_accept
    while True:
        live = list(automaton.live_bytes(state))
        if automaton.accepting[state] and (not live or len(out) >= max_len or rng.random() < 0.3):
            return bytes(out)
        if len(out) >= max_len:
            live = [b for b in live if distance[automaton.transitions[state, b]] < distance[state]]
        byte = rng.choice(live)
        out.append(byte)
        state = int(automaton.transitions[state, byte])


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pattern=patterns, data=st.data())
def test_automaton_agrees_with_re_fullmatch(pattern: str, data: st.DataObject) -> None:
    compiled = re.compile(pattern)
    try:
        automaton = compile_regex(pattern)
    except EmptyLanguageError:
        automaton = None
    texts = data.draw(st.lists(st.text(alphabet=st.sampled_from(_pieces(pattern)), max_size=7), max_size=25))
    for text in texts + [""]:
        expected = compiled.fullmatch(text) is not None
        got = automaton is not None and automaton.accepts(text.encode("utf-8"))
        assert got == expected, (pattern, text)
    if automaton is None:
        return
    assert automaton.is_trim()
    rng = random.Random(data.draw(st.integers(0, 2**32)))
    for _ in range(10):
        sample = accepted_sample(automaton, rng)
        assert compiled.fullmatch(sample.decode("utf-8")), (pattern, sample)


def test_samples_cover_unicode_classes() -> None:
    automaton = compile_regex(r"[\w\s]{3}\d\D\W\S")
    rng = random.Random(7)
    for _ in range(300):
        text = accepted_sample(automaton, rng).decode("utf-8")
        assert re.fullmatch(r"[\w\s]{3}\d\D\W\S", text)


def test_numbering_is_bfs_from_start_in_byte_order() -> None:
    automaton = compile_regex(r'\{"a":(?:[0-9]+|"[a-z]*")(?:,"b":true)?\}')
    order, seen = [0], {0}
    queue = deque([0])
    while queue:
        for target in automaton.transitions[queue.popleft()].tolist():
            if target >= 0 and target not in seen:
                seen.add(target)
                order.append(target)
                queue.append(target)
    assert order == list(range(automaton.num_states))


def test_equal_languages_give_identical_tables() -> None:
    first = compile_regex("(a|b)*abb")
    second = compile_regex("(?:[ab]*a)b{2}")
    assert np.array_equal(first.transitions, second.transitions)
    assert np.array_equal(first.accepting, second.accepting)


def _brute_forced_chain(transitions: np.ndarray, accepting: np.ndarray, state: int) -> tuple[bytes, int]:
    out, seen = bytearray(), set()
    while state >= 0 and state not in seen:
        live = [b for b in range(256) if transitions[state][b] >= 0]
        if accepting[state] or len(live) != 1:
            break
        seen.add(state)
        out.append(live[0])
        state = transitions[state][live[0]]
    return bytes(out), state


def _reaches_accept(transitions: np.ndarray, accepting: np.ndarray, removed: int | None) -> bool:
    if removed == 0:
        return False
    seen, stack = {0}, [0]
    while stack:
        state = stack.pop()
        if accepting[state]:
            return True
        for target in set(transitions[state].tolist()):
            if target >= 0 and target != removed and target not in seen:
                seen.add(target)
                stack.append(target)
    return False


def _brute_cut_states(transitions: np.ndarray, accepting: np.ndarray) -> list[bool]:
    if not _reaches_accept(transitions, accepting, None):
        return [False] * len(transitions)
    return [not _reaches_accept(transitions, accepting, c) for c in range(len(transitions))]


def _brute_min_bytes(transitions: np.ndarray, accepting: np.ndarray) -> list[int]:
    out = []
    for start in range(len(transitions)):
        distance, queue, best = {start: 0}, deque([start]), -1
        while queue:
            state = queue.popleft()
            if accepting[state]:
                best = distance[state]
                break
            for target in transitions[state].tolist():
                if target >= 0 and target not in distance:
                    distance[target] = distance[state] + 1
                    queue.append(target)
        out.append(best)
    return out


@st.composite
def random_dfas(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray]:
    """Small random DFAs over the bytes a, b, c (not necessarily trim)."""
    num_states = draw(st.integers(1, 9))
    transitions = np.full((num_states, 256), -1, dtype=np.int64)
    for state in range(num_states):
        for byte in b"abc":
            transitions[state, byte] = draw(st.integers(-1, num_states - 1))
    accepting = np.array(draw(st.lists(st.booleans(), min_size=num_states, max_size=num_states)))
    return transitions, accepting


@settings(max_examples=300, deadline=None)
@given(random_dfas())
def test_derived_tables_match_brute_force_on_random_dfas(dfa: tuple[np.ndarray, np.ndarray]) -> None:
    transitions, accepting = dfa
    automaton = Automaton(transitions, accepting)
    assert automaton.cut_states.tolist() == _brute_cut_states(transitions, accepting)
    assert automaton.min_bytes_to_accept.tolist() == _brute_min_bytes(transitions, accepting)
    for state in range(automaton.num_states):
        chain, end = _brute_forced_chain(transitions, accepting, state)
        assert automaton.forced_chain(state) == chain
        assert automaton.chain_end(state) == end
        live = bytes(b for b in range(256) if transitions[state, b] >= 0)
        assert automaton.live_bytes(state) == live
        assert automaton.live_count[state] == len(live)
        forced = not accepting[state] and len(live) == 1
        assert automaton.forced_byte[state] == (live[0] if forced else -1)
    reachable = {0}
    stack = [0]
    while stack:
        for target in transitions[stack.pop()].tolist():
            if target >= 0 and target not in reachable:
                reachable.add(target)
                stack.append(target)
    trim = len(reachable) == automaton.num_states and all(d >= 0 for d in _brute_min_bytes(transitions, accepting))
    assert automaton.is_trim() == trim


@pytest.mark.parametrize("pattern", [
    r'\{"name":"[a-z]*","age":[0-9]+\}', "(a|b)*c(d|e)", "abc(d|e)*fg", r"x(\d{2}|y)*z", "é(é|ü)?中", "a|b|",
])
def test_derived_tables_match_brute_force_on_compiled_automata(pattern: str) -> None:
    automaton = compile_regex(pattern)
    transitions = automaton.transitions.astype(np.int64)
    assert automaton.cut_states.tolist() == _brute_cut_states(transitions, automaton.accepting)
    assert automaton.min_bytes_to_accept.tolist() == _brute_min_bytes(transitions, automaton.accepting)
    for state in range(automaton.num_states):
        assert (automaton.forced_chain(state), automaton.chain_end(state)) == \
            _brute_forced_chain(transitions, automaton.accepting, state)


def test_forced_keys_end_at_cut_states() -> None:
    automaton = compile_regex(r'\{"name":"[a-z]*","age":[0-9]+\}')
    assert automaton.forced_chain(0) == b'{"name":"'
    after_key = automaton.chain_end(0)
    assert automaton.cut_states[after_key]
    assert automaton.cut_states[0]
    state = automaton.step(0, b'{"name":"bob"')
    assert automaton.forced_chain(state) == b',"age":'
    assert automaton.cut_states[automaton.chain_end(state)]


def test_step_accepts_and_repr() -> None:
    automaton = compile_regex("ab*")
    assert automaton.step(0, b"abbb") >= 0
    assert automaton.step(0, b"ba") == -1
    assert automaton.step(-1, b"") == -1
    assert automaton.accepts(b"a") and automaton.accepts(b"abb") and not automaton.accepts(b"")
    assert repr(automaton) == f"Automaton(states={automaton.num_states}, bytes={automaton.nbytes})"
    whole = int((np.count_nonzero(automaton.class_transitions >= 0, axis=1) >= 2).sum())
    per_state = 1 + 2 + 1  # sole_class, sole_target (int16), accepting
    assert automaton.nbytes == whole * automaton.num_classes * 2 + automaton.num_states * per_state + 256
    assert automaton.start == 0


def test_constructor_coerces_dtype_and_validates() -> None:
    small = Automaton(np.full((3, 256), -1, dtype=np.int64), [True, False, False])
    assert small.transitions.dtype == np.int16 and small.accepting.dtype == bool
    big = Automaton(np.full((40_000, 256), -1, dtype=np.int16), np.zeros(40_000, dtype=bool))
    assert big.transitions.dtype == np.int32
    with pytest.raises(ValueError):
        Automaton(np.zeros((2, 255), dtype=np.int32), [True, True])
    with pytest.raises(ValueError):
        Automaton(np.full((2, 256), 2, dtype=np.int32), [True, True])
    with pytest.raises(ValueError):
        Automaton(np.zeros((2, 256), dtype=np.int32), [True])
    with pytest.raises(TypeError):
        Automaton(np.zeros((1, 256), dtype=float), [True])


def test_forced_chain_stops_on_a_forced_cycle() -> None:
    transitions = np.full((2, 256), -1, dtype=np.int32)
    transitions[0, ord("a")] = 1
    transitions[1, ord("b")] = 0
    automaton = Automaton(transitions, [False, False])
    assert automaton.forced_chain(0) == b"ab"
    assert automaton.chain_end(0) == 0
    assert not automaton.is_trim()
    assert not automaton.cut_states.any()
    assert automaton.min_bytes_to_accept.tolist() == [-1, -1]


def test_empty_language_is_an_error() -> None:
    for pattern in ["[^\\x00-\\U0010FFFF]", "\\ud800", "a\\ud800b"]:
        with pytest.raises(EmptyLanguageError):
            compile_regex(pattern)
    with pytest.raises(EmptyLanguageError):
        build_automaton(ir.NOTHING)


def test_empty_string_language() -> None:
    automaton = compile_regex("")
    assert automaton.num_states == 1 and automaton.accepts(b"") and not automaton.accepts(b"a")
    assert automaton.cut_states.tolist() == [True]


def test_state_budget_blowup_is_refused_fast() -> None:
    start = time.perf_counter()
    with pytest.raises(StateBudgetError) as info:
        compile_regex("(a|b)*a(a|b){25}", max_states=2000)
    assert "2,000" in str(info.value) and "max_states" in str(info.value)
    assert time.perf_counter() - start < 2.0
    assert compile_regex("(a|b)*a(a|b){5}").num_states == 64


def test_nfa_size_guard_is_refused_fast() -> None:
    start = time.perf_counter()
    with pytest.raises(StateBudgetError, match="NFA states"):
        compile_regex("((a{1000}){1000}){1000}")
    assert time.perf_counter() - start < 1.0


def test_embedded_automaton_is_spliced_in_like_its_regex() -> None:
    inner = compile_regex(r"[0-9]+(\.[0-9]+)?")
    field = ir.seq(ir.literal("x="), ir.Embedded(inner.transitions, inner.accepting), ir.literal(";"))
    spliced = build_automaton(ir.repeat(field, 1, 3))
    reference = compile_regex(r"(?:x=[0-9]+(?:\.[0-9]+)?;){1,3}")
    assert np.array_equal(spliced.transitions, reference.transitions)
    assert np.array_equal(spliced.accepting, reference.accepting)
