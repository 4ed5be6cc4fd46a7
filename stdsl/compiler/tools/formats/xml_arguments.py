"""XGrammar's XML argument styles of a structural tag's `json_schema` (`style: "qwen_xml"`, `"minimax_xml"`,
`"glm_xml"`, `"kimi_k3_xml"`): the arguments object written as one tagged parameter per property, as XGrammar's
matcher reads it.

The language (XGrammar 0.2.9's `XMLToolCallingConverter`, checked against its matcher in the tests):

    WS (PARAM WS)?...            one PARAM per property in schema order, the required ones present
    PARAM = KEY_PREFIX name [TYPE] KEY_SUFFIX [WS VALUE_PREFIX] VALUE CLOSING
    VALUE = text without CLOSING                   a plain string (it takes the whitespace around it)
          | WS literal WS                          a `const` or `enum` (a string raw, any other value as JSON)
          | WS json WS                             any other single `type`, as the `json` style writes it (a
                                                   number with a bound without an exponent and to six
                                                   decimals, as XGrammar writes one)

WS is `[ \\n\\r\\t]*` (at most `max_whitespace_cnt` of them where given).  Where the `json` style reads less than
XGrammar (a container, written compact; a number is never `-0.0` nor past a double, `1e400`) this reads less too;
a bounded number inside a container is the `json` style's, which also reads more than six decimals.  Qwen3-Coder's
own call format (`xml_calls.QwenXmlFormat`) is a different language (a newline around each value, no free
whitespace, a string never `null`), so it is not reused.  What XGrammar reads in ways not written here (a string
with a `pattern`, `format` or length, several types, `anyOf`, free-form keys, the other XML styles of XGrammar
0.2.9: deepseek_xml, deepseek_v4_1_xml, minimax_m3_xml, cohere_xml, gemma) is refused naming its path.  A parameter
that refers into the schema (`{"$ref": "#/$defs/Unit"}`, annotations beside it) is the schema it refers to, as
XGrammar resolves it, and references inside a value resolve in the whole schema (`json_schema.member_document`).
Inside a tag the object and the tag's ends are laid out from the parameters (`xml_argument_layout`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from stdsl import caches
from stdsl.compiler import ir
from stdsl.compiler.automata.build import embedded_leaf
from stdsl.compiler.json_schema.member_document import dereferenced, standalone
from stdsl.compiler.not_containing import not_containing
from stdsl.compiler.tools.formats.raw_values import intersection
from stdsl.compiler.tools.xml_argument_layout import XmlParameter, xml_tag_layout
from stdsl.errors import CompileError


@dataclass(frozen=True)
class XmlStyle:
    """How a style wraps one parameter: `KEY_PREFIX name [TYPE] KEY_SUFFIX [WS VALUE_PREFIX] value CLOSING`, where
    a `typed` style writes the name as an attribute value (`&` and `"` escaped) and the value's type after it."""

    key_prefix: str
    key_suffix: str
    value_prefix: str
    closing: str
    typed: bool = False


STYLES = {"qwen_xml": XmlStyle("<parameter=", ">", "", "</parameter>"),
          "minimax_xml": XmlStyle('<parameter name="', '">', "", "</parameter>"),
          "glm_xml": XmlStyle("<arg_key>", "</arg_key>", "<arg_value>", "</arg_value>"),
          "kimi_k3_xml": XmlStyle('<|open|>argument key="', '"<|sep|>', "", "<|close|>argument<|sep|>", typed=True)}
_VALUE_TYPES = ((bool, "boolean"), (str, "string"), ((int, float), "number"), (type(None), "null"),
                (list, "array"), (dict, "object"))

WHITESPACE = b" \n\r\t"
_TAGS = caches.kind("xml argument tags")
"""A tag of an XML style's arguments object (laid out, or its expression) per begin, ends, style, schema and bound."""
ValueIr = Callable[[Any, str], ir.Node]
"""A property's schema (a single non-string type) as its JSON value's IR, given the path that names it."""

_ROOT_KEYS = {"type", "properties", "required", "additionalProperties", "title", "description", "$schema", "$defs",
              "definitions"}
