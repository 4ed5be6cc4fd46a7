"""The constraint of one program call: the output template's automaton (or pushdown), read back by position."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from stdsl.compiler import ir
from stdsl.compiler.automata.automaton import Automaton
from stdsl.compiler.constraint import Constraint
from stdsl.compiler.pushdown.constraint import PushdownConstraint
from stdsl.compiler.pushdown.embedding import compile_merged
from stdsl.compiler.stc.recursion import RecursiveHoles
from stdsl.compiler.stc.template import Hole, Template


class ProgramConstraint(Constraint):
    """The constraint of one call of a program: its automaton and how to read the fields back."""

    def __init__(self, automaton: Automaton, parts: list[str | Hole], compile_seconds: float) -> None:
        super().__init__(automaton, "program", compile_seconds=compile_seconds)
        self.parts = parts

    def parse(self, text: str) -> dict[str, Any]:
        """Field values of an accepted output, read by position."""
        return Template.read(self.parts, text)

    def render(self, values: Mapping[str, Any]) -> str:
        """The output text that carries `values` (the inverse of `parse`)."""
        return Template.render(self.parts, values)


class RecursiveProgramConstraint(PushdownConstraint):
    """A program call's constraint when a field's type or grammar is recursive: a pushdown, read back by position."""

    def __init__(self, main: ir.Node, holes: RecursiveHoles, parts: list[str | Hole]) -> None:
        began = time.perf_counter()
        grammar = compile_merged(main, holes.definitions())
        super().__init__(grammar, "program", compile_seconds=time.perf_counter() - began)
        self.parts = parts

    def parse(self, text: str) -> dict[str, Any]:
        """Field values of an accepted output, read by position."""
        return Template.read(self.parts, text)

    def render(self, values: Mapping[str, Any]) -> str:
        """The output text that carries `values` (the inverse of `parse`)."""
        return Template.render(self.parts, values)
