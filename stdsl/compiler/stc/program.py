"""`CompiledProgram`: a parsed, typed `.stc` program that compiles its output constraint per call.

Running it on a model is above the runtime (`stdsl.programs.Program`); the compiler only parses,
resolves types, fills the prompt and compiles the output template.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Self

from stdsl.caches import CacheKind
from stdsl.compiler.automata.build import build_automaton
from stdsl.compiler.pushdown.embedding import holds_grammar
from stdsl.compiler.source_files import FileAccess
from stdsl.compiler.stc.branch_fusion import BranchedConstraint, FusedBranches, branch_parts, compile_branches
from stdsl.compiler.stc.jinja_text import evaluate, render_text
from stdsl.compiler.stc.loop_fusion import FusedLoop, LoopedConstraint, compile_loop, loop_parts
from stdsl.compiler.stc.parameters import ParameterType, check_arguments, stc_parameter_type
from stdsl.compiler.stc.program_constraint import ProgramConstraint, RecursiveProgramConstraint
from stdsl.compiler.stc.recursion import RecursiveHoles, is_recursive
from stdsl.compiler.stc.resolve import TypeResolver
from stdsl.compiler.stc.source_file import read_source
from stdsl.compiler.stc.step_plan import StepPlan, build_plan, one_step_body, used_path
from stdsl.compiler.stc.syntax import Expr, Message, OutputStep, Pos, ProgramError, parse_program
from stdsl.compiler.stc.template import Hole, Template
from stdsl.errors import CompileError

MISSING_VALUE_HINTS = {
    "library": "pass {name}=... (a keyword argument of the @program function, a key of run's or map's arguments)",
    "cli": "pass --set {name}=...",
    "dataset": 'give "{name}" in every input line',
    "server": 'give "{name}" in the request\'s program.arguments',
}
"""How each caller supplies a parameter's value, as a missing one's error tells it (`arguments(caller=...)`)."""

_CONSTRAINTS: CacheKind[ProgramConstraint | RecursiveProgramConstraint | BranchedConstraint | LoopedConstraint] = \
    CacheKind("program constraints")


class CompiledProgram:
    """A program: prompt messages with Jinja2 placeholders and a typed output template, compiled per call; or a
    program of several steps (`plan`), checked whole here and run by the runtime step by step."""

    def __init__(self, text: str, source: str = "<program>", scope: Mapping[str, Any] | None = None,
                 params: list[str] | None = None, param_types: Mapping[str, ParameterType] | None = None,
                 files: FileAccess | None = None, functions: Mapping[str, Callable[..., Any]] | None = None,
                 using: tuple[str, ...] = ()) -> None:
        """`files`: what its file references (`grammar("...")`, `use "..."`) may read (default: a local user's
        files); `functions`: what its `call` steps may call, by name; `using`: the programs whose `use` led here
        (a cycle is refused)."""
        self.source = source
        self.syntax = parse_program(text, source)
        self.param_types = {name: stc_parameter_type(name, type_name, default, pos)
                            for name, (type_name, default, pos) in self.syntax.params.items() if type_name is not None}
        self.param_types.update(param_types or {})
        self.scope, self.files, self.functions = scope, files, dict(functions or {})
        self.resolver = TypeResolver(self.syntax.types, scope, files)
        self.resolver.resolve_declared()
        self.params = list(params) if params is not None else list(self.syntax.params)
        self.plan: StepPlan[CompiledProgram] | None = None
        self._one_step_plan: StepPlan[CompiledProgram] | None = None
        self.template = Template(self.syntax.output, self.syntax.output_pos, self.resolver.resolve) \
            if not self.syntax.has_steps else None
        if self.syntax.has_steps:
            self._using = (*using, _program_key(source))
            self.plan = build_plan(self, self.syntax.steps, self.functions, self._load_used)

    @classmethod
    def from_file(cls, path: str | Path, scope: Mapping[str, Any] | None = None,
                  functions: Mapping[str, Callable[..., Any]] | None = None) -> Self:
        """Load a `.stc` file; `functions` are what its `call` steps may call, by name."""
        return cls(read_source(path), str(path), scope, functions=functions)

    def _load_used(self, path: str, pos: Pos) -> CompiledProgram:
        """The program a `use` step names, compiled with this one's scope, files and functions; a cycle is refused."""
        target = used_path(self.source, path)
        if str(target) in self._using:
            chain = " -> ".join(Path(p).name for p in (*self._using, str(target)))
            raise pos.error(f"use cycle: {chain}")
        try:
            text = read_source(target, self.files)
        except ProgramError as error:
            raise pos.error(f"use of {path}: {error.message}") from None
        return CompiledProgram(text, str(target), self.scope, files=self.files, functions=self.functions,
                               using=self._using)

    def steps_plan(self) -> StepPlan[CompiledProgram]:
        """This program as steps: its own plan, or a one-step program's messages and output (run by a `use`)."""
        if self.plan is not None:
            return self.plan
        if self._one_step_plan is None:
            def no_use(path: str, pos: Pos) -> CompiledProgram:
                raise pos.error("a one-step program uses no other program")
            self._one_step_plan = build_plan(self, one_step_body(self), self.functions, no_use)
        return self._one_step_plan

    @property
    def fields(self) -> dict[str, Any]:
        """Field name → field type, in template order (a steps program: every output's fields, in program order)."""
        if self.template is not None:
            return self.template.fields
        assert self.plan is not None
        return {name: kind for template in self.plan.templates.values() for name, kind in template.fields.items()}

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
        if self.template is None:
            raise self._several_steps_at().error("a program of several steps is not one output constraint; run it "
                                                 "with a model (Program.run, stcon run)")
        return self.template_constraint(self.template, self.syntax.output_pos, args or {})

    def _several_steps_at(self) -> Pos:
        """Where this program stops being one step: its first step other than a message or its one unnamed output."""
        outputs = 0
        for step in self.syntax.steps:
            if isinstance(step, OutputStep) and step.name is None:
                outputs += 1
            if not isinstance(step, Message) and (not isinstance(step, OutputStep) or step.name is not None
                                                  or outputs > 1):
                return step.pos
        return Pos(self.source, 1, 1)

    def template_constraint(self, template: Template, start: Pos,
                            args: Mapping[str, Any]) -> ProgramConstraint | RecursiveProgramConstraint:
        """The compiled constraint of one of this program's output templates (which begins at `start`) with its
        literal text filled from `args` (cached as `constraint`'s)."""
        parts = template.render_literals(args, render_text)
        key = (id(template), *(p if isinstance(p, str) else "\0" + p.decl.name for p in parts))
        try:
            found = _CONSTRAINTS.get((self,), lambda: self._compile(template, parts), key)
        except ProgramError:
            raise
        except CompileError as exc:
            raise self._locate(exc, parts, start) from None
        assert not isinstance(found, (BranchedConstraint, LoopedConstraint))  # their keys begin with a word
        return found

    def branched_constraint(self, fused: FusedBranches, args: Mapping[str, Any]) -> BranchedConstraint:
        """An output and the branches on its enum field compiled as one constraint for these arguments (cached);
        CompileError where they cannot be (the steps then run one after another)."""
        assert self.plan is not None
        if self.resolver.recursive:
            raise CompileError("a program with recursive types decodes its branches as steps")
        templates = self.plan.templates

        def choose(condition: Expr, scope: Mapping[str, Any]) -> bool:
            return bool(evaluate(condition.text, scope, condition.pos))

        choices = branch_parts(fused, templates, args, render_text, choose)
        key = ("branches", id(fused.output), *(tuple(p if isinstance(p, str) else "\0" + p.decl.name + "\0" +
                                                      "|".join(getattr(p.kind, "values", ())) for p in parts)
                                                for parts in choices))
        template = templates[id(fused.output)]
        constraint = _CONSTRAINTS.get((self,), lambda: compile_branches(template, choices), key)
        assert isinstance(constraint, BranchedConstraint)
        return constraint

    def looped_constraint(self, fused: FusedLoop, args: Mapping[str, Any]) -> LoopedConstraint:
        """An output and the `for` over its bounded list compiled as one constraint for these arguments (cached); a
        ProgramError at the loop where they cannot be."""
        assert self.plan is not None
        templates = self.plan.templates
        choices = loop_parts(fused, templates, args, render_text)
        key = ("loop", id(fused.output), *(tuple(p if isinstance(p, str) else "\0" + p.decl.name for p in parts)
                                           for _, parts in choices))
        constraint = _CONSTRAINTS.get((self,), lambda: compile_loop(fused, templates, choices), key)
        assert isinstance(constraint, LoopedConstraint)
        return constraint

    def _compile(self, template: Template, parts: list[str | Hole]) -> ProgramConstraint | RecursiveProgramConstraint:
        start = time.perf_counter()
        if self.resolver.recursive:
            holes = RecursiveHoles(self.resolver.recursive)
            main = template.to_ir(parts, holes.hole_ir)
            return RecursiveProgramConstraint(main, holes, parts)
        node = template.to_ir(parts)
        if holds_grammar(node):
            return RecursiveProgramConstraint(node, RecursiveHoles({}), parts)
        automaton = build_automaton(node)
        return ProgramConstraint(automaton, parts, time.perf_counter() - start)

    def _locate(self, error: CompileError, parts: list[str | Hole], start: Pos) -> ProgramError:
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
        return start.error(str(error))

    def program_constraint(self) -> ProgramConstraint | RecursiveProgramConstraint:
        """The output constraint under the declared defaults (what `stdsl.compile(program)` returns)."""
        if self.template is None:
            raise ProgramError(f"{self.source}: a program of several steps is not one output constraint; run it "
                               "with a model instead of passing it as a constraint")
        missing = [name for name, (_, default, _) in self.syntax.params.items() if default is None]
        if missing:
            raise ProgramError(f"{self.source}: parameters {', '.join(missing)} have no default; compile the program "
                               "with its arguments: program.constraint({...}), or call program.run(model, {...})")
        return self.constraint(self.arguments({}))


def _program_key(source: str) -> str:
    """How `use` cycles name a program: its file's resolved path (a program that is no file: its source name)."""
    path = Path(source)
    return str(path.resolve()) if path.suffix else source
