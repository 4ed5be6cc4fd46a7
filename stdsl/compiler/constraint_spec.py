"""A request's output constraint as plain JSON (the cache key), and its compilation.

A spec is a JSON object with a `kind`: `json_schema` (`schema`, `strict`: true or absent, objects closed to
their declared members and a schema the compiler refuses an error; false, the schema's exact open language and a
refused schema falling back to any object), `json_object`,
`regex` (`pattern`), `choice` (`choices`), `grammar` (`text`, `syntax`, `source`: the field, for errors),
`structural_tag` (`tag`: XGrammar's object), `program` (`source`, `arguments`) or `tools`
(`format`: a tool-call format's name, `tools` (`name` and `parameters`, and `strict`: false for open objects in
its arguments, or a custom tool's `name` and
`custom`: `syntax`, `definition`, `field`), `choice`, `parallel`, `content`: a spec or null, `tokens`: the
format's markers written as one token of the model's tokenizer), or
`reasoning` (`format`: a thinking format's name, `mode`, `answer`: a spec or null, `tokens`: the tags written
as one token of the model's tokenizer).  A tools spec a compile worker assembles may carry `calls`, call DFAs
another worker built (kind `tool_calls`: `tools`, a tools spec, and `share`, indices of its tools); they are kept
in the calls cache before the build and are no part of the compiled constraint.  Its canonical text
(sorted keys) identifies the compiled constraint.  `build_constraint` imports only the
compiler, so it runs in a worker process, off the decode loop.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import numpy as np

from stdsl.compiler import ir
from stdsl.compiler.automata.automaton import Automaton
from stdsl.compiler.automata.build import build_automaton, embedded_leaf
from stdsl.compiler.collector_pause import collector_paused
from stdsl.compiler.constraint import Constraint, Regex, compile_embeddable
from stdsl.compiler.constraint import compile as compile_constraint
from stdsl.compiler.deadline import compile_deadline
from stdsl.compiler.json_schema.json_tokens import Whitespace
from stdsl.compiler.json_schema.member_document import DOCUMENT, dereferenced, standalone
from stdsl.compiler.json_schema.recursive import is_recursive_schema
from stdsl.compiler.pushdown.constraint import PushdownConstraint
from stdsl.compiler.pushdown.embedding import compile_embedding, grammar_leaf
from stdsl.compiler.reasoning import FORMATS, ReasoningConstraint, think_then
from stdsl.compiler.source_files import FileAccess
from stdsl.compiler.tools.formats import ToolFormat, ToolSpec, format_named
from stdsl.compiler.tools.formats.base import parameters_path, parameters_path_of
from stdsl.compiler.tools.formats.structural_tag import structural_tag_automaton, structural_tag_ir
from stdsl.compiler.tools.integer_digits import digit_limited
from stdsl.compiler.tools.object_layout import object_layout
from stdsl.compiler.tools.reply_automaton import CallKey, call_share, keep_calls, reply_automaton
from stdsl.compiler.tools.reply_grammar import reply_ir
from stdsl.compiler.tools.tag_automaton import tags_automaton
from stdsl.errors import (
    CompileError,
    CompileTimeError,
    EmptyLanguageError,
    SchemaError,
    StateBudgetError,
    StdslError,
)

Spec = Mapping[str, Any]
Compiled = Constraint | PushdownConstraint | ReasoningConstraint
ANY_OBJECT: dict[str, Any] = {"type": "object"}


def canonical_text(spec: Spec) -> str:
    """The cache key of a spec: its JSON without insignificant whitespace, key order kept (a schema's properties are
    written in their declared order, so two orders are two constraints)."""
    return json.dumps(spec, separators=(",", ":"), ensure_ascii=False)


class _Deadline:
    """The time left of one build, handed to each nested `compile` as its own limit."""

    def __init__(self, seconds: float) -> None:
        self.end = time.perf_counter() + seconds

    def left(self) -> float:
        return max(self.end - time.perf_counter(), 1e-3)


def _embeddable_schema(schema: Any, *, max_seconds: float, whitespace: Whitespace | None = None,
                       strict: bool = True, zero_fractions: bool = True) -> Constraint | PushdownConstraint:
    """A schema to embed in a larger constraint: a DFA whose free-form values nest at most `ANY_VALUE_DEPTH`
    levels, or the pushdown of a schema whose `$ref`s form a cycle (embedded as a grammar, `embedded_ir`);
    `strict` as `stdsl.compile`'s, `zero_fractions` as `compile_embeddable`'s (for the DFA)."""
    if isinstance(schema, dict) and is_recursive_schema(schema):
        return compile_constraint(schema, whitespace=whitespace, max_seconds=max_seconds, strict=strict)
    return compile_embeddable(schema, whitespace=whitespace, max_seconds=max_seconds, strict=strict,
                              zero_fractions=zero_fractions)


def embedded_ir(compiled: Compiled, label: str) -> ir.Node:
    """A compiled constraint as a leaf of a larger IR: its DFA, or its pushdown's bodies (`grammar_leaf`, which
    makes the larger constraint a pushdown); `label` names it in errors."""
    if isinstance(compiled, Constraint):
        return embedded_leaf(compiled.automaton)
    if isinstance(compiled, PushdownConstraint):
        return grammar_leaf(compiled.grammar, label)
    raise CompileError(f"{label}: a reasoning constraint cannot stand inside another constraint")


def _lowered(node: ir.Node, kind: str, spec: Spec, start: float, deadline: _Deadline,
             special_tokens: tuple[str, ...] = ()) -> Constraint | PushdownConstraint:
    """The constraint of a larger IR: one DFA, or a pushdown when it embeds a recursive grammar."""
    with compile_deadline(deadline.left()):
        lowered = compile_embedding(node)
    if isinstance(lowered, Automaton):
        return Constraint(lowered, kind, dict(spec), None, time.perf_counter() - start, special_tokens=special_tokens)
    return PushdownConstraint(lowered, kind, dict(spec), time.perf_counter() - start, special_tokens=special_tokens)


def _schema(schema: Any, strict: bool, deadline: _Deadline, embeddable: bool) -> Compiled:
    """A JSON Schema compiled `strict` (objects closed to their declared members) and refused naming the keyword,
    or non-strict: its exact open language, falling back to any object when refused.

    `embeddable`: to embed beside tools (`_embeddable_schema`).
    """
    compile_schema = _embeddable_schema if embeddable else compile_constraint
    try:
        return compile_schema(schema, max_seconds=deadline.left(), strict=strict)
    except SchemaError:
        if strict:
            raise
        return compile_schema(ANY_OBJECT, max_seconds=deadline.left(), strict=strict)


ARGUMENTS_LOWERING = "embeddable json schema, integers within 20 digits"
"""Names `_arguments_ir`'s lowering in the keys of cached tool calls (`tools.reply_automaton`)."""


