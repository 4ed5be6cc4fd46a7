"""`ProgramResult`: the typed fields a program run read back from its output, with the text and decoding stats."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from stdsl.generation import Stats


class ProgramResult(Mapping[str, Any]):
    """A program's typed result: one attribute per field, plus `.text` and `.stats`; a read-only mapping."""

    def __init__(self, values: dict[str, Any], text: str, stats: Stats) -> None:
        self._values = values
        self.text = text
        self.stats = stats

    def __getattr__(self, name: str) -> Any:
        values = self.__dict__.get("_values", {})
        if name in values:
            return values[name]
        raise AttributeError(f"the program has no field {name!r} (fields: {', '.join(values)})")

    def __getitem__(self, key: str) -> Any:
        return self._values[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def to_dict(self) -> dict[str, Any]:
        """The field values as a plain dict (Pydantic instances dumped to dicts)."""
        return {k: v.model_dump(mode="json", by_alias=True) if hasattr(v, "model_dump") else v
                for k, v in self._values.items()}

    def __repr__(self) -> str:
        return f"ProgramResult({self._values!r})"
