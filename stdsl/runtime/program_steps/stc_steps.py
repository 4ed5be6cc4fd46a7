"""Running a `.stc` program of several steps: its checked plan (`stdsl.compiler.stc.step_plan`) drives a `State`
with the same actions a Python program uses (messages, `Gen` steps, `call`, `fork`), so steps reuse the KV cache
of the ones before and a `for` loop's iterations decode as rows of one batch.

The result is a `ProgramRun` whose values are the record of every step: each output's fields (and a named output
as a record of its own), each call's and `use`'s value; a name set inside a `for` is the list of its iterations'
values (a failed iteration gives its `StepError`). `returned` is what a `return` names (else None).
"""

from __future__ import annotations

import inspect
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from stdsl.compiler.stc.branch_fusion import FusedBranches
from stdsl.compiler.stc.jinja_text import evaluate, render_text
from stdsl.compiler.stc.loop_fusion import FusedLoop
from stdsl.compiler.stc.parameters import annotated_types
from stdsl.compiler.stc.program import CompiledProgram
from stdsl.compiler.stc.step_plan import ARGUMENTS, StepPlan
from stdsl.compiler.stc.syntax import (
    BreakStep,
    CallStep,
    ForStep,
    IfStep,
    Message,
    OutputStep,
    RepeatStep,
    ReturnStep,
    Step,
    UseStep,
)
from stdsl.errors import CompileError, OptionError, StdslError
from stdsl.generation import Generation
from stdsl.runtime.program_steps.actions import Gen
from stdsl.runtime.program_steps.record import ProgramRun, StepError, StepRecord
from stdsl.runtime.program_steps.run import run_program
from stdsl.runtime.program_steps.state import ProgramRunState, State


class StepValues(dict[str, Any]):
    """The fields of a named output step (or the record of a `use`d program): a dict whose keys read as attributes
    (`plan.steps` in a template and in Python)."""

    def __getattr__(self, name: str) -> Any:
        if name in self:
            return self[name]
        raise AttributeError(f"no field {name!r} here (fields: {', '.join(self)})")


class _Break(Exception):
    """`break`: leave the innermost `repeat`."""


class _Return(Exception):
    """`return expr`: end the program with this value."""

    def __init__(self, value: Any) -> None:
        super().__init__("return")
        self.value = value


def check_loops(plan: StepPlan[CompiledProgram], args: Mapping[str, Any]) -> None:
    """Refuse, before any step, a `for` over parameters' values that is not a list, and a `for` compiled into its
    output that cannot be compiled (when its text reads the arguments alone): a ProgramError at the loop."""
    for step in plan.param_loops:
        value = evaluate(step.iterable.text, args, step.iterable.pos)
        if not isinstance(value, (list, tuple)):
            raise step.iterable.pos.error(f"for over {step.iterable.text}, which is not a list (it is "
                                          f"{type(value).__name__})")
    for loop in plan.fused_loops.values():
        if loop.reads(plan.templates) <= set(args):
            plan.program.looped_constraint(loop, args)


def run_stc_steps(program: CompiledProgram, model: Any, arguments: Mapping[str, Any] | None,
                  options: Mapping[str, Any]) -> ProgramRun:
    """Run `program`'s steps on `model` with `arguments` (checked first, as a one-step program's) and the decoding
    `options` every step starts from."""
    assert program.plan is not None
    args = program.arguments(dict(arguments or {}))
    check_loops(program.plan, args)
    return run_checked_stc_steps(ProgramRunState(model, dict(options)), program, args)


def run_checked_stc_steps(run: ProgramRunState, program: CompiledProgram, args: Mapping[str, Any]) -> ProgramRun:
    """Run `program`'s steps as `run` (a state its caller made to watch its steps or to abort it) with arguments
    already checked (`program.arguments`, `check_loops`)."""
    plan = program.plan
    assert plan is not None

    def body(s: State) -> tuple[dict[str, Any], Any]:
        return _Interpreter(plan).run(s, args)

    done = run_program(run, body, (), {})
    record, returned = done.returned
    return ProgramRun(record, done.text, in_program_order(done.steps), returned)


def map_stc_steps(program: CompiledProgram, inputs: Iterable[Any], model: Any,
                  options: Mapping[str, Any]) -> list[ProgramRun | StdslError]:
    """Run `program`'s steps once per argument dict, all at once (their steps decode in one batch); a `ProgramRun`
    per input, in order, or the StdslError that input met."""
    def one(item: tuple[int, Any]) -> ProgramRun | StdslError:
        index, arguments = item
        if not isinstance(arguments, Mapping):
            return OptionError("inputs", f"inputs[{index}] must be a dict of program arguments, got "
                                         f"{type(arguments).__name__}")
        try:
            return run_stc_steps(program, model, arguments, options)
        except StdslError as error:
            return error

    items = list(enumerate(inputs))
    if not items:
        return []
    with ThreadPoolExecutor(max_workers=min(len(items), 16), thread_name_prefix="stdsl-stc-map") as pool:
        return list(pool.map(one, items))


