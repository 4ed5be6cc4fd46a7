"""Random valid JSON documents for the extraction schemas (compact, keys in schema order), for planner tests."""

from __future__ import annotations

import json
import random
from typing import Any

from tests.data_files import EXTRACTION


def load_task(name: str) -> dict:
    """One extraction task of tests/data/tasks (schema, prompts, source, gold)."""
    return json.loads((EXTRACTION / f"{name}.json").read_text())

STRING_PIECES = (
    list("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
    + [" ", "  ", ".", ",", "-", "@", "'", "!", "?", ":", "/", "(", ")", '"', "\\", "\n", "\t"]
    + ["é", "ü", "ñ", "ô", "中", "文", "😀", "—", "«", "»", "ß", "Ж", "٣", "\u00a0"]
    + ["Maria", " Gonzalez", "hello", " world", "'s", "'t", "123", " 42", "...", "!!", "::"]
)


def random_string(rng: random.Random) -> str:
    """A short string mixing letters, digits, spaces, punctuation, escapes and non-ASCII text."""
    return "".join(rng.choice(STRING_PIECES) for _ in range(rng.randint(0, 8)))


def random_number(rng: random.Random, schema: dict[str, Any]) -> float | int:
    """A number inside the schema's bounds: an integer or a decimal with up to three places."""
    lo = schema.get("minimum", -1000)
    hi = schema.get("maximum", 1000)
    if rng.random() < 0.4:
        return rng.randint(int(lo), int(hi)) if int(lo) <= int(hi) else lo
    value = round(rng.uniform(lo, hi), rng.randint(1, 3))
    return min(max(value, lo), hi)


def random_instance(rng: random.Random, schema: dict[str, Any]) -> Any:
    """A random instance of the subset of JSON Schema the extraction tasks use."""
    if "enum" in schema:
        return rng.choice(schema["enum"])
    kind = schema.get("type")
    if kind == "object":
        required = set(schema.get("required", ()))
        return {
            key: random_instance(rng, sub)
            for key, sub in schema.get("properties", {}).items()
            if key in required or rng.random() < 0.5
        }
    if kind == "array":
        lo = schema.get("minItems", 0)
        hi = schema.get("maxItems", lo + 3)
        return [random_instance(rng, schema.get("items", {})) for _ in range(rng.randint(lo, hi))]
    if kind == "string":
        if schema.get("format") == "date":
            return f"{rng.randint(1900, 2099):04d}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
        return random_string(rng)
    if kind == "integer":
        return rng.randint(schema.get("minimum", -100000), schema.get("maximum", 100000))
    if kind == "number":
        return random_number(rng, schema)
    if kind == "boolean":
        return rng.random() < 0.5
    raise ValueError(f"unsupported schema in the document generator: {schema}")


def compact(value: Any) -> str:
    """Compact JSON text (no whitespace, non-ASCII kept)."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)
