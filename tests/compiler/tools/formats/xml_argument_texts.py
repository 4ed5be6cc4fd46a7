"""Random arguments schemas for XGrammar's XML argument styles, texts that spell them (well and badly), and the
language as a Python regular expression (the oracle where xgrammar is not installed)."""

from __future__ import annotations

import json
import random
import re
from typing import Any

from hypothesis import strategies as st

from stdsl.compiler.tools.formats.xml_arguments import STYLES

WS = " \n\r\t"
WORDS = ["", "a", "hi there", "\n", " x ", "</param", "</parameter", "</arg_value", "<", ">", "é", "null", "3", '"q"',
         "</function>", "\n</function>\n</tool_call>", "<parameter=a>", "[1]"]

SCALARS = st.one_of(
    st.just({"type": "string"}), st.just({"type": "string", "description": "free text"}),
    st.just({"type": "integer"}), st.just({"type": "boolean"}), st.just({"type": "null"}),
    st.lists(st.sampled_from(["x", "y z", "a<b", "", 3, -1, True, False, None]), min_size=1, max_size=4,
             unique=True).map(lambda values: {"enum": values}),
    st.sampled_from(["x", "two words", 7]).map(lambda value: {"const": value}))
"""Property schemas whose language the regular expression below spells out."""
BOUNDED = st.one_of(st.just({"type": "integer", "minimum": 0, "maximum": 120}), st.just({"type": "number"}),
                    st.just({"type": "number", "minimum": -2.5}))
"""Scalars with a range or JSON's number syntax (checked against xgrammar only)."""
CONTAINERS = st.sampled_from([{"type": "array", "items": {"type": "string"}}, {"type": "array", "items": {
    "type": "integer"}}, {"type": "object", "properties": {"k": {"type": "string"}}, "required": ["k"]}])
"""JSON containers: written compact, as the `json` style writes them (XGrammar also reads whitespace inside)."""


def schemas(values: st.SearchStrategy[dict[str, Any]]) -> st.SearchStrategy[dict[str, Any]]:
    """Arguments objects of up to four properties drawn from `values`, a random subset required."""
    names = st.lists(st.sampled_from(["a", "path", "n_2", "Query", "b", 'x"&y']), max_size=4, unique=True)

    def build(keys: list[str], draw_values: list[dict[str, Any]], required: list[bool]) -> dict[str, Any]:
        properties = dict(zip(keys, draw_values))
        return {"type": "object", "properties": properties,
                "required": [key for key, needed in zip(keys, required) if needed]}

    return names.flatmap(lambda keys: st.tuples(st.just(keys), st.lists(values, min_size=len(keys),
                                                                        max_size=len(keys)),
                                                st.lists(st.booleans(), min_size=len(keys), max_size=len(keys)))
                         ).map(lambda drawn: build(*drawn))


def _space(rng: random.Random, max_run: int | None) -> str:
    """Whitespace within `max_run` mostly, one more sometimes."""
    longest = 3 if max_run is None else max_run + (rng.random() < 0.1)
    return "".join(rng.choice(WS) for _ in range(rng.randint(0, longest)))


def _value(schema: dict[str, Any], rng: random.Random, max_run: int | None) -> str:
    """A value's spelling: what the schema allows most of the time, a near miss sometimes."""
    if "const" in schema or "enum" in schema:
        values = [schema["const"]] if "const" in schema else schema["enum"]
        value = rng.choice([*values, "zz", 4]) if rng.random() < 0.2 else rng.choice(values)
        text = value if isinstance(value, str) else json.dumps(value)
        return _space(rng, max_run) + text + _space(rng, max_run)
    kind = schema["type"]
    if kind == "string":
        return "".join(rng.choice(WORDS) for _ in range(rng.randint(0, 3)))
    valid, invalid = {"integer": (["0", "42", "-7", "120"], ["007", "1.5", "1.0", "121", "99999999"]),
                      "number": (["0", "-2.5", "-3", "0.125"], ["1e5", "2.", "-0.0", "1E-2", "0.1234567"]),
                      "boolean": (["true", "false"], ["True", "null"]), "null": (["null"], ["None", ""]),
                      "array": (['["a","b"]', "[]", "[1,2]"], ["[1.0]", '[ "a" ]', '["a",]']),
                      "object": (['{"k":"v"}'], ['{"k": "v"}', "{}", '{"k":"v","x":1}'])}[kind]
    spelled = invalid if rng.random() < 0.2 else valid
    return _space(rng, max_run) + rng.choice(spelled) + _space(rng, max_run)


