"""XGrammar's structural tags (`response_format: {"type": "structural_tag", ...}`) lowered to the IR.

Primitives, with XGrammar's meaning (checked against `xgrammar` itself in the tests):

    const_string {value}            the text
    json_schema {json_schema, style} a JSON value of the schema (style "json", compact, an integer without a
                                    fraction as XGrammar writes one), or an arguments object in
                                    an XML style (qwen_xml, minimax_xml, glm_xml: `xml_arguments`)
    grammar {grammar, syntax}       a grammar's language (one without recursion: it is embedded)
    regex {pattern}                 the regular expression, its \\d \\w \\s and . as XGrammar reads them
    any_text {excludes}             any text without the excluded strings (inside a tag: nor its end)
    sequence {elements}, or {elements}
    tag {begin, content, end}       begin, content, one of the ends
    triggered_tags {triggers, tags, at_least_one, stop_after_first, excludes}
        free text without triggers, then tags each begun by one trigger:
        FREE (TAG FREE)*; stop_after_first: FREE TAG?; at_least_one: TAG FREE (TAG FREE)*; both: TAG
    tags_with_separator {tags, separator, at_least_one, stop_after_first}
        tags and nothing else, the separator between two: (TAG (SEP TAG)*)?; stop_after_first: TAG?;
        at_least_one: TAG (SEP TAG)*; both: TAG
    optional {content}, plus {content}, star {content}, repeat {content, min, max (-1: unbounded)}

The older form `{"structures": [{"begin", "schema", "end"}], "triggers": [...]}` (vLLM) is
triggered_tags of json_schema tags.  Any other primitive or field value (token-level formats, the other XML
argument styles, `any_order`, `excludes`, token and character limits) is refused naming its path.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Mapping
from os.path import commonprefix
from typing import Any

from stdsl.compiler import ir
from stdsl.compiler.automata.automaton import Automaton
from stdsl.compiler.automata.build import embedded_leaf
from stdsl.compiler.not_containing import not_containing
from stdsl.compiler.tools.formats.xgrammar_regex import xgrammar_regex
from stdsl.compiler.tools.formats.xml_arguments import STYLES, xml_arguments_ir, xml_tag_ir
from stdsl.errors import CompileError

Lower = Callable[[Any, str], ir.Node]
"""Lowers a JSON Schema, a Regex or a Grammar (by kind) to embedded IR: (spec, path) -> node."""
Assemble = Callable[[list[ir.Node], Callable[[ir.Node], ir.Node]], "Automaton | None"]
"""Triggered tags (or tags with a separator) as one DFA from their tags' expressions and the expression around one
tag (`tools.tag_automaton`), or None to lower them whole."""

PRIMITIVES = ("const_string", "json_schema", "grammar", "regex", "any_text", "sequence", "or", "tag",
              "triggered_tags", "tags_with_separator", "optional", "plus", "star", "repeat")


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

    def __init__(self, embed: Lower, assemble: Assemble | None) -> None:
        self.embed = embed
        self.assemble = assemble

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
        style, schema, limit = self._schema_options(node, path)
        if style == "json":
            return self.embed(("json_schema", schema), f"{path}.json_schema")
        return xml_arguments_ir(schema, style, f"{path}.json_schema", self._value_ir, limit)

    def _value_ir(self, schema: Any, path: str) -> ir.Node:
        return self.embed(("json_schema", schema), path)

    def _schema_options(self, node: Mapping[str, Any], path: str) -> tuple[str, Any, int | None]:
        """A `json_schema` primitive's style, schema and whitespace bound, the options it cannot honour refused."""
        style = node.get("style", "json")
        if style != "json" and style not in STYLES:
            raise _refuse(f"{path}.style", f"the style {style!r} is not supported (supported: json, "
                          f"{', '.join(STYLES)})")
        if _flag(node, "any_order", path):
            raise _refuse(f"{path}.any_order", "properties in any order are not supported")
        if _strings(node.get("excludes", []), f"{path}.excludes"):
            raise _refuse(f"{path}.excludes", "excluded substrings in a schema's strings are not supported")
        limit = node.get("max_whitespace_cnt")
        if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool) or limit < 1):
            raise _refuse(f"{path}.max_whitespace_cnt", f"must be a positive integer or null, got {limit!r}")
        return style, _field(node, "json_schema", (dict, bool), path), limit

    def _grammar(self, node: Mapping[str, Any], path: str, ends: tuple[str, ...]) -> ir.Node:
        syntax = node.get("syntax", "ebnf")
        if syntax not in ("ebnf", "lark"):
            raise _refuse(f"{path}.syntax", f"must be 'ebnf' or 'lark', not {syntax!r}")
        return self.embed(("grammar", _field(node, "grammar", str, path), syntax), f"{path}.grammar")

    def _regex(self, node: Mapping[str, Any], path: str, ends: tuple[str, ...]) -> ir.Node:
        return self.embed(("regex", xgrammar_regex(_field(node, "pattern", str, path))), f"{path}.pattern")

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
        begin, closing = self._tag_ends(node, path)
        content = node.get("content")
        if isinstance(content, Mapping) and content.get("type") == "json_schema" and content.get("style") in STYLES:
            where = f"{path}.content"
            style, schema, limit = self._schema_options(content, where)
            return xml_tag_ir(begin, closing, schema, style, f"{where}.json_schema", self._value_ir, limit)
        lowered = self.node(content, f"{path}.content", tuple(e for e in closing if e))
        return ir.seq(ir.literal(begin), lowered, ir.alt(*(ir.literal(e) for e in closing)))

    def _tag_ends(self, node: Mapping[str, Any], path: str) -> tuple[str, list[str]]:
        """A tag's begin and its end strings."""
        begin = _field(node, "begin", str, path)
        end = node.get("end")
        closing = [end] if isinstance(end, str) else _strings(end, f"{path}.end")
        if not closing:
            raise _refuse(f"{path}.end", "needs at least one end string")
        return begin, closing

    def _lowered_tags(self, tags: list[Any], path: str) -> tuple[list[ir.Node], Callable[[ir.Node], ir.Node]]:
        """The tags' expressions and the expression of a tag around one of them: the tags themselves, or, for one
        tag whose content is tags (Kimi's section of tool calls), that content's tags, each its own piece, and the
        section around one (a single assembly, not the section's assembled DFA laid out again in a piece)."""
        content = tags[0].get("content") if len(tags) == 1 else None
        if not isinstance(content, Mapping) or content.get("type") not in ("triggered_tags", "tags_with_separator"):
            return self._spelled_tags(tags, path), lambda one: one
        begin, closing = self._tag_ends(tags[0], f"{path}[0]")
        where = f"{path}[0].content"
        lowered, inner = (self._triggered_parts(content, where, tuple(e for e in closing if e))
                          if content["type"] == "triggered_tags" else self._separated_parts(content, where))
        return lowered, lambda one: ir.seq(ir.literal(begin), inner(one), ir.alt(*(ir.literal(e) for e in closing)))

    def _spelled_tags(self, tags: list[Any], path: str) -> list[ir.Node]:
        """The tags' expressions, those that differ only in their begin and that their begins' common prefix tells
        apart from every other tag as one (`spelling_groups`): Harmony's tag spells each tool's header three ways,
        and `p (s1|s2) rest` is `p s1 rest | p s2 rest` with the rest laid out once (`tag_automaton`)."""
        spelled = []
        for i, tag in enumerate(tags):
            begin, _ = self._tag_ends(tag, f"{path}[{i}]")
            spelled.append((begin, self._tag({**tag, "begin": ""}, f"{path}[{i}]", ())))
        return [ir.seq(ir.literal(prefix), ir.alt(*(ir.literal(begin[len(prefix):]) for begin in begins)), rest)
                for prefix, begins, rest in spelling_groups(spelled)]

    def _triggered_tags(self, node: Mapping[str, Any], path: str, ends: tuple[str, ...]) -> ir.Node:
        return self._assembled_or_whole(*self._triggered_parts(node, path, ends))

    def _tags_with_separator(self, node: Mapping[str, Any], path: str, ends: tuple[str, ...]) -> ir.Node:
        return self._assembled_or_whole(*self._separated_parts(node, path))

    def _assembled_or_whole(self, lowered: list[ir.Node], around: Callable[[ir.Node], ir.Node]) -> ir.Node:
        """The tags' assembled DFA as a leaf, or the expression with their alternative in place of one tag."""
        assembled = self.assemble(lowered, around) if self.assemble is not None else None
        return embedded_leaf(assembled, minimal=True) if assembled is not None else around(ir.alt(*lowered))

    def assembled(self, node: Any, path: str) -> Automaton | None:
        """A format of tags (`triggered_tags`, `tags_with_separator`) as one assembled DFA (None for another format,
        or tags that lower whole), read with the checks `node` makes."""
        if self.assemble is None or not isinstance(node, Mapping) or node.get("type") not in (
                "triggered_tags", "tags_with_separator"):
            return None
        parts = (self._triggered_parts(node, path, ()) if node["type"] == "triggered_tags"
                 else self._separated_parts(node, path))
        return self.assemble(*parts)

    def _triggered_parts(self, node: Mapping[str, Any], path: str, ends: tuple[str, ...]
                         ) -> tuple[list[ir.Node], Callable[[ir.Node], ir.Node]]:
        """The tags' expressions and the expression around one tag: free text without the triggers between tags."""
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
        lowered, inside = self._lowered_tags(tags, f"{path}.tags")
        free = not_containing([*triggers, *_strings(node.get("excludes", []), f"{path}.excludes"), *ends])
        first, stop = _flag(node, "at_least_one", path), _flag(node, "stop_after_first", path)

        def around(piece: ir.Node) -> ir.Node:
            one = inside(piece)
            if first and stop:
                return one
            if stop:
                return ir.seq(free, ir.optional(one))
            if first:
                return ir.seq(one, free, ir.star(ir.seq(one, free)))
            return ir.seq(free, ir.star(ir.seq(one, free)))

        return lowered, around

    def _separated_parts(self, node: Mapping[str, Any], path: str
                         ) -> tuple[list[ir.Node], Callable[[ir.Node], ir.Node]]:
        """The tags' expressions and the expression around one tag: nothing but the separator between tags."""
        tags = _field(node, "tags", list, path)
        if not tags:
            raise _refuse(f"{path}.tags", "needs at least one tag")
        for i, tag in enumerate(tags):
            if not isinstance(tag, Mapping) or tag.get("type", "tag") != "tag":
                raise _refuse(f"{path}.tags[{i}].type", "must be 'tag'")
        separator = ir.literal(_field(node, "separator", str, path))
        lowered, inside = self._lowered_tags(tags, f"{path}.tags")
        first, stop = _flag(node, "at_least_one", path), _flag(node, "stop_after_first", path)

        def around(piece: ir.Node) -> ir.Node:
            one = inside(piece)
            if stop:
                return one if first else ir.optional(one)
            some = ir.seq(one, ir.star(ir.seq(separator, one)))
            return some if first else ir.optional(some)

        return lowered, around

    def _optional(self, node: Mapping[str, Any], path: str, ends: tuple[str, ...]) -> ir.Node:
        return ir.optional(self.node(node.get("content"), f"{path}.content", ends))

    def _plus(self, node: Mapping[str, Any], path: str, ends: tuple[str, ...]) -> ir.Node:
        return ir.repeat(self.node(node.get("content"), f"{path}.content", ends), 1, None)

    def _star(self, node: Mapping[str, Any], path: str, ends: tuple[str, ...]) -> ir.Node:
        return ir.star(self.node(node.get("content"), f"{path}.content", ends))

    def _repeat(self, node: Mapping[str, Any], path: str, ends: tuple[str, ...]) -> ir.Node:
        low, high = _field(node, "min", int, path), _field(node, "max", int, path)
        if isinstance(low, bool) or isinstance(high, bool) or low < 0 or (high != -1 and high < low):
            raise _refuse(path, f"needs 0 <= min <= max (or max -1, unbounded), got min {low!r}, max {high!r}")
        return ir.repeat(self.node(node.get("content"), f"{path}.content", ends), low, None if high == -1 else high)


