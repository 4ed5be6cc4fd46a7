"""Grammars as users write them (Lark in the llguidance / XGrammar dialect, GBNF, EBNF) compiled to byte machines.

`Grammar(text)` is accepted wherever a constraint is; `stdsl.compile(Grammar(...))` gives a DFA
`Constraint` when no rule recurses and a `PushdownConstraint` when one does (kind "grammar").
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

SYNTAXES = ("auto", "lark", "gbnf", "ebnf")


@dataclass(frozen=True)
class Grammar:
    """A context-free grammar constraint: `text` in `syntax` ("auto": a non-comment line with `::=` is GBNF/EBNF,
    else Lark, vLLM's rule), starting at rule `start` (None: `start` for Lark, `root` for GBNF/EBNF).

    `source` names the grammar in errors (a file path); `Grammar.from_file(path)` reads one.
    `special_tokens` are the tokenizer's special (and added) tokens as (text, id) pairs, which `<[id]>` needs
    and `<name>` is checked against (None: compiled without a tokenizer; `with_special_tokens` sets them).
    """

    text: str
    syntax: str = "auto"
    start: str | None = None
    source: str = "<grammar>"
    special_tokens: tuple[tuple[str, int], ...] | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.text, str):
            raise TypeError(f"Grammar text must be a str, got {type(self.text).__name__}")
        if self.syntax not in SYNTAXES:
            raise ValueError(f"Grammar syntax must be one of {', '.join(SYNTAXES)}, got {self.syntax!r}")

    def with_special_tokens(self, tokens: Mapping[str, int]) -> Grammar:
        """This grammar compiled for a tokenizer whose special (and added) tokens are `tokens` (text -> id)."""
        return replace(self, special_tokens=tuple(sorted((str(text), int(i)) for text, i in tokens.items())))

    @classmethod
    def from_file(cls, path: str | os.PathLike[str], syntax: str = "auto", start: str | None = None) -> Grammar:
        """The grammar in regular file `path` (UTF-8, at most 8 MiB), named by its path in errors; a missing file, a
        directory, a device or a byte that is not UTF-8 is a GrammarError naming the file."""
        from stdsl.compiler.source_files import FileAccess, SourceFileError
        from stdsl.errors import GrammarError

        try:
            text = FileAccess.local().read(Path(path), str(path))
        except SourceFileError as error:
            raise GrammarError(error.message, str(path), max(error.line, 1), max(error.column, 1)) from None
        return cls(text, syntax, start, str(path))


__all__ = ["Grammar", "SYNTAXES"]
