"""`analyze_automaton` finds the true cut states, and every finite region spends at most r-1 sampling points
(Corollary 1)."""

from __future__ import annotations

import importlib
import json
import re
from dataclasses import dataclass
from math import prod

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stdsl.theory import analyze_automaton, render_analysis
from tests.data_files import EXTRACTION


@dataclass
class TableAutomaton:
    """A bare automaton (transition table and accepting mask) like the compiler's, without its derived tables."""

    transitions: np.ndarray
    accepting: np.ndarray


def trie_automaton(words: set[bytes]) -> TableAutomaton:
    """The trie DFA of a finite set of byte strings: one path per string, so r is the number of strings."""
    rows: list[dict[int, int]] = [{}]
    accepting = [False]
    for word in sorted(words):
        state = 0
        for byte in word:
            if byte not in rows[state]:
                rows.append({})
                accepting.append(False)
                rows[state][byte] = len(rows) - 1
            state = rows[state][byte]
        accepting[state] = True
    table = np.full((len(rows), 256), -1, dtype=np.int32)
    for q, row in enumerate(rows):
        for byte, target in row.items():
            table[q, byte] = target
    return TableAutomaton(table, np.array(accepting))


def states_on_every_run(automaton: TableAutomaton) -> set[int]:
    """By deletion: q is on every accepting run iff no accepting state is reachable from 0 once q is removed."""
    table, accepting = automaton.transitions, automaton.accepting

    def accepts_without(removed: int | None) -> bool:
        if removed == 0:
            return False
        seen, stack = {0}, [0]
        while stack:
            q = stack.pop()
            if accepting[q]:
                return True
            for target in set(table[q][table[q] >= 0].tolist()):
                if target != removed and target not in seen:
                    seen.add(target)
                    stack.append(target)
        return False

    assert accepts_without(None)
    return {q for q in range(len(table)) if not accepts_without(q)}


def check_report(report: dict, automaton: TableAutomaton) -> None:
    json.dumps(report)
    assert set(report["cut_states"]) == states_on_every_run(automaton)
    assert report["block_cuts_are_cut_states"]
    for region in report["regions"] + report["local_finite_regions"]:
        if region["kind"] == "finite":
            assert region["within_bound"], region
            assert region["block_product_holds"], region
            assert region["sampling_points"] <= region["cyclomatic"] <= region["paths"] - 1
    assert report["summary"]["all_finite_regions_within_bound"]
    assert "cut states" in render_analysis(report)


@settings(max_examples=150, deadline=None)
@given(st.sets(st.binary(min_size=0, max_size=5).map(lambda b: bytes(97 + x % 3 for x in b)), min_size=1, max_size=10))
def test_finite_languages_split_into_a_product_of_regions(words: set[bytes]) -> None:
    automaton = trie_automaton(words)
    report = analyze_automaton(automaton)
    check_report(report, automaton)
    assert report["acyclic"]
    assert report["block_cut_states"] == report["cut_states"]
    # Theorem 12 on the whole automaton: the strings are independent choices per region between cuts.
    assert prod(region["paths"] for region in report["regions"]) == len(words)
    assert sum(region["sampling_points"] for region in report["regions"]) <= len(words) - 1


@st.composite
def small_dfas(draw: st.DrawFn) -> TableAutomaton:
    """Random DFAs over the bytes a, b, c with 1..6 states (cycles allowed) accepting something."""
    n = draw(st.integers(1, 6))
    table = np.full((n, 256), -1, dtype=np.int32)
    for q in range(n):
        for byte in b"abc":
            table[q, byte] = draw(st.integers(-1, n - 1))
    accepting = np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n)))
    return TableAutomaton(table, accepting)


@settings(max_examples=200, deadline=None)
@given(small_dfas())
def test_cut_states_are_the_states_on_every_accepting_run(automaton: TableAutomaton) -> None:
    report = analyze_automaton(automaton)
    json.dumps(report)
    if report["empty"]:
        return
    check_report(report, automaton)