def _arguments_ir(deadline: _Deadline, open_tools: list[ToolSpec],
                  tools: Sequence[ToolSpec] = ()) -> _ArgumentsLowering:
    """Lowers a tool's parameter schema (or one of its parameters') to an embedded DFA, or a recursive one to an
    embedded grammar (compiled and cached by `stdsl.compile`): strict, but for the `open_tools` (`strict: false`),
    whose schemas sit under their own `parameters_path`; spelled with the format's `whitespace`; an integer without
    a stated bound kept to 20 digits (`digit_limited`), so no family's parser fails on it or reads it changed.  A
    parameter lowered apart keeps its references into its tool's schema (`member_document.standalone`).  A
    closed object of tool-schema shape is laid out from its members' values, each lowered (and kept) apart
    (`tools.object_layout`): the same language with no subset construction over the whole object."""
    return _ArgumentsLowering(deadline, [parameters_path(tool) for tool in open_tools],
                              {parameters_path(tool): tool.parameters for tool in tools})


class _ArgumentsLowering:
    """`_arguments_ir`'s lowering, called with (schema, path, whitespace).  A class, not a closure that calls
    itself: that would be a reference cycle the collector alone frees."""

    def __init__(self, deadline: _Deadline, open_paths: list[str], documents: dict[str, Mapping[str, Any]]) -> None:
        self.deadline, self.open_paths, self.documents = deadline, open_paths, documents

    def __call__(self, schema: Mapping[str, Any], path: str, whitespace: Whitespace | None = None) -> ir.Node:
        strict = not any(path == where or path.startswith(where + "/") for where in self.open_paths)
        deadline = self.deadline
        root = parameters_path_of(path)
        root = root if root in self.documents else None
        if root is not None:
            schema = dereferenced(schema, self.documents[root])
        compiled = schema if root is None else standalone(schema, self.documents[root])

        def whole() -> Compiled:
            try:
                return _embeddable_schema(digit_limited(compiled), max_seconds=deadline.left(),
                                          whitespace=whitespace, strict=strict)
            except SchemaError as error:
                copied = f"#/$defs/{DOCUMENT}"
                if root is not None and (error.path == copied or error.path.startswith(copied + "/")):
                    raise error.relocated(root, copied) from None
                raise error.relocated(path) from None

        resolved = compiled if root is not None or path in self.documents else None
        return _schema_leaf(schema, path, whitespace, strict, ARGUMENTS_LOWERING,
                            lambda value, where: self(value, where, whitespace), whole, resolved)


