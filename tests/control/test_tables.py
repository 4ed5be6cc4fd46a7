"""`Tables.of` is the one DFA/pushdown switch: one registry for both kinds, one byte-machine protocol read after it."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest

import stdsl
from stdsl.compiler.automata.automaton import Automaton
from stdsl.compiler.byte_machine import ByteMachine
from stdsl.compiler.pushdown.machine import PushdownMachine
from stdsl.control.pushdown_controller import PushdownController
from stdsl.control.special_vocabulary import vocabulary_of
from stdsl.control.tables import AutomatonTables, PushdownTables, Tables
from stdsl.errors import StdslError

TREE = {"$defs": {"n": {"type": "object", "properties": {"k": {"type": "array", "items": {"$ref": "#/$defs/n"}}},
                        "required": ["k"], "additionalProperties": False}}, "$ref": "#/$defs/n"}
PUSHDOWN_NAMES = {"PushdownMachine", "PushdownGrammar", "PushdownConstraint", "PushdownController", "PushdownTables"}
"""Classes an `isinstance` would tell a pushdown from a DFA by."""
DECODING = ("control", "kernels", "runtime", "integrations", "server")
"""The packages that decode (the compiler builds the machines; the CLI reports what it built)."""
SWITCH = Path(stdsl.__file__).parent / "control" / "tables.py"


def test_each_kind_gets_its_tables_once_and_its_controller(smollm2_tokenizer) -> None:
    vocab = vocabulary_of(smollm2_tokenizer)
    regular, recursive = stdsl.compile(stdsl.Regex("yes|no")), stdsl.compile(TREE)
    dfa = Tables.of(regular, vocab)
    assert isinstance(dfa, AutomatonTables) and Tables.of(regular.automaton, vocab) is dfa
    pushdown = Tables.of(recursive, vocab)
    assert isinstance(pushdown, PushdownTables) and Tables.of(recursive.machine, vocab) is pushdown
    controller = pushdown.controller(smollm2_tokenizer, max_tokens=None)
    assert isinstance(controller, PushdownController) and controller.device_masks is None
    assert type(dfa.controller(smollm2_tokenizer, max_tokens=5).machine) is Automaton
    with pytest.raises(StdslError, match="expected a compiled constraint .*got dict"):
        Tables.of({"type": "string"}, vocab)


def test_both_machines_step_as_the_planner_reads_them() -> None:
    """The protocol's byte row, next state, live bytes and step agree with each other on both kinds."""
    machines: list[ByteMachine] = [stdsl.compile(stdsl.Regex('"[a-c]{1,3}"')).automaton,
                                   PushdownMachine(stdsl.compile(TREE).machine.grammar)]
    for machine in machines:
        state = machine.start
        for byte in b'{"k":[{"k":[]}]}' if isinstance(machine, PushdownMachine) else b'"abc"':
            row = machine.byte_row(state)
            assert bytes(np.flatnonzero(row >= 0).tolist()) == machine.live_bytes(state)
            assert int(machine.live_count[state]) == len(machine.live_bytes(state))
            assert machine.next_state(state, byte) == int(row[byte]) == machine.step(state, bytes([byte]))
            state = machine.next_state(state, byte)
        assert bool(machine.accepting[state]) and machine.shortest_completion(state) == 0


def _kind_tests(path: Path) -> list[int]:
    """Lines of `path` that test whether a value is a pushdown's (an isinstance naming a pushdown class)."""
    lines = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "isinstance" and len(node.args) == 2:
            names = {n.id if isinstance(n, ast.Name) else getattr(n, "attr", "") for n in ast.walk(node.args[1])}
            if names & PUSHDOWN_NAMES:
                lines.append(node.lineno)
    return lines


def test_the_factory_is_the_only_switch() -> None:
    """No decoding module but `control/tables.py` tests whether a machine is a pushdown's."""
    root = Path(stdsl.__file__).parent
    found = {str(path.relative_to(root)): _kind_tests(path) for package in DECODING
             for path in (root / package).rglob("*.py") if path != SWITCH}
    assert {path: lines for path, lines in found.items() if lines} == {}
    assert _kind_tests(SWITCH), "the switch itself is found by the same check"
