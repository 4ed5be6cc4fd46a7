"""The plan of a `.stc` program of several steps: its output templates compiled, its names, loops, calls and `use`s
checked before any model pass.

Every mistake a program's text can show is refused here at its file:line:col: a name no parameter, field, step
or call defines before it is used (in a template, a condition, a loop or a call), a `for` over a value whose type
is not a list, a `call` of a function not registered with the program (or with arguments its signature refuses),
a `use` of a program that uses this one again (a cycle), a `break` outside `repeat`. The runtime
(`stdsl.runtime.program_steps.stc_steps`) then runs the plan with the same step actions a Python program uses.
"""

from __future__ import annotations

import inspect
import re
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar

from jinja2 import TemplateSyntaxError, meta, nodes

from stdsl.compiler.stc.branch_fusion import FusedBranches, fusable
from stdsl.compiler.stc.jinja_text import expression_env, locate_in_template
from stdsl.compiler.stc.loop_fusion import FusedLoop, loop_fusable
from stdsl.compiler.stc.parameters import ParameterType
from stdsl.compiler.stc.syntax import (
    BreakStep,
    CallStep,
    Expr,
    ForStep,
    IfStep,
    Message,
    OutputStep,
    Pos,
    ProgramSyntax,
    RepeatStep,
    ReturnStep,
    Step,
    UseStep,
)
from stdsl.compiler.stc.template import Literal, Template

Shape = dict[str, Any] | None
"""What the plan knows statically of a value: the JSON Schema of its type, or None when it cannot know."""
_CALL = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_]*)\s*\((.*)\)\s*", re.DOTALL)
ARGUMENTS = "__stc_arguments"
"""The Jinja function a call's or use's argument list is evaluated with: it returns (args, kwargs)."""


@dataclass
class CallPlan:
    """A `call` step checked: the registered function and the argument list's text (`a, b=2`)."""

    function: Callable[..., Any]
    arguments: str


class PlannedProgram(Protocol):
    """What a plan reads of its program (a `CompiledProgram`, which imports this module): its syntax, its
    parameters' types and the resolver of its type names."""

    @property
    def syntax(self) -> ProgramSyntax: ...

    @property
    def param_types(self) -> Mapping[str, ParameterType]: ...

    @property
    def resolver(self) -> Any: ...


P = TypeVar("P", bound=PlannedProgram)


@dataclass
class StepPlan(Generic[P]):
    """A program's steps with what the runtime needs beside them: each output's template (by the step's id),
    each call's function and each `use`d program."""

    program: P
    steps: list[Step]
    templates: dict[int, Template] = field(default_factory=dict)
    calls: dict[int, CallPlan] = field(default_factory=dict)
    uses: dict[int, P] = field(default_factory=dict)
    param_loops: list[ForStep] = field(default_factory=list)
    """`for` steps over a value of the parameters alone whose type the plan cannot know: checked on the arguments."""
    fused: dict[int, FusedBranches] = field(default_factory=dict)
    """Outputs (by the step's id) whose `if` right after them branches on their own enum field alone: the output
    and its branches decode as one step (`branch_fusion.py`)."""
    fused_loops: dict[int, FusedLoop] = field(default_factory=dict)
    """Outputs (by the step's id) whose `for` right after them runs over their own bounded list field: the output and
    every iteration decode as one step (`loop_fusion.py`)."""

    def step_name(self, step: OutputStep) -> str:
        """The name of an output step: its own, else its fields' (`verdict` or `verdict, score`)."""
        return step.name or ", ".join(self.templates[id(step)].fields)


def one_step_body(program: PlannedProgram) -> list[Step]:
    """A one-step program's messages and output as the body of a steps program (for `use`)."""
    syntax = program.syntax
    output = OutputStep(None, syntax.output, syntax.output_pos, syntax.output_pos)
    return [*syntax.messages, output]


