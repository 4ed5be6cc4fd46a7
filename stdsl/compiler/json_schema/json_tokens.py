"""JSON's punctuation with the chosen whitespace: the `Whitespace` option and the token nodes every JSON lowering
(schemas, free-form values, tool arguments) writes its gaps with."""

from __future__ import annotations

from dataclasses import dataclass

from stdsl.compiler import ir
from stdsl.compiler.ir import Node


@dataclass(frozen=True)
class Whitespace:
    """Bounded optional whitespace: up to `max_run` of `chars` in every gap between tokens (and around the value),
    and the item and key `separators` written exactly, as `json.dumps(separators=...)` takes them (`JSON_DUMPS`:
    its default `", "` and `": "`, the spelling chat templates' `tojson` renders)."""

    max_run: int = 2
    chars: str = " \n\t\r"
    separators: tuple[str, str] = (",", ":")

    def __post_init__(self) -> None:
        if self.max_run < 0 or not self.chars or any(c not in " \n\t\r" for c in self.chars):
            raise ValueError("Whitespace needs max_run >= 0 and chars drawn from space, \\n, \\t, \\r")
        item, key = self.separators
        if item.strip(" \n\t\r") != "," or key.strip(" \n\t\r") != ":":
            raise ValueError(f"Whitespace separators must be ',' and ':' with JSON whitespace around, "
                             f"got {self.separators!r}")


JSON_DUMPS = Whitespace(max_run=0, separators=(", ", ": "))


class JsonTokens:
    """The punctuation of JSON with the chosen whitespace in each gap."""

    def __init__(self, whitespace: Whitespace | None) -> None:
        if whitespace is None or whitespace.max_run == 0:
            self.ws: Node = ir.EMPTY
        else:
            self.ws = ir.repeat(ir.byte_set((ord(c), ord(c)) for c in whitespace.chars), 0, whitespace.max_run)
        ws = self.ws
        item, key = whitespace.separators if whitespace is not None else (",", ":")
        self.comma = ir.seq(ws, ir.literal(item), ws)
        self.colon = ir.seq(ws, ir.literal(key), ws)
        self.open_object, self.close_object = ir.seq(ir.literal("{"), ws), ir.seq(ws, ir.literal("}"))
        self.open_array, self.close_array = ir.seq(ir.literal("["), ws), ir.seq(ws, ir.literal("]"))
        self.empty_object = ir.seq(ir.literal("{"), ws, ir.literal("}"))
        self.empty_array = ir.seq(ir.literal("["), ws, ir.literal("]"))