TAG_SCHEMA_LOWERING = "embeddable json schema, integers without a fraction"
"""Names `_tag_schema`'s lowering in the keys of laid-out objects (`tools.object_layout`)."""


def _tag_schema(schema: Any, path: str, deadline: _Deadline) -> ir.Node:
    """A structural tag's JSON Schema as an embedded leaf (`_schema_leaf`), strict and compact, an integer never
    written `1.0` (XGrammar does not read it as an integer; a recursive schema's pushdown still does)."""
    return _schema_leaf(schema, path, None, True, TAG_SCHEMA_LOWERING,
                        lambda value, where: _tag_schema(value, where, deadline),
                        lambda: _embeddable_schema(schema, max_seconds=deadline.left(), zero_fractions=False))


def _schema_leaf(schema: Any, path: str, whitespace: Whitespace | None, strict: bool, lowering: str,
                 lower_value: Callable[[Mapping[str, Any], str], ir.Node], whole: Callable[[], Compiled],
                 resolved: Any = None) -> ir.Node:
    """A schema as an embedded leaf: a closed object of tool-schema shape laid out from its members' values, each
    lowered by `lower_value` (and kept, `tools.object_layout`: the same language with no subset construction over
    the whole object), else `whole()` compiled.  `resolved`: the schema as its own document, where `lower_value`
    resolves a member's references in the document the schema sits in (see `object_layout`)."""

    def value_of(value: Mapping[str, Any], where: str) -> Automaton | None:
        return _value_automaton(lower_value(value, where))

    laid_out = _apart(lambda: object_layout(schema, path, whitespace, strict, value_of, lowering, resolved))
    if laid_out is not None:
        return embedded_leaf(laid_out, minimal=True)
    return embedded_ir(whole(), path)


def _apart(build: Callable[[], Automaton | None]) -> Automaton | None:
    """What `build` lays out from parts compiled apart, or None where a part is refused (the whole compile then
    gives the refusal, or drops an optional member whose value is empty, as before)."""
    try:
        return build()
    except (SchemaError, EmptyLanguageError, StateBudgetError):
        return None


def _value_automaton(node: ir.Node) -> Automaton | None:
    """A lowered member value's DFA, or None where it is a recursive grammar (which needs the pushdown)."""
    if not isinstance(node, ir.Embedded) or np.shape(node.transitions)[1:] != (256,):
        return None
    return build_automaton(node)


def _tool_spec(entry: Spec, deadline: _Deadline) -> ToolSpec:
    """A tool of a tools spec: a function's parameter schema, or a custom tool's input language compiled."""
    if "custom" not in entry:
        return ToolSpec(entry["name"], entry["parameters"])
    from stdsl.compiler.tools.custom_input import input_language
    from stdsl.compiler.tools.formats.base import CUSTOM_PARAMETERS

    return ToolSpec(entry["name"], CUSTOM_PARAMETERS, input_language(entry["custom"], deadline.left()))


def _content_ir(spec: Spec | None, deadline: _Deadline) -> ir.Node | None:
    """The IR of a response format used next to tools (a DFA, or an embedded grammar when it recurses), or None
    for free text."""
    if spec is None:
        return None
    return embedded_ir(build(spec, deadline, embeddable=True), "response_format")


def _embedder(deadline: _Deadline) -> Any:
    """Compiles a structural tag's schema, regex or grammar to an embedded DFA (an embedded grammar when it
    recurses), errors naming the tag's field."""
    from stdsl.compiler.grammar import Grammar

    def embed(item: tuple[Any, ...], path: str) -> ir.Node:
        try:
            if item[0] == "json_schema":
                return _tag_schema(item[1], path, deadline)
            if item[0] == "regex":
                compiled = compile_constraint(Regex(item[1]), max_seconds=deadline.left())
            else:
                compiled = compile_constraint(Grammar(item[1], syntax=item[2]), max_seconds=deadline.left())
        except CompileTimeError:
            raise
        except StdslError as error:
            raise CompileError(f"{path}: {error}") from None
        return embedded_ir(compiled, path)

    return embed


