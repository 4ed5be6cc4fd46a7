"""The field types of the program language: how each is written in a template, as JSON, and read back.

Every type knows three things: its byte language when it stands in a template (`text_ir`),
its JSON Schema when it sits inside a record or `json(...)` (`schema`), and how to turn the
text of one value into a Python value (`read`) and back (`render`, used by the tests).
"""

from __future__ import annotations

import datetime as dt
import enum
import json
import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from decimal import Decimal
from functools import cached_property
from typing import Any

from stdsl.compiler import ir
from stdsl.compiler.automata.automaton import Automaton
from stdsl.compiler.automata.build import build_automaton
from stdsl.compiler.json_schema.to_ir import schema_to_ir
from stdsl.compiler.regex.parser import parse_regex
from stdsl.compiler.stc.bounding import bounded_by


class FieldType:
    """Base class of field types."""

    @property
    def free_text(self) -> bool:
        """Whether the value is free text that the compiler bounds by the literal that follows it."""
        return False

    def text_ir(self) -> ir.Node:
        """The bytes of a value when it stands alone in a template (its JSON, numbers kept finite)."""
        return schema_to_ir(self.schema(), zero_fractions=False)

    def schema(self) -> dict[str, Any]:
        """The JSON Schema of a value inside JSON (records, lists rendered as JSON, `json(...)`)."""
        raise NotImplementedError

    def read(self, text: str) -> Any:
        """The Python value of the template text of one value."""
        return json.loads(text)

    def render(self, value: Any) -> str:
        """The template text of a Python value (the inverse of `read`)."""
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))

    def from_json(self, value: Any) -> Any:
        """The Python value of this type's JSON form (records become model instances)."""
        return value

    @cached_property
    def automaton(self) -> Automaton:
        """The automaton of `text_ir` (used to check and read unions and adjacent fields)."""
        return build_automaton(self.text_ir())