_ANNOTATIONS = {"title", "description", "examples", "default", "$comment", "deprecated", "readOnly", "writeOnly"}
_STRING_LIMITS = ("pattern", "format", "minLength", "maxLength")
_DIGIT = ir.byte_set([(ord("0"), ord("9"))])
BOUNDED_NUMBER = ir.seq(ir.optional(ir.literal("-")),
                        ir.alt(ir.literal("0"), ir.seq(ir.byte_set([(ord("1"), ord("9"))]), ir.star(_DIGIT))),
                        ir.optional(ir.seq(ir.literal("."), ir.repeat(_DIGIT, 1, 6))))
"""A number with a bound as XGrammar writes one: no exponent, at most six digits after the point."""
_NUMBER_BOUNDS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")
_TYPES = ("integer", "number", "boolean", "null", "array", "object")


def _refuse(path: str, message: str) -> CompileError:
    return CompileError(f"{path}: {message}")


def _whitespace(max_run: int | None) -> ir.Node:
    chars = ir.byte_set((byte, byte) for byte in WHITESPACE)
    return ir.star(chars) if max_run is None else ir.repeat(chars, 0, max_run)


def _raw_literal(value: Any, path: str) -> ir.Node:
    """A `const` or `enum` value as XGrammar writes it in a tag: a string raw, an integer, boolean or null as
    JSON (a float or a container, which XGrammar writes in its own spelling, is refused)."""
    if isinstance(value, str):
        return ir.literal(value)
    if value is None or isinstance(value, (bool, int)):
        return ir.literal(json.dumps(value))
    raise _refuse(path, f"a const or enum value {value!r} in an XML argument style is not supported (strings, "
                        "integers, booleans and null are)")


def _value(schema: Any, path: str, value_ir: ValueIr, ws: ir.Node, closing: str) -> tuple[ir.Node, ir.Node | None]:
    """One property's value with the whitespace XGrammar allows around it, and the value without it where there
    is some (None for a plain string, which takes the whitespace in)."""
    if not isinstance(schema, Mapping):
        raise _refuse(path, "a property schema in an XML argument style must be an object")
    if "const" in schema or "enum" in schema:
        values = [schema["const"]] if "const" in schema else schema["enum"]
        if not isinstance(values, list) or not values:
            raise _refuse(f"{path}.enum", "must be a non-empty list")
        core = ir.alt(*(_raw_literal(v, path) for v in values))
        return ir.seq(ws, core, ws), core
    kind = schema.get("type")
    if kind == "string":
        extra = set(schema) - {"type"} - _ANNOTATIONS
        limited = [key for key in _STRING_LIMITS if key in schema]
        if limited or extra:
            raise _refuse(f"{path}.{(limited or sorted(extra))[0]}", "a string parameter in an XML argument style "
                          "is any text up to its closing tag; its keywords other than annotations are not supported")
        return not_containing([closing]), None
    if kind not in _TYPES:
        raise _refuse(path, f"a parameter in an XML argument style needs one type of string, {', '.join(_TYPES)} "
                            "(or a const or enum)")
    value = value_ir(schema, path)
    if kind == "number" and any(key in schema for key in _NUMBER_BOUNDS):
        value = intersection(value, BOUNDED_NUMBER)
    return ir.seq(ws, value, ws), value


def xml_arguments_ir(schema: Any, style: str, path: str, value_ir: ValueIr, max_whitespace: int | None) -> ir.Node:
    """The arguments object `schema` written in the XML argument `style` (a key of `STYLES`), each non-string
    value lowered by `value_ir`; `path` names the `json_schema` field in errors."""
    return arguments_expression(xml_parameters(schema, style, path, value_ir, max_whitespace),
                                _whitespace(max_whitespace))