def build_plan(program: P, steps: list[Step], functions: Mapping[str, Callable[..., Any]],
               load_used: Callable[[str, Pos], P]) -> StepPlan[P]:
    """Check `steps` of `program` and compile their templates; `load_used(path, pos)` compiles a `use`d program
    (refusing a cycle)."""
    plan = StepPlan(program, steps)
    scope: dict[str, Shape] = {name: _parameter_shape(program.param_types.get(name))
                               for name in program.syntax.params}
    _Checker(plan, functions, load_used, set(program.syntax.params)).block(steps, scope, in_repeat=False)
    _find_fusions(plan, steps, set(program.syntax.params))
    return plan


def _find_fusions(plan: StepPlan[Any], steps: list[Step], params: set[str]) -> None:
    """Record every output whose following `if` or `for` can be compiled into its automaton, in every block (a
    program with recursive types keeps its loops as forks)."""
    for step, following in zip(steps, steps[1:]):
        found = fusable(step, following, plan.templates, params)
        if found is not None:
            plan.fused[id(step)] = found
        loop = loop_fusable(step, following, plan.templates) if not plan.program.resolver.recursive else None
        if loop is not None:
            plan.fused_loops[id(step)] = loop
    for step in steps:
        bodies = [body for _, body in step.branches] if isinstance(step, IfStep) else \
            [step.body] if isinstance(step, (ForStep, RepeatStep)) else []
        for body in bodies:
            _find_fusions(plan, body, params)


