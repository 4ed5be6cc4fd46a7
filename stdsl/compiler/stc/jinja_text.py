"""Fill `{{ ... }}` placeholders in Jinja2's sandbox; every Jinja error becomes a `ProgramError` at FILE:LINE:COL.

Jinja reports lines only, so the column is found in the template text: the placeholder that names
a missing argument, else the first tag on the reported line.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from contextvars import ContextVar
from typing import Any

from jinja2 import StrictUndefined, TemplateSyntaxError, UndefinedError
from jinja2.runtime import Context
from jinja2.sandbox import MAX_RANGE, ImmutableSandboxedEnvironment

from stdsl.compiler.deadline import check_deadline
from stdsl.compiler.stc.syntax import Pos, ProgramError
from stdsl.errors import CompileTimeError

_TAG = re.compile(r"\{\{|\{%|\{#")
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


_LIMIT: ContextVar[int | None] = ContextVar("stdsl_render_bytes", default=None)
_DIGITS = re.compile(r"\d+")


class _RenderTooLong(Exception):
    """A template expression whose result would pass the byte limit of the render in progress."""


def _size(value: Any) -> int | None:
    """Characters (of a str: at least a byte each) or items (of a sequence) in `value`, None for what is neither."""
    if isinstance(value, (str, bytes, list, tuple)):
        return len(value)
    return None


def _widest(values: tuple[Any, ...]) -> int:
    """The largest int among `values` and the digit runs of their strings (a width such as `%9999999d`)."""
    out = 0
    for value in values:
        if isinstance(value, int) and not isinstance(value, bool):
            out = max(out, abs(value))
        elif isinstance(value, str):
            out = max([out, *(int(d) if len(d) < 20 else 1 << 64 for d in _DIGITS.findall(value))])
        elif isinstance(value, (list, tuple)):
            out = max(out, _widest(tuple(value)))
    return out


def _check_size(size: int, what: str) -> None:
    """Refuse, before it is built, a value of `size` bytes or items past the current render's limit."""
    limit = _LIMIT.get()
    if limit is not None and size > limit:
        raise _RenderTooLong(f"{what} would make about {size} bytes, past the limit of {limit} bytes on rendered text")


def _check_text_call(name: str, value: Any, args: tuple[Any, ...]) -> None:
    """Refuse a str method or filter `name` on `value` whose result would pass the limit: widths, repeated
    separators, wrap strings and replacements are bounded from the arguments before the call."""
    size = _size(value) or 0
    longest = max((len(a) for a in args if isinstance(a, str)), default=0)
    if name == "replace" and len(args) >= 2:
        _check_size(size + (size + 1) * (_size(args[1]) or 0), "replace(...)")
    elif name == "join" and args:
        sep, items = (value, args[0]) if isinstance(value, str) else (args[0], value)
        count = len(items) if isinstance(items, (list, tuple, str, range)) else MAX_RANGE
        _check_size((_size(sep) or 0) * count, "join(...)")
        return
    elif name in ("format", "format_map") and isinstance(value, str):
        _check_size(_formatted(value, args), f"{name}(...)")
    elif name in ("indent", "expandtabs", "wordwrap"):
        _check_size(size * (1 + max(longest, _widest(args) if name != "wordwrap" else 0)), f"{name}(...)")
        if name == "wordwrap":
            return
    _check_size(_widest((value, *args)), f"{name}(...)")


