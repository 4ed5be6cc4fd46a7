"""A `for` over a bounded list the same step generates, compiled into that step's automaton.

```
output '''Plan: {steps: list[str(/[a-z ]{3,20}/)](1..3, sep="; ")}'''
for step in steps {
  output '''
- {detail: line}'''
}
```

When a `for` follows an output step directly, iterates over a list field of that output (`steps`, or `plan.steps`
for an output named `plan`) whose length is bounded by at most `MAX_UNROLLED` items, and its body holds only
unnamed outputs whose literal text reads neither the loop variable nor a value of the step, the output and its
iterations are one language: for each length `n` the list allowed, the output with the list fixed to `n` items
followed by `n` copies of the body. The union over the lengths is one automaton, so the whole step (the list's items
and every iteration's text) decodes in one engine run, forced text and budget included. A list that is unbounded,
longer, or read from an earlier step, and a body that reads the item, keep the loop as forks (one per item).
A loop of this shape that still cannot be compiled (two lengths whose texts could be alike, a body field whose end
would be ambiguous once repeated) is refused at its position, rather than run with a different meaning.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from jinja2 import meta

from stdsl.compiler import ir
from stdsl.compiler.automata.automaton import Automaton
from stdsl.compiler.automata.build import build_automaton
from stdsl.compiler.constraint import Constraint
from stdsl.compiler.pushdown.embedding import holds_grammar
from stdsl.compiler.stc.branch_fusion import merged_parts, overlap
from stdsl.compiler.stc.jinja_text import expression_env
from stdsl.compiler.stc.syntax import ForStep, OutputStep, ProgramError, Step
from stdsl.compiler.stc.template import Hole, Literal, Template
from stdsl.compiler.stc.types import ListType
from stdsl.errors import CompileError

MAX_UNROLLED = 8
"""The most items a list may have for a `for` over it to be compiled into its step (each length is a branch)."""
_PATH = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_]*)(?:\s*\.\s*([A-Za-z_][A-Za-z0-9_]*))?\s*")


@dataclass
class FusedLoop:
    """An output step and the `for` after it over its bounded list field `field`, whose body is `body`."""

    output: OutputStep
    loop: ForStep
    field: str
    kind: ListType
    body: list[OutputStep]

    def reads(self, templates: Mapping[int, Template]) -> set[str]:
        """The names the literal text of the output and of the body reads (to compile it, these must be known)."""
        return {name for step in (self.output, *self.body) for segment in templates[id(step)].segments
                if isinstance(segment, Literal) for name in _reads(segment.template)}


def loop_fusable(output: Step, following: Step, templates: Mapping[int, Template]) -> FusedLoop | None:
    """The fusion of an output and the `for` right after it over its own bounded list field, when the body is
    unnamed outputs whose literal text reads nothing the step generates; else None (the loop runs as forks)."""
    if not isinstance(output, OutputStep) or not isinstance(following, ForStep):
        return None
    path = _PATH.fullmatch(following.iterable.text)
    if path is None:
        return None
    first, second = path.groups()
    name = first if output.name is None and second is None else second if first == output.name else None
    fields = templates[id(output)].fields
    kind = fields.get(name) if name is not None else None
    if not isinstance(kind, ListType) or kind.max_items is None or kind.max_items > MAX_UNROLLED:
        return None
    body = following.body
    if not body or not all(isinstance(step, OutputStep) and step.name is None for step in body):
        return None
    names = [field for step in body for field in templates[id(step)].fields]
    if len(set(names)) != len(names) or set(names) & set(fields) or following.var in names:
        return None
    generated = {following.var, *fields, *names, *([output.name] if output.name else [])}
    for step in body:
        for segment in templates[id(step)].segments:
            if isinstance(segment, Literal) and _reads(segment.template) & generated:
                return None
    assert name is not None
    return FusedLoop(output, following, name, kind, [step for step in body if isinstance(step, OutputStep)])


def _reads(template: str) -> set[str]:
    return set(meta.find_undeclared_variables(expression_env().parse(template)))


def iteration_name(name: str, index: int) -> str:
    """The name a body field has in the compiled loop's `index`-th iteration (`detail[0]`)."""
    return f"{name}[{index}]"