class _Checker:
    def __init__(self, plan: StepPlan[Any], functions: Mapping[str, Callable[..., Any]],
                 load_used: Callable[[str, Pos], Any], params: set[str]) -> None:
        self.plan, self.functions, self.load_used, self.params = plan, functions, load_used, params
        self.in_for = 0
        """How many `for` bodies enclose the step being checked (a `return` inside one is refused)."""

    def block(self, steps: list[Step], scope: dict[str, Shape], in_repeat: bool) -> None:
        """Check `steps` in order; the names they define are added to `scope`."""
        for step in steps:
            self.step(step, scope, in_repeat)

    def step(self, step: Step, scope: dict[str, Shape], in_repeat: bool) -> None:
        if isinstance(step, Message):
            _check_template_names(step.template, step.pos, scope)
        elif isinstance(step, OutputStep):
            self.output(step, scope)
        elif isinstance(step, IfStep):
            defined: dict[str, Shape] = {}
            for condition, body in step.branches:
                if condition is not None:
                    _check_expr_names(condition, scope)
                inner = dict(scope)
                self.block(body, inner, in_repeat)
                defined.update({k: v for k, v in inner.items() if k not in scope or inner[k] is not scope[k]})
            scope.update(defined)
        elif isinstance(step, ForStep):
            self.loop(step, scope, in_repeat)
        elif isinstance(step, RepeatStep):
            self.block(step.body, scope, in_repeat=True)
        elif isinstance(step, CallStep):
            self.call(step, scope)
        elif isinstance(step, UseStep):
            self.use(step, scope)
        elif isinstance(step, ReturnStep):
            if self.in_for:
                raise step.pos.error("return inside a for loop (its iterations are forks that run together); "
                                     "return after the loop")
            _check_expr_names(step.value, scope)
        elif isinstance(step, BreakStep) and not in_repeat:
            raise step.pos.error("break outside a repeat loop (a for loop's iterations are forks: they run together)")

    def output(self, step: OutputStep, scope: dict[str, Shape]) -> None:
        template = Template(step.template, step.block_pos, self.plan.program.resolver.resolve)
        for segment in template.segments:
            if isinstance(segment, Literal):
                _check_template_names(segment.template, segment.pos, scope)
        self.plan.templates[id(step)] = template
        shapes = {name: _field_shape(kind) for name, kind in template.fields.items()}
        if step.name is None:
            scope.update(shapes)
        else:
            scope[step.name] = {"type": "object", "properties": {k: v or {} for k, v in shapes.items()}}

    def loop(self, step: ForStep, scope: dict[str, Shape], in_repeat: bool) -> None:
        node = _check_expr_names(step.iterable, scope)
        shape = _path_shape(node, scope)
        if shape is not None and shape.get("type") != "array":
            raise step.iterable.pos.error(f"for over {step.iterable.text}, which is not a list (its type is "
                                          f"{_shape_name(shape)})")
        if shape is None and _names_in(node) <= self.params:
            self.plan.param_loops.append(step)
        inner = dict(scope)
        inner[step.var] = (shape or {}).get("items") if shape else None
        self.in_for += 1
        self.block(step.body, inner, in_repeat=False)
        self.in_for -= 1
        for name, value in inner.items():
            if name != step.var and (name not in scope or value is not scope[name]):
                scope[name] = {"type": "array", "items": value or {}}

    def call(self, step: CallStep, scope: dict[str, Shape]) -> None:
        found = _CALL.fullmatch(step.call.text)
        if found is None:
            raise step.call.pos.error(f"call needs function(arguments), got {step.call.text!r}")
        name, arguments = found.group(1), found.group(2)
        node = _check_expr_names(Expr(f"{ARGUMENTS}({arguments})", step.call.pos), scope,
                                 offset=len(name) - len(ARGUMENTS))
        if name not in self.functions:
            known = ", ".join(sorted(self.functions)) or "none"
            raise step.call.pos.error(f"call of {name}, which is not a function registered with the program "
                                      f"(registered: {known}); pass functions={{{name!r}: ...}} to the Program")
        function = self.functions[name]
        assert isinstance(node, nodes.Call)
        try:
            signature = inspect.signature(function)
        except (TypeError, ValueError):
            signature = None
        if signature is not None:
            try:
                signature.bind(*node.args, **{keyword.key: keyword.value for keyword in node.kwargs})
            except TypeError as error:
                raise step.call.pos.error(f"call of {name}: {error}") from None
        self.plan.calls[id(step)] = CallPlan(function, arguments)
        scope[step.name] = _annotation_shape(_return_annotation(function))

    def use(self, step: UseStep, scope: dict[str, Shape]) -> None:
        used = self.load_used(step.path, step.pos)
        given: set[str] = set()
        if step.arguments is not None:
            node = _check_expr_names(Expr(f"{ARGUMENTS}({step.arguments.text})", step.arguments.pos), scope,
                                     offset=-len(ARGUMENTS) - 1)
            assert isinstance(node, nodes.Call)
            if node.args:
                raise step.arguments.pos.error("use passes arguments by name: use x = \"p.stc\" with a=..., b=...")
            given = {keyword.key for keyword in node.kwargs}
        unknown = sorted(given - set(used.syntax.params))
        if unknown:
            raise step.pos.error(f"use of {step.path}: it has no parameter {unknown[0]} (parameters: "
                                 f"{', '.join(used.syntax.params) or 'none'})")
        for name, (_, default, _) in used.syntax.params.items():
            if default is None and name not in given:
                raise step.pos.error(f"use of {step.path}: its parameter {name} has no default; pass it: "
                                     f"with {name}=...")
        self.plan.uses[id(step)] = used
        scope[step.name] = None


def _parameter_shape(declared: ParameterType | None) -> Shape:
    return _annotation_shape(declared.annotation) if declared is not None else None


def _annotation_shape(annotation: Any) -> Shape:
    """The shape of a Python annotation: lists, scalars, dicts and Pydantic classes are known; the rest is not."""
    origin = typing.get_origin(annotation) or annotation
    simple = {list: "array", tuple: "array", str: "string", int: "integer", float: "number", bool: "boolean",
              dict: "object"}
    if origin in simple:
        return {"type": simple[origin]}
    schema = getattr(annotation, "model_json_schema", None)
    if callable(schema):
        try:
            return dict(schema())
        except Exception:  # a model whose schema pydantic cannot write is simply not known statically
            return None
    return None


