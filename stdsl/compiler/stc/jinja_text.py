"""Fill `{{ ... }}` placeholders in Jinja2's sandbox; every Jinja error becomes a `ProgramError` at FILE:LINE:COL.

Jinja reports lines only, so the column is found in the template text: the placeholder that names
a missing argument, else the first tag on the reported line.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from contextvars import ContextVar
from typing import Any

from jinja2 import StrictUndefined, TemplateSyntaxError, UndefinedError
from jinja2.exceptions import SecurityError
from jinja2.runtime import Context
from jinja2.sandbox import ImmutableSandboxedEnvironment

from stdsl.compiler.deadline import check_deadline
from stdsl.compiler.stc.syntax import Pos, ProgramError
from stdsl.errors import CompileTimeError

_TAG = re.compile(r"\{\{|\{%|\{#")
_MAX_BYTES: ContextVar[int | None] = ContextVar("stdsl_render_max_bytes", default=None)
MAX_EXPONENT = 4096
"""The largest integer exponent `**` may take in a template (a huge power is a denial of service, not text)."""
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


class _DeadlineSandbox(ImmutableSandboxedEnvironment):
    """Jinja's immutable sandbox checking the compile deadline at every call, attribute and item lookup, so
    a template that loops for long (`range` is a call) is stopped by the time limit like the rest of a compile;
    `*`, `+` and `**` are checked before they run, so `"a" * 20000000` is refused before it takes memory."""

    intercepted_binops = frozenset({"*", "+", "**"})

    def call_binop(self, context: Context, operator: str, left: Any, right: Any) -> Any:
        check_deadline("a Jinja template")
        limit = _MAX_BYTES.get()
        if operator == "**" and isinstance(right, int) and isinstance(left, int) and abs(right) > MAX_EXPONENT:
            raise SecurityError(f"a power with an exponent above {MAX_EXPONENT} is not allowed in a template")
        if limit is not None:
            sized = [v for v in (left, right) if isinstance(v, (str, bytes, list, tuple))]
            count = next((v for v in (left, right) if isinstance(v, int) and not isinstance(v, bool)), None)
            if operator == "*" and sized and count is not None and len(sized[0]) * max(count, 0) > limit:
                raise SecurityError(f"the product would hold more than {limit} items, the rendering limit")
            if operator == "+" and len(sized) == 2 and len(sized[0]) + len(sized[1]) > limit:
                raise SecurityError(f"the sum would hold more than {limit} items, the rendering limit")
        return super().call_binop(context, operator, left, right)

    def call(self, context: Context, obj: Any, /, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
        check_deadline("a Jinja template")
        return super().call(context, obj, *args, **kwargs)

    def getattr(self, obj: Any, attribute: str) -> Any:
        check_deadline("a Jinja template")
        return super().getattr(obj, attribute)

    def getitem(self, obj: Any, argument: Any) -> Any:
        check_deadline("a Jinja template")
        return super().getitem(obj, argument)


_ENV = _DeadlineSandbox(undefined=StrictUndefined, keep_trailing_newline=True)


def render_text(template: str, args: Mapping[str, Any], start: Pos, max_bytes: int | None = None) -> str:
    """`template` (which begins at `start` in its source) filled from `args`; ProgramError on any Jinja error, on
    a filled text that is not text (a lone surrogate from an argument) and on one longer than `max_bytes` UTF-8
    bytes (checked as it is produced, and before a `*` or `+` builds a longer string); CompileTimeError past the
    compile time limit (checked between output chunks and in the sandbox's hooks)."""
    token = _MAX_BYTES.set(max_bytes)
    try:
        chunks, size = [], 0
        for chunk in _ENV.from_string(template).generate(**args):
            check_deadline("a Jinja template")
            size += len(chunk.encode("utf-8", "surrogatepass"))
            if max_bytes is not None and size > max_bytes:
                raise _located(template, start, None, None, f"the filled text is longer than {max_bytes} bytes, "
                               "the most a message may hold")
            chunks.append(chunk)
        text = "".join(chunks)
        surrogate = _LONE_SURROGATE.search(text)
        if surrogate is not None:
            raise _located(template, start, None, None, f"the filled text holds a lone surrogate "
                           f"U+{ord(surrogate.group()):04X}, which is not text (it has no UTF-8 encoding)")
        return text
    except (CompileTimeError, ProgramError):
        raise
    except TemplateSyntaxError as exc:
        raise _located(template, start, exc.lineno, None, f"Jinja syntax error: {exc.message}") from None
    except UndefinedError as exc:
        name = re.match(r"'([^']+)' is undefined", exc.message or "")
        message = f"{exc.message}; pass it as an argument" if name else f"Jinja error: {exc.message}"
        raise _located(template, start, _template_line(exc), name.group(1) if name else None, message) from None
    except Exception as exc:  # a runtime error inside an expression (1/0, a sandbox refusal, a bad filter)
        raise _located(template, start, _template_line(exc), None,
                       f"Jinja error: {type(exc).__name__}: {exc}") from None
    finally:
        _MAX_BYTES.reset(token)


def _template_line(exc: BaseException) -> int | None:
    """The template line Jinja's rewritten traceback points at (its frames are named `<template>`)."""
    line = None
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == "<template>":
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


def _located(template: str, start: Pos, line: int | None, name: str | None, message: str) -> ProgramError:
    """A ProgramError at the tag naming `name` (or the first tag on `line`, or the first tag) of `template`."""
    offset = None
    if name is not None:
        found = re.search(r"\{[{%][^}]*?\b" + re.escape(name) + r"\b", template)
        offset = found.start() if found else None
    if offset is None:
        line_start = 0
        if line is not None:
            for _ in range(line - 1):
                line_start = template.find("\n", line_start) + 1 if "\n" in template[line_start:] else line_start
        found = _TAG.search(template, line_start)
        offset = found.start() if found else line_start
    before = template[:offset]
    newlines = before.count("\n")
    column = (start.column + offset) if newlines == 0 else offset - before.rfind("\n")
    return ProgramError(message, start.source, start.line + newlines, column)
