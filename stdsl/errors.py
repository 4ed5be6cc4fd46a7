"""The errors stdsl raises: each says what went wrong and where (position, schema path, file:line:col)."""

from __future__ import annotations


class StdslError(Exception):
    """Base class of every error stdsl raises on purpose."""


class CompileError(StdslError):
    """A constraint could not be compiled, or cannot be enforced exactly and is refused."""


class RegexError(CompileError):
    """A malformed or unsupported regular expression; `position` is the 0-based offset in `pattern`."""

    def __init__(self, message: str, pattern: str, position: int) -> None:
        self.pattern = pattern
        self.position = position
        caret = " " * position + "^"
        super().__init__(f"{message} at position {position}\n  {pattern}\n  {caret}")


class SchemaError(CompileError):
    """A JSON Schema that is invalid or uses something that cannot be enforced exactly; `path` is a JSON pointer."""

    def __init__(self, message: str, path: str) -> None:
        self.message, self.path = message, path or "#"
        super().__init__(f"{message} (at schema path {self.path})")

    def relocated(self, where: str, below: str = "#") -> SchemaError:
        """The same refusal where the schema it names sits at `where` (a request field, a tool's parameters): the
        part of `path` past `below` follows `where`."""
        return SchemaError(self.message, where + (self.path[len(below):] if self.path.startswith(below) else self.path))


class StateBudgetError(CompileError):
    """Determinization exceeded its state budget (the constraint is too large to enforce as a DFA)."""


class EmptyLanguageError(CompileError):
    """The constraint admits no string at all."""


class BudgetError(StdslError):
    """No valid output fits in the requested `max_tokens` (reported before decoding starts)."""


class GenerationError(StdslError):
    """Decoding reached a configuration with no admissible token; no invalid output is returned."""


class UnspellableError(GenerationError):
    """The constraint forces text that the model's vocabulary cannot write (a byte with no token of its own):
    a fault of the constraint asked for, not of decoding."""


class ControlBudgetError(GenerationError):
    """The constraint's mask and advance work for one output ran past the engine's `max_control_seconds` of CPU: a
    fault of the constraint asked for (a grammar too costly to decode), not of decoding."""


class CompileTimeError(CompileError):
    """Compiling took longer than the time limit it was given (the constraint is refused, not half-built)."""


class OptionError(StdslError):
    """A decoding option or prompt that is not allowed; `argument` names it, the message says what is allowed."""

    def __init__(self, argument: str, message: str) -> None:
        self.argument = argument
        super().__init__(message)


class ContextLengthError(OptionError):
    """A prompt (`argument` "prompt") or a prompt and `max_tokens` ("max_tokens") past the model's context."""


class MissingExtraError(StdslError, ImportError):
    """An optional part of stdsl whose packages are not installed; `extra` names it, the message says the
    `pip install` to run (an ImportError too, so `except ImportError` around an optional import still works)."""

    def __init__(self, extra: str, message: str) -> None:
        self.extra = extra
        super().__init__(message)


class UnsupportedModelError(StdslError):
    """The model's layers keep a state the batch engine cannot slot by row (a sliding-window, rotating or recurrent
    cache): refused when the model is loaded or an engine is made for it, before any request."""


class Cancelled(StdslError):
    """The request was cancelled before it finished."""


class GrammarError(CompileError):
    """A grammar (Lark, GBNF or EBNF) that is malformed or uses what cannot be enforced exactly.

    `source` names the grammar (a file path, or "<grammar>"), `line` and `column` are 1-based.
    """

    def __init__(self, message: str, source: str = "<grammar>", line: int = 1, column: int = 1) -> None:
        self.source, self.line, self.column = source, line, column
        self.reason = message
        super().__init__(f"{source}:{line}:{column}: {message}")
