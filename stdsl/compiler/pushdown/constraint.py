"""A compiled recursive constraint: the pushdown grammar, its machine, and how to read the output back."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

from stdsl.compiler import ir
from stdsl.compiler.automata.determinize import DEFAULT_MAX_STATES
from stdsl.compiler.json_schema.recursive import compile_recursive_schema, free_form_grammar
from stdsl.compiler.json_schema.to_ir import Whitespace
from stdsl.compiler.pushdown.grammar import MAX_DEPTH, PushdownGrammar
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


def compile_recursive(schema: dict, *, whitespace: Whitespace | None = None, max_states: int = DEFAULT_MAX_STATES,
                      max_depth: int = MAX_DEPTH, model_class: Any = None, outline: bool = False, strict: bool = True
                      ) -> PushdownConstraint:
    """Compile a JSON Schema with `$ref` cycles (of a Pydantic `model_class`, if given) to a pushdown constraint.

    With `outline`, container members are nonterminals too (for schemas too large for one DFA).
    A model's integers are written without a zero fraction (Pydantic reads `1.0` as a float).
    `strict` closes objects as `schema_to_ir` does.
    """
    began = time.perf_counter()
    grammar = compile_recursive_schema(schema, whitespace=whitespace, max_states=max_states, max_depth=max_depth,
                                       outline=outline, zero_fractions=model_class is None, strict=strict)
    return PushdownConstraint(grammar, "json_schema", schema, time.perf_counter() - began, model_class,
                              strict=strict)



def compile_free_form(schema: dict, *, whitespace: Whitespace | None = None, max_states: int = DEFAULT_MAX_STATES,
                      model_class: Any = None, outline: bool = False, strict: bool = True
                      ) -> PushdownConstraint | ir.Node:
    """A schema without reference cycles whose free-form values nest to any depth (calls of one nonterminal),
    or the schema's IR for a DFA when it has no free-form value (see `free_form_grammar`); `strict` closes
    objects as `schema_to_ir` does."""
    began = time.perf_counter()
    grammar = free_form_grammar(schema, whitespace=whitespace, max_states=max_states, outline=outline,
                                zero_fractions=model_class is None, strict=strict)
    if not isinstance(grammar, PushdownGrammar):
        return grammar
    return PushdownConstraint(grammar, "json_schema", schema, time.perf_counter() - began, model_class,
                              strict=strict)