def _return_annotation(function: Callable[..., Any]) -> Any:
    try:
        hints = typing.get_type_hints(function)
    except Exception:  # an annotation that does not resolve is not known statically
        return None
    return hints.get("return")


def _field_shape(kind: Any) -> Shape:
    try:
        return dict(kind.schema())
    except Exception:  # a field type with no JSON Schema (a grammar field) is text
        return {"type": "string"}


def _shape_name(shape: dict[str, Any]) -> str:
    if "enum" in shape or "const" in shape:
        return "an enum" if "enum" in shape else "a constant"
    kind = shape.get("type")
    return {"string": "str", "integer": "int", "number": "float", "boolean": "bool", "object": "a record"}.get(
        str(kind), str(kind))


def _path_shape(node: nodes.Node, scope: Mapping[str, Shape]) -> Shape:
    """The shape of a name or a path of attributes and constant keys (`plan.steps`), else None."""
    if isinstance(node, nodes.Name):
        return scope.get(node.name)
    if isinstance(node, (nodes.Getattr, nodes.Getitem)):
        parent = _path_shape(node.node, scope)
        key = node.attr if isinstance(node, nodes.Getattr) else getattr(node.arg, "value", None)
        if parent is None or not isinstance(key, str):
            return None
        properties = parent.get("properties")
        if isinstance(properties, dict) and isinstance(properties.get(key), dict):
            found = properties[key]
            return found if found and "$ref" not in found and "anyOf" not in found else None
    return None


def _names_in(node: nodes.Node) -> set[str]:
    return {name.name for name in node.find_all(nodes.Name)}


def _parse_expr(expr: Expr) -> nodes.Node:
    try:
        tree = expression_env().parse("{{ " + expr.text + " }}")
    except TemplateSyntaxError as error:
        raise expr.pos.error(f"bad expression {expr.text!r}: {error.message}") from None
    output = tree.body[0] if len(tree.body) == 1 else None
    if not isinstance(output, nodes.Output) or len(output.nodes) != 1:
        raise expr.pos.error(f"bad expression {expr.text!r}")
    return output.nodes[0]


def _check_expr_names(expr: Expr, scope: Mapping[str, Any], offset: int = 0) -> nodes.Node:
    """The parsed expression; an unknown name in it is a ProgramError at the name (`offset`: columns the text
    was shifted by)."""
    node = _parse_expr(expr)
    known = set(scope) | set(expression_env().globals) | {ARGUMENTS}
    unknown = sorted(_names_in(node) - known, key=lambda n: expr.text.find(n))
    if unknown:
        found = re.search(r"\b" + re.escape(unknown[0]) + r"\b", expr.text)
        column = expr.pos.column + (found.start() if found else 0) + offset
        raise Pos(expr.pos.source, expr.pos.line, max(column, 1)).error(_unknown(unknown[0], scope))
    return node


def _check_template_names(template: str, start: Pos, scope: Mapping[str, Any]) -> None:
    """An unknown name in a message or an output's literal text is a ProgramError at its tag."""
    env = expression_env()
    try:
        used = meta.find_undeclared_variables(env.parse(template))
    except TemplateSyntaxError as error:
        raise locate_in_template(template, start, error.lineno, None, f"Jinja syntax error: {error.message}") from None
    unknown = sorted(used - set(scope) - set(env.globals))
    if unknown:
        raise locate_in_template(template, start, None, unknown[0], _unknown(unknown[0], scope))


def _unknown(name: str, scope: Mapping[str, Any]) -> str:
    known = ", ".join(sorted(scope)) or "none"
    return (f"unknown name {name!r}: no parameter, field, step or call before this point defines it "
            f"(known here: {known})")


def used_path(source: str, path: str) -> Path:
    """A `use`d program's file: `path` relative to the directory of the program that names it."""
    base = Path(source).parent if Path(source).suffix else Path(".")
    return (base / path).resolve()