def program_files(spec: Spec) -> FileAccess:
    """What a program spec's file references may read: files under its `files` directory, or none at all (a spec
    is what a client sent; only the server that builds it sets `files`)."""
    root = spec.get("files")
    return FileAccess.under(root) if root else FileAccess.none()


def build(spec: Spec, deadline: _Deadline, embeddable: bool = False) -> Compiled:
    """The compiled constraint of `spec` within `deadline` (with `embeddable`, a DFA where one exists)."""
    kind = spec.get("kind")
    start = time.perf_counter()
    if kind == "json_schema":
        return _schema(spec["schema"], bool(spec.get("strict", True)), deadline, embeddable)
    if kind == "json_object":
        return _schema(ANY_OBJECT, True, deadline, embeddable)
    if kind == "grammar":
        from stdsl.compiler.grammar import Grammar

        grammar = Grammar(spec["text"], syntax=spec.get("syntax", "auto"), source=spec.get("source", "<grammar>"))
        if spec.get("tokens") is not None:
            grammar = grammar.with_special_tokens(dict(spec["tokens"]))
        return compile_constraint(grammar, max_seconds=deadline.left())
    if kind == "structural_tag":
        embed = _embedder(deadline)
        with compile_deadline(deadline.left()):
            assembled = structural_tag_automaton(spec["tag"], embed, tags_automaton)
            if assembled is not None:
                return Constraint(assembled, "structural_tag", dict(spec), None, time.perf_counter() - start)
            node = structural_tag_ir(spec["tag"], embed, tags_automaton)
        return _lowered(node, "structural_tag", spec, start, deadline)
    if kind == "regex":
        return compile_constraint(Regex(spec["pattern"]), max_seconds=deadline.left())
    if kind == "choice":
        with compile_deadline(deadline.left()):
            automaton = build_automaton(ir.alt(*(ir.literal(str(c)) for c in spec["choices"])))
        return Constraint(automaton, "choice", list(spec["choices"]), None, time.perf_counter() - start)
    if kind == "program":
        from stdsl.compiler.stc.program import CompiledProgram

        program = CompiledProgram(spec["source"], "<request program>", files=program_files(spec))
        with compile_deadline(deadline.left()):
            return program.constraint(program.arguments(spec.get("arguments") or {}, "server"))
    if kind == "tools":
        keep_calls(spec.get("calls") or ())
        spec = {key: value for key, value in spec.items() if key != "calls"}
        tool_format, tools, open_tools, lowering = _tools_of(spec, deadline)
        content = _content_ir(spec.get("content"), deadline)
        with compile_deadline(deadline.left()):
            assembled = reply_automaton(tools, tool_format, _arguments_ir(deadline, open_tools, tools), lowering,
                                        choice=spec["choice"], parallel=bool(spec["parallel"]), content=content)
        if assembled is not None:
            return Constraint(assembled, "tools", dict(spec), None, time.perf_counter() - start,
                              special_tokens=tool_format.tokens)
        node = reply_ir(tools, tool_format, _arguments_ir(deadline, open_tools, tools), choice=spec["choice"],
                        parallel=bool(spec["parallel"]), content=content)
        return _lowered(node, "tools", spec, start, deadline, tool_format.tokens)
    if kind == "reasoning":
        return _reasoning(spec, deadline)
    raise CompileError(f"unknown constraint kind {kind!r}")


def _tools_of(spec: Spec, deadline: _Deadline) -> tuple[ToolFormat, list[ToolSpec], list[ToolSpec], Any]:
    """A tools spec's format, tools, open tools (`strict: false`) and its calls' lowering key."""
    tools = [_tool_spec(t, deadline) for t in spec["tools"]]
    open_tools = [tool for tool, entry in zip(tools, spec["tools"]) if entry.get("strict") is False]
    return _format_of(spec), tools, open_tools, _lowering(open_tools)


def _format_of(spec: Spec) -> ToolFormat:
    """A tools spec's call format, with the markers its model writes as one token."""
    return format_named(spec["format"]).with_tokens(spec.get("tokens") or ())


def _lowering(open_tools: list[ToolSpec]) -> Any:
    """What the calls of a list with these open tools are lowered under (part of each call's cache key)."""
    return (ARGUMENTS_LOWERING, tuple(parameters_path(t) for t in open_tools))


