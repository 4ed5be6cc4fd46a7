"""The generation steps of a Python program: `gen` (a typed field under any constraint stdsl takes) and `select`
(one of some literal options).

Each is checked and compiled when it is written (`gen(...)` raises on a constraint stdsl cannot compile, a bad
option or bad `select` options), so a mistake fails before the model reads anything for its step.
"""

from __future__ import annotations

import enum
import reprlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from stdsl.compiler.constraint import Regex
from stdsl.compiler.constraint import compile as compile_constraint
from stdsl.errors import OptionError
from stdsl.generation import Generation
from stdsl.runtime.batch.requests import check_stop
from stdsl.runtime.options import DecodeOptions

_REGEX_SPECIAL = frozenset("\\.^$*+?{}[]|()")
_SCALARS: dict[type, tuple[Any, Callable[[str], Any]]] = {
    int: (Regex("-?(0|[1-9][0-9]*)"), int),
    float: (Regex(r"-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?"), float),
    bool: (Regex("true|false"), lambda text: text == "true"),
}
"""Python scalar types as the JSON spelling of their values and how it reads back."""
_RESERVED = ("chat", "prompt", "constraint")
"""Options a step may not set: the program owns the prompt (token ids) and each step's constraint."""


@dataclass(frozen=True)
class Gen:
    """One generation step as written: its name, the constraint handed to the engine, its decoding options and
    how its text is read as a typed value."""

    name: str
    constraint: Any
    options: dict[str, Any] = field(default_factory=dict)
    read: Callable[[Generation], Any] = field(default=lambda generation: generation.value)
    kind: str = "gen"


def gen(name: str, constraint: Any = None, **options: Any) -> Gen:
    """A step that generates the field `name` under `constraint`: a JSON Schema, a Pydantic class, a `Regex`, a
    `Grammar`, a compiled constraint, a list of literal options or an Enum class (as `select`), `int`, `float` or
    `bool` (its JSON spelling, read back as that type), `str` or None (free text); `options` are decoding options
    (`max_tokens`, `stop`, ...).
    """
    _check_name(name)
    settings = _options(name, options)
    if isinstance(constraint, (list, tuple)):
        return select(name, list(constraint), **options)
    if isinstance(constraint, type) and issubclass(constraint, enum.Enum):
        members = list(constraint)
        choice = select(name, [str(member.value) for member in members], **options)
        by_text = {str(member.value): member for member in members}
        return Gen(name, choice.constraint, choice.options, lambda generation: by_text[generation.text])
    if constraint is str:
        constraint = None
    if isinstance(constraint, type) and constraint in _SCALARS:
        pattern, convert = _SCALARS[constraint]
        check_stop(pattern, settings)
        return Gen(name, pattern, options, lambda generation: convert(generation.text))
    if constraint is not None:
        compile_constraint(constraint)  # the step's errors now, before any model pass (the compile is cached)
    check_stop(constraint, settings)
    return Gen(name, constraint, options)


def select(name: str, options: Sequence[str], **decoding: Any) -> Gen:
    """A step that generates exactly one of `options` (distinct, non-empty strings) as the field `name`; its value
    is the option's text. The choice is decoded under the constraint (greedy by default), not scored by likelihood.
    """
    _check_name(name)
    if isinstance(options, (str, bytes)) or not isinstance(options, Sequence) or not options:
        raise OptionError("options", f"select({name!r}) needs a non-empty list of option strings, got "
                                     f"{reprlib.repr(options)}")
    for index, option in enumerate(options):
        if not isinstance(option, str) or not option:
            raise OptionError("options", f"select({name!r}) option {index} must be a non-empty str, got "
                                         f"{reprlib.repr(option)}")
    repeated = sorted({option for option in options if list(options).count(option) > 1})
    if repeated:
        raise OptionError("options", f"select({name!r}) lists {repeated[0]!r} more than once")
    _options(name, decoding)
    if "stop" in decoding:
        raise OptionError("stop", f"select({name!r}) takes no stop: its options say where it ends")
    constraint = Regex("|".join(_literal(option) for option in options))
    compile_constraint(constraint)
    return Gen(name, constraint, dict(decoding), lambda generation: generation.text, "select")


def _check_name(name: Any) -> None:
    """Refuse a step name that is not a non-empty str."""
    if not isinstance(name, str) or not name:
        raise OptionError("name", f"a step's name must be a non-empty str, got {reprlib.repr(name)}")


def _options(name: str, options: dict[str, Any]) -> DecodeOptions:
    """The step's decoding options checked now (unknown names and bad values refused, naming the step)."""
    for reserved in _RESERVED:
        if reserved in options:
            raise OptionError(reserved, f"step {name!r} cannot set {reserved!r}: the program decides it")
    try:
        return DecodeOptions.of(**options)
    except OptionError as error:
        raise OptionError(error.argument, f"step {name!r}: {error}") from error


def _literal(text: str) -> str:
    """`text` as a regular expression matching exactly it."""
    return "".join("\\" + c if c in _REGEX_SPECIAL else c for c in text)