@dataclass
class LoopChoice:
    """The text of one length `count` of the list: its parts and their automaton."""

    count: int
    parts: list[str | Hole]
    automaton: Automaton


class LoopedConstraint(Constraint):
    """The constraint of an output fused with the `for` over its list: the union over the list's lengths, read back
    by the length whose text it is."""

    def __init__(self, automaton: Automaton, choices: list[LoopChoice], fused: FusedLoop,
                 body_fields: list[str], compile_seconds: float) -> None:
        super().__init__(automaton, "program", compile_seconds=compile_seconds)
        self.choices, self.fused, self.body_fields = choices, fused, body_fields

    def parse(self, text: str) -> dict[str, Any]:
        """The output's fields, then each body field as the list of its iterations' values (in order)."""
        data = text.encode("utf-8")
        for choice in self.choices:
            if choice.automaton.accepts(data):
                values = Template.read(choice.parts, text)
                head = {name: value for name, value in values.items() if "[" not in name}
                head.setdefault(self.fused.field, [])
                body = {name: [values[iteration_name(name, i)] for i in range(choice.count)]
                        for name in self.body_fields}
                return {**head, **body}
        raise CompileError("the text is in no length of the loop")


def loop_parts(fused: FusedLoop, templates: Mapping[int, Template], args: Mapping[str, Any],
               render: Callable[[str, Mapping[str, Any], Any], str]) -> list[tuple[int, list[str | Hole]]]:
    """For each length the list allows, in order: the output's parts with the list fixed to that many items, then
    that many copies of the body's parts (fields renamed per iteration); literals filled from `args`."""
    head = templates[id(fused.output)].render_literals(args, render)
    body = [part for step in fused.body for part in templates[id(step)].render_literals(args, render)]
    out: list[tuple[int, list[str | Hole]]] = []
    for count in range(fused.kind.min_items, (fused.kind.max_items or 0) + 1):
        parts: list[str | Hole] = []
        for part in head:
            if isinstance(part, Hole) and part.decl.name == fused.field:
                if count:
                    parts.append(Hole(part.decl, replace(fused.kind, min_items=count, max_items=count)))
            else:
                parts.append(part)
        for index in range(count):
            parts += [Hole(replace(part.decl, name=iteration_name(part.decl.name, index)), part.kind)
                      if isinstance(part, Hole) else part for part in body]
        out.append((count, merged_parts(parts)))
    return out


def compile_loop(fused: FusedLoop, templates: Mapping[int, Template],
                 choices: list[tuple[int, list[str | Hole]]]) -> LoopedConstraint:
    """The union of the lengths' languages as one constraint; a ProgramError at the loop (or at the field) where one
    length cannot be compiled or two share a text."""
    began = time.perf_counter()
    template = templates[id(fused.output)]
    where = fused.loop.iterable.pos
    branches: list[ir.Node] = []
    for _, parts in choices:
        try:
            node = template.to_ir(parts)
        except ProgramError as error:
            raise ProgramError(f"for over {fused.loop.iterable.text} compiled into its output: {error.message}",
                               error.source, error.line, error.column) from None
        if holds_grammar(node):
            raise where.error(f"for over {fused.loop.iterable.text}: a grammar field inside a loop compiled into "
                              "its output; put a message between the output and the loop to run its iterations "
                              "as forks")
        branches.append(node)
    try:
        automata = [build_automaton(node) for node in branches]
        union = build_automaton(ir.alt(*branches))
    except ProgramError:
        raise
    except CompileError as error:
        raise where.error(f"for over {fused.loop.iterable.text} compiled into its output: {error}") from None
    for i, first in enumerate(automata):
        for j in range(i + 1, len(automata)):
            if overlap(first, automata[j]):
                raise where.error(f"for over {fused.loop.iterable.text} compiled into its output: a list of "
                                  f"{choices[i][0]} and one of {choices[j][0]} items, each followed by its "
                                  "iterations, can be the same text; separate the items, or put a message between "
                                  "the output and the loop to run its iterations as forks")
    body_fields = [name for step in fused.body for name in templates[id(step)].fields]
    return LoopedConstraint(union, [LoopChoice(count, parts, automaton) for (count, parts), automaton
                                    in zip(choices, automata)], fused, body_fields, time.perf_counter() - began)
