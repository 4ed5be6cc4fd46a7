"""XGrammar's XML argument styles in a structural tag against their language written as a Python regular expression
(random schemas, spellings and mutations), a hand-checked set of Qwen3-Coder texts (also checked against
xgrammar's matcher in `tests/server/test_structural_tags.py`), and refusals by path."""

from __future__ import annotations

import random
import re
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from stdsl.compiler.constraint_spec import build_constraint
from stdsl.compiler.tools.formats.xml_arguments import STYLES
from stdsl.errors import CompileError
from tests.compiler.language_difference import difference
from tests.compiler.tools.formats.xml_argument_texts import (
    SCALARS,
    mixed_enum,
    mutated,
    pattern,
    schemas,
    spellings,
)

CODER_SCHEMA = {"type": "object", "properties": {
    "s": {"type": "string"}, "n": {"type": "integer", "minimum": 0},
    "a": {"type": "array", "items": {"type": "string"}}, "e": {"enum": ["x", "y z", 3, True, None]}},
    "required": ["s", "n"], "additionalProperties": False}
CODER_TAG = {"type": "tag", "begin": "<tool_call>\n<function=f>\n", "end": "\n</function>\n</tool_call>",
             "content": {"type": "json_schema", "json_schema": CODER_SCHEMA, "style": "qwen_xml"}}
CODER_TEXTS = [
    ("<parameter=s>hi</parameter><parameter=n>3</parameter>", True),
    ("<parameter=s>\nhi\n</parameter>\n<parameter=n>\n3\n</parameter>\n", True),
    (" \t<parameter=s></parameter>  <parameter=n> 0 </parameter>", True),
    ("<parameter=s>a</parameter</parameter><parameter=n>3</parameter>", True),
    ("<parameter=s>a\n</function>\n</tool_call></parameter><parameter=n>3</parameter>", True),
    ("<parameter=s>a</parameter><parameter=n>-3</parameter>", False),
    ("<parameter=s>a</parameter><parameter=n>03</parameter>", False),
    ('<parameter=s>a</parameter><parameter=n>3</parameter><parameter=a>["a","b"]</parameter>', True),
    ("<parameter=s>a</parameter><parameter=n>3</parameter><parameter=e>y z</parameter>", True),
    ("<parameter=s>a</parameter><parameter=n>3</parameter><parameter=e> null\n</parameter>", True),
    ('<parameter=s>a</parameter><parameter=n>3</parameter><parameter=e>"x"</parameter>', False),
    ("<parameter=s>a</parameter><parameter=n>3</parameter><parameter=e>3</parameter><parameter=a>[]</parameter>",
     False),
    ("<parameter=n>3</parameter>", False),
    ("<parameter=s>a</parameter></parameter><parameter=n>3</parameter>", False),
    ("<parameter=s>\u00e9\x00</parameter><parameter=n>3</parameter>", True),
]
"""Arguments inside CODER_TAG and whether XGrammar 0.2.9's matcher accepts them."""


def _constraint(fmt: dict[str, Any]):
    return build_constraint({"kind": "structural_tag", "tag": {"format": fmt}}, 30)


def test_qwen3_coder_texts_read_as_xgrammar_reads_them() -> None:
    ours = _constraint(CODER_TAG)
    for body, accepted in CODER_TEXTS:
        text = CODER_TAG["begin"] + body + CODER_TAG["end"]
        assert ours.accepts(text.encode()) == accepted, body


ENDS = [None, ["\n</function>\n</tool_call>"], ["</f>", "\n\n</g>"], [" x", "\t</parameter>"]]
"""A tag's ends around the arguments (None: the arguments alone): whitespace, a closing tag, both."""


@settings(max_examples=80, deadline=None)
@given(schema=schemas(SCALARS), style=st.sampled_from(sorted(STYLES)), max_run=st.sampled_from([None, None, 1, 2]),
       ends=st.sampled_from(ENDS), seed=st.integers(0, 2**16))
