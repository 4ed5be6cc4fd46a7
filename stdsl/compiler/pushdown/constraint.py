"""A compiled recursive constraint: the pushdown grammar, its machine, and how to read the output back."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from stdsl.compiler.pushdown.grammar import PushdownGrammar
from stdsl.compiler.pushdown.machine import PushdownMachine
from stdsl.compiler.special_tokens import output_bytes


@dataclass
class PushdownConstraint:
    """A recursive constraint (nesting capped at `grammar.max_depth`); `machine` is shared by every request."""

    grammar: PushdownGrammar
    kind: str
    source: Any = None
    compile_seconds: float = 0.0
    model_class: Any = None
    special_tokens: tuple[str, ...] = ()
    """The special tokens the constraint uses (by their text), each spelled privately (`compiler.special_tokens`)."""
    strict: bool | None = None
    """For a JSON Schema: whether objects were closed to their declared members (`stdsl.compile`'s `strict`);
    None for other kinds."""
    machine: PushdownMachine = field(init=False)

    def __post_init__(self) -> None:
        self.machine = PushdownMachine(self.grammar)

    def __getstate__(self) -> dict[str, Any]:
        """Pickled without the machine (configurations met in this process; it holds closures): a server's
        compile worker sends the grammar, and the receiving process starts a machine of its own."""
        return {key: value for key, value in self.__dict__.items() if key != "machine"}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self.machine = PushdownMachine(self.grammar)

    @property
    def num_states(self) -> int:
        """States of all nonterminal DFAs together."""
        return self.grammar.num_states

    @property
    def nbytes(self) -> int:
        """Bytes the grammar tables and the machine's interned configurations hold now."""
        return self.machine.nbytes

    def accepts(self, data: bytes | str) -> bool:
        """Whether the whole of `data` is an output this constraint allows (text: each used special token's text
        read as that token; bytes: read as they are, special tokens in their private spelling).

        For a JSON Schema that is the language generation uses: with `strict` (the default) objects closed to
        their declared members, so a valid instance with undeclared members is refused; compile with
        `strict=False` to test the schema's exact language."""
        return self.machine.accepts(output_bytes(data, self.special_tokens))

    def parse(self, text: str) -> Any:
        """A validated Pydantic instance, parsed JSON for a schema constraint, else the text."""
        if self.model_class is not None:
            return self.model_class.model_validate_json(text)
        return json.loads(text) if self.kind == "json_schema" else text

    def __repr__(self) -> str:
        return f"PushdownConstraint({self.kind}, nonterminals={len(self.grammar.names)}, states={self.num_states})"
