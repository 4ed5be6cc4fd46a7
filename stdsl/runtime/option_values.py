"""Checks for one option value (an int, a real number, a bool): each returns the value as a plain Python type
or raises OptionError naming the argument, the value and what is allowed."""

from __future__ import annotations

import numbers
import reprlib
from typing import Any

import numpy as np

from stdsl.errors import OptionError


def refuse(argument: str, value: Any, allowed: str) -> OptionError:
    """The error for `argument=value` where only `allowed` is accepted (the value shortened when long)."""
    return OptionError(argument, f"{argument} must be {allowed}, got {reprlib.repr(value)}")


def integer(argument: str, value: Any, *, minimum: int, maximum: int | None = None) -> int:
    """`value` as an int in [minimum, maximum]; bools, floats and strings are refused, numpy integers accepted."""
    span = f"an integer >= {minimum}" if maximum is None else f"an integer in [{minimum}, {maximum}]"
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise refuse(argument, value, span)
    number = int(value)
    if number < minimum or (maximum is not None and number > maximum):
        raise refuse(argument, value, span)
    return number


def real(argument: str, value: Any, allowed: str) -> float:
    """`value` as a float (ints and numpy numbers accepted; bools and strings refused); `allowed` says the range."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise refuse(argument, value, allowed)
    return float(value)


def boolean(argument: str, value: Any) -> bool:
    """`value` as a bool; only True and False (numpy's included) are accepted, not 0/1 or strings."""
    if not isinstance(value, (bool, np.bool_)):
        raise refuse(argument, value, "True or False")
    return bool(value)


def boolean_or(argument: str, value: Any, words: tuple[str, ...]) -> bool | str:
    """`value` as a bool (as `boolean`), or one of the str `words` as given."""
    if isinstance(value, str) and value in words:
        return value
    if not isinstance(value, (bool, np.bool_)):
        raise refuse(argument, value, "True, False or " + " or ".join(repr(w) for w in words))
    return bool(value)
