"""What a stream reads as typed values, chosen by its constraint: JSON values at their paths (with partial Pydantic
instances), a `.stc` program's fields at their ends, or the whole text of any other constraint.

Every reader is fed the output text as it is decided and told once the constraint accepted the whole of it; a value
it yields is read exactly as the final result reads it, so the final value never contradicts it (a stream cut short
yields nothing it would not have yielded whole).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Annotated, Any, Protocol

from pydantic import TypeAdapter

from stdsl.compiler.stc.template import Hole, Template
from stdsl.compiler.stc.template import _ends_by_itself as ends_by_itself
from stdsl.compiler.stc.template import _first_accept as first_accept
from stdsl.runtime.stream_values.json_reader import JsonReader, StreamValue


class ValueReader(Protocol):
    """Reads typed values from an output as it grows."""

    def feed(self, text: str) -> list[StreamValue]:
        """The values decided by `text` (the next piece of the output)."""

    def finish(self) -> list[StreamValue]:
        """The values decided by the end of an output the constraint accepted."""


class JsonValues:
    """A JSON Schema's output: every value at its JSON path; for a Pydantic class, also the instance of the top-level
    fields complete so far (`complete=False`) and, at the end, the validated instance at path ()."""

    def __init__(self, model_class: Any = None, keys_may_repeat: bool = False) -> None:
        self._json = JsonReader(keys_may_repeat)
        self._model = model_class
        self._text = ""
        self._fields: dict[str, Any] = {}
        self._names = {(info.alias or name): name for name, info in model_class.model_fields.items()} \
            if model_class is not None else {}

    def feed(self, text: str) -> list[StreamValue]:
        self._text += text
        return self._typed(self._json.feed(text.encode("utf-8")))

    def finish(self) -> list[StreamValue]:
        return self._typed(self._json.finish())

    def _typed(self, events: list[StreamValue]) -> list[StreamValue]:
        if self._model is None:
            return events
        out: list[StreamValue] = []
        for event in events:
            out.append(event)
            if event.complete and event.path == ():
                out[-1] = StreamValue((), self._model.model_validate_json(self._text), end=event.end)
            elif event.complete and len(event.path) == 1 and event.path[0] in self._names:
                self._fields[self._names[str(event.path[0])]] = _field_value(self._model, self._names[
                    str(event.path[0])], event.value)
                out.append(StreamValue((), self._model.model_construct(**self._fields), complete=False, end=event.end))
        return out


def _field_value(model_class: Any, name: str, value: Any) -> Any:
    """A top-level field's JSON value read as the model reads it (its type, validators on the field included)."""
    info = model_class.model_fields[name]
    adapter: TypeAdapter[Any] = TypeAdapter(Annotated[info.annotation, info])  # type: ignore[arg-type]
    return adapter.validate_json(json.dumps(value))


class ProgramFields:
    """A `.stc` program's output: each field's typed value once its end is decided (the literal after it is all
    there, its own automaton accepts, or the output ended), read as `Template.read` reads the whole output."""

    def __init__(self, parts: list[str | Hole]) -> None:
        self._parts = parts
        self._text = ""
        self._index = 0
        self._at = 0
        self._sent: dict[str, Any] = {}

    def feed(self, text: str) -> list[StreamValue]:
        self._text += text
        return self._advance(ended=False)

    def finish(self) -> list[StreamValue]:
        return self._advance(ended=True)

    def _advance(self, ended: bool) -> list[StreamValue]:
        out: list[StreamValue] = []
        while self._index < len(self._parts):
            part = self._parts[self._index]
            if isinstance(part, str):
                if len(self._text) < self._at + len(part):
                    break
                self._at += len(part)
                self._index += 1
                continue
            rest = self._parts[self._index:]
            end = self._field_end(rest, ended)
            if end is None:
                break
            value = Template.read(rest[:1], self._text[self._at : end])[part.decl.name]
            out.append(StreamValue((part.decl.name,), value, end=len(self._text[:end].encode("utf-8"))))
            self._at = end
            self._index += 1
        return out

    def _field_end(self, rest: list[str | Hole], ended: bool) -> int | None:
        """Where the field first in `rest` ends in the text so far, found as `Template.read` finds it in the whole
        output (None: not decided yet)."""
        field, after = rest[0], (rest[1] if len(rest) > 1 else None)
        assert isinstance(field, Hole)
        if after is not None and (isinstance(after, Hole) or ends_by_itself(field)):
            try:
                end = self._at + first_accept(field.kind, self._text[self._at :])
            except ValueError:  # its automaton has not accepted yet
                return None
            return end if end < len(self._text) or ended else None  # a JSON number could still grow
        if after:
            found = self._text.find(after, self._at)
            return found if found >= 0 else None
        return len(self._text) if ended else None


