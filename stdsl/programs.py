"""`stdsl.Program` and `@stdsl.program`: a compiled `.stc` program that also runs on a model.

The compiler's `CompiledProgram` parses, types and compiles; this layer adds `run` and `map`,
which call the runtime. The runtime is imported when a program first runs, so building or
compiling a program never loads MLX.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from stdsl.compiler.stc.parameters import annotated_types
from stdsl.compiler.stc.program import CompiledProgram
from stdsl.compiler.stc.program_constraint import ProgramConstraint, RecursiveProgramConstraint
from stdsl.compiler.stc.syntax import ProgramError
from stdsl.errors import StdslError

if TYPE_CHECKING:
    from stdsl.runtime.program_result import ProgramResult


class Program(CompiledProgram):
    """A program: prompt messages with Jinja2 placeholders and a typed output template, run on a model."""

    def run(self, model: Any, args: Mapping[str, Any] | None = None, **options: Any) -> ProgramResult:
        """Decode the program's output with `model` and return its typed fields."""
        from stdsl.runtime.program_runs import run_program

        return run_program(self, model, args, **options)

    def map(self, inputs: Iterable[Mapping[str, Any]], *, model: Any,
            **options: Any) -> list[ProgramResult | StdslError]:
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
        params = list(signature.parameters)
        types = annotated_types(signature, source, scope)
        static = Program(inspect.cleandoc(func.__doc__), source, scope, params, types) if func.__doc__ else None

        @functools.wraps(func)
        def call(*args: Any, model: Any, **kwargs: Any) -> ProgramResult:
            options = {k: kwargs.pop(k) for k in list(kwargs) if k not in signature.parameters}
            bound = signature.bind(*args, **kwargs)
            bound.apply_defaults()
            prog = static
            if prog is None:
                text = func(*bound.args, **bound.kwargs)
                if not isinstance(text, str):
                    raise ProgramError(f"{source}: a @program function needs a docstring or must return "
                                       "the program text")
                prog = Program(text, source, scope, params, types)
            return prog.run(model, dict(bound.arguments), **{**defaults, **options})

        def program_constraint() -> ProgramConstraint | RecursiveProgramConstraint:
            if static is None:
                raise ProgramError(f"{source}: this @program function builds its program when called; call it "
                                   "with model= instead of passing it as a constraint")
            return static.program_constraint()

        def map_inputs(inputs: Iterable[Mapping[str, Any]], *, model: Any,
                       **options: Any) -> list[ProgramResult | StdslError]:
            if static is None:
                raise ProgramError(f"{source}: this @program function builds its program when called; "
                                   "map needs a docstring program")
            return static.map(inputs, model=model, **{**defaults, **options})

        call.map = map_inputs  # type: ignore[attr-defined]
        call.program = static  # type: ignore[attr-defined]
        call.program_constraint = program_constraint  # type: ignore[attr-defined]
        return call

    return wrap(fn) if fn is not None else wrap
