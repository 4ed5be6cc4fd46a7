"""`grammar("file.lark")`: a field whose text is a sentence of a grammar (Lark, GBNF or EBNF) read from a file.

The grammar is compiled by the grammar front end; a grammar without recursion becomes the field's DFA
and is bounded, like `str(/regex/)`, by the literal text that follows the field. A recursive grammar is
embedded (`pushdown.embedding`), bounded the same way body by body, and the program compiles to a pushdown.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from stdsl.compiler import ir
from stdsl.compiler.automata.automaton import Automaton
from stdsl.compiler.grammar import Grammar
from stdsl.compiler.grammar.lowering import lower_grammar
from stdsl.compiler.pushdown.embedding import grammar_leaf
from stdsl.compiler.source_files import FileAccess, SourceFileError
from stdsl.compiler.stc.syntax import Pos
from stdsl.compiler.stc.types import FieldType
from stdsl.errors import CompileError, CompileTimeError, GrammarError


def grammar_field(written: str, syntax: str, start: str | None, pos: Pos, files: FileAccess) -> GrammarType:
    """The field type of `grammar("FILE", syntax=..., start=...)`, its grammar compiled now so that a bad grammar
    is reported with its own file, line and column. The file is found under `files`: relative to the program
    file's folder (or the working directory for a program that is not a file) for a local user, inside the
    server's program directory for a client, or not at all."""
    what = f'grammar("{written}")'
    program = Path(pos.source)
    try:
        path = files.resolve(written, program.parent if program.is_file() else None, what)
    except SourceFileError as error:
        raise pos.error(error.message) from None
    shown = written if files.restricted else str(path)
    try:
        text = files.read(path, shown)
    except SourceFileError as error:
        raise pos.error(f"grammar file {shown}: {error.message}") from None
    try:
        grammar = Grammar(text, syntax=syntax, start=start, source=shown)
        lowered = lower_grammar(grammar)
    except CompileTimeError:
        raise
    except CompileError as error:
        if not files.restricted:
            raise
        where = f" (line {error.line}, column {error.column})" if isinstance(error, GrammarError) else ""
        raise pos.error(f"grammar file {written} does not compile{where}; the server quotes nothing of its "
                        "files") from None
    if isinstance(lowered, Automaton):
        return GrammarType(shown, lowered)
    return GrammarType(shown, None, grammar_leaf(lowered.grammar, f"grammar {written}"))


@dataclass(eq=False)
class GrammarType(FieldType):
    """Text in a grammar's language, written as is in the template (no quotes): the DFA of a regular grammar, or
    the embedded pushdown of a recursive one (`recursive`)."""

    path: str = ""
    dfa: Automaton | None = field(default=None)
    recursive: ir.EmbeddedGrammar | None = None

    @property
    def free_text(self) -> bool:
        """Bounded by the literal that follows, as `str(/regex/)` is."""
        return True

    def text_ir(self) -> ir.Node:
        if self.dfa is None:
            assert self.recursive is not None
            return self.recursive
        return ir.Embedded(self.dfa.transitions, self.dfa.accepting)

    def schema(self) -> dict:
        raise CompileError(f"the grammar field ({self.path}) stands in a template as text; it cannot be a value "
                           "inside JSON (a record, a list rendered as JSON, json(...))")

    def read(self, text: str) -> str:
        return text

    def render(self, value: object) -> str:
        return str(value)