def xml_tag_ir(begin: str, ends: list[str], schema: Any, style: str, path: str, value_ir: ValueIr,
               max_whitespace: int | None) -> ir.Node:
    """A tag (`begin`, the arguments object as `xml_arguments_ir`, one of `ends`), its content and ends laid out
    (`xml_argument_layout`) where the whitespace is unbounded and no end is empty, and kept per begin, ends, style,
    schema and bound: XGrammar's Qwen3-Coder tag has one per tool, and a tool list with one tool changed lowers
    the others again."""

    def build() -> ir.Node:
        parameters = xml_parameters(schema, style, path, value_ir, max_whitespace)
        laid_out = None
        if max_whitespace is None and all(ends):
            laid_out = xml_tag_layout(parameters, [end.encode() for end in ends], WHITESPACE)
        if laid_out is not None:
            return ir.seq(ir.literal(begin), embedded_leaf(laid_out, minimal=True))
        return ir.seq(ir.literal(begin), arguments_expression(parameters, _whitespace(max_whitespace)),
                      ir.alt(*(ir.literal(end) for end in ends)))

    try:
        key = json.dumps(schema, allow_nan=False)
    except (TypeError, ValueError):
        return build()
    found: ir.Node = _TAGS.get((), build, (begin, tuple(ends), style, key, max_whitespace))
    return found


def xml_parameters(schema: Any, style: str, path: str, value_ir: ValueIr, max_whitespace: int | None
                   ) -> list[XmlParameter]:
    """The parameters of the arguments object `schema` in `style`, in order, each value with what precedes it
    after the head (whitespace and `<arg_value>` in glm_xml)."""
    wrap = STYLES[style]
    if not isinstance(schema, Mapping) or schema.get("type") != "object" or not isinstance(
            schema.get("properties", {}), Mapping):
        raise _refuse(path, "an XML argument style needs an object schema with `properties`")
    for key in schema:
        if key not in _ROOT_KEYS:
            raise _refuse(f"{path}.{key}", "not supported on the arguments object of an XML argument style")
    if "properties" not in schema or schema.get("additionalProperties", False) is not False:
        raise _refuse(f"{path}.additionalProperties", "free-form parameters in an XML argument style are not "
                      "supported: list the `properties` and leave `additionalProperties` out or false")
    properties: Mapping[str, Any] = schema["properties"]
    required = schema.get("required", [])
    if not isinstance(required, list) or any(name not in properties for name in required):
        raise _refuse(f"{path}.required", "must list names of `properties`")
    ws = _whitespace(max_whitespace)
    parameters = []
    for name, written in properties.items():
        value_schema = dereferenced(written, schema)
        value, core = _value(value_schema, f"{path}.properties.{name}",
                             lambda part, where: value_ir(standalone(part, schema), where), ws, wrap.closing)
        if wrap.value_prefix:
            value, core = ir.seq(ws, ir.literal(wrap.value_prefix), value), None
        head = wrap.key_prefix + name + wrap.key_suffix
        if wrap.typed:
            escaped = name.replace("&", "&amp;").replace('"', "&quot;")
            kind = _type_attribute(value_schema, f"{path}.properties.{name}")
            head = f'{wrap.key_prefix}{escaped}" type="{kind}{wrap.key_suffix}'
        parameters.append(XmlParameter(head.encode(), value, core, wrap.closing.encode(), name in required))
    return parameters


def _type_attribute(schema: Mapping[str, Any], path: str) -> str:
    """The type Kimi-K3 writes beside a parameter (`number` for an integer too; a `const` or `enum` by its values'
    one JSON type: values of several types, where XGrammar lets the attribute be any type, are refused)."""
    if "const" in schema or "enum" in schema:
        values = [schema["const"]] if "const" in schema else schema["enum"]
        kinds = {next(name for kind, name in _VALUE_TYPES if isinstance(value, kind)) for value in values}
        if len(kinds) != 1:
            raise _refuse(path, "an enum of several JSON types is not supported in the kimi_k3_xml style")
        return kinds.pop()
    kind = schema["type"]
    return "number" if kind == "integer" else str(kind)


def arguments_expression(parameters: list[XmlParameter], ws: ir.Node) -> ir.Node:
    """`WS (PARAM WS)?...` as one expression."""
    parts = [ws]
    for parameter in parameters:
        written = ir.seq(ir.literal(parameter.head), parameter.value, ir.literal(parameter.closing), ws)
        parts.append(written if parameter.required else ir.optional(written))
    return ir.seq(*parts)
