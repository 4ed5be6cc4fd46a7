"""The start's row of a tool reply taken from its front's cut equals the reply's own walk (whether or not a token
runs into a call's block), and a list with one tool changed reuses the row kept for its front."""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import stdsl
from stdsl.compiler.automata.automaton import Automaton
from stdsl.compiler.constraint_spec import ARGUMENTS_LOWERING, _arguments_ir, _Deadline
from stdsl.compiler.tools.formats import FORMATS, ToolSpec, format_named
from stdsl.compiler.tools.reply_automaton import reply_automaton
from stdsl.errors import StdslError
from stdsl.kernels.front_rows import FRONT_START_ROWS, front_cut
from stdsl.kernels.rows import RowCache
from stdsl.kernels.token_table import token_table
from stdsl.kernels.vocabulary import Vocabulary

VALUES = [{"type": "string"}, {"type": "integer"}, {"type": "boolean"}, {"type": "string", "enum": ["a", "b"]}]


def _tool(name: str, keys: list[str]) -> ToolSpec:
    properties = {key: VALUES[index % len(VALUES)] for index, key in enumerate(keys)}
    return ToolSpec(name, {"type": "object", "properties": properties, "required": keys[:1],
                           "additionalProperties": False})


@st.composite
def tool_lists(draw: Any) -> list[ToolSpec]:
    """One to four tools whose names share prefixes."""
    names = draw(st.lists(st.sampled_from(["get", "get_a", "set", "search", "s"]), min_size=1, max_size=4,
                          unique=True))
    return [_tool(name, draw(st.lists(st.sampled_from(["path", "city", "n"]), max_size=2, unique=True)))
            for name in names]


def _reply(tools: list[ToolSpec], name: str, choice: str, tokens: bool) -> Automaton:
    tool_format = format_named(name)
    if tokens:
        tool_format = tool_format.with_tokens(tool_format.markers)
    return reply_automaton(tools, tool_format, _arguments_ir(_Deadline(120), []), ARGUMENTS_LOWERING,
                           choice=choice, parallel=True)


def _walks(automaton: Automaton, seed: int, count: int, longest: int) -> list[bytes]:
    """Texts read from random states along random live bytes: long ones from the start run into the blocks."""
    table = automaton.transitions
    rng = np.random.default_rng(seed)
    texts = []
    for index in range(count):
        state = 0 if index % 2 else int(rng.integers(automaton.num_states))
        text = bytearray()
        for _ in range(int(rng.integers(1, longest + 1))):
            live = np.flatnonzero(table[state] >= 0)
            if not len(live):
                break
            byte = int(rng.choice(live))
            text.append(byte)
            state = int(table[state, byte])
        if text:
            texts.append(bytes(text))
    return texts


def _vocabulary(texts: list[bytes]) -> Vocabulary:
    tokens = [bytes([byte]) for byte in range(256)] + sorted(set(texts) - {bytes([b]) for b in range(256)})
    return Vocabulary([*tokens, None], [len(tokens)])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tools=tool_lists(), name=st.sampled_from(sorted(FORMATS)), choice=st.sampled_from(["auto", "required"]),
       tokens=st.booleans(), seed=st.integers(0, 2**32 - 1), longest=st.sampled_from([4, 16, 64]))
def test_the_start_row_from_the_front_equals_the_reply_walk(tools: list[ToolSpec], name: str, choice: str,
                                                            tokens: bool, seed: int, longest: int) -> None:
    try:
        automaton = _reply(tools, name, choice, tokens)
    except StdslError:
        automaton = None
    assume(automaton is not None and bool(automaton.blocks))
    assert automaton is not None
    vocab = _vocabulary(_walks(automaton, seed, 60, longest))
    want = token_table(automaton, vocab)[0]
    stdsl.caches.clear()
    for _ in range(2):
        cache = RowCache(automaton, vocab)
        assert np.array_equal(cache.next_states(0), want)
        assert np.array_equal(cache.mask(0)[:-1], want[:-1] >= 0)
        assert bool(cache.mask(0)[-1]) == bool(automaton.accepting[0])


def test_a_token_into_a_block_is_walked_on_the_reply_not_the_front() -> None:
    automaton = _reply([_tool("get", ["path"]), _tool("set", ["city"])], "hermes", "auto", False)
    cut = front_cut(automaton)
    assert cut is not None
    head = b'<tool_call>\n{"name": "get", "arguments": {"path": "x'
    vocab = _vocabulary([head, b"<tool", b"hello"])
    stdsl.caches.clear()
    row = RowCache(automaton, vocab).next_states(0)
    assert np.array_equal(row, token_table(automaton, vocab)[0])
    assert row[256 + sorted([head, b"<tool", b"hello"]).index(head)] >= automaton.blocks[0].start
    assert FRONT_START_ROWS.find((vocab,), (cut[1],)) == (None,)


@pytest.mark.parametrize("name", ["hermes", "qwen_xml", "harmony"])
def test_one_tool_changed_reuses_the_start_row_kept_for_the_front(name: str) -> None:
    tools = [_tool(f"tool_{index}", ["path", "city"]) for index in range(6)]
    changed = [*tools[:3], _tool("tool_3", ["n"]), *tools[4:]]
    first, second = (_reply(listed, name, "auto", False) for listed in (tools, changed))
    assert first.blocks and second.blocks
    vocab = _vocabulary([b"<tool_call>", b"hello", b"<|channel|>", b"to=", *_walks(first, 7, 40, 8)])
    stdsl.caches.clear()
    RowCache(first, vocab).token_mask(0)
    misses = stdsl.caches.stats()["front start rows"].misses
    row = RowCache(second, vocab).next_states(0)
    assert stdsl.caches.stats()["front start rows"].misses == misses
    assert np.array_equal(row, token_table(second, vocab)[0])


def test_keeping_the_start_row_while_the_registry_measures_the_row_cache_does_not_deadlock(monkeypatch: Any) -> None:
    automaton = _reply([_tool("get", ["path"]), _tool("set", ["city"])], "hermes", "auto", False)
    vocab = _vocabulary([b"<tool", b"hello"])
    stdsl.caches.clear()
    cache = RowCache(automaton, vocab)
    holder = stdsl.caches.kind("row caches held by a test")
    holder.put((automaton,), cache)
    monkeypatch.setattr(stdsl.caches.registry, "_next_remeasure", 0.0)
    done: list[np.ndarray] = []
    worker = threading.Thread(target=lambda: done.append(cache.next_states(0)), daemon=True)
    worker.start()
    worker.join(60)
    assert not worker.is_alive() and len(done) == 1
    assert np.array_equal(done[0], token_table(automaton, vocab)[0])
