"""`Program`: a parsed `.stc` program (or `@program` function) that compiles per call and runs on a model."""

from __future__ import annotations

import functools
import inspect
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from stdsl.compiler.automata.automaton import Automaton
from stdsl.compiler.automata.build import build_automaton
from stdsl.compiler.constraint import Constraint
from stdsl.compiler.stc.jinja_text import render_text
from stdsl.compiler.stc.recursion import RecursiveHoles, RecursiveProgramConstraint, is_recursive
from stdsl.compiler.stc.resolve import TypeResolver
from stdsl.compiler.stc.source_file import read_source
from stdsl.compiler.stc.syntax import ProgramError, parse_program
from stdsl.compiler.stc.template import Hole, Template
from stdsl.errors import CompileError


class ProgramResult(Mapping[str, Any]):
    """A program's typed result: one attribute per field, plus `.text` and `.stats`; a read-only mapping."""

    def __init__(self, values: dict[str, Any], text: str, stats: Any = None) -> None:
        self._values = values
        self.text = text
        self.stats = stats

    def __getattr__(self, name: str) -> Any:
        values = self.__dict__.get("_values", {})
        if name in values:
            return values[name]
        raise AttributeError(f"the program has no field {name!r} (fields: {', '.join(values)})")

    def __getitem__(self, key: str) -> Any:
        return self._values[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def to_dict(self) -> dict[str, Any]:
        """The field values as a plain dict (Pydantic instances dumped to dicts)."""
        return {k: v.model_dump(mode="json", by_alias=True) if hasattr(v, "model_dump") else v
                for k, v in self._values.items()}

    def __repr__(self) -> str:
        return f"ProgramResult({self._values!r})"


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


class Program:
    """A program: prompt messages with Jinja2 placeholders and a typed output template."""

    def __init__(self, text: str, source: str = "<program>", scope: Mapping[str, Any] | None = None,
                 params: list[str] | None = None) -> None:
        self.source = source
        self.syntax = parse_program(text, source)
        self.resolver = TypeResolver(self.syntax.types, scope)
        for name, (expr, _) in self.syntax.types.items():
            self.resolver.declared_type(name, expr.pos)
        self.template = Template(self.syntax.output, self.syntax.output_pos, self.resolver.resolve)
        self.params = list(params) if params is not None else list(self.syntax.params)
        self._compiled: dict[tuple[str, ...], ProgramConstraint | RecursiveProgramConstraint] = {}

    @classmethod
    def from_file(cls, path: str | Path, scope: Mapping[str, Any] | None = None) -> Program:
        """Load a `.stc` file."""
        return cls(read_source(path), str(path), scope)

    @property
    def fields(self) -> dict[str, Any]:
        """Field name → field type, in template order."""
        return self.template.fields

    def arguments(self, args: Mapping[str, Any]) -> dict[str, Any]:
        """`args` completed with declared defaults; unknown or missing parameters are errors."""
        out = dict(args)
        for name, (_, default, pos) in self.syntax.params.items():
            if name not in out:
                if default is None:
                    raise pos.error(f"parameter {name} has no value; pass {name}=...")
                out[name] = default
        return out

    def messages(self, args: Mapping[str, Any]) -> list[dict[str, str]]:
        """The prompt messages with placeholders filled."""
        return [
            {"role": m.role, "content": render_text(m.template, args, m.pos)}
            for m in self.syntax.messages
        ]

    def constraint(self, args: Mapping[str, Any] | None = None) -> ProgramConstraint | RecursiveProgramConstraint:
        """The compiled output constraint for these arguments (cached by the filled literal text).

        With a recursive declared type in a field, it is a pushdown constraint (nesting capped at 64).
        """
        parts = self.template.render_literals(args or {}, render_text)
        key = tuple(p if isinstance(p, str) else "\0" + p.decl.name for p in parts)
        if key not in self._compiled:
            try:
                self._compiled[key] = self._compile(parts)
            except ProgramError:
                raise
            except CompileError as exc:
                raise self._locate(exc, parts) from None
        return self._compiled[key]

    def _compile(self, parts: list[str | Hole]) -> ProgramConstraint | RecursiveProgramConstraint:
        start = time.perf_counter()
        if self.resolver.recursive:
            holes = RecursiveHoles(self.resolver.recursive)
            main = self.template.to_ir(parts, holes.hole_ir)
            return RecursiveProgramConstraint(main, holes, parts)
        automaton = build_automaton(self.template.to_ir(parts))
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

    def run(self, model: Any, args: Mapping[str, Any] | None = None, **options: Any) -> ProgramResult:
        """Decode the program's output with `model` and return its typed fields."""
        from stdsl.runtime.api import generate

        args = self.arguments(args or {})
        constraint = self.constraint(args)
        messages = self.messages(args)
        result = generate(model, messages or "", constraint=constraint, chat=bool(messages), **options)
        return ProgramResult(constraint.parse(result.text), result.text, result.stats)

    def map(self, inputs: Iterable[Mapping[str, Any]], *, model: Any, **options: Any) -> list[Any]:
        """Run the program on every argument dict together (one batch); a `ProgramResult` per input, in order,
        or the StdslError that input met (a failure loses nothing else)."""
        from stdsl.runtime.program_runs import map_program

        return map_program(self, inputs, model, **options)


def program(fn: Callable[..., Any] | None = None, **defaults: Any) -> Any:
    """Decorator: the function's docstring (or returned string) is a program; its parameters are the variables.

    Pydantic classes and Enums visible where the function is defined can be used as field types.
    Call the decorated function with its arguments plus `model=` (and decoding options).
    """

    frame = inspect.currentframe()
    caller_locals = dict(frame.f_back.f_locals) if frame is not None and frame.f_back is not None else {}
    del frame

    def wrap(func: Callable[..., Any]) -> Callable[..., ProgramResult]:
        scope = dict(func.__globals__)
        scope.update(caller_locals)
        if func.__closure__:
            scope.update({n: c.cell_contents for n, c in zip(func.__code__.co_freevars, func.__closure__)})
        signature = inspect.signature(func)
        source = f"{func.__code__.co_filename}:{func.__name__}"
        static = Program(inspect.cleandoc(func.__doc__), source, scope, list(signature.parameters)) if func.__doc__ else None

        @functools.wraps(func)
        def call(*args: Any, model: Any, **kwargs: Any) -> ProgramResult:
            options = {k: kwargs.pop(k) for k in list(kwargs) if k not in signature.parameters}
            bound = signature.bind(*args, **kwargs)
            bound.apply_defaults()
            prog = static
            if prog is None:
                text = func(*bound.args, **bound.kwargs)
                if not isinstance(text, str):
                    raise ProgramError(f"{source}: a @program function needs a docstring or must return the program text")
                prog = Program(text, source, scope, list(signature.parameters))
            return prog.run(model, dict(bound.arguments), **{**defaults, **options})

        def program_constraint() -> ProgramConstraint | RecursiveProgramConstraint:
            if static is None:
                raise ProgramError(f"{source}: this @program function builds its program when called; call it "
                                   "with model= instead of passing it as a constraint")
            return static.program_constraint()

        def map_inputs(inputs: Iterable[Mapping[str, Any]], *, model: Any, **options: Any) -> list[Any]:
            if static is None:
                raise ProgramError(f"{source}: this @program function builds its program when called; "
                                   "map needs a docstring program")
            return static.map(inputs, model=model, **{**defaults, **options})

        call.map = map_inputs  # type: ignore[attr-defined]
        call.program = static  # type: ignore[attr-defined]
        call.program_constraint = program_constraint  # type: ignore[attr-defined]
        return call

    return wrap(fn) if fn is not None else wrap