def spelling_groups(spelled: list[tuple[str, ir.Node]]) -> list[tuple[str, list[str], ir.Node]]:
    """Tags as (begin, rest) grouped where they share their rest and a group's begins share a prefix longer than any
    of them shares with a begin outside it: (that prefix, the begins, the rest), in order of first appearance.  Past
    the prefix no other tag is alive, so the group is one piece with a forced head (the block layout's shape)."""
    ordered = sorted({begin for begin, _ in spelled})
    by_rest: dict[ir.Node, list[str]] = {}
    rests_of: dict[str, set[ir.Node]] = {}
    for begin, rest in spelled:
        if begin not in by_rest.setdefault(rest, []):
            by_rest[rest].append(begin)
        rests_of.setdefault(begin, set()).add(rest)
    shared = {begin for begin, rests in rests_of.items() if len(rests) > 1}
    groups: list[tuple[str, list[str], ir.Node]] = []
    for rest, begins in by_rest.items():
        cluster: list[str] = []
        for begin in sorted(begins):
            joined = [*cluster, begin]
            if cluster and len(commonprefix(joined)) <= _outside_prefix(joined, ordered, shared):
                groups.append((commonprefix(cluster), cluster, rest))
                joined = [begin]
            cluster = joined
        groups.append((commonprefix(cluster), cluster, rest))
    first = {tag: index for index, tag in reversed(list(enumerate(spelled)))}
    return sorted(groups, key=lambda group: min(first[begin, group[2]] for begin in group[1]))


