"""Random tool lists of the kind agents send (strings, numbers, enums, nested objects, optional fields), seeded,
for `tool_compile.py` and its profile."""

from __future__ import annotations

import json
import random
from typing import Any

WORDS = ("path", "query", "city", "limit", "offset", "mode", "content", "name", "title", "tags", "unit", "url",
         "owner", "repo", "branch", "message", "count", "level", "start", "end", "format", "language", "id")


def _value(rng: random.Random, depth: int) -> dict[str, Any]:
    kind = rng.choice(("string", "string", "integer", "number", "boolean", "enum", "array", "object"))
    if kind == "enum":
        return {"type": "string", "enum": rng.sample(["a", "b", "celsius", "fahrenheit", "asc", "desc", "x1"], 3)}
    if kind == "array":
        return {"type": "array", "items": {"type": rng.choice(("string", "integer"))}}
    if kind == "object":
        if depth >= 1:
            return {"type": "string"}
        return _object(rng, depth + 1, rng.randint(1, 3))
    if kind == "integer" and rng.random() < 0.3:
        return {"type": "integer", "minimum": 0}
    return {"type": kind}


def _object(rng: random.Random, depth: int, size: int) -> dict[str, Any]:
    keys = rng.sample(WORDS, size)
    properties = {key: _value(rng, depth) for key in keys}
    required = [key for key in keys if rng.random() < 0.6]
    return {"type": "object", "properties": properties, "required": required, "additionalProperties": False}


def random_tool(rng: random.Random, index: int) -> dict[str, Any]:
    """One OpenAI-style function tool, named uniquely by `index`."""
    name = f"{rng.choice(('get', 'set', 'list', 'search', 'run', 'read'))}_{rng.choice(WORDS)}_{index}"
    return {"type": "function", "function": {"name": name, "parameters": _object(rng, 0, rng.randint(1, 5))}}


def random_tools(count: int, seed: int = 0) -> list[dict[str, Any]]:
    """`count` random tools, the same for the same seed."""
    rng = random.Random(seed)
    return [random_tool(rng, index) for index in range(count)]


def with_references(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`tools` with every enum and nested object member moved into its tool's `$defs` and referred to, as Pydantic
    writes them, the member's `type` beside the reference (what Qwen XML's parser types a parameter by)."""
    out = []
    for tool in tools:
        parameters = json.loads(json.dumps(tool["function"]["parameters"]))
        definitions: dict[str, Any] = {}
        for key, value in parameters["properties"].items():
            if "enum" in value or value.get("type") == "object":
                name = f"{key.title()}{len(definitions)}"
                definitions[name] = value
                parameters["properties"][key] = {"$ref": f"#/$defs/{name}", "type": value["type"]}
        if definitions:
            parameters["$defs"] = definitions
        out.append({**tool, "function": {**tool["function"], "parameters": parameters}})
    return out