def test_the_styles_accept_what_their_regular_expression_accepts(schema: dict[str, Any], style: str,
                                                                 max_run: int | None, ends: list[str] | None,
                                                                 seed: int) -> None:
    """Alone (one expression) and inside a tag (laid out from its parameters where the whitespace is unbounded)."""
    fmt = {"type": "json_schema", "json_schema": schema, "style": style, "max_whitespace_cnt": max_run}
    if mixed_enum(schema, style):
        with pytest.raises(CompileError, match="several JSON types"):
            _constraint(fmt)
        return
    written = pattern(schema, style, max_run)
    if ends is not None:
        fmt = {"type": "tag", "begin": "<f>", "content": fmt, "end": ends}
        written = "<f>" + written + "(?:" + "|".join(re.escape(end) for end in ends) + ")"
    ours = _constraint(fmt)
    oracle = re.compile(written, re.DOTALL)
    rng = random.Random(seed)
    texts = [spellings(schema, style, rng, max_run) for _ in range(30)]
    if ends is not None:
        texts = ["<f>" + text + rng.choice([*ends, *ends, "", "\n"]) for text in texts]
    texts += [mutated(rng.choice(texts), rng) for _ in range(30)]
    for text in texts:
        assert ours.accepts(text.encode()) == bool(oracle.fullmatch(text)), (schema, style, text)
    assert any(oracle.fullmatch(text) for text in texts) or max_run is not None  # bounded runs are often past it


@settings(max_examples=40, deadline=None)
@given(schema=schemas(SCALARS), style=st.sampled_from(sorted(STYLES)), data=st.data())
def test_parameters_that_refer_into_defs_read_as_written_in_place(schema: dict[str, Any], style: str,
                                                                 data: st.DataObject) -> None:
    """A parameter that refers into the schema's `$defs` (a description beside it, or not) is the parameter written
    in place, as XGrammar's converter resolves it (`tests/server/test_structural_tags.py` checks its matcher)."""
    assume(not mixed_enum(schema, style))
    properties, definitions = {}, {}
    for index, (key, value) in enumerate(schema["properties"].items()):
        if data.draw(st.booleans()):
            definitions[f"D{index}"] = value
            value = {"$ref": f"#/$defs/D{index}", **({"description": "d"} if data.draw(st.booleans()) else {})}
        properties[key] = value
    referring = {**schema, "properties": properties, "$defs": definitions}

    def automaton(json_schema: dict[str, Any]) -> Any:
        return _constraint({"type": "tag", "begin": "<f>", "end": "</f>", "content": {
            "type": "json_schema", "json_schema": json_schema, "style": style}}).automaton

    assert difference(automaton(referring), automaton(schema)) is None


@pytest.mark.parametrize(("fmt", "where"), [
    ({"style": "deepseek_xml"}, "response_format.format.style"),
    ({"style": "qwen_xml", "json_schema": {}}, "response_format.format.json_schema"),
    ({"style": "qwen_xml", "any_order": True}, "response_format.format.any_order"),
    ({"excludes": ["x"]}, "response_format.format.excludes"),
    ({"style": "glm_xml", "max_whitespace_cnt": 0}, "response_format.format.max_whitespace_cnt"),
    ({"style": "qwen_xml", "json_schema": {"type": "object", "properties": {"p": {"type": "string",
                                                                                 "pattern": "a+"}}}},
     "response_format.format.json_schema.properties.p.pattern"),
    ({"style": "minimax_xml", "json_schema": {"type": "object", "properties": {"p": {"type": ["string", "null"]}}}},
     "response_format.format.json_schema.properties.p"),
    ({"style": "qwen_xml", "json_schema": {"type": "object", "properties": {}, "additionalProperties": True}},
     "response_format.format.json_schema.additionalProperties"),
    ({"style": "qwen_xml", "json_schema": {"type": "object", "properties": {"p": {"enum": [1.5]}}}},
     "response_format.format.json_schema.properties.p"),
])
def test_what_the_styles_cannot_enforce_is_refused_by_path(fmt: dict[str, Any], where: str) -> None:
    full = {"type": "json_schema", "json_schema": {"type": "object", "properties": {"p": {"type": "string"}}},
            **fmt}
    with pytest.raises(CompileError, match=re.escape(where) + ":"):
        _constraint(full)
