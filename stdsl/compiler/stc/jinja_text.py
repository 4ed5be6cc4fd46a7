"""Fill `{{ ... }}` placeholders in Jinja2's sandbox; every Jinja error becomes a `ProgramError` at FILE:LINE:COL.

Jinja reports lines only, so the column is found in the template text: the placeholder that names
a missing argument, else the first tag on the reported line.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from jinja2 import StrictUndefined, TemplateSyntaxError, UndefinedError
from jinja2.runtime import Context
from jinja2.sandbox import ImmutableSandboxedEnvironment

from stdsl.compiler.deadline import check_deadline
from stdsl.compiler.stc.syntax import Pos, ProgramError
from stdsl.errors import CompileTimeError

_TAG = re.compile(r"\{\{|\{%|\{#")
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


class _DeadlineSandbox(ImmutableSandboxedEnvironment):
    """Jinja's immutable sandbox checking the compile deadline at every call, attribute and item lookup, so
    a template that loops for long (`range` is a call) is stopped by the time limit like the rest of a compile."""

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


def render_text(template: str, args: Mapping[str, Any], start: Pos) -> str:
    """`template` (which begins at `start` in its source) filled from `args`; ProgramError on any Jinja error and
    on a filled text that is not text (a lone surrogate from an argument), CompileTimeError past the compile
    time limit (checked between output chunks and in the sandbox's hooks)."""
    try:
        chunks = []
        for chunk in _ENV.from_string(template).generate(**args):
            check_deadline("a Jinja template")
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
