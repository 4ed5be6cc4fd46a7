"""The public decoding entry points: `generate` and `stream` take anything `stdsl.compile` accepts."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from stdsl.compiler.constraint import compile as compile_constraint
from stdsl.runtime import decode
from stdsl.runtime.decode import Prompt
from stdsl.runtime.generation import Generation


def generate(model: Any, prompt: Prompt, constraint: Any, **options: Any) -> Generation:
    """Decode one output of `model` under `constraint` (JSON Schema, `Regex`, Pydantic class, program, `Constraint`).

    Options: `max_tokens` (default 256), `temperature`, `top_p`, `top_k`, `seed`, `chat`
    (apply the chat template, default True). Returns a `Generation` with `.text`, `.value`
    (a validated instance, parsed JSON or the text) and `.stats`. Raises `BudgetError` before
    decoding when no valid output fits in `max_tokens`.
    """
    return decode.generate(model, prompt, compile_constraint(constraint), **options)


def stream(model: Any, prompt: Prompt, constraint: Any, **options: Any) -> Iterator[str]:
    """Yield the output text piece by piece as it is decided (forced text included); options as `generate`."""
    return decode.stream(model, prompt, compile_constraint(constraint), **options)
