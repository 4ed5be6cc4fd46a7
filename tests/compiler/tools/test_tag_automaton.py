"""Triggered tags (and tags with a separator) assembled from each tag's DFA accept exactly what the whole structural
tag lowered to one expression accepts, and a tag list with one tag changed compiles that tag only."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import stdsl
from stdsl.compiler import ir
from stdsl.compiler.automata.build import build_automaton
from stdsl.compiler.constraint import Constraint
from stdsl.compiler.constraint_spec import _Deadline, _embeddable_schema, _embedder, build_constraint, embedded_ir
from stdsl.compiler.pushdown.constraint import PushdownConstraint
from stdsl.compiler.tools import tag_automaton
from stdsl.compiler.tools.formats.structural_tag import _Lowering, structural_tag_ir
from tests.compiler.language_difference import assert_agree_on_walks, difference

CONTENTS = st.sampled_from([
    {"type": "json_schema", "json_schema": {"type": "integer", "minimum": 0, "maximum": 99}},
    {"type": "json_schema", "json_schema": {"type": "object", "properties": {"a": {"type": "string", "maxLength": 3},
                                                                            "b": {"type": "boolean"}},
                                            "required": ["a"], "additionalProperties": False}},
    {"type": "json_schema", "json_schema": {"type": "array", "items": {"enum": ["x", "y"]}, "maxItems": 2}},
    {"type": "regex", "pattern": "[ab]{1,2}"},
    {"type": "const_string", "value": "ok"},
    {"type": "any_text", "excludes": ["zz"]},
    {"type": "sequence", "elements": [{"type": "regex", "pattern": "[0-9]+"}, {"type": "const_string", "value": ":"},
                                      {"type": "json_schema", "json_schema": {"type": "boolean"}}]},
    {"type": "json_schema", "style": "qwen_xml", "json_schema": {"type": "object", "properties": {
        "p": {"type": "string"}, "n": {"type": "integer", "maximum": 50}}, "required": ["n"]}},
])
NAMES = st.sampled_from(["f", "fa", "fab", "g", "<", "h>"])
ENDS = st.sampled_from(["</f>", "/>", ["/>", "</g>"], ["}", "}}"], "\n"])


@st.composite
def triggered_tags(draw: Any) -> dict[str, Any]:
    """A triggered_tags format (one or two triggers, one to four tags each begun by one trigger), or those tags with
    a separator, alone or as the content of a section tag (as XGrammar's Kimi and DeepSeek tags are), with free text
    between them or not."""
    triggers = draw(st.lists(st.sampled_from(["<f", "<g", "<fun", "[["]), min_size=1, max_size=2, unique=True))
    triggers = [t for i, t in enumerate(triggers) if not any(o.startswith(t) or t.startswith(o) for o in triggers[:i])]
    tags = []
    for _ in range(draw(st.integers(1, 4))):
        trigger = draw(st.sampled_from(triggers))
        tags.append({"type": "tag", "begin": trigger + draw(NAMES) + "=", "content": draw(CONTENTS),
                     "end": draw(ENDS)})
    flags = {"at_least_one": draw(st.booleans()), "stop_after_first": draw(st.booleans())}
    shape = draw(st.sampled_from(["triggered", "separated", "section", "triggered section"]))
    if shape != "triggered":
        separated = {"type": "tags_with_separator", "tags": tags, "separator": draw(st.sampled_from([",", "\n", ""])),
                     **flags}
        if shape == "separated":
            return separated
        content = separated if shape == "section" else {"type": "triggered_tags", "triggers": triggers, "tags": tags,
                                                        **flags}
        return {"type": "triggered_tags", "triggers": ["<<"], "tags": [{"type": "tag", "begin": "<<calls>",
                                                                        "content": content, "end": "<</calls>"}]}
    return {"type": "triggered_tags", "triggers": triggers, "tags": tags, **flags,
            **({"excludes": ["STOP"]} if draw(st.booleans()) else {})}


def _whole_embedder(item: tuple[Any, ...], path: str) -> Any:
    """The embedder of the single-expression build, each JSON schema compiled whole (no member layout)."""
    if item[0] == "json_schema":
        return embedded_ir(_embeddable_schema(item[1], max_seconds=60, zero_fractions=False), path)
    return _embedder(_Deadline(60))(item, path)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tag_format=triggered_tags(), seed=st.integers(0, 2**32 - 1))
def test_assembled_tags_accept_exactly_the_whole_structural_tag(tag_format: dict[str, Any], seed: int) -> None:
    tag = {"type": "structural_tag", "format": tag_format}
    whole = build_automaton(structural_tag_ir(tag, _whole_embedder))
    compiled = build_constraint({"kind": "structural_tag", "tag": tag}, 60)
    assert isinstance(compiled, Constraint)
    assembled = compiled.automaton
    assert difference(whole, assembled) is None
    assert_agree_on_walks(whole, assembled, np.random.default_rng(seed))


def test_two_literal_tags_with_one_begin_keep_both_ends() -> None:
    """The first tag is alone after `<ff=ok<`, the second after `<ff=ok\n`, where its text ends (hypothesis found
    the assembled reply refusing `<ff=ok\n`)."""
    tags = [{"type": "tag", "begin": "<ff=", "content": {"type": "const_string", "value": "ok"}, "end": end}
            for end in ("</f>", "\n")]
    tag = {"type": "structural_tag", "format": {"type": "triggered_tags", "triggers": ["<f"], "tags": tags}}
    compiled = build_constraint({"kind": "structural_tag", "tag": tag}, 60)
    assert isinstance(compiled, Constraint)
    assert difference(build_automaton(structural_tag_ir(tag, _whole_embedder)), compiled.automaton) is None
    assert compiled.accepts("x<ff=ok\ny<ff=ok</f>")


def _tool_tags(schemas: list[dict[str, Any]]) -> dict[str, Any]:
    """XGrammar's Qwen 3 tool-calling structural tag for tools with these parameter schemas."""
    return {"type": "structural_tag", "format": {"type": "triggered_tags", "triggers": ["<tool_call>"], "tags": [
        {"type": "tag", "begin": f'<tool_call>\n{{"name": "tool_{i}", "arguments": ',
         "content": {"type": "json_schema", "json_schema": schema}, "end": "}\n</tool_call>"}
        for i, schema in enumerate(schemas)]}}


def test_one_changed_tag_compiles_that_tag_only() -> None:
    schemas = [{"type": "object", "properties": {"a": {"type": "integer", "minimum": i}}, "required": ["a"]}
               for i in range(5)]
    build_constraint({"kind": "structural_tag", "tag": _tool_tags(schemas)}, 60)
    before = tag_automaton._TAGS.stats()
    changed = [*schemas[:4], {"type": "object", "properties": {"b": {"type": "string"}}}]
    compiled = build_constraint({"kind": "structural_tag", "tag": _tool_tags(changed)}, 60)
    after = tag_automaton._TAGS.stats()
    assert (after.misses - before.misses, after.hits - before.hits) == (1, 4)
    whole = build_automaton(structural_tag_ir(_tool_tags(changed), _whole_embedder))
    assert isinstance(compiled, Constraint) and difference(whole, compiled.automaton) is None


def test_a_tag_with_a_recursive_schema_lowers_whole_to_a_pushdown() -> None:
    tree = {"type": "object", "properties": {"kids": {"type": "array", "items": {"$ref": "#"}}}, "required": ["kids"]}
    compiled = build_constraint({"kind": "structural_tag", "tag": _tool_tags([{"type": "integer"}, tree])}, 60)
    assert isinstance(compiled, PushdownConstraint)
    assert compiled.accepts('x<tool_call>\n{"name": "tool_1", "arguments": {"kids":[{"kids":[]}]}}\n</tool_call>y')
    assert not compiled.accepts('<tool_call>\n{"name": "tool_1", "arguments": {"kids":[{}]}}\n</tool_call>')


def test_a_tag_schema_keeps_its_integers_beside_the_same_schema_in_a_tool_list() -> None:
    """A tool's arguments keep integers to 20 digits and a structural tag's schema does not: the laid-out object kept
    for one must not serve the other."""
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"],
              "additionalProperties": False}
    digits = "1" * 25
    call = f'<tool_call>\n{{"name": "tool_0", "arguments": {{"n":{digits}}}}}\n</tool_call>'
    for tools_first in (True, False):
        stdsl.caches.clear()
        tools = {"kind": "tools", "format": "harmony", "tools": [{"name": "tool_0", "parameters": schema}],
                 "choice": "auto", "parallel": True, "content": None}
        if tools_first:
            build_constraint(tools, 60)
        assert build_constraint({"kind": "structural_tag", "tag": _tool_tags([schema])}, 60).accepts(call)


