"""The written-out key complement: the language of the name trie's IR, minimal, its moves those of its table, and
an open object's body DFA the same language, classes and minimal table as built from the trie's IR (the same table
where both subset constructions are minimal: a trie node and the rest of a string were one NFA state where the
trie's IR shared it, and the subset construction could merge there what it now keeps apart, or the other way)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from stdsl.compiler import ir
from stdsl.compiler.automata.automaton import Automaton
from stdsl.compiler.automata.build import build_automaton, determinized
from stdsl.compiler.automata.chains import EMBEDDED_FROM
from stdsl.compiler.automata.embedded_moves import embedded_edges, minimal_labels
from stdsl.compiler.automata.minimization.minimize import minimize, trim_in_bfs_order
from stdsl.compiler.json_schema.scalars import strings
from stdsl.compiler.json_schema.scalars.name_complement import (
    PLAIN,
    _merged,
    _trie,
    name_complement,
    plain_names,
)
from stdsl.compiler.json_schema.scalars.string_units import char_trie
from stdsl.compiler.json_schema.to_ir import schema_to_ir
from tests.compiler.language_difference import difference

PLAIN_CHARS = "abcz ~!\x7f{}"
name_sets = st.lists(st.text(alphabet=PLAIN_CHARS, max_size=5), max_size=7).map(lambda names: tuple(sorted(set(names))))


@settings(max_examples=200, deadline=None)
@given(name_sets)
def test_the_written_dfa_is_the_trie_language_minimal(names: tuple[str, ...]) -> None:
    written = name_complement(names)
    assert written is not None
    trie = build_automaton(strings._outside(char_trie(names)))
    assert difference(build_automaton(written), trie) is None, names
    table, accepting = np.asarray(written.transitions), np.asarray(written.accepting)
    assert len(minimize(table, accepting)[0]) == len(accepting) == trie.num_states
    labels = minimal_labels(written)
    assert labels is not None
    first_of_label = {label: byte for byte, label in reversed(list(enumerate(labels.tolist())))}
    assert (table == table[:, [first_of_label[label] for label in labels.tolist()]]).all()
    symbol_sets, moves = embedded_edges(written)
    from_moves = np.full_like(table, -1)
    for state, out in enumerate(moves):
        for number, target in out:
            for lo, hi in symbol_sets[number]:
                assert (from_moves[state, lo:hi + 1] == -1).all()
                from_moves[state, lo:hi + 1] = target
    assert (from_moves == table).all()


def _trie_by_lookups(names: tuple[str, ...]) -> tuple[list[dict[int, int]], list[bool]]:
    """The names' trie built name by name from the root (the oracle of `_trie`'s walk from the previous name)."""
    children: list[dict[int, int]] = [{}]
    final = [False]
    for name in names:
        state = 0
        for byte in name.encode():
            child = children[state].get(byte)
            if child is None:
                child = children[state][byte] = len(children)
                children.append({})
                final.append(False)
            state = child
        final[state] = True
    return children, final


def _merged_by_sorted_children(children: list[dict[int, int]], final: list[bool]) -> tuple[list[int], list[int]]:
    """`_merged` with each node's children sorted by byte and the states renumbered in one walk (its oracle)."""
    canonical: dict[tuple, int] = {}
    merged = [0] * len(children)
    for node in range(len(children) - 1, -1, -1):
        signature = (final[node], tuple((byte, merged[child]) for byte, child in sorted(children[node].items())))
        merged[node] = canonical.setdefault(signature, len(canonical))
    renumber = {merged[0]: 0}
    order = [0]
    for node in range(1, len(children)):
        if merged[node] not in renumber:
            renumber[merged[node]] = len(order)
            order.append(node)
    return [renumber[state] for state in merged], order


ALL_PLAIN = "".join(chr(byte) for lo, hi in PLAIN for byte in range(lo, hi + 1))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(alphabet=PLAIN_CHARS, max_size=6), max_size=12).map(lambda names: tuple(sorted(set(names)))),
       st.text(alphabet=ALL_PLAIN + "\"\\\né", max_size=4))
def test_the_trie_and_its_merge_are_those_built_node_by_node(names: tuple[str, ...], other: str) -> None:
    children, final, parents, entered_by = _trie(names)
    assert (children, final) == _trie_by_lookups(names)
    assert [(parent, byte) for parent, byte in zip(parents, entered_by)] == sorted(
        ((parent, byte) for parent, out in enumerate(children) for byte in out),
        key=lambda edge: children[edge[0]][edge[1]])
    if names:
        assert _merged(children, final) == _merged_by_sorted_children(*_trie_by_lookups(names))
    assert plain_names((*names, other)) == all(ch in ALL_PLAIN for ch in other)


def test_names_beyond_printable_ascii_and_large_sets_keep_the_trie() -> None:
    assert not plain_names(("a\"b",)) and not plain_names(("\u00e9",)) and not plain_names(("a\\",))
    assert not plain_names(("\n",)) and plain_names(("a b~\x7f",))
    rng = np.random.default_rng(0)
    many = tuple(sorted({"".join(rng.choice(list("abcdefgh"), 12)) for _ in range(EMBEDDED_FROM // 4)}))
    assert name_complement(many) is None
    assert not isinstance(strings._string_not_in(many).items[1], ir.Embedded)


def _body_dfa(schema: dict) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The subset construction of the schema's IR trimmed in BFS order, as a pushdown body's DFA is built."""
    dfa = determinized(schema_to_ir(schema, strict=False), 100_000)
    table, accepting = trim_in_bfs_order(dfa.table, dfa.accepting, all_reachable=True, all_live=dfa.all_live,
                                         in_bfs_order=dfa.in_bfs_order)
    return table, accepting, dfa.byte_class


values = st.sampled_from([{"type": "string"}, {"type": "integer"}, {"enum": ["x", 1]}, {"type": "boolean"}, False,
                         {"type": "object", "properties": {"a": {"type": "string"}, "b~": {"type": "integer"}}}])


@settings(max_examples=60, deadline=None)
@given(st.dictionaries(st.text(alphabet=PLAIN_CHARS + "é\"", max_size=4), values, max_size=5),
       st.sampled_from([True, {"type": "integer"}]), st.booleans())
def test_an_open_object_body_keeps_its_language_and_minimal_table(properties: dict, extra: object,
                                                                  required: bool) -> None:
    schema = {"type": "object", "properties": properties, "additionalProperties": extra,
              "required": [name for name, value in properties.items() if value is not False][:1] if required else []}
    strings._string_not_in.cache_clear()
    written = _body_dfa(schema)
    strings._string_not_in.cache_clear()
    original = strings.name_complement
    strings.name_complement = lambda names: None  # type: ignore[assignment]
    try:
        from_trie = _body_dfa(schema)
    finally:
        strings.name_complement = original
        strings._string_not_in.cache_clear()
    assert (written[2] == from_trie[2]).all(), schema
    mine = Automaton.from_classes(written[0], written[1], written[2])
    theirs = Automaton.from_classes(from_trie[0], from_trie[1], from_trie[2])
    assert difference(mine, theirs) is None, schema
    for left, right in zip(minimize(written[0], written[1]), minimize(from_trie[0], from_trie[1])):
        assert left.shape == right.shape and (left == right).all(), schema
