"""A request body read into its typed request before any engine work: size, JSON, text, numbers and fields checked.

The one place every body passes: past `max_body_bytes` it is a 413 before anything is parsed; JSON
that nests too deeply, an integer too long, a number that is not finite, text that is not valid
Unicode (a lone surrogate) or a field this server cannot honour is a 400 naming the field (and the
offset in the text); then the body's Pydantic model types it.  The checks are generic over the JSON,
so a new request field is covered without code of its own; `UNSUPPORTED_FIELDS` lists the refused ones.
"""

from __future__ import annotations

import asyncio
import json
import math
import re
from collections.abc import Sequence
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from starlette.requests import Request

from stdsl.server.openai_api.errors import RequestError
from stdsl.server.openai_api.protocol import ChatCompletionRequest, CompletionRequest

MAX_DEPTH = 128
MAX_INT_DIGITS = 40
UNSUPPORTED_FIELDS = {
    "logit_bias": "logit_bias is not supported by this server",
    "functions": "functions (the deprecated form of tools) is not supported by this server; use tools",
    "function_call": "function_call (the deprecated form of tool_choice) is not supported by this server; "
                     "use tools and tool_choice",
}
_SURROGATE = re.compile("[\ud800-\udfff]")

Body = TypeVar("Body", bound=BaseModel)


class _BadNumber:
    """A number of the body kept as its text, refused once the walk knows which field holds it."""

    def __init__(self, text: str, why: str) -> None:
        self.text = text if len(text) <= 24 else f"{text[:12]}...{text[-8:]}"
        self.why = why


def _parse_int(text: str) -> int | _BadNumber:
    digits = len(text.lstrip("-"))
    if digits > MAX_INT_DIGITS:
        return _BadNumber(text, f"an integer of {digits} digits (at most {MAX_INT_DIGITS})")
    return int(text)


def _parse_float(text: str) -> float | _BadNumber:
    value = float(text)
    return value if math.isfinite(value) else _BadNumber(text, "a number that is not finite")


def _parse_constant(text: str) -> _BadNumber:
    return _BadNumber(text, f"{text}, which is not JSON")


def field_path(location: Sequence[Any]) -> str:
    """A field's location as a client writes it: `messages[0].content`."""
    out = ""
    for part in location:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            name = str(part).encode("utf-8", "backslashreplace").decode("utf-8")
            out += f".{name}" if out else name
    return out


def _refuse(location: Sequence[Any], problem: str, code: str = "invalid_value") -> RequestError:
    param = field_path(location) or None
    return RequestError(f"{param}: {problem}" if param else problem, param=param, code=code)


def _text_problem(text: str) -> str | None:
    found = _SURROGATE.search(text)
    if found is None:
        return None
    return f"not valid Unicode: a lone surrogate U+{ord(found.group()):04X} at offset {found.start()}"


def check_json(value: Any) -> None:
    """Refuse the first deep nest, bad number or invalid text in `value` (iteratively: no recursion limit)."""
    stack: list[tuple[Any, tuple[Any, ...]]] = [(value, ())]
    while stack:
        item, location = stack.pop()
        if len(location) > MAX_DEPTH:
            raise _refuse(location[:MAX_DEPTH], f"the body nests deeper than {MAX_DEPTH} levels")
        if isinstance(item, str):
            problem = _text_problem(item)
            if problem is not None:
                raise _refuse(location, problem)
        elif isinstance(item, _BadNumber):
            raise _refuse(location, f"{item.text} is {item.why}")
        elif isinstance(item, dict):
            for key, member in reversed(item.items()):
                problem = _text_problem(key)
                if problem is not None:
                    raise _refuse(location, f"a member name is {problem}")
                stack.append((member, (*location, key)))
        elif isinstance(item, list):
            stack.extend((member, (*location, i)) for i, member in reversed(list(enumerate(item))))


def check_fields(body: Any, model: type[BaseModel]) -> None:
    """Refuse the fields that would change the output but that this server cannot honour, and the fields of the
    other endpoint (`messages` or `tools` sent to /v1/completions), which `model` would otherwise ignore."""
    if not isinstance(body, dict):
        return
    for name, message in UNSUPPORTED_FIELDS.items():
        if body.get(name) not in (None, {}, []):
            raise RequestError(message, param=name, code="unsupported_parameter")
    for name in sorted(_other_endpoint_fields(model)):
        if body.get(name) not in (None, False, "", {}, []):
            raise RequestError(f"{name} is not a field of this endpoint (it belongs to the other completions "
                               "endpoint)", param=name, code="unsupported_parameter")


def _other_endpoint_fields(model: type[BaseModel]) -> set[str]:
    """Fields that the other completions endpoint's request declares and `model` does not."""
    if model not in (ChatCompletionRequest, CompletionRequest):
        return set()
    declared = set(ChatCompletionRequest.model_fields) | set(CompletionRequest.model_fields)
    return declared - set(model.model_fields)


def parse_body(raw: bytes, model: type[Body]) -> Body:
    """The typed request of `raw` JSON, or a 400 naming what is wrong and where."""
    try:
        data = json.loads(raw, parse_int=_parse_int, parse_float=_parse_float, parse_constant=_parse_constant)
    except RecursionError:
        raise RequestError(f"the body nests deeper than {MAX_DEPTH} levels", code="invalid_json") from None
    except ValueError as error:
        raise RequestError(f"the body is not valid JSON: {error}", code="invalid_json") from None
    check_json(data)
    check_fields(data, model)
    try:
        return model.model_validate(data)
    except ValidationError as error:
        raise validation_error(error.errors(include_url=False)) from None


def validation_error(errors: Sequence[Any]) -> RequestError:
    """A body that does not fit its model: a 400 naming the first offending field."""
    first = errors[0] if errors else {}
    location = [p for p in first.get("loc", ()) if p != "body"]
    if first.get("type") == "json_invalid":
        return RequestError(f"the body is not valid JSON: {first.get('msg')}", code="invalid_json")
    return _refuse(location, str(first.get("msg", "invalid request body")))


async def read_body(request: Request, limit: int) -> bytes:
    """The raw body, refused with a 413 as soon as it is known to pass `limit` bytes (before reading it all)."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise too_large(int(declared), limit)
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise too_large(size, limit)
        chunks.append(chunk)
    return b"".join(chunks)


def too_large(size: int, limit: int) -> RequestError:
    """The 413 for a body of at least `size` bytes."""
    return RequestError(f"the request body has at least {size} bytes; this server takes at most {limit} "
                        "(--max-body-bytes)", status=413, code="body_too_large")


async def read_request(request: Request, model: type[Body], limit: int) -> Body:
    """Read, check and type the body of `request` (parsed off the event loop, so a big body stalls no one)."""
    raw = await read_body(request, limit)
    return await asyncio.to_thread(parse_body, raw, model)
