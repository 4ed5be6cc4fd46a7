"""The types of a program's parameters, checked when the program is called: `param n: int` in a `.stc` file,
or the annotation of a `@program` function's parameter (`n: int`, `tags: list[str]`, a Pydantic class).

A value of the wrong type (`n="five"`, `n=True`, `n=2.0`) is an `OptionError` naming the parameter and the
type it expects, before any prompt is rendered: strict, so nothing is converted behind the caller's back.
"""

from __future__ import annotations

import inspect
import reprlib
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from stdsl.compiler.stc.syntax import Pos, ProgramError
from stdsl.errors import OptionError

STC_TYPES: dict[str, type] = {"str": str, "int": int, "float": float, "bool": bool, "list": list, "dict": dict}
"""The type names a `.stc` parameter may declare (a float parameter also takes an int, as JSON numbers do)."""

_UNSET = object()


@dataclass(frozen=True)
class ParameterType:
    """The type one parameter expects: `annotation` checked strictly; `default` (a Python default) always passes."""

    name: str
    annotation: Any
    where: str
    default: Any = _UNSET

    @cached_property
    def _adapter(self) -> Any:
        from pydantic import TypeAdapter

        return TypeAdapter(self.annotation)

    def check(self, parameter: str, value: Any) -> None:
        """Raise OptionError unless `value` is of this type."""
        if value is self.default:
            return
        from pydantic import ValidationError

        try:
            self._adapter.validate_python(value, strict=True)
        except ValidationError:
            raise OptionError(parameter, f"{self.where}: parameter {parameter} expects {self.name}, got "
                                         f"{reprlib.repr(value)} of type {type(value).__name__}") from None


def stc_parameter_type(parameter: str, name: str, default: Any, pos: Pos) -> ParameterType:
    """The type a `.stc` parameter declares (ProgramError for an unknown name, or a default of another type)."""
    if name not in STC_TYPES:
        raise pos.error(f"parameter {parameter}: unknown type {name}; a parameter is one of "
                        f"{', '.join(STC_TYPES)}")
    declared = ParameterType(name, STC_TYPES[name], f"{pos.source}:{pos.line}:{pos.column}")
    if default is not None:
        try:
            declared.check(parameter, default)
        except OptionError as error:
            raise ProgramError(f"the default of parameter {parameter} must be {name}, got {default!r}", pos.source,
                               pos.line, pos.column) from error
    return declared


def annotated_types(signature: inspect.Signature, source: str, scope: Mapping[str, Any]) -> dict[str, ParameterType]:
    """The types of a `@program` function's annotated parameters; a string annotation (postponed evaluation) is
    resolved in `scope`, as `typing.get_type_hints` does. An annotation that does not resolve, or that pydantic
    cannot check, is not checked."""
    from pydantic import PydanticSchemaGenerationError, TypeAdapter

    types: dict[str, ParameterType] = {}
    for name, parameter in signature.parameters.items():
        annotation = parameter.annotation
        if isinstance(annotation, str):
            try:
                annotation = eval(annotation, dict(scope))  # noqa: S307  (the function's own annotation text)
            except Exception:  # an annotation naming what is not in scope is simply not checked
                continue
        if annotation is inspect.Parameter.empty:
            continue
        try:
            TypeAdapter(annotation)
        except (PydanticSchemaGenerationError, TypeError):
            continue
        default = parameter.default if parameter.default is not inspect.Parameter.empty else _UNSET
        types[name] = ParameterType(_type_name(annotation), annotation, source, default)
    return types


def _type_name(annotation: Any) -> str:
    """How an annotation reads in an error: `int`, `list[str]`, `Person`."""
    if isinstance(annotation, type) and not getattr(annotation, "__args__", None):
        return annotation.__name__
    return str(annotation).replace("typing.", "")


def check_arguments(types: Mapping[str, ParameterType], args: Mapping[str, Any]) -> None:
    """Check every argument that has a declared type (OptionError for the first of the wrong type)."""
    for name, declared in types.items():
        if name in args:
            declared.check(name, args[name])
