"""Branches on a value the same step generates, compiled into that step's automaton.

```
output '''Verdict: {verdict: "accept" | "reject"}'''
if verdict == "reject" {
  output '''
Reasons: {reasons: list[line](1..3)}'''
}
```

When an `if` follows an output step directly, its conditions read only one enum field of that output (and the
parameters), and its branches hold only outputs, the output and the branch each enum value selects are one
language: the output's template with the field fixed to that value, followed by the branch's templates. The union
of these languages over the enum's values is one automaton, so the whole step decodes in one engine run (forced
text, budget and all) instead of one run per output. The result reads back by the one branch that accepts the
text; where two branches could accept the same text (an enum value a prefix of another, say) the union is
refused and the steps run one after another, as written.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from jinja2 import nodes

from stdsl.compiler import ir
from stdsl.compiler.automata.automaton import Automaton
from stdsl.compiler.automata.build import build_automaton
from stdsl.compiler.automata.ops import intersect
from stdsl.compiler.constraint import Constraint
from stdsl.compiler.pushdown.embedding import holds_grammar
from stdsl.compiler.stc.jinja_text import expression_env
from stdsl.compiler.stc.syntax import Expr, IfStep, OutputStep, Step
from stdsl.compiler.stc.template import Hole, Template
from stdsl.compiler.stc.types import EnumType
from stdsl.errors import CompileError, EmptyLanguageError


@dataclass
class FusedBranches:
    """An output step and the `if` after it that branches on its enum field `field` alone."""

    output: OutputStep
    branches: IfStep
    field: str
    values: tuple[str, ...]


def fusable(output: Step, following: Step, templates: Mapping[int, Template],
            params: set[str]) -> FusedBranches | None:
    """The fusion of an unnamed output and the `if` right after it, when the `if` reads one enum field of the
    output (and parameters) and its branches are unnamed outputs only; else None."""
    if not isinstance(output, OutputStep) or not isinstance(following, IfStep) or output.name is not None:
        return None
    fields = templates[id(output)].fields
    enums = {name for name, kind in fields.items() if isinstance(kind, EnumType) and kind.enum_class is None}
    read: set[str] = set()
    for condition, body in following.branches:
        if not all(isinstance(step, OutputStep) and step.name is None for step in body):
            return None
        names = [name for step in body for name in templates[id(step)].fields]
        if len(set(names)) != len(names) or set(names) & set(fields):
            return None
        if condition is not None:
            read |= _names(condition)
    chosen = read - params
    if len(chosen) != 1 or not chosen <= enums:
        return None
    (name,) = chosen
    kind = fields[name]
    assert isinstance(kind, EnumType)
    return FusedBranches(output, following, name, kind.values)


def _names(condition: Expr) -> set[str]:
    tree = expression_env().parse("{{ " + condition.text + " }}")
    return {node.name for node in tree.find_all(nodes.Name)}


class BranchedConstraint(Constraint):
    """The constraint of an output fused with its branches: the union over the enum's values, read back by the
    branch that accepts the text."""

    def __init__(self, automaton: Automaton, choices: list[tuple[Automaton, list[str | Hole]]],
                 compile_seconds: float) -> None:
        super().__init__(automaton, "program", compile_seconds=compile_seconds)
        self.choices = choices

    def parse(self, text: str) -> dict[str, Any]:
        """Field values of an accepted output: the output's fields and those of the branch its value chose."""
        data = text.encode("utf-8")
        for automaton, parts in self.choices:
            if automaton.accepts(data):
                return Template.read(parts, text)
        raise CompileError("the text is in no branch of the step")


def branch_parts(fused: FusedBranches, templates: Mapping[int, Template], args: Mapping[str, Any],
                 render: Callable[[str, Mapping[str, Any], Any], str],
                 choose: Callable[[Expr, Mapping[str, Any]], Any]) -> list[list[str | Hole]]:
    """For each enum value, in order: the output's parts with the field fixed to it, then the parts of the branch
    whose condition (`choose`) it makes true first; literals filled from `args` with `render`."""
    out: list[list[str | Hole]] = []
    head = templates[id(fused.output)].render_literals(args, render)
    for value in fused.values:
        parts: list[str | Hole] = [Hole(p.decl, EnumType((value,))) if isinstance(p, Hole) and
                                   p.decl.name == fused.field else p for p in head]
        for condition, body in fused.branches.branches:
            if condition is None or choose(condition, {**args, fused.field: value}):
                for step in body:
                    parts += templates[id(step)].render_literals(args, render)
                break
        out.append(merged_parts(parts))
    return out


def merged_parts(parts: list[str | Hole]) -> list[str | Hole]:
    """Adjacent literal texts joined (a branch's first literal continues the output's last)."""
    out: list[str | Hole] = []
    for part in parts:
        if isinstance(part, str) and out and isinstance(out[-1], str):
            out[-1] += part
        elif part != "":
            out.append(part)
    return out


def compile_branches(template: Template, choices: list[list[str | Hole]]) -> BranchedConstraint:
    """The union of the choices' languages as one constraint; CompileError where one is ambiguous on its own or two
    share a text (then the step cannot be read back by its branch)."""
    began = time.perf_counter()
    branches = [template.to_ir(parts) for parts in choices]
    for node in branches:
        if holds_grammar(node):
            raise CompileError("a recursive field or grammar inside a fused branch")
    automata = [build_automaton(node) for node in branches]
    for i, first in enumerate(automata):
        for second in automata[i + 1:]:
            if overlap(first, second):
                raise CompileError("two branches of the step accept the same text")
    union = build_automaton(ir.alt(*branches))
    return BranchedConstraint(union, list(zip(automata, choices)), time.perf_counter() - began)


def overlap(first: Automaton, second: Automaton) -> bool:
    """Whether two automata accept a common string."""
    try:
        intersect(first, second)
    except EmptyLanguageError:
        return False
    return True