KIMI_TYPES = {"integer": "number", "number": "number", "string": "string", "boolean": "boolean", "null": "null",
              "array": "array", "object": "object"}


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    return {str: "string", int: "number", float: "number", type(None): "null"}[type(value)]


def mixed_enum(schema: dict[str, Any], style: str) -> bool:
    """Whether kimi_k3_xml has no one type to write for some enum of `schema` (which the style refuses)."""
    return style == "kimi_k3_xml" and any(
        len({_json_type(v) for v in ([value["const"]] if "const" in value else value.get("enum", [None]))}) > 1
        for value in schema["properties"].values())


def head(style: str, key: str, value: dict[str, Any]) -> str:
    """A parameter's opening text: Kimi-K3 writes the name as an attribute and the value's JSON type after it."""
    wrap = STYLES[style]
    if not wrap.typed:
        return wrap.key_prefix + key + wrap.key_suffix
    values = [value["const"]] if "const" in value else value.get("enum")
    kind = _json_type(values[0]) if values else KIMI_TYPES[value["type"]]
    return f'{wrap.key_prefix}{key.replace("&", "&amp;").replace(chr(34), "&quot;")}" type="{kind}{wrap.key_suffix}'


def spellings(schema: dict[str, Any], style: str, rng: random.Random, max_run: int | None = None) -> str:
    """An arguments text for `schema` in `style`: each property present (the required ones mostly), in order."""
    wrap = STYLES[style]
    parts = [_space(rng, max_run)]
    for key, value in schema["properties"].items():
        if rng.random() < (0.95 if key in schema.get("required", []) else 0.5):
            parts.append(head(style, key, value))
            if wrap.value_prefix:
                parts.append(_space(rng, max_run) + wrap.value_prefix)
            parts.append(_value(value, rng, max_run) + wrap.closing + _space(rng, max_run))
    return "".join(parts)


def mutated(text: str, rng: random.Random) -> str:
    """`text` with a character dropped, doubled or inserted, or two halves swapped."""
    if not text:
        return rng.choice(WS + "<a")
    at = rng.randrange(len(text))
    move = rng.randrange(4)
    if move == 0:
        return text[:at] + text[at + 1:]
    if move == 1:
        return text[:at] + text[at] + text[at:]
    if move == 2:
        return text[:at] + rng.choice(WS + '<>/="x') + text[at:]
    return text[at:] + text[:at]


def pattern(schema: dict[str, Any], style: str, max_run: int | None = None) -> str:
    """The arguments language of a schema of `SCALARS` as a Python regular expression (DOTALL)."""
    wrap = STYLES[style]
    ws = "[ \\n\\r\\t]*" if max_run is None else f"[ \\n\\r\\t]{{0,{max_run}}}"
    parts = [ws]
    for key, value in schema["properties"].items():
        if "const" in value or "enum" in value:
            values = [value["const"]] if "const" in value else value["enum"]
            texts = [v if isinstance(v, str) else json.dumps(v) for v in values]
            body = ws + "(?:" + "|".join(re.escape(t) for t in texts) + ")" + ws
        elif value["type"] == "string":
            body = f"(?:(?!{re.escape(wrap.closing)}).)*"
        else:
            body = ws + {"integer": "-?(?:0|[1-9][0-9]*)", "boolean": "(?:true|false)", "null": "null"}[
                value["type"]] + ws
        opening = re.escape(head(style, key, value))
        if wrap.value_prefix:
            opening += ws + re.escape(wrap.value_prefix)
        parameter = opening + body + re.escape(wrap.closing) + ws
        parts.append(parameter if key in schema.get("required", []) else f"(?:{parameter})?")
    return "".join(parts)