def _outside_prefix(members: list[str], ordered: list[str], shared: set[str]) -> int:
    """The longest prefix a member shares with a tag outside its group: a member `shared` (begun alike, with another
    rest) shares all of itself; else the begins of `ordered` (sorted) outside `members`, of which the nearest on
    either side share the longest."""
    inside = set(members)
    longest = max((len(member) for member in members if member in shared), default=0)
    for member in members:
        at = bisect_left(ordered, member)
        for step, start in ((-1, at - 1), (1, at)):
            index = start
            while 0 <= index < len(ordered) and ordered[index] in inside:
                index += step
            if 0 <= index < len(ordered):
                longest = max(longest, len(commonprefix([member, ordered[index]])))
    return longest


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


def structural_tag_ir(tag: Mapping[str, Any], embed: Lower, assemble: Assemble | None = None) -> ir.Node:
    """The IR of a structural tag (the `response_format` object: `format`, or the older `structures`/`triggers`),
    its tags' formats assembled by `assemble` where given."""
    return _Lowering(embed, assemble).node(*_format(tag))


def structural_tag_automaton(tag: Mapping[str, Any], embed: Lower, assemble: Assemble) -> Automaton | None:
    """A structural tag whose format is tags (`triggered_tags`, `tags_with_separator`, as a model's tool-calling
    tags are) as the DFA `assemble` builds, with no IR leaf (whose byte table of every state would be laid out
    only to be read back); None for another format or tags that lower whole."""
    return _Lowering(embed, assemble).assembled(*_format(tag))


def _format(tag: Mapping[str, Any]) -> tuple[Any, str]:
    """A structural tag's format and the path that names it in errors."""
    if "format" in tag:
        return tag["format"], "response_format.format"
    return legacy_format(tag), "response_format"