def test_a_template_with_an_enum_free_text_and_a_boolean() -> None:
    compiler = pytest.importorskip("stdsl.compiler.automata.build", reason="the compiler's automaton is not available")
    automaton = compiler.compile_regex(
        r'\{"color":"(red|green|blue)","tags":\[("(big|small)",)*\],"name":"[a-z]*","ok":(true|false)\}'
    )
    report = analyze_automaton(automaton)
    check_report(report, TableAutomaton(automaton.transitions, automaton.accepting))
    assert report["automaton_cut_states_match"] and report["automaton_forced_chains_match"]
    kinds = [region["kind"] for region in report["regions"]]
    assert kinds == ["finite", "cyclic", "cyclic", "finite"]
    values = [sorted(region.get("values", [])) for region in report["local_finite_regions"]]
    assert ["blue", "green", "red"] in values and ["big", "small"] in values
    assert report["forced_chains"][0]["text"] == '{"color":"'


def _compile_schema(schema: dict):
    try:
        json_schema = importlib.import_module("stdsl.compiler.json_schema.to_ir")
        automaton_module = importlib.import_module("stdsl.compiler.automata.build")
    except ImportError as missing:
        pytest.skip(f"the JSON Schema compiler is not available yet ({missing})")
    return automaton_module.build_automaton(json_schema.schema_to_ir(schema))


def _enums(node: object) -> list[list]:
    if isinstance(node, dict):
        found = [node["enum"]] if "enum" in node else []
        return found + [e for value in node.values() for e in _enums(value)]
    if isinstance(node, list):
        return [e for value in node for e in _enums(value)]
    return []


@pytest.mark.parametrize("name", ["classification", "contact_card", "event", "person", "product", "tool_call"])
def test_extraction_schemas(name: str) -> None:
    path = EXTRACTION / f"{name}.json"
    if not path.exists():
        pytest.skip(f"{path} is absent")
    schema = json.loads(path.read_text())["schema"]
    automaton = _compile_schema(schema)
    report = analyze_automaton(automaton)
    check_report(report, TableAutomaton(automaton.transitions, automaton.accepting))
    assert report["automaton_cut_states_match"]
    assert report["automaton_forced_chains_match"]
    for enum in _enums(schema):
        wanted = sorted(json.dumps(value) for value in enum)
        matches = [
            region
            for region in report["local_finite_regions"]
            if sorted('"' + re.sub(r'^"|"$', "", value) + '"' for value in region.get("values", [])) == wanted
        ]
        assert matches, f"no finite region holds the values of enum {enum}"
        for region in matches:
            assert region["paths"] == len(enum)
            assert region["sampling_points"] <= len(enum) - 1


def _every_maximal_finite_region(automaton: TableAutomaton) -> list[dict]:
    """The definition, by brute force: every decision state's full region report, the finite ones whose entry is
    inside no other finite region."""
    from stdsl.theory.analyze import _ByteGraph, _class_form, _public
    from stdsl.theory.structure import immediate_dominators

    graph = _ByteGraph(*_class_form(automaton), np.asarray(automaton.accepting, dtype=bool))
    post = immediate_dominators(graph.backward, graph.sink)
    found = [r for r in (graph.region(e, post[e]) for e in sorted(graph.live - {graph.sink})
                         if graph.out_bytes[e] >= 2) if r is not None and r["kind"] == "finite"]
    interior = set().union(set(), *(r["_inside"] - {r["entry"], post[r["entry"]]} for r in found))
    return [_public(r) for r in found if r["entry"] not in interior]


@settings(max_examples=200, deadline=None)
@given(small_dfas())
def test_local_finite_regions_are_the_maximal_ones_of_every_decision_state(automaton: TableAutomaton) -> None:
    """Only maximal finite regions are analysed in full (nested ones are skipped unanalysed): the same report."""
    report = analyze_automaton(automaton)
    if not report["empty"]:
        assert report["local_finite_regions"] == _every_maximal_finite_region(automaton)


def test_huge_path_counts_read_as_orders_of_magnitude() -> None:
    from stdsl.theory.analyze import readable_count

    assert [readable_count(n) for n in (0, 999_999, 10**6, 3 * 10**459)] == ["0", "999999", "≥ 10^6", "≥ 10^459"]
