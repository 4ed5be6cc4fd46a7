"""What every tool-call format gives: the grammar of one call and of a run of calls, the text of a call, a reader.

A reply is free text (no trigger of the format in it), then optionally the calls: the section
open text, calls joined by the separator, the section close text.  A marker the model's tokenizer has
as one token is written as that token (`with_tokens`); free text never spells a trigger as text.  Formats
whose replies do not have that shape (Harmony channels, a bare JSON call) override `reply_ir` and `parse`.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from stdsl.compiler import ir
from stdsl.compiler.automata.automaton import Automaton
from stdsl.compiler.json_schema.flatten import document_context, flatten_schema
from stdsl.compiler.json_schema.json_tokens import JSON_DUMPS, Whitespace
from stdsl.compiler.json_schema.logic.complement import ALL_KINDS, possible_kinds
from stdsl.compiler.json_schema.member_document import references
from stdsl.compiler.json_schema.resolve import pointer_token
from stdsl.compiler.special_tokens import spelled
from stdsl.errors import CompileError, SchemaError, StdslError


@dataclass(frozen=True)
class ToolSpec:
    """A tool offered to the model: its name and the JSON Schema of its arguments (an object), or for an OpenAI
    custom tool the DFA of its raw input's language, or the embedded grammar of a recursive one (`custom_input`;
    `parameters` then the one string `input`)."""

    name: str
    parameters: Mapping[str, Any]
    custom_input: Automaton | ir.EmbeddedGrammar | None = None


@dataclass(frozen=True)
class ParsedCall:
    """One call read from a reply: the tool name, the arguments as JSON text, the call's exact text, and the id the
    model wrote for it where the format has one (Mistral's)."""

    name: str
    arguments: str
    text: str
    id: str | None = None


class ArgumentsIR(Protocol):
    """Lowers a JSON Schema (with its path for errors) to the IR of one JSON value, spelled with `whitespace`
    (None: compact)."""

    def __call__(self, schema: Mapping[str, Any], path: str, whitespace: Whitespace | None = None) -> ir.Node: ...


Tools = Mapping[str, Mapping[str, Any]]
"""The offered tools' parameter schemas by name (what a reader needs to type raw values)."""

_DECODER = json.JSONDecoder()
CUSTOM_PARAMETER = "input"
"""The one parameter that carries a custom tool's raw input in the formats that write parameters apart."""
CUSTOM_PARAMETERS: Mapping[str, Any] = {"type": "object", "properties": {CUSTOM_PARAMETER: {"type": "string"}},
                                        "required": [CUSTOM_PARAMETER]}
"""A custom tool's parameters as those formats' readers see them: the one string `input`, read raw."""
MAX_UNION_DEPTH = 8
"""How deep `value_kinds` reads nested `anyOf`/`oneOf` branches (below, any kind)."""


PARAMETERS_FIELD = ".function.parameters"


def parameters_path(tool: ToolSpec) -> str:
    """Where a tool's parameter schema sits in the request, for errors."""
    return f"tools[{tool.name}]{PARAMETERS_FIELD}"


def parameters_path_of(path: str) -> str | None:
    """The `parameters_path` a path below a tool's parameters starts with (None: the parameters themselves, or no
    tool's), found without trying every tool's."""
    end = path.find(PARAMETERS_FIELD + "/")
    return path[:end + len(PARAMETERS_FIELD)] if end >= 0 else None


def properties_of(tool: ToolSpec) -> tuple[Mapping[str, Any], set[str]]:
    """The tool's top-level properties (in schema order) and its required names, checked to be an object schema;
    a string property that refers elsewhere in the tool's schema with its references folded in (`_string_read`)."""
    where = parameters_path(tool)
    properties = tool.parameters.get("properties", {})
    if not isinstance(properties, Mapping):
        raise SchemaError("properties must be an object", f"{where}/properties")
    return ({key: _string_read(value, key, tool) for key, value in properties.items()},
            set(tool.parameters.get("required", ())))


def _string_read(schema: Any, key: str, tool: ToolSpec) -> Any:
    """A parameter of `type` "string" with references (`{"$ref": "#/$defs/Unit", "type": "string"}`) flattened in
    its tool's schema, its type kept: a format that writes strings raw takes their `enum` or `const` from what the
    reference points to, and the family's parser, which reads the `type` beside it, reads the value raw still."""
    if not isinstance(schema, Mapping) or schema.get("type") != "string" or not references(schema):
        return schema
    try:
        flattened = flatten_schema(dict(schema), f"#/properties/{pointer_token(key)}",
                                   document_context(dict(tool.parameters)))[0]
    except SchemaError as error:
        raise error.relocated(parameters_path(tool)) from None
    return {**flattened, "type": "string"} if isinstance(flattened, Mapping) else schema


def value_kinds(schema: Any, key: str, tool: ToolSpec) -> frozenset[str]:
    """A superset of the JSON kinds (`null`, `boolean`, `integer`, `fraction`, `string`, `array`, `object`) of a
    parameter's values, its references and `anyOf`/`oneOf` branches read in its tool's schema."""
    context = document_context(dict(tool.parameters))

    def kinds(part: Any, path: str, depth: int) -> frozenset[str]:
        flat = flatten_schema(part, path, context)[0] if isinstance(part, (dict, bool)) else True
        if not isinstance(flat, dict) or depth > MAX_UNION_DEPTH:
            return possible_kinds(flat) if isinstance(flat, bool) else ALL_KINDS
        found = possible_kinds({k: v for k, v in flat.items() if k not in ("anyOf", "oneOf")})
        for union in ("anyOf", "oneOf"):
            if isinstance(flat.get(union), list):
                found &= frozenset().union(*(kinds(branch, f"{path}/{union}/{i}", depth + 1)
                                             for i, branch in enumerate(flat[union])))
        return found

    try:
        return kinds(schema, f"#/properties/{pointer_token(key)}", 0)
    except SchemaError as error:
        raise error.relocated(parameters_path(tool)) from None


def json_object_arguments(name: str, arguments: str) -> dict[str, Any]:
    """A call's JSON arguments as a dict (for formats that write each argument apart)."""
    try:
        values = json.loads(arguments) if arguments else {}
    except ValueError:
        values = None
    if not isinstance(values, dict):
        raise StdslError(f"the arguments of a {name!r} tool call are not a JSON object: {arguments[:80]!r}")
    return values


def spelling_end(text: str, position: int, spellings: Sequence[str]) -> int:
    """Where the longest of `spellings` found at `position` ends, or -1 when none is there."""
    ends = [position + len(s) for s in spellings if text.startswith(s, position)]
    return max(ends, default=-1)


def read_json(text: str, position: int) -> tuple[Any, int] | None:
    """The JSON value at `position` and where it ends, or None when there is none (yet)."""
    try:
        return _DECODER.raw_decode(text, position)
    except ValueError:
        return None


def without_literals(node: ir.Node, literals: Sequence[str]) -> ir.Node:
    """`node`'s strings that contain none of `literals` (`node` itself when there are none, or when no string of an
    embedded automaton holds the first byte of any: a number, a boolean, most enums)."""
    if not literals:
        return node
    if isinstance(node, ir.EmbeddedGrammar):
        from stdsl.compiler.pushdown.embedding import without_literals_in

        return without_literals_in(node, literals)
    from stdsl.compiler.automata.build import build_automaton
    from stdsl.compiler.not_containing import not_containing
    from stdsl.compiler.tools.formats.raw_values import intersection

    if isinstance(node, ir.Embedded):
        automaton = build_automaton(node)
        first_bytes = [literal.encode("utf-8")[0] for literal in literals]
        if not (automaton.class_transitions[:, automaton.byte_class[first_bytes]] >= 0).any():
            return node
    return intersection(node, not_containing(list(literals)))


class ToolFormat:
    """A family's tool-call format (subclasses fill in the call grammar, its text and its reader)."""

    name = ""
    triggers: tuple[str, ...] = ()
    """Literals that start the calls; free text contains none of them."""
    free_excludes: tuple[str, ...] = ()
    """Other literals free text never contains: where the family's reference reader would take them for a call."""
    section_open = ""
    separator = "\n"
    section_close = ""
    open_spellings: tuple[str, ...] = ()
    separator_spellings: tuple[str, ...] = ()
    """Other spellings of the section open and of the separator that the family's template or parser reads
    alike (a space after Mistral's `[TOOL_CALLS]`, a blank line between Hermes calls)."""
    streams_content = True
    """Whether free text before the calls can be sent while the reply is decoded (False: sent at the end)."""
    template_marks: tuple[str, ...] = ()
    """Strings whose presence in a chat template (all of them) recognises this family."""
    body_excludes: tuple[str, ...] = ()
    """Literals no argument value may contain (the markers the family's parser splits a call at)."""
    markers: tuple[str, ...] = ()
    """The format's own texts that a family's tokenizer may have as one special or added token."""
    spacing: Whitespace | None = JSON_DUMPS
    """How JSON values are spelled, as the family's chat template renders a past call (`tojson`: `", "`, `": "`;
    None: compact)."""
    tokens: tuple[str, ...] = ()
    """The markers this request's tokenizer has as one token (`with_tokens`), each written as that token."""

    def with_tokens(self, tokens: Sequence[str]) -> ToolFormat:
        """This format writing `tokens` (markers of its own, as `special_tokens.token_markers` chose them for the
        model's tokenizer) as one token each; the text parsers read the same reply (a token shows as its text)."""
        unknown = [token for token in tokens if token not in self.markers]
        if unknown:
            raise CompileError(f"{unknown[0]!r} is not a marker of the {self.name} tool-call format")
        chosen = copy.copy(self)
        chosen.tokens = tuple(dict.fromkeys(tokens))
        return chosen

    def literal(self, text: str) -> ir.Node:
        """The format's own text (a tag, a call head), each marker in `tokens` written as its token."""
        return ir.literal(spelled(text, self.tokens))

    def recognises(self, template: str) -> bool:
        """Whether `template` is this family's chat template."""
        return bool(self.template_marks) and all(mark in template for mark in self.template_marks)

    def call_ir(self, tool: ToolSpec, arguments_ir: ArgumentsIR) -> ir.Node:
        """One call of `tool`, its arguments typed by the tool's JSON Schema."""
        raise NotImplementedError

    def call_parts(self, tool: ToolSpec, arguments_ir: ArgumentsIR) -> tuple[bytes, ir.Node, bytes] | None:
        """Where `call_ir` is a literal head, the arguments kept free of `body_excludes` and a literal tail: those
        three, the arguments unguarded (`tools.guarded_calls` builds many such calls at once); else None."""
        return None

    def render(self, name: str, arguments: str, index: int = 0) -> str:
        """The text of a call (the `index`-th of its reply), as the model writes it under `call_ir`."""
        raise NotImplementedError

    def render_past(self, name: str, arguments: str, index: int, call_id: str) -> str:
        """The text of a past call the client sent back under `call_id`, as the family's template renders it (here
        `render`'s: only Mistral's v3 templates write the id)."""
        return self.render(name, arguments, index)

    def tool_call_ir(self, tool: ToolSpec, arguments_ir: ArgumentsIR) -> ir.Node:
        """One call of `tool`: `custom_call_ir` (`recursive_custom_call_ir`) for a custom tool, else `call_ir`."""
        if isinstance(tool.custom_input, ir.EmbeddedGrammar):
            return self.recursive_custom_call_ir(tool, tool.custom_input)
        if tool.custom_input is not None:
            return self.custom_call_ir(tool, tool.custom_input)
        return self.call_ir(tool, arguments_ir)

    def recursive_custom_call_ir(self, tool: ToolSpec, grammar: ir.EmbeddedGrammar) -> ir.Node:
        """One call of a custom tool whose input language recurses (a grammar, `grammar.label` its field): refused
        here, where the format writes the input raw between its markers."""
        raise CompileError(f"{grammar.label}: the grammar is recursive, but the {self.name} tool-call format writes "
                           "a custom tool's input raw between its markers, which needs a regular language: bound the "
                           "nesting (unroll the recursive rule a fixed number of levels), or send the grammar as the "
                           "whole reply (structured_outputs.grammar)")

    def custom_call_ir(self, tool: ToolSpec, text: Automaton) -> ir.Node:
        """One call of a custom tool whose raw input is a string of `text`'s language."""
        raise NotImplementedError

    def custom_arguments(self, raw: str) -> str:
        """The arguments text (what `render` writes and `read_calls` returns) of a custom call carrying `raw`:
        here the input as one JSON string."""
        return json.dumps(raw, ensure_ascii=False)

    def custom_input(self, arguments: str) -> str:
        """The raw input of a custom call read by this format (the inverse of `custom_arguments`)."""
        value = json.loads(arguments)
        if not isinstance(value, str):
            raise StdslError(f"a custom tool call's input is not a JSON string: {arguments[:80]!r}")
        return value

    def read_calls(self, reply: str, start: int, tools: Tools) -> list[ParsedCall]:
        """Every complete call of the section that begins at `start` (a cut last call is dropped)."""
        raise NotImplementedError

    def free_ir(self) -> ir.Node:
        """Any text that cannot start a call (nor be read as one by the family's reference reader)."""
        from stdsl.compiler.not_containing import not_containing

        return not_containing([*self.triggers, *self.free_excludes])

    def calls_ir(self, call: ir.Node, parallel: bool) -> ir.Node:
        """The calls part of a reply: one call, or with `parallel` one or more joined by the separator."""
        separator = ir.alt(*(self.literal(s) for s in (self.separator, *self.separator_spellings)))
        many = ir.seq(call, ir.star(ir.seq(separator, call))) if parallel else call
        section_open = ir.alt(*(self.literal(s) for s in (self.section_open, *self.open_spellings)))
        return ir.seq(section_open, many, self.literal(self.section_close))

    def separator_end(self, reply: str, position: int) -> int:
        """Where the separator (any of its spellings) at `position` ends, or -1 when none is there."""
        return spelling_end(reply, position, (self.separator, *self.separator_spellings))

    def content_ir(self, content: ir.Node) -> ir.Node:
        """A reply without calls whose content is `content`."""
        return content

    def reply_ir(self, text: ir.Node, calls: ir.Node, formatted: bool) -> ir.Node:
        """tool_choice "auto": `text` then optionally the calls, or (`formatted`: a response format) either one."""
        if formatted:
            return ir.alt(self.content_ir(text), calls)
        return ir.seq(text, ir.optional(calls))

    def join(self, texts: Sequence[str]) -> str:
        """The calls part of an assistant turn from its calls' texts (nothing for no calls)."""
        return self.section_open + self.separator.join(texts) + self.section_close if texts else ""

    def call_start(self, reply: str) -> int:
        """Where the calls begin in `reply` (-1: not yet)."""
        starts = [i for i in (reply.find(t) for t in self.triggers) if i >= 0]
        return min(starts) if starts else -1

    def parse(self, reply: str, tools: Tools) -> tuple[str, list[ParsedCall]]:
        """The reply's content (the free text before the calls) and every complete call."""
        start = self.call_start(reply)
        if start < 0:
            return reply, []
        return reply[:start], self.read_calls(reply, start, tools)


class InputParameterCustomCalls:
    """Custom calls written as one string parameter `input` (formats whose parser reads parameters, not a value)."""

    def custom_arguments(self, raw: str) -> str:
        return json.dumps({CUSTOM_PARAMETER: raw}, ensure_ascii=False)

    def custom_input(self, arguments: str) -> str:
        return str(json_object_arguments("custom", arguments)[CUSTOM_PARAMETER])


class JsonArgumentsFormat(ToolFormat):
    """A format whose call is `head(name)`, the arguments as one JSON object, then `tail`."""

    tail = ""

    def head(self, name: str, index: int) -> str:
        raise NotImplementedError

    def head_at(self, reply: str, position: int) -> tuple[str, int] | None:
        """The tool name of the call head at `position` and where its arguments begin, or None."""
        raise NotImplementedError

    def call_ir(self, tool: ToolSpec, arguments_ir: ArgumentsIR) -> ir.Node:
        arguments = without_literals(arguments_ir(tool.parameters, parameters_path(tool), self.spacing),
                                     self.body_excludes)
        return ir.seq(self.head_ir(tool.name), arguments, self.tail_ir())

    def call_parts(self, tool: ToolSpec, arguments_ir: ArgumentsIR) -> tuple[bytes, ir.Node, bytes] | None:
        """`call_ir`'s parts (see `ToolFormat.call_parts`); None for a custom tool or a head or tail that is not
        literal text."""
        if tool.custom_input is not None:
            return None
        head, tail = ir.literal_bytes(self.head_ir(tool.name)), ir.literal_bytes(self.tail_ir())
        if head is None or tail is None:
            return None
        return head, arguments_ir(tool.parameters, parameters_path(tool), self.spacing), tail

    custom_in_object = False
    """Whether a custom call's arguments are `{"input": JSON string}` (a family whose parser takes only an object)
    rather than the JSON string alone."""

    def custom_call_ir(self, tool: ToolSpec, text: Automaton) -> ir.Node:
        """The raw input as the JSON string that stands for the arguments (or their one member `input`)."""
        from stdsl.compiler.json_schema.scalars.escaped_automaton import json_string_of

        arguments = json_string_of(text.transitions, text.accepting)
        if self.custom_in_object:
            arguments = ir.seq(ir.literal(f'{{"{CUSTOM_PARAMETER}": '), arguments, ir.literal("}"))
        return ir.seq(self.head_ir(tool.name), without_literals(arguments, self.body_excludes), self.tail_ir())

    def recursive_custom_call_ir(self, tool: ToolSpec, grammar: ir.EmbeddedGrammar) -> ir.Node:
        """The recursive input as the JSON string that stands for the arguments: each grammar body escaped."""
        from stdsl.compiler.json_schema.scalars.escaped_grammar import json_string_leaf

        arguments: ir.Node = without_literals(json_string_leaf(grammar), self.body_excludes)
        if self.custom_in_object:
            arguments = ir.seq(ir.literal(f'{{"{CUSTOM_PARAMETER}": '), arguments, ir.literal("}"))
        return ir.seq(self.head_ir(tool.name), arguments, self.tail_ir())

    def custom_arguments(self, raw: str) -> str:
        if self.custom_in_object:
            return json.dumps({CUSTOM_PARAMETER: raw}, ensure_ascii=False)
        return super().custom_arguments(raw)

    def custom_input(self, arguments: str) -> str:
        if self.custom_in_object:
            return str(json_object_arguments("custom", arguments)[CUSTOM_PARAMETER])
        return super().custom_input(arguments)

    def head_ir(self, name: str) -> ir.Node:
        """The grammar of a call's head (a literal unless the head carries a number the model chooses)."""
        return self.literal(self.head(name, 0))

    def tail_ir(self) -> ir.Node:
        """The grammar of what follows a call's arguments (a literal unless it carries something the model writes)."""
        return self.literal(self.tail)

    def tail_at(self, reply: str, position: int) -> tuple[int, str | None]:
        """Where the tail at `position` ends (-1: none there) and the call id it carries, if any."""
        return (position + len(self.tail) if reply.startswith(self.tail, position) else -1), None

    def render(self, name: str, arguments: str, index: int = 0) -> str:
        return self.head(name, index) + arguments + self.tail

    def read_calls(self, reply: str, start: int, tools: Tools) -> list[ParsedCall]:
        calls: list[ParsedCall] = []
        position = spelling_end(reply, start, (self.section_open, *self.open_spellings))
        if position < 0:
            return calls
        while True:
            head = self.head_at(reply, position)
            value = read_json(reply, head[1]) if head is not None else None
            if head is None or value is None:
                return calls
            end, call_id = self.tail_at(reply, value[1])
            if end < 0:
                return calls
            calls.append(ParsedCall(head[0], reply[head[1]: value[1]], reply[position:end], call_id))
            position = self.separator_end(reply, end)
            if position < 0:
                return calls
