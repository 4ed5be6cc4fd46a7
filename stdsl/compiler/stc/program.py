"""`CompiledProgram`: a parsed, typed `.stc` program that compiles its output constraint per call.

Running it on a model is above the runtime (`stdsl.programs.Program`); the compiler only parses,
resolves types, fills the prompt and compiles the output template.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Self

from stdsl.caches import CacheKind
from stdsl.compiler.automata.build import build_automaton
from stdsl.compiler.pushdown.embedding import holds_grammar
from stdsl.compiler.source_files import FileAccess
from stdsl.compiler.stc.jinja_text import render_text
from stdsl.compiler.stc.parameters import ParameterType, check_arguments, stc_parameter_type
from stdsl.compiler.stc.program_constraint import ProgramConstraint, RecursiveProgramConstraint
from stdsl.compiler.stc.recursion import RecursiveHoles, is_recursive
from stdsl.compiler.stc.resolve import TypeResolver
from stdsl.compiler.stc.source_file import read_source
from stdsl.compiler.stc.syntax import ProgramError, parse_program
from stdsl.compiler.stc.template import Hole, Template
from stdsl.errors import CompileError

MISSING_VALUE_HINTS = {
    "library": "pass {name}=... (a keyword argument of the @program function, a key of run's or map's arguments)",
    "cli": "pass --set {name}=...",
    "dataset": 'give "{name}" in every input line',
    "server": 'give "{name}" in the request\'s program.arguments',
}
"""How each caller supplies a parameter's value, as a missing one's error tells it (`arguments(caller=...)`)."""

_CONSTRAINTS: CacheKind[ProgramConstraint | RecursiveProgramConstraint] = CacheKind("program constraints")


class CompiledProgram:
    """A program: prompt messages with Jinja2 placeholders and a typed output template, compiled per call."""

    def __init__(self, text: str, source: str = "<program>", scope: Mapping[str, Any] | None = None,
                 params: list[str] | None = None, param_types: Mapping[str, ParameterType] | None = None,
                 files: FileAccess | None = None) -> None:
        """`files`: what its file references (`grammar("...")`) may read (default: a local user's files)."""
        self.source = source
        self.syntax = parse_program(text, source)
        self.param_types = {name: stc_parameter_type(name, type_name, default, pos)
                            for name, (type_name, default, pos) in self.syntax.params.items() if type_name is not None}
        self.param_types.update(param_types or {})
        self.resolver = TypeResolver(self.syntax.types, scope, files)
        self.resolver.resolve_declared()
        self.template = Template(self.syntax.output, self.syntax.output_pos, self.resolver.resolve)
        self.params = list(params) if params is not None else list(self.syntax.params)

    @classmethod
    def from_file(cls, path: str | Path, scope: Mapping[str, Any] | None = None) -> Self:
        """Load a `.stc` file."""
        return cls(read_source(path), str(path), scope)

    @property
    def fields(self) -> dict[str, Any]:
        """Field name → field type, in template order."""
        return self.template.fields

    def arguments(self, args: Mapping[str, Any], caller: str = "library") -> dict[str, Any]:
        """`args` completed with declared defaults; a missing parameter is a ProgramError that says how `caller`
        (a key of MISSING_VALUE_HINTS) passes it, an argument of the wrong type (`param n: int` given "five") an
        OptionError naming the parameter and its type."""
        check_arguments(self.param_types, args)
        out = dict(args)
        for name, (_, default, pos) in self.syntax.params.items():
            if name not in out:
                if default is None:
                    raise pos.error(f"parameter {name} has no value; {MISSING_VALUE_HINTS[caller].format(name=name)}")
                out[name] = default
        return out

    def messages(self, args: Mapping[str, Any], max_bytes: int | None = None) -> list[dict[str, str]]:
        """The prompt messages with placeholders filled (ProgramError once they pass `max_bytes` UTF-8 bytes)."""
        out: list[dict[str, str]] = []
        left = max_bytes
        for m in self.syntax.messages:
            content = render_text(m.template, args, m.pos, left)
            if left is not None:
                left -= len(content.encode("utf-8"))
            out.append({"role": m.role, "content": content})
        return out

    def constraint(self, args: Mapping[str, Any] | None = None) -> ProgramConstraint | RecursiveProgramConstraint:
        """The compiled output constraint for these arguments (a `stdsl.caches` entry per program and filled literal
        text: least recently used go first past the registry's byte budget, and all go with the program).

        With a recursive declared type in a field, it is a pushdown constraint (nesting capped at 64).
        """
        parts = self.template.render_literals(args or {}, render_text)
        key = tuple(p if isinstance(p, str) else "\0" + p.decl.name for p in parts)
        try:
            return _CONSTRAINTS.get((self,), lambda: self._compile(parts), key)
        except ProgramError:
            raise
        except CompileError as exc:
            raise self._locate(exc, parts) from None

    def _compile(self, parts: list[str | Hole]) -> ProgramConstraint | RecursiveProgramConstraint:
        start = time.perf_counter()
        if self.resolver.recursive:
            holes = RecursiveHoles(self.resolver.recursive)
            main = self.template.to_ir(parts, holes.hole_ir)
            return RecursiveProgramConstraint(main, holes, parts)
        node = self.template.to_ir(parts)
        if holds_grammar(node):
            return RecursiveProgramConstraint(node, RecursiveHoles({}), parts)
        automaton = build_automaton(node)
        return ProgramConstraint(automaton, parts, time.perf_counter() - start)

    def _locate(self, error: CompileError, parts: list[str | Hole]) -> ProgramError:
        """`error` at the declared type or field it comes from (else at the output block)."""
        definition = getattr(error, "definition", None)
        if definition in self.syntax.types:
            return self.syntax.types[definition][1].error(f"type {definition}: {error}")
        for part in parts:
            if isinstance(part, Hole) and not is_recursive(part.kind):
                try:
                    part.kind.automaton
                except CompileError as own:
                    return part.decl.pos.error(f"field {part.decl.name}: {own}")
        return self.syntax.output_pos.error(str(error))

    def program_constraint(self) -> ProgramConstraint | RecursiveProgramConstraint:
        """The output constraint under the declared defaults (what `stdsl.compile(program)` returns)."""
        missing = [name for name, (_, default, _) in self.syntax.params.items() if default is None]
        if missing:
            raise ProgramError(f"{self.source}: parameters {', '.join(missing)} have no default; compile the program "
                               "with its arguments: program.constraint({...}), or call program.run(model, {...})")
        return self.constraint(self.arguments({}))