class TextValue:
    """Any other constraint (a regex, a grammar, free text): the text so far, and at the end the value the
    constraint's parser reads from the whole of it."""

    def __init__(self, parse: Callable[[str], Any]) -> None:
        self._parse = parse
        self._text = ""

    def feed(self, text: str) -> list[StreamValue]:
        self._text += text
        return [StreamValue((), self._text, complete=False, end=len(self._text.encode("utf-8")))] if text else []

    def finish(self) -> list[StreamValue]:
        try:
            value = self._parse(self._text)
        except ValueError:  # the result's own reading fails too (a bare automaton's text that is not JSON)
            return []
        return [StreamValue((), value, end=len(self._text.encode("utf-8")))]


_TYPED = ("type", "enum", "const", "$ref", "anyOf", "oneOf", "allOf", "properties", "items", "prefixItems")
"""Keywords that say what a schema's values are; a schema with none of them admits any value, objects included."""


_SCHEMA_MAPS = ("properties", "$defs", "definitions", "dependentSchemas")
"""Keywords whose value maps names to schemas."""
_NOT_SCHEMAS = ("enum", "const", "required", "examples", "default", "dependentRequired", "not")
"""Keywords whose value is data, not a schema of the values admitted."""


def keys_may_repeat(schema: Any) -> bool:
    """Whether a (strict) schema admits an object with undeclared members, whose keys may then repeat: any
    `additionalProperties` or `patternProperties` that is not false, an object type without `properties`, or a
    part that admits any value. Conservative: unsure is yes (the reader then holds an object's members)."""
    if schema is True or schema == {}:
        return True
    if isinstance(schema, list):
        return any(keys_may_repeat(item) for item in schema)
    if not isinstance(schema, dict):
        return False
    if schema.get("additionalProperties", False) is not False or schema.get("patternProperties"):
        return True
    kinds = schema.get("type")
    if (kinds == "object" or (isinstance(kinds, list) and "object" in kinds)) and "properties" not in schema:
        return True
    if not any(keyword in schema for keyword in _TYPED):
        return True
    parts: list[Any] = []
    for key, value in schema.items():
        if key in _SCHEMA_MAPS and isinstance(value, dict):
            parts += value.values()
        elif key not in _NOT_SCHEMAS and isinstance(value, (dict, list)):
            parts.append(value)
    return any(keys_may_repeat(part) for part in parts)


def reader_for(compiled: Any) -> ValueReader:
    """The value reader of a compiled constraint (None: free text), reading as its `Generation.value` does (a bare
    automaton without a parser: as JSON)."""
    if compiled is None:
        return TextValue(lambda text: text)
    parts = getattr(compiled, "parts", None)
    if getattr(compiled, "kind", None) == "program" and parts is not None:
        return ProgramFields(parts)
    if getattr(compiled, "kind", None) == "json_schema":
        model_class = getattr(compiled, "model_class", None)
        schema = model_class.model_json_schema() if model_class is not None else getattr(compiled, "source", None)
        return JsonValues(model_class, getattr(compiled, "strict", None) is not True or keys_may_repeat(schema))
    return TextValue(getattr(compiled, "parse", None) or json.loads)
