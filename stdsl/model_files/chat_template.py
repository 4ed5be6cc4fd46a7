"""Render a chat template (Jinja2, as Hugging Face writes them) in Jinja2's immutable sandbox."""
from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from functools import lru_cache
from typing import Any, NoReturn

from jinja2 import TemplateError
from jinja2.sandbox import ImmutableSandboxedEnvironment

from stdsl.errors import StdslError


class ChatTemplateError(StdslError):
    """A chat template failed to compile or raised while rendering."""


def _raise_exception(message: str) -> NoReturn:
    raise ChatTemplateError(f"chat template: {message}")


def _strftime_now(fmt: str) -> str:
    return datetime.now().strftime(fmt)


def _tojson(value: Any, ensure_ascii: bool = False, indent: int | None = None,
            separators: tuple[str, str] | None = None, sort_keys: bool = False) -> str:
    """`tojson` as Hugging Face templates expect it (json.dumps: keys in their order, `", "`/`": "`, no HTML
    escapes), not Jinja's HTML-safe one that sorts keys and writes `<` as `\\u003c`."""
    return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


@lru_cache(maxsize=16)
def _compile(template: str) -> Any:
    environment = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                                extensions=["jinja2.ext.loopcontrols"])
    environment.globals["raise_exception"] = _raise_exception
    environment.globals["strftime_now"] = _strftime_now
    environment.filters["tojson"] = _tojson
    try:
        return environment.from_string(template)
    except TemplateError as error:
        raise ChatTemplateError(f"chat template does not compile: {error}") from error


def render_chat_template(
    template: str,
    messages: Sequence[Mapping[str, Any]],
    *,
    add_generation_prompt: bool = True,
    bos_token: str = "",
    eos_token: str = "",
    **variables: Any,
) -> str:
    """Render `messages` (dicts with role/content) through `template`; untrusted templates stay sandboxed."""
    if isinstance(messages, (str, bytes)) or not all(isinstance(m, Mapping) for m in messages):
        raise ChatTemplateError("messages must be a list of {'role': ..., 'content': ...} mappings")
    try:
        return _compile(template).render(
            messages=[dict(m) for m in messages],
            add_generation_prompt=add_generation_prompt,
            bos_token=bos_token,
            eos_token=eos_token,
            **variables,
        )
    except ChatTemplateError:
        raise
    except TemplateError as error:
        raise ChatTemplateError(f"chat template failed to render: {error}") from error
