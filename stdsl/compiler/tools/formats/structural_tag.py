"""XGrammar's structural tags (`response_format: {"type": "structural_tag", ...}`) lowered to the IR.

Primitives, with XGrammar's meaning (checked against `xgrammar` itself in the tests):

    const_string {value}            the text
    json_schema {json_schema}       a JSON value of the schema (style "json" only)
    grammar {grammar, syntax}       a grammar's language (one without recursion: it is embedded)
    regex {pattern}                 the regular expression
    any_text {excludes}             any text without the excluded strings (inside a tag: nor its end)
    sequence {elements}, or {elements}
    tag {begin, content, end}       begin, content, one of the ends
    triggered_tags {triggers, tags, at_least_one, stop_after_first, excludes}
        free text without triggers, then tags each begun by one trigger:
        FREE (TAG FREE)*; stop_after_first: FREE TAG?; at_least_one: TAG FREE (TAG FREE)*; both: TAG

The older form `{"structures": [{"begin", "schema", "end"}], "triggers": [...]}` (vLLM) is
triggered_tags of json_schema tags.  Any other primitive or field value (token-level formats,
XML argument styles, token and character limits) is refused naming its path.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from stdsl.compiler import ir
from stdsl.compiler.not_containing import not_containing
from stdsl.errors import CompileError

Lower = Callable[[Any, str], ir.Node]
"""Lowers a JSON Schema, a Regex or a Grammar (by kind) to embedded IR: (spec, path) -> node."""

PRIMITIVES = ("const_string", "json_schema", "grammar", "regex", "any_text", "sequence", "or", "tag",
              "triggered_tags")


def _refuse(path: str, message: str) -> CompileError:
    return CompileError(f"{path}: {message}")


def _field(node: Mapping[str, Any], key: str, kind: type | tuple[type, ...], path: str) -> Any:
    if key not in node or not isinstance(node[key], kind):
        raise _refuse(f"{path}.{key}", f"required, of type {getattr(kind, '__name__', 'str or list')}")
    return node[key]


def _flag(node: Mapping[str, Any], key: str, path: str) -> bool:
    """An optional boolean field (a string such as "no" is refused, not read as true)."""
    value = node.get(key, False)
    if not isinstance(value, bool):
        raise _refuse(f"{path}.{key}", f"must be true or false, got {value!r}")
    return value


def _strings(value: Any, path: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise _refuse(path, "must be a list of non-empty strings")
    return list(value)


class _Lowering:
    """One structural tag's lowering, with the embedders for schemas, regexes and grammars."""

    def __init__(self, embed: Lower) -> None:
        self.embed = embed

    def node(self, node: Any, path: str, ends: tuple[str, ...] = ()) -> ir.Node:
        if not isinstance(node, Mapping) or not isinstance(node.get("type"), str):
            raise _refuse(path, "must be an object with a string 'type'")
        kind = node["type"]
        if kind not in PRIMITIVES:
            raise _refuse(f"{path}.type", f"the structural tag primitive {kind!r} is not supported (supported: "
                          f"{', '.join(PRIMITIVES)})")
        lower: Callable[[Mapping[str, Any], str, tuple[str, ...]], ir.Node] = getattr(self, "_" + kind)
        return lower(node, path, ends)

    def _const_string(self, node: Mapping[str, Any], path: str, ends: tuple[str, ...]) -> ir.Node:
        return ir.literal(_field(node, "value", str, path))

    def _json_schema(self, node: Mapping[str, Any], path: str, ends: tuple[str, ...]) -> ir.Node:
        style = node.get("style", "json")
        if style != "json":
            raise _refuse(f"{path}.style", f"only the 'json' style is supported, not {style!r}")
        return self.embed(("json_schema", _field(node, "json_schema", (dict, bool), path)), f"{path}.json_schema")

    def _grammar(self, node: Mapping[str, Any], path: str, ends: tuple[str, ...]) -> ir.Node:
        syntax = node.get("syntax", "ebnf")
        if syntax not in ("ebnf", "lark"):
            raise _refuse(f"{path}.syntax", f"must be 'ebnf' or 'lark', not {syntax!r}")
        return self.embed(("grammar", _field(node, "grammar", str, path), syntax), f"{path}.grammar")

    def _regex(self, node: Mapping[str, Any], path: str, ends: tuple[str, ...]) -> ir.Node:
        return self.embed(("regex", _field(node, "pattern", str, path)), f"{path}.pattern")

    def _any_text(self, node: Mapping[str, Any], path: str, ends: tuple[str, ...]) -> ir.Node:
        for limit in ("max_tokens", "max_chars"):
            if node.get(limit) is not None:
                raise _refuse(f"{path}.{limit}", "limits on any_text are not supported")
        return not_containing([*_strings(node.get("excludes", []), f"{path}.excludes"), *ends])

    def _sequence(self, node: Mapping[str, Any], path: str, ends: tuple[str, ...]) -> ir.Node:
        elements = _field(node, "elements", list, path)
        return ir.seq(*(self.node(e, f"{path}.elements[{i}]") for i, e in enumerate(elements)))

    def _or(self, node: Mapping[str, Any], path: str, ends: tuple[str, ...]) -> ir.Node:
        elements = _field(node, "elements", list, path)
        if not elements:
            raise _refuse(f"{path}.elements", "needs at least one element")
        return ir.alt(*(self.node(e, f"{path}.elements[{i}]") for i, e in enumerate(elements)))

    def _tag(self, node: Mapping[str, Any], path: str, ends: tuple[str, ...]) -> ir.Node:
        begin = _field(node, "begin", str, path)
        end = node.get("end")
        closing = [end] if isinstance(end, str) else _strings(end, f"{path}.end")
        if not closing:
            raise _refuse(f"{path}.end", "needs at least one end string")
        inner = tuple(e for e in closing if e)
        content = self.node(node.get("content"), f"{path}.content", inner)
        return ir.seq(ir.literal(begin), content, ir.alt(*(ir.literal(e) for e in closing)))

    def _triggered_tags(self, node: Mapping[str, Any], path: str, ends: tuple[str, ...]) -> ir.Node:
        triggers = _strings(node.get("triggers"), f"{path}.triggers")
        tags = _field(node, "tags", list, path)
        if not tags:
            raise _refuse(f"{path}.tags", "needs at least one tag")
        for i, tag in enumerate(tags):
            begin = tag.get("begin") if isinstance(tag, Mapping) else None
            matched = [t for t in triggers if isinstance(begin, str) and begin.startswith(t)]
            if len(matched) != 1:
                raise _refuse(f"{path}.tags[{i}].begin", f"must start with exactly one of the triggers {triggers}")
            if tag.get("type", "tag") != "tag":
                raise _refuse(f"{path}.tags[{i}].type", "must be 'tag'")
        one = ir.alt(*(self._tag(t, f"{path}.tags[{i}]", ()) for i, t in enumerate(tags)))
        free = not_containing([*triggers, *_strings(node.get("excludes", []), f"{path}.excludes"), *ends])
        first, stop = _flag(node, "at_least_one", path), _flag(node, "stop_after_first", path)
        if first and stop:
            return one
        if stop:
            return ir.seq(free, ir.optional(one))
        if first:
            return ir.seq(one, free, ir.star(ir.seq(one, free)))
        return ir.seq(free, ir.star(ir.seq(one, free)))


def legacy_format(tag: Mapping[str, Any]) -> dict[str, Any]:
    """The older `{"structures": [...], "triggers": [...]}` form as a triggered_tags format."""
    structures = tag.get("structures")
    if not isinstance(structures, list):
        raise _refuse("response_format.structures", "must be a list of {begin, schema, end}")
    tags = []
    for i, item in enumerate(structures):
        where = f"response_format.structures[{i}]"
        if not isinstance(item, Mapping):
            raise _refuse(where, "must be an object {begin, schema, end}")
        tags.append({"type": "tag", "begin": _field(item, "begin", str, where),
                     "content": {"type": "json_schema", "json_schema": _field(item, "schema", (dict, bool), where)},
                     "end": _field(item, "end", str, where)})
    return {"type": "triggered_tags", "triggers": tag.get("triggers"), "tags": tags}


def structural_tag_ir(tag: Mapping[str, Any], embed: Lower) -> ir.Node:
    """The IR of a structural tag (the `response_format` object: `format`, or the older `structures`/`triggers`)."""
    if "format" in tag:
        return _Lowering(embed).node(tag["format"], "response_format.format")
    return _Lowering(embed).node(legacy_format(tag), "response_format")