def in_program_order(steps: list[StepRecord]) -> list[StepRecord]:
    """`steps` as the program writes them: the iterations of a `for` submit from threads of their own, so each run
    of fork records is put in branch order (each branch's own steps keep their order)."""
    out: list[StepRecord] = []
    forked: list[StepRecord] = []
    for step in [*steps, None]:
        if step is not None and step.branch:
            forked.append(step)
            continue
        out += sorted(forked, key=lambda record: record.branch)
        forked = []
        if step is not None:
            out.append(step)
    return out


class _Interpreter:
    """Walks one plan's steps on a state; `scope` holds what templates read, `record` what the result keeps."""

    def __init__(self, plan: StepPlan[CompiledProgram]) -> None:
        self.plan = plan

    def run(self, s: State, args: Mapping[str, Any]) -> tuple[dict[str, Any], Any]:
        """The record of every step and what `return` names (None without one)."""
        scope: dict[str, Any] = dict(args)
        record: dict[str, Any] = {}
        try:
            self.block(s, self.plan.steps, scope, record)
        except _Return as done:
            return record, done.value
        return record, None

    def block(self, s: State, steps: list[Step], scope: dict[str, Any], record: dict[str, Any]) -> None:
        skip: Step | None = None
        for step in steps:
            if step is skip:
                continue
            fused = self.plan.fused.get(id(step))
            if fused is not None and self.branched(s, fused, scope, record):
                skip = fused.branches
                continue
            loop = self.plan.fused_loops.get(id(step))
            if loop is not None:
                self.looped(s, loop, scope, record)
                skip = loop.loop
                continue
            self.step(s, step, scope, record)

    def branched(self, s: State, fused: FusedBranches, scope: dict[str, Any], record: dict[str, Any]) -> bool:
        """Decode an output and the `if` on its own enum field as one step; False (nothing done) where they cannot
        be compiled as one: the steps then run as written."""
        try:
            constraint = self.plan.program.branched_constraint(fused, scope)
        except CompileError:
            return False
        name = self.plan.step_name(fused.output)

        def read(generation: Generation) -> dict[str, Any]:
            return constraint.parse(generation.text)

        s += Gen(name, constraint, read=read, kind="branched")
        fields = s[name]
        scope.update(fields)
        record.update(fields)
        return True

    def looped(self, s: State, loop: FusedLoop, scope: dict[str, Any], record: dict[str, Any]) -> None:
        """Decode an output and the `for` over its own bounded list as one step: its fields, then each body field as
        the list of its iterations' values (as the forks of a `for` would set it)."""
        constraint = self.plan.program.looped_constraint(loop, scope)
        name = self.plan.step_name(loop.output)

        def read(generation: Generation) -> dict[str, Any]:
            return constraint.parse(generation.text)

        s += Gen(name, constraint, read=read, kind="looped")
        values = s[name]
        head = {key: value for key, value in values.items() if key not in constraint.body_fields}
        if loop.output.name is None:
            scope.update(head)
            record.update(head)
        else:
            scope[loop.output.name] = record[loop.output.name] = StepValues(head)
        for key in constraint.body_fields:
            scope[key] = record[key] = values[key]

    def step(self, s: State, step: Step, scope: dict[str, Any], record: dict[str, Any]) -> None:
        if isinstance(step, Message):
            getattr(s, step.role)(render_text(step.template, scope, step.pos))
        elif isinstance(step, OutputStep):
            self.output(s, step, scope, record)
        elif isinstance(step, IfStep):
            for condition, body in step.branches:
                if condition is None or evaluate(condition.text, scope, condition.pos):
                    self.block(s, body, scope, record)
                    break
        elif isinstance(step, ForStep):
            self.loop(s, step, scope, record)
        elif isinstance(step, RepeatStep):
            for _ in range(step.count):
                try:
                    self.block(s, step.body, scope, record)
                except _Break:
                    break
        elif isinstance(step, CallStep):
            self.call(s, step, scope, record)
        elif isinstance(step, UseStep):
            self.use(s, step, scope, record)
        elif isinstance(step, ReturnStep):
            raise _Return(evaluate(step.value.text, scope, step.value.pos))
        elif isinstance(step, BreakStep):
            raise _Break()

    def output(self, s: State, step: OutputStep, scope: dict[str, Any], record: dict[str, Any]) -> None:
        constraint = self.plan.program.template_constraint(self.plan.templates[id(step)], step.block_pos, scope)
        name = self.plan.step_name(step)

        def read(generation: Generation) -> dict[str, Any]:
            return constraint.parse(generation.text)

        s += Gen(name, constraint, read=read, kind="output")
        fields = s[name]
        if step.name is None:
            scope.update(fields)
            record.update(fields)
        else:
            scope[step.name] = record[step.name] = StepValues(fields)

    def loop(self, s: State, step: ForStep, scope: dict[str, Any], record: dict[str, Any]) -> None:
        items = evaluate(step.iterable.text, scope, step.iterable.pos)
        if not isinstance(items, (list, tuple)):
            raise step.iterable.pos.error(f"for over {step.iterable.text}, which is not a list (it is "
                                          f"{type(items).__name__})")
        names = defined_names(self.plan, step.body)
        outcomes: list[dict[str, Any]] = []
        if items:
            branches = s.fork(len(items))

            def iteration(branch: State, item: Any) -> dict[str, Any]:
                inner: dict[str, Any] = {**scope, step.var: item}
                own: dict[str, Any] = {}
                try:
                    self.block(branch, step.body, inner, own)
                except StepError as error:
                    return {name: own.get(name, error) for name in names}
                return own

            with ThreadPoolExecutor(max_workers=len(items), thread_name_prefix="stdsl-stc-for") as pool:
                outcomes = list(pool.map(iteration, branches, items))
        for name in names:
            scope[name] = record[name] = [outcome.get(name) for outcome in outcomes]

    def call(self, s: State, step: CallStep, scope: dict[str, Any], record: dict[str, Any]) -> None:
        plan = self.plan.calls[id(step)]
        args, kwargs = _arguments(plan.arguments, scope, step)
        function = plan.function

        def checked() -> Any:
            _check_types(function, args, kwargs)
            return function(*args, **kwargs)

        try:
            value = s.call(step.name, checked)
        except StepError:
            raise
        except Exception as error:  # the function's own failure (or its arguments'): the step's, named
            raise StepError(step.name, s.branch, error) from error
        scope[step.name] = record[step.name] = value

    def use(self, s: State, step: UseStep, scope: dict[str, Any], record: dict[str, Any]) -> None:
        used = self.plan.uses[id(step)]
        _, kwargs = _arguments(step.arguments.text, scope, step) if step.arguments is not None else ((), {})
        args = used.arguments(kwargs)
        inner = _Interpreter(used.steps_plan())
        if inner.plan.param_loops:
            check_loops(inner.plan, args)
        own, returned = inner.run(s, args)
        scope[step.name] = record[step.name] = returned if _returns(inner.plan.steps) else StepValues(own)