def tool_call_share(spec: Spec, max_seconds: float) -> list[tuple[CallKey, Automaton]]:
    """Kind "tool_calls" (`tools`: a tools spec, `share`: indices into its tools): those tools' call DFAs and their
    cache keys, built as the tools spec's build builds them (the other tools read only for the lowering's open ones),
    for the worker that assembles the list (which gets them as the tools spec's `calls`, kept before its build, so
    it compiles none of them again)."""
    deadline = _Deadline(max_seconds)
    tools = spec["tools"]
    chosen = [_tool_spec(tools["tools"][index], deadline) for index in spec["share"]]
    open_tools = [_tool_spec(entry, deadline) for entry in tools["tools"] if entry.get("strict") is False]
    with compile_deadline(deadline.left()):
        return call_share(chosen, _format_of(tools), _arguments_ir(deadline, open_tools, chosen), _lowering(open_tools),
                          range(len(chosen)))


def _reasoning(spec: Spec, deadline: _Deadline) -> ReasoningConstraint:
    """The answer's constraint (free text when null) after a thinking block of `format` in `mode`."""
    answer = spec.get("answer")
    compiled = (build(answer, deadline) if answer is not None
                else compile_constraint(Regex(r"[\s\S]*"), max_seconds=deadline.left()))
    if isinstance(compiled, ReasoningConstraint):
        raise CompileError("a reasoning constraint cannot be the answer of another")
    with compile_deadline(deadline.left()):
        return think_then(compiled, FORMATS[spec["format"]], spec["mode"], tuple(spec.get("tokens") or ()))


def build_constraint(spec: Spec, max_seconds: float) -> Compiled:
    """Compile `spec` within `max_seconds` (CompileTimeError past it)."""
    with collector_paused():
        return build(spec, _Deadline(max_seconds))


T = TypeVar("T")
Outcome = tuple[Compiled | None, str | None, str]
"""(compiled, None, "") on success, else (None, error class name, message): exceptions with extra
constructor arguments do not cross a process boundary, so the worker returns them as text."""


def program_messages(spec: Spec, max_seconds: float) -> list[dict[str, str]]:
    """A program spec's prompt messages, parsed and rendered within `max_seconds` and its `max_bytes` of text."""
    from stdsl.compiler.stc.program import CompiledProgram
    from stdsl.compiler.stc.syntax import ProgramError

    with compile_deadline(max_seconds):
        program = CompiledProgram(spec["source"], "<request program>", files=program_files(spec))
        if program.plan is not None:
            raise ProgramError("a program of several steps runs on the server by name: start it with "
                               "stcon serve --steps-program FILE.stc and send program: {\"name\": ...}",
                               "<request program>")
        return program.messages(program.arguments(spec.get("arguments") or {}, "server"), spec.get("max_bytes"))


RenderOutcome = tuple[list[dict[str, str]] | None, str | None, str]
"""A program's rendered messages, or (None, error class name, message)."""
CallsOutcome = tuple[list[tuple[CallKey, Automaton]] | None, str | None, str]
"""A share of a tool list's call DFAs with their cache keys, or (None, error class name, message)."""


def worker_outcome(spec: Spec, max_seconds: float) -> Outcome | RenderOutcome | CallsOutcome:
    """What a compile worker answers: a program's rendered messages for kind "program_messages", a share of a tool
    list's call DFAs for kind "tool_calls" (`tool_call_share`), else `build_outcome`."""
    if spec.get("kind") == "tool_calls":
        return _attempt(tool_call_share, spec, max_seconds)
    if spec.get("kind") != "program_messages":
        return build_outcome(spec, max_seconds)
    return _attempt(program_messages, spec, max_seconds)


def build_outcome(spec: Spec, max_seconds: float) -> Outcome:
    """`build_constraint` for a worker process: a refusal comes back as its class name and message."""
    return _attempt(build_constraint, spec, max_seconds)


def _attempt(work: Callable[[Spec, float], T], spec: Spec, max_seconds: float) -> tuple[T | None, str | None, str]:
    """`work(spec, max_seconds)`, or (None, error class name, message) for a refusal: what crosses the process
    boundary from a worker."""
    try:
        with collector_paused():
            return work(spec, max_seconds), None, ""
    except StdslError as error:
        return None, type(error).__name__, str(error)
    except RecursionError:
        return None, "CompileError", ("the constraint nests too deeply to compile (schemas, expressions or rules "
                                      "inside one another); flatten it")
    except (ValueError, TypeError, KeyError) as error:
        return None, "CompileError", f"cannot compile this constraint: {type(error).__name__}: {error}"
