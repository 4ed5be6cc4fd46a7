"""The public decoding entry points: `generate` and `stream` take anything `stdsl.compile` accepts."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from stdsl.compiler.constraint import compile as compile_constraint
from stdsl.runtime import decode
from stdsl.runtime.decode import Prompt
from stdsl.runtime.generation import Generation


def generate(
    model: Any,
    prompt: Prompt,
    constraint: Any,
    *,
    max_tokens: int | None = 256,
    temperature: float = 0.0,
    top_p: float = 1.0,
    top_k: int = 0,
    seed: int | None = None,
    chat: bool = True,
) -> Generation:
    """Decode one output of `model` under `constraint` (JSON Schema, `Regex`, Pydantic class, program, `Constraint`).

    Returns a `Generation` with `.text`, `.value` (a validated instance, parsed JSON or the
    text) and `.stats`. Raises `BudgetError` before decoding when no valid output fits in
    `max_tokens`.
    """
    return decode.generate(
        model,
        prompt,
        compile_constraint(constraint),
        max_tokens=max_tokens,
        temperature=temperature,
        top_p=top_p,
        top_k=top_k,
        seed=seed,
        chat=chat,
    )


def stream(
    model: Any,
    prompt: Prompt,
    constraint: Any,
    *,
    max_tokens: int | None = 256,
    temperature: float = 0.0,
    top_p: float = 1.0,
    top_k: int = 0,
    seed: int | None = None,
    chat: bool = True,
) -> Iterator[str]:
    """Yield the output text piece by piece as it is decided (forced text included)."""
    return decode.stream(
        model,
        prompt,
        compile_constraint(constraint),
        max_tokens=max_tokens,
        temperature=temperature,
        top_p=top_p,
        top_k=top_k,
        seed=seed,
        chat=chat,
    )