def defined_names(plan: StepPlan[Any], steps: list[Step]) -> list[str]:
    """The names the result records for `steps` (in program order): a named output's name, an unnamed one's
    fields, calls and uses."""
    names: list[str] = []
    for step in steps:
        found: list[str] = []
        if isinstance(step, OutputStep):
            found = [step.name] if step.name else list(plan.templates[id(step)].fields)
        elif isinstance(step, (CallStep, UseStep)):
            found = [step.name]
        elif isinstance(step, IfStep):
            found = [name for _, body in step.branches for name in defined_names(plan, body)]
        elif isinstance(step, (ForStep, RepeatStep)):
            found = defined_names(plan, step.body)
        names += [name for name in found if name not in names]
    return names


def _returns(steps: list[Step]) -> bool:
    """Whether a program's top level (or a branch or loop in it) holds a `return`."""
    for step in steps:
        if isinstance(step, ReturnStep):
            return True
        bodies = [body for _, body in step.branches] if isinstance(step, IfStep) else \
            [step.body] if isinstance(step, (ForStep, RepeatStep)) else []
        if any(_returns(body) for body in bodies):
            return True
    return False


def _arguments(text: str, scope: Mapping[str, Any], step: CallStep | UseStep) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """The positional and keyword arguments an argument list's text evaluates to over `scope`."""
    where = step.call.pos if isinstance(step, CallStep) else step.arguments.pos if step.arguments else step.pos
    return evaluate(f"{ARGUMENTS}({text})", {**scope, ARGUMENTS: lambda *a, **k: (a, k)}, where)  # type: ignore[no-any-return]


def _check_types(function: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """Refuse (OptionError) arguments of the wrong type for the function's annotations, checked strictly."""
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):
        return
    bound = signature.bind(*args, **kwargs)
    types = annotated_types(signature, getattr(function, "__name__", "function"), getattr(function, "__globals__", {}))
    for name, value in bound.arguments.items():
        if name in types:
            types[name].check(name, value)