class _DeadlineSandbox(ImmutableSandboxedEnvironment):
    """Jinja's immutable sandbox checking the compile deadline at every call, attribute and item lookup, so
    a template that loops for long (`range` is a call) is stopped by the time limit like the rest of a compile;
    under a byte limit, `*`, `+`, `**`, `%` and str methods whose results would pass it are refused unbuilt."""

    intercepted_binops = frozenset({"*", "+", "**", "%"})

    def call(self, context: Context, obj: Any, /, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
        check_deadline("a Jinja template")
        method = getattr(obj, "__wrapped__", obj)  # the sandbox wraps str.format and format_map
        if _LIMIT.get() is not None and isinstance(getattr(method, "__self__", None), str):
            _check_text_call(getattr(method, "__name__", ""), method.__self__, (*args, *kwargs.values()))
        return super().call(context, obj, *args, **kwargs)

    def call_binop(self, context: Context, operator: str, left: Any, right: Any) -> Any:
        check_deadline("a Jinja template")
        if _LIMIT.get() is not None:
            _check_binop(operator, left, right)
        return super().call_binop(context, operator, left, right)

    def getattr(self, obj: Any, attribute: str) -> Any:
        check_deadline("a Jinja template")
        return super().getattr(obj, attribute)

    def getitem(self, obj: Any, argument: Any) -> Any:
        check_deadline("a Jinja template")
        return super().getitem(obj, argument)


def _check_binop(operator: str, left: Any, right: Any) -> None:
    """Refuse `left operator right` whose result would pass the render's byte limit, from its operands' sizes."""
    sizes = (_size(left), _size(right))
    if operator == "*":
        for size, count in zip(sizes, (right, left)):
            if size is not None and isinstance(count, int):
                _check_size(size * count, "a repetition")
        if isinstance(left, int) and isinstance(right, int):
            _check_size((abs(left).bit_length() + abs(right).bit_length()) // 8, "a product")
    elif operator == "+" and None not in sizes:
        _check_size((sizes[0] or 0) + (sizes[1] or 0), "a concatenation")
    elif operator == "**" and isinstance(left, int) and isinstance(right, int) and right > 0:
        _check_size(abs(left).bit_length() * right // 8, "a power")
    elif operator == "%" and isinstance(left, str):
        _check_size(_formatted(left, (right,)), "a % format")


def _formatted(text: str, args: tuple[Any, ...]) -> int:
    """An upper bound (in bytes or items) on `text` formatted with `args`: each `%` or `{` may take the largest
    argument (or value of a tuple or mapping argument), padded to the widest width written."""
    values: list[Any] = []
    for arg in args:
        values += list(arg.values()) if isinstance(arg, dict) else list(arg) if isinstance(arg, tuple) else [arg]
    numbers = tuple(v for v in values if isinstance(v, int))
    largest = max([_widest((text, *numbers)), *(_size(v) or 0 for v in values)])
    return (_size(text) or 0) + (text.count("%") + text.count("{")) * largest


def _bounded_filter(name: str, function: Any) -> Any:
    """Jinja's filter `name` refusing, under a byte limit, a result past it (`_check_text_call`)."""
    passes_context = hasattr(function, "jinja_pass_arg")

    @functools.wraps(function)
    def bounded(*args: Any, **kwargs: Any) -> Any:
        if _LIMIT.get() is not None:
            value, *rest = args[1:] if passes_context else args
            _check_text_call(name, value, (*rest, *kwargs.values()))
        return function(*args, **kwargs)

    return bounded


def _bounded_value(value: Any) -> Any:
    """A placeholder's value, refused under a byte limit when its text would pass it: lists of shared big strings
    (`[s, s, s]` nested) are small to build but huge to print, so their strings and items are summed first."""
    limit = _LIMIT.get()
    if limit is None:
        return value
    total, stack = 0, [value]
    while stack and total <= limit:
        item = stack.pop()
        if isinstance(item, (str, bytes)):
            total += len(item)
        elif isinstance(item, (list, tuple, set, frozenset, dict)):
            total += len(item)
            stack.extend(item.items() if isinstance(item, dict) else item)
        else:
            total += 1
    _check_size(total, "a placeholder's value")
    return value


_ENV = _DeadlineSandbox(undefined=StrictUndefined, keep_trailing_newline=True, finalize=_bounded_value)
_ENV.filters.update({name: _bounded_filter(name, _ENV.filters[name])
                     for name in ("center", "format", "indent", "join", "replace", "wordwrap")})


def expression_env() -> ImmutableSandboxedEnvironment:
    """The sandboxed environment templates are filled in (steps parse and evaluate their expressions with it)."""
    return _ENV


def evaluate(text: str, scope: Mapping[str, Any], start: Pos) -> Any:
    """The value of the Jinja expression `text` (which begins at `start`) over `scope`; ProgramError at `start` on
    any error, naming it (a missing name, a sandbox refusal, an exception of the expression)."""
    try:
        return _ENV.compile_expression(text, undefined_to_none=False)(**scope)
    except (CompileTimeError, ProgramError):
        raise
    except TemplateSyntaxError as exc:
        raise start.error(f"bad expression {text!r}: {exc.message}") from None
    except UndefinedError as exc:
        raise start.error(f"{text}: {exc.message}") from None
    except Exception as exc:  # a runtime error inside the expression (1/0, a sandbox refusal)
        raise start.error(f"{text}: {type(exc).__name__}: {exc}") from None


def render_text(template: str, args: Mapping[str, Any], start: Pos, max_bytes: int | None = None) -> str:
    """`template` (which begins at `start` in its source) filled from `args`; ProgramError on any Jinja error, on a
    filled text that is not text (a lone surrogate from an argument) and on one past `max_bytes` UTF-8 bytes (None:
    no limit; counted as chunks come, and large `*`, `+`, widths and joins refused before they are built),
    CompileTimeError past the compile time limit (checked between output chunks and in the sandbox's hooks)."""
    token = _LIMIT.set(max_bytes)
    try:
        chunks = []
        size = 0
        for chunk in _ENV.from_string(template).generate(**args):
            check_deadline("a Jinja template")
            size += len(chunk.encode("utf-8", "surrogatepass")) if max_bytes is not None else 0
            if max_bytes is not None and size > max_bytes:
                raise locate_in_template(template, start, None, None, f"the filled text passes the limit of "
                                         f"{max_bytes} bytes on rendered text")
            chunks.append(chunk)
        text = "".join(chunks)
        surrogate = _LONE_SURROGATE.search(text)
        if surrogate is not None:
            raise locate_in_template(template, start, None, None, f"the filled text holds a lone surrogate "
                           f"U+{ord(surrogate.group()):04X}, which is not text (it has no UTF-8 encoding)")
        return text
    except (CompileTimeError, ProgramError):
        raise
    except _RenderTooLong as exc:
        raise locate_in_template(template, start, _template_line(exc), None, str(exc)) from None
    except TemplateSyntaxError as exc:
        raise locate_in_template(template, start, exc.lineno, None, f"Jinja syntax error: {exc.message}") from None
    except UndefinedError as exc:
        name = re.match(r"'([^']+)' is undefined", exc.message or "")
        message = f"{exc.message}; pass it as an argument" if name else f"Jinja error: {exc.message}"
        raise locate_in_template(template, start, _template_line(exc), name.group(1) if name else None,
                                 message) from None
    except Exception as exc:  # a runtime error inside an expression (1/0, a sandbox refusal, a bad filter)
        raise locate_in_template(template, start, _template_line(exc), None,
                       f"Jinja error: {type(exc).__name__}: {exc}") from None
    finally:
        _LIMIT.reset(token)


def _template_line(exc: BaseException) -> int | None:
    """The template line Jinja's rewritten traceback points at (its frames are named `<template>`)."""
    line = None
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == "<template>":
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


def locate_in_template(template: str, start: Pos, line: int | None, name: str | None,
                       message: str) -> ProgramError:
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