def _harmony_tags(schemas: list[dict[str, Any]]) -> dict[str, Any]:
    """XGrammar's Harmony tool-calling structural tag (three spellings of each tool's header) for these schemas."""
    spellings = ["<|channel|>commentary to=functions.{}<|constrain|>json<|message|>",
                 " to=functions.{}<|channel|>commentary <|constrain|>json<|message|>",
                 " to=functions.{}<|channel|>commentary json<|message|>"]
    tags = [{"type": "tag", "begin": spelling.format(f"tool_{i}"), "end": "<|call|>",
             "content": {"type": "json_schema", "json_schema": schema, "style": "json"}}
            for i, schema in enumerate(schemas) for spelling in spellings]
    return {"type": "structural_tag", "format": {"type": "tags_with_separator", "separator": "<|start|>assistant",
                                                 "at_least_one": False, "stop_after_first": False, "tags": tags}}


def test_a_tools_header_spellings_share_one_layout_of_its_arguments() -> None:
    """Harmony spells a tool's header three ways; the two that begin alike (` to=functions.NAME...`) are one piece, so
    each tool's arguments are laid out twice, not three times, and the reply accepts exactly the tags' alternative
    with each spelling lowered on its own."""
    schemas = [{"type": "object", "properties": {"a": {"type": "integer", "minimum": i}}, "required": ["a"],
                "additionalProperties": False} for i in range(3)]
    tag = _harmony_tags(schemas)
    stdsl.caches.clear()
    compiled = build_constraint({"kind": "structural_tag", "tag": tag}, 60)
    assert tag_automaton._TAGS.stats().entries == 2 * len(schemas)
    assert isinstance(compiled, Constraint)
    lowering = _Lowering(_whole_embedder, None)
    one = ir.alt(*(lowering._tag(t, "tag", ()) for t in tag["format"]["tags"]))
    each_spelled = ir.optional(ir.seq(one, ir.star(ir.seq(ir.literal("<|start|>assistant"), one))))
    assert difference(build_automaton(each_spelled), compiled.automaton) is None
    for header in (" to=functions.tool_1<|channel|>commentary json<|message|>",
                   "<|channel|>commentary to=functions.tool_1<|constrain|>json<|message|>"):
        assert compiled.accepts(f'{header}{{"a":5}}<|call|>')
        assert not compiled.accepts(f'{header}{{"a":0}}<|call|>')
