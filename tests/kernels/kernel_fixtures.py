"""Automata and vocabularies for the kernel tests: random DFAs and hand-built JSON-like DFAs as numpy arrays."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

Part = bytes | tuple[str, bytes]


def random_dfa(
    rng: np.random.Generator, num_states: int, live_fraction: float, alphabet: bytes
) -> tuple[np.ndarray, np.ndarray]:
    """A random DFA over `alphabet` (other bytes dead): (transitions (Q, 256) int16, accepting (Q,))."""
    transitions = np.full((num_states, 256), -1, dtype=np.int16)
    columns = np.frombuffer(alphabet, dtype=np.uint8)
    live = rng.random((num_states, columns.shape[0])) < live_fraction
    targets = rng.integers(0, num_states, size=(num_states, columns.shape[0]))
    transitions[:, columns] = np.where(live, targets, -1)
    accepting = rng.random(num_states) < 0.3
    return transitions, accepting


def chain_dfa(parts: Sequence[Part]) -> tuple[np.ndarray, np.ndarray]:
    """DFA for a concatenation of literals and ('star'|'plus', byte class) parts; accepts at the end.

    Each class must be disjoint from the byte that follows it, so the result is deterministic.
    """
    steps: list[tuple[bytes, bool]] = []
    for part in parts:
        if isinstance(part, bytes):
            steps.extend((bytes([b]), False) for b in part)
        else:
            op, cls = part
            if op == "plus":
                steps.append((cls, False))
            steps.append((cls, True))
    num_states = 1 + sum(1 for _, loop in steps if not loop)
    transitions = np.full((num_states, 256), -1, dtype=np.int16)
    state = 0
    for cls, loop in steps:
        columns = np.frombuffer(cls, dtype=np.uint8)
        if loop:
            transitions[state, columns] = state
        else:
            transitions[state, columns] = state + 1
            state += 1
    accepting = np.zeros(num_states, dtype=bool)
    accepting[-1] = True
    return transitions, accepting


STRING_CHARS = bytes(b for b in range(0x20, 256) if b not in b'"\\')
DIGITS = b"0123456789"
LOWER = bytes(range(ord("a"), ord("z") + 1))


def person_dfa() -> tuple[np.ndarray, np.ndarray]:
    """A JSON-object-like DFA: {"name":"<string>","age":<digits>,"email":"<string>","tags":["<lower>"]}."""
    return chain_dfa(
        [
            b'{"name":"',
            ("star", STRING_CHARS),
            b'","age":',
            ("plus", DIGITS),
            b',"email":"',
            ("star", STRING_CHARS),
            b'","tags":["',
            ("star", LOWER),
            b'"]}',
        ]
    )


def naive_next_state(transitions: np.ndarray, state: int, token: bytes | None) -> int:
    """δ*(state, token) by a plain Python walk; -1 for dead or for a token without bytes."""
    if token is None or len(token) == 0:
        return -1
    s = state
    for b in token:
        s = int(transitions[s, b])
        if s < 0:
            return -1
    return s


MULTIBYTE_ALPHABET = bytes(
    [
        0x22,
        0x2C,
        0x61,
        0x62,
        0x7B,
        0x7D,
        0xC3,
        0xA9,
        0xE2,
        0x82,
        0xAC,
        0xF0,
        0x9F,
        0x00,
        0xFF,
    ]
)


def dfa_and_vocab_strategy(max_states: int = 8, max_tokens: int = 40):
    """Hypothesis strategy: (transitions, accepting, token_bytes, eos_ids) over a small byte alphabet.

    Tokens mix single bytes with multibyte UTF-8 pieces; the list holds specials (None) and one eos.
    """
    from hypothesis import strategies as st

    @st.composite
    def build(draw):
        alphabet = draw(
            st.lists(
                st.sampled_from(MULTIBYTE_ALPHABET), min_size=1, max_size=8, unique=True
            )
        )
        num_states = draw(st.integers(1, max_states))
        cell = st.one_of(st.just(-1), st.integers(0, num_states - 1))
        transitions = np.full((num_states, 256), -1, dtype=np.int16)
        for q in range(num_states):
            for b in alphabet:
                transitions[q, b] = draw(cell)
        accepting = np.asarray(
            draw(st.lists(st.booleans(), min_size=num_states, max_size=num_states)),
            dtype=bool,
        )
        token = st.lists(st.sampled_from(alphabet), min_size=1, max_size=7).map(bytes)
        tokens: list[bytes | None] = draw(
            st.lists(token, min_size=1, max_size=max_tokens)
        )
        specials = draw(st.integers(0, 3))
        for _ in range(specials):
            tokens.insert(draw(st.integers(0, len(tokens))), None)
        tokens.append(None)
        return transitions, accepting, tokens, [len(tokens) - 1]

    return build()


def naive_table(
    transitions: np.ndarray, tokens: Sequence[bytes | None], eos_ids: Sequence[int]
) -> np.ndarray:
    """T[q, t] by plain Python walks (eos and specials -1)."""
    eos = set(eos_ids)
    return np.asarray(
        [
            [
                naive_next_state(transitions, q, None if i in eos else t)
                for i, t in enumerate(tokens)
            ]
            for q in range(transitions.shape[0])
        ],
        dtype=np.int64,
    ).reshape(transitions.shape[0], len(tokens))


STRING_RE = r'"([^"\\\x00-\x1f]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})*"'
INTEGER_RE = r"-?(0|[1-9][0-9]*)"
WS = r"[ ]?"


def person_regex() -> str:
    """An outlines-style regex for {name: string, age: integer, email: string, tags: [string]}."""

    def key(name: str, value: str) -> str:
        return f'{WS}"{name}"{WS}:{WS}{value}'

    tags = rf"\[{WS}({STRING_RE}({WS},{WS}{STRING_RE})*)?{WS}\]"
    fields = [
        key("name", STRING_RE),
        key("age", INTEGER_RE),
        key("email", STRING_RE),
        key("tags", tags),
    ]
    return r"\{" + f"{WS},".join(fields) + rf"{WS}\}}"


def enum_regex() -> str:
    """A small JSON-like regex with an enum and a boolean."""
    return r'\{"kind":("circle"|"square"|"triangle"),"filled":(true|false),"size":[0-9]{1,3}(\.[0-9]+)?\}'