@dataclass(eq=False)
class TextType(FieldType):
    """Free text: single line (`str`, `line`) or multi-line (`text`), length bounds in characters, or a regex."""

    min_length: int = 0
    max_length: int | None = None
    multiline: bool = False
    pattern: str | None = None

    @property
    def free_text(self) -> bool:
        """Text is bounded by whatever literal follows it."""
        return True

    def text_ir(self) -> ir.Node:
        if self.pattern is not None:
            return parse_regex(self.pattern)
        return ir.repeat(ir.any_char(exclude_newline=not self.multiline), self.min_length, self.max_length)

    def schema(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": "string"}
        if self.pattern is not None:
            from stdsl.compiler.json_schema.pydantic import rust_pattern_as_ecma

            out["pattern"] = rust_pattern_as_ecma(f"^(?:{self.pattern})$")
        if self.min_length:
            out["minLength"] = self.min_length
        if self.max_length is not None:
            out["maxLength"] = self.max_length
        return out

    def read(self, text: str) -> str:
        return text

    def render(self, value: Any) -> str:
        return str(value)


@dataclass(eq=False)
class IntType(FieldType):
    """A decimal integer, optionally in an inclusive range."""

    lo: int | None = None
    hi: int | None = None

    def schema(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": "integer"}
        if self.lo is not None:
            out["minimum"] = self.lo
        if self.hi is not None:
            out["maximum"] = self.hi
        return out

    def read(self, text: str) -> int:
        return int(text)

    def render(self, value: Any) -> str:
        return str(int(value))


@dataclass(eq=False)
class NumberType(FieldType):
    """A JSON number, optionally in an inclusive range."""

    lo: float | None = None
    hi: float | None = None

    def schema(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": "number"}
        if self.lo is not None:
            out["minimum"] = self.lo
        if self.hi is not None:
            out["maximum"] = self.hi
        return out

    def read(self, text: str) -> float:
        return float(text)

    def render(self, value: Any) -> str:
        """The first spelling of `value` the language accepts: JSON's, the plain decimal one, or the digits with
        the exponent moved into the mantissa (`85.32348e+99` where `8.532348e+100` has one exponent digit too
        many and the plain decimal too many integer digits)."""
        return next((text for text in number_spellings(float(value)) if self.automaton.accepts(text.encode("utf-8"))),
                    json.dumps(value))


def number_spellings(value: float) -> Iterator[str]:
    """Spellings of a finite float that read back as it, most usual first (made only as far as they are asked
    for): JSON's, the plain decimal (with and without `.0`), and the shortest digits with 1 to 20 of them before
    the point and the rest of the exponent after an `e`."""
    yield json.dumps(value)
    decimal = Decimal(repr(value))
    plain = format(decimal, "f")
    yield plain
    if plain.endswith(".0"):
        yield plain[:-2]
    sign, digits, exponent = decimal.normalize().as_tuple()
    assert isinstance(exponent, int)
    shown = "".join(map(str, digits))
    for whole in range(1, 21):
        mantissa = shown[:whole].ljust(whole, "0") + ("." + shown[whole:] if len(shown) > whole else "")
        power = exponent + len(shown) - whole
        for form in ("+d", "d"):
            for e in ("e", "E"):
                yield f"{'-' if sign else ''}{mantissa}{e}{power:{form}}"


@dataclass(eq=False)
class BoolType(FieldType):
    """`true` or `false`."""

    def schema(self) -> dict[str, Any]:
        return {"type": "boolean"}

    def read(self, text: str) -> bool:
        return text == "true"


_FORMAT_TYPES: dict[str, Any] = {"date": dt.date, "time": dt.time, "date-time": dt.datetime}


@dataclass(eq=False)
class FormatType(FieldType):
    """A date (`YYYY-MM-DD`), time or date-time (RFC 3339), written without quotes in a template."""

    format: str = "date"

    def schema(self) -> dict[str, Any]:
        """RFC 3339 less what Python's `datetime` cannot hold (year 0000, leap seconds)."""
        from stdsl.compiler.json_schema.pydantic import NO_LEAP_SECOND_DATETIME, NO_LEAP_SECOND_TIME, NOT_YEAR_ZERO

        pattern = {"date": NOT_YEAR_ZERO, "time": NO_LEAP_SECOND_TIME}.get(self.format, NO_LEAP_SECOND_DATETIME)
        return {"type": "string", "format": self.format, "pattern": pattern}

    def text_ir(self) -> ir.Node:
        node = schema_to_ir(self.schema(), zero_fractions=False)
        assert isinstance(node, ir.Seq) and node.items[0] == node.items[-1] == ir.literal('"')
        return ir.seq(*node.items[1:-1])

    def read(self, text: str) -> Any:
        kind = _FORMAT_TYPES[self.format]
        if kind is dt.date:
            return dt.date.fromisoformat(text)
        return kind.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))

    def render(self, value: Any) -> str:
        return value.isoformat() if hasattr(value, "isoformat") else str(value)

    def from_json(self, value: Any) -> Any:
        return self.read(value)


@dataclass(eq=False)
class EnumType(FieldType):
    """One of a fixed set of values; read back as the string or as a member of a Python `Enum`.

    `values` are the template texts (a string member as is, any other member as its JSON text);
    `json_values` the members' JSON values (the schema inside records), when they are not the texts.
    """

    values: tuple[str, ...] = ()
    enum_class: type[enum.Enum] | None = None
    json_values: tuple[Any, ...] = ()

    def text_ir(self) -> ir.Node:
        return ir.alt(*(ir.literal(v) for v in self.values))

    def schema(self) -> dict[str, Any]:
        return {"enum": list(self.json_values or self.values)}

    def read(self, text: str) -> Any:
        if self.enum_class is None:
            return text
        return list(self.enum_class)[self.values.index(text)]

    def render(self, value: Any) -> str:
        if self.enum_class is not None and isinstance(value, self.enum_class):
            return self.values[list(self.enum_class).index(value)]
        return str(value)

    def from_json(self, value: Any) -> Any:
        return self.enum_class(value) if self.enum_class is not None else value


def enum_texts(enum_class: type[enum.Enum]) -> tuple[tuple[str, ...], tuple[Any, ...]]:
    """Template texts and JSON values of an `Enum`'s members; ValueError for a member that is not a JSON scalar
    or two members written alike."""
    texts: list[str] = []
    values: list[Any] = []
    for member in enum_class:
        value = member.value
        if isinstance(value, str):
            text = value
        elif value is None or isinstance(value, (bool, int, float)):
            if isinstance(value, float) and not math.isfinite(value):
                raise ValueError(f"member {member.name} has the value {value}, which JSON cannot write")
            text = json.dumps(value)
        else:
            raise ValueError(f"member {member.name} has a {type(value).__name__} value; "
                             "an Enum field needs string, number, bool or None values")
        if text in texts:
            raise ValueError(f"members {list(enum_class)[texts.index(text)].name} and {member.name} "
                             f"are both written {text!r}")
        texts.append(text)
        values.append(value)
    return tuple(texts), tuple(values)


@dataclass(eq=False)
class ListType(FieldType):
    """`list[T](lo..hi, sep=", ")`: items separated by `sep` in a template, a JSON array inside JSON."""

    item: FieldType = field(default_factory=TextType)
    min_items: int = 0
    max_items: int | None = None
    sep: str = ", "

    @property
    def free_text(self) -> bool:
        """A list of free-text items is free text: it is bounded by what follows it like its items."""
        return self.item.free_text

    def item_ir(self) -> ir.Node:
        """The item language, bounded so that an item can never contain the separator."""
        return bounded_by(self.item, self.sep.encode("utf-8"), f"an item of list[{type(self.item).__name__}]")

    def text_ir(self) -> ir.Node:
        item = self.item_ir()
        rest = ir.seq(ir.literal(self.sep), item)
        tail_max = None if self.max_items is None else self.max_items - 1
        some = ir.seq(item, ir.repeat(rest, max(self.min_items - 1, 0), tail_max))
        return ir.alt(ir.EMPTY, some) if self.min_items == 0 else some

    def schema(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": "array", "items": self.item.schema()}
        if self.min_items:
            out["minItems"] = self.min_items
        if self.max_items is not None:
            out["maxItems"] = self.max_items
        return out

    def read(self, text: str) -> list[Any]:
        """Items split on `sep` (no item contains it); the empty text is no item unless at least one is required."""
        if not text and self.min_items == 0:
            return []
        return [self.item.read(part) for part in text.split(self.sep)]

    def render(self, value: Any) -> str:
        return self.sep.join(self.item.render(v) for v in value)

    def from_json(self, value: Any) -> Any:
        return [self.item.from_json(v) for v in value]


@dataclass(eq=False)
class RecordType(FieldType):
    """A record of named fields, written as a compact JSON object; read back as a Pydantic instance."""

    name: str = "Record"
    fields: dict[str, tuple[FieldType, bool]] = field(default_factory=dict)

    def schema(self) -> dict[str, Any]:
        return {
            "type": "object",
            "properties": {k: t.schema() for k, (t, _) in self.fields.items()},
            "required": [k for k, (_, optional) in self.fields.items() if not optional],
            "additionalProperties": False,
        }

    @cached_property
    def attribute_names(self) -> dict[str, str]:
        """JSON key → Python attribute name: the key itself, or a renamed one where Pydantic reserves the key
        (a leading underscore, the `model_` prefix, a `BaseModel` attribute)."""
        import pydantic

        names: dict[str, str] = {}
        for key in self.fields:
            name = key.lstrip("_") or "field"
            if name.startswith("model_") or hasattr(pydantic.BaseModel, name):
                name = "field_" + name
            while name in names.values() or (name != key and name in self.fields):
                name += "_"
            names[key] = name
        return names

    @cached_property
    def model(self) -> Any:
        """A Pydantic model class with this record's fields (built once); every field is aliased by its JSON key."""
        import pydantic

        spec = {
            self.attribute_names[k]: (Any, pydantic.Field(None if optional else ..., alias=k))
            for k, (_, optional) in self.fields.items()
        }
        config = pydantic.ConfigDict(populate_by_name=True, protected_namespaces=())
        return pydantic.create_model(self.name, __config__=config, **spec)  # type: ignore[call-overload]

    def read(self, text: str) -> Any:
        return self.from_json(json.loads(text))

    def render(self, value: Any) -> str:
        data = value.model_dump(exclude_none=True, by_alias=True) if hasattr(value, "model_dump") else dict(value)
        parts = []
        for key, (kind, _) in self.fields.items():
            if key in data:
                parts.append(json.dumps(key) + ":" + json_text(kind, data[key]))
        return "{" + ",".join(parts) + "}"

    def from_json(self, value: Any) -> Any:
        converted = {k: self.fields[k][0].from_json(v) for k, v in value.items()}
        return self.model(**converted)


@dataclass(eq=False)
class PydanticType(FieldType):
    """A Pydantic model class used as a field type: JSON in its own schema, read back validated."""

    model_class: Any = None

    def schema(self) -> dict[str, Any]:
        from stdsl.compiler.json_schema.pydantic import pydantic_schema

        return pydantic_schema(self.model_class)

    def read(self, text: str) -> Any:
        return self.model_class.model_validate_json(text)

    def render(self, value: Any) -> str:
        from stdsl.compiler.json_schema.order import dump_in_schema_order

        return dump_in_schema_order(value.model_dump(mode="json"), self.schema())

    def from_json(self, value: Any) -> Any:
        return self.model_class.model_validate(value)


@dataclass(eq=False)
class JsonType(FieldType):
    """`json(T)`: a value of T written as JSON even where T alone would be plain text."""

    inner: FieldType = field(default_factory=TextType)

    def schema(self) -> dict[str, Any]:
        return self.inner.schema()

    def read(self, text: str) -> Any:
        return self.inner.from_json(json.loads(text))

    def render(self, value: Any) -> str:
        return json_text(self.inner, value)

    def from_json(self, value: Any) -> Any:
        return self.inner.from_json(value)


@dataclass(eq=False)
class UnionType(FieldType):
    """One of several types; read back by the first option whose automaton accepts the text."""

    options: tuple[FieldType, ...] = ()

    def text_ir(self) -> ir.Node:
        return ir.alt(*(o.text_ir() for o in self.options))

    def schema(self) -> dict[str, Any]:
        return {"anyOf": [o.schema() for o in self.options]}

    def read(self, text: str) -> Any:
        data = text.encode("utf-8")
        for option in self.options:
            if option.automaton.accepts(data):
                return option.read(text)
        raise ValueError(f"{text!r} matches no option of the union")

    def render(self, value: Any) -> str:
        for option in self.options:
            try:
                text = option.render(value)
            except (ValueError, TypeError, AttributeError, KeyError):
                continue  # the value is not of this option's type
            if option.automaton.accepts(text.encode("utf-8")):
                return text
        raise ValueError(f"{value!r} fits no option of the union")


def json_text(kind: FieldType, value: Any) -> str:
    """Compact JSON of `value` as the type's schema lays it out (records in field order)."""
    if isinstance(kind, (RecordType, PydanticType)):
        return kind.render(value)
    if isinstance(kind, ListType):
        return "[" + ",".join(json_text(kind.item, v) for v in value) + "]"
    if isinstance(kind, JsonType):
        return json_text(kind.inner, value)
    if isinstance(value, enum.Enum):
        value = value.value
    if hasattr(value, "isoformat"):
        value = value.isoformat()
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
