"""`stdsl.Program` and `@stdsl.program`: a compiled `.stc` program that also runs on a model, or a Python function
that drives a program's steps (`StepsProgram`).

The compiler's `CompiledProgram` parses, types and compiles; this layer adds `run` and `map`,
which call the runtime. The runtime is imported when a program first runs, so building or
compiling a program never loads MLX.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, cast

from stdsl.compiler.stc.parameters import annotated_types
from stdsl.compiler.stc.program import CompiledProgram
from stdsl.compiler.stc.program_constraint import ProgramConstraint, RecursiveProgramConstraint
from stdsl.compiler.stc.syntax import ProgramError
from stdsl.errors import StdslError

if TYPE_CHECKING:
    from stdsl.runtime.program_result import ProgramResult
    from stdsl.runtime.program_steps.record import ProgramRun

STATE_NAMES = ("s", "state")
"""First-parameter names that make a decorated function a steps program (as does an annotation `State`)."""


class Program(CompiledProgram):
    """A program: prompt messages with Jinja2 placeholders and a typed output template, run on a model."""

    def run(self, model: Any, args: Mapping[str, Any] | None = None, **options: Any) -> ProgramResult:
        """Decode the program's output with `model` and return its typed fields; a program of several steps runs
        them and returns a `ProgramRun` (the record of every step, with their stats)."""
        if self.plan is not None:
            from stdsl.runtime.program_steps.stc_steps import run_stc_steps

            return run_stc_steps(self, model, args, options)
        from stdsl.runtime.program_runs import run_program

        return run_program(self, model, args, **options)

    def map(self, inputs: Iterable[Mapping[str, Any]], *, model: Any,
            **options: Any) -> list[ProgramResult | StdslError]:
        """Run the program on every argument dict together (one batch); a `ProgramResult` per input, in order,
        or the StdslError that input met (a failure loses nothing else); a program of several steps gives a
        `ProgramRun` per input."""
        if self.plan is not None:
            from stdsl.runtime.program_steps.stc_steps import map_stc_steps

            return list(map_stc_steps(self, inputs, model, options))
        from stdsl.runtime.program_runs import map_program

        return map_program(self, inputs, model, **options)


class StepsProgram:
    """A Python function whose first parameter is the program's state (`s`): its body appends text, messages and
    steps (`s += gen(...)`) with ordinary control flow. Run it with `run(model, *args, **kwargs)`, or call it with
    its arguments plus `model=`; options that are not parameters are decoding options every step starts from."""

    def __init__(self, function: Callable[..., Any], defaults: Mapping[str, Any]) -> None:
        functools.update_wrapper(self, function)
        self.function = function
        self.defaults = dict(defaults)
        self.source = f"{function.__code__.co_filename}:{function.__name__}"
        self.signature = inspect.signature(function)
        self._names = list(self.signature.parameters)[1:]

    @property
    def name(self) -> str:
        """The name a server serves it by: the function's."""
        return self.function.__name__

    def __call__(self, *args: Any, model: Any, **kwargs: Any) -> ProgramRun:
        return self.run(model, *args, **kwargs)

    def run(self, model: Any, /, *args: Any, **kwargs: Any) -> ProgramRun:
        """Run the program on `model` with its arguments; a `ProgramRun` (every step's value and stats)."""
        from stdsl.runtime.program_steps.run import run_steps

        options = {k: kwargs.pop(k) for k in list(kwargs) if k not in self._names}
        call_args, call_kwargs = self._bind(args, kwargs)
        return run_steps(self.function, model, call_args, call_kwargs, {**self.defaults, **options})

    def map(self, inputs: Iterable[Mapping[str, Any]], *, model: Any,
            **options: Any) -> list[ProgramRun | StdslError]:
        """Run the program on every argument dict at once (their steps decode in one batch); a result per input,
        in order, or the StdslError that input met."""
        from stdsl.runtime.program_steps.run import map_steps

        return map_steps(self.function, inputs, model, {**self.defaults, **options},
                         lambda arguments: self._bind((), dict(arguments)))

    def bind(self, arguments: Mapping[str, Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """A dict of the function's arguments (after the state) as its call's positional and keyword arguments;
        ProgramError naming what does not fit (a missing or unknown argument)."""
        return self._bind((), dict(arguments))

    values_by_step = True
    """Each main-line step's record is the value of its name, so a server streams it as the step ends."""

    def run_on(self, run: Any, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> ProgramRun:
        """Run the program with bound arguments (`bind`) as `run`, a `ProgramRunState` its caller made to watch its
        steps as they end or to abort it (the server's)."""
        from stdsl.runtime.program_steps.run import run_program

        return run_program(run, self.function, args, kwargs)

    def program_constraint(self) -> ProgramConstraint:
        """Refused: a program of several steps is not one output constraint."""
        raise ProgramError(f"{self.source}: a steps program decodes several steps; run it with model= instead of "
                           "passing it as a constraint")

    def _bind(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
        try:
            bound = self.signature.bind(None, *args, **kwargs)
        except TypeError as error:
            raise ProgramError(f"{self.source}: {error}") from error
        bound.apply_defaults()
        return tuple(bound.args[1:]), dict(bound.kwargs)


class StcStepsProgram:
    """A `.stc` program of steps run as a named steps program is (`bind` then `run`; served by its file's stem), so a
    server and a dataset run take either kind."""

    values_by_step = False
    """Its steps' records are not its values one for one (a compiled branch or loop, an output's fields spread into
    the record), so a server streams its values when the run ends."""

    def __init__(self, program: Program) -> None:
        if program.plan is None:
            raise ProgramError("a one-step program, not a program of steps: send it as a program's source, or run "
                               "it with stcon run", program.source)
        self.program = program
        self.source = program.source
        self.defaults: dict[str, Any] = {}

    @property
    def name(self) -> str:
        """The name a server serves it by: its file's stem."""
        from pathlib import Path

        return Path(self.source).stem

    def bind(self, arguments: Mapping[str, Any], caller: str = "server") -> tuple[tuple[Any, ...], dict[str, Any]]:
        """The program's arguments checked and completed with its defaults (a ProgramError or OptionError naming what
        does not fit, and the loops that cannot run on them), as the one positional argument of `run`."""
        from stdsl.runtime.program_steps.stc_steps import check_loops

        checked = self.program.arguments(dict(arguments), caller)
        assert self.program.plan is not None
        check_loops(self.program.plan, checked)
        return (checked,), {}

    def run(self, model: Any, arguments: Mapping[str, Any], /, **options: Any) -> ProgramRun:
        """Run the program's steps on `model` with checked `arguments` (from `bind`) and decoding options."""
        return cast("ProgramRun", self.program.run(model, arguments, **options))

    def run_on(self, run: Any, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> ProgramRun:
        """Run the program's steps with bound arguments (`bind`) as `run`, a `ProgramRunState` its caller made to
        watch its steps as they end or to abort it (the server's)."""
        from stdsl.runtime.program_steps.stc_steps import run_checked_stc_steps

        return run_checked_stc_steps(run, self.program, *args)


def load_steps_program(spec: str, functions: Mapping[str, Callable[..., Any]] | None = None
                       ) -> StepsProgram | StcStepsProgram:
    """The steps program `FILE.py:NAME` names (`NAME` may be left out when the file defines exactly one), its file
    run as a module with its folder on `sys.path` (so it imports its neighbours); or the `.stc` program of steps
    `FILE.stc` (its `call` steps may call `functions`)."""
    import importlib.util
    import sys
    from pathlib import Path

    if spec.endswith(".stc"):
        return StcStepsProgram(Program.from_file(spec, functions=functions))
    path_text, _, name = spec.rpartition(":") if not spec.endswith(".py") else (spec, ":", "")
    path = Path(path_text)
    if not path.is_file():
        raise ProgramError("no such file", str(path))
    module_spec = importlib.util.spec_from_file_location(f"stcon_steps_{path.stem}", path)
    if module_spec is None or module_spec.loader is None:
        raise ProgramError("not a Python file", str(path))
    module = importlib.util.module_from_spec(module_spec)
    sys.path.insert(0, str(path.resolve().parent))
    try:
        module_spec.loader.exec_module(module)
    except StdslError as error:
        raise ProgramError(str(error), str(path)) from None
    except Exception as error:  # the file's own failure, reported in a line rather than a traceback
        raise ProgramError(f"importing it failed: {type(error).__name__}: {error}", str(path)) from None
    finally:
        sys.path.remove(str(path.resolve().parent))
    found = {key: value for key, value in vars(module).items() if isinstance(value, StepsProgram)}
    if not name:
        if len(found) != 1:
            raise ProgramError(f"it defines {len(found)} steps programs ({', '.join(found) or 'none'}): name one, "
                               f"as {path}:NAME", str(path))
        name = next(iter(found))
    if name not in found:
        raise ProgramError(f"no steps program named {name!r} (steps programs: {', '.join(found) or 'none'})",
                           str(path))
    return found[name]


def drives_steps(signature: inspect.Signature) -> bool:
    """Whether a function is a steps program: its first parameter is named `s` or `state`, or annotated `State`."""
    parameters = list(signature.parameters.values())
    if not parameters:
        return False
    first = parameters[0]
    annotation = first.annotation
    named = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", "")
    return first.name in STATE_NAMES or named == "State" or named.endswith(".State")


def program(fn: Callable[..., Any] | None = None, **defaults: Any) -> Any:
    """Decorator: the function's docstring (or returned string) is a program; its parameters are the variables.

    Pydantic classes and Enums visible where the function is defined can be used as field types.
    Call the decorated function with its arguments plus `model=` (and decoding options).
    A function whose first parameter is the state (`s`, `state` or annotated `State`) is a `StepsProgram`
    instead: its body drives the steps.
    """

    frame = inspect.currentframe()
    caller_locals = dict(frame.f_back.f_locals) if frame is not None and frame.f_back is not None else {}
    del frame

    def wrap(func: Callable[..., Any]) -> Callable[..., ProgramResult] | StepsProgram:
        if drives_steps(inspect.signature(func)):
            return StepsProgram(func, defaults)
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
