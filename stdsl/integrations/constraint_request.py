"""The constraint spec an engine request carries to a stdsl processor: read, checked field by field, compiled once.

A spec is the JSON object of `stcon serve` (`{"kind": "json_schema", "schema": ...}`, `regex`, `choice`,
`program`, `tools`, `json_object`) or a grammar (`{"kind": "grammar", "grammar": TEXT, "syntax": "auto"}`).
It arrives from a client (vLLM's `vllm_xargs` as JSON text, or `SamplingParams.extra_args` as a mapping),
so every malformed spec is an `OptionError` naming the field: JSON nested past `MAX_DEPTH` (checked without
recursion), text that is not valid Unicode, a missing or unknown key, a value of the wrong type.  A checked spec
compiles as the server compiles its own (`stdsl.compiler.constraint_spec`); the compiled constraints are entries
of the process's cache registry (`stdsl.caches`), by the spec's canonical text.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from stdsl.caches import CacheKind
from stdsl.compiler.constraint import compile as compile_constraint
from stdsl.compiler.constraint_spec import build_constraint, canonical_text
from stdsl.compiler.grammar import SYNTAXES, Grammar
from stdsl.errors import CompileError, OptionError, StdslError

FIELD = "stdsl"
MAX_DEPTH = 128
MAX_SPEC_CHARS = 4 * 1024 * 1024
COMPILE_SECONDS = 60.0
MAX_COMPILED = 64
_COMPILED: CacheKind[Any] = CacheKind("integration constraints", max_entries=MAX_COMPILED)
_SURROGATE = re.compile("[\ud800-\udfff]")

_REQUIRED = object()
_KINDS: dict[str, dict[str, Any]] = {
    "json_schema": {"schema": _REQUIRED, "strict": True},
    "json_object": {},
    "regex": {"pattern": _REQUIRED},
    "choice": {"choices": _REQUIRED},
    "program": {"source": _REQUIRED, "arguments": {}},
    "tools": {"format": _REQUIRED, "tools": _REQUIRED, "choice": "auto", "parallel": True, "content": None},
    "grammar": {"grammar": _REQUIRED, "syntax": "auto", "start": None},
}
_TYPES: dict[str, tuple[tuple[type, ...], str]] = {
    "schema": ((dict, bool), "a JSON Schema (an object or a boolean)"),
    "strict": ((bool,), "a boolean"),
    "pattern": ((str,), "a string (a regular expression)"),
    "choices": ((list,), "a non-empty list of strings"),
    "source": ((str,), "a string (a .stc program)"),
    "arguments": ((dict,), "an object (the program's arguments by name)"),
    "format": ((str,), "a string (a tool-call format's name)"),
    "tools": ((list,), "a list of {\"name\": string, \"parameters\": object, \"strict\": boolean (optional)}"),
    "choice": ((str,), "a string (\"auto\", \"none\", \"required\" or a tool's name)"),
    "parallel": ((bool,), "a boolean"),
    "content": ((dict, type(None)), "a constraint spec object or null"),
    "grammar": ((str,), "a string (the grammar's text)"),
    "syntax": ((str,), f"one of {', '.join(SYNTAXES)}"),
    "start": ((str, type(None)), "a rule name or null"),
}


def _refuse(path: str, problem: str) -> OptionError:
    """The error for the spec's field at `path` (".choices[1]"; "" for the whole spec)."""
    return OptionError(f"{FIELD}{path}", f"{path[1:]}: {problem}" if path else problem)


def _describe(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False) if not isinstance(value, str) else repr(value)
    return f"{type(value).__name__} {text if len(text) <= 40 else text[:37] + '...'}"


def _check_json(value: Any) -> None:
    """Refuse nesting past MAX_DEPTH and text that is not valid Unicode, iteratively (no recursion limit)."""
    stack: list[tuple[Any, str, int]] = [(value, "", 0)]
    while stack:
        item, path, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise _refuse(path, f"the spec nests deeper than {MAX_DEPTH} levels")
        if isinstance(item, str):
            found = _SURROGATE.search(item)
            if found is not None:
                raise _refuse(path, f"not valid Unicode: a lone surrogate U+{ord(found.group()):04X} at offset "
                                    f"{found.start()}")
        elif isinstance(item, Mapping):
            for key, member in item.items():
                if not isinstance(key, str) or _SURROGATE.search(key):
                    raise _refuse(path, f"member name {key!r} is not a valid Unicode string")
                stack.append((member, f"{path}.{key}", depth + 1))
        elif isinstance(item, list | tuple):
            stack.extend((member, f"{path}[{i}]", depth + 1) for i, member in enumerate(item))


def parse_spec(raw: Any) -> dict[str, Any]:
    """The checked spec of `raw` (JSON text or a mapping), defaults filled in; OptionError naming what is wrong."""
    if isinstance(raw, bytes):
        try:
            raw = raw.decode("utf-8")
        except UnicodeDecodeError as error:
            raise _refuse("", f"not valid UTF-8 at byte {error.start}") from None
    if isinstance(raw, str):
        if len(raw) > MAX_SPEC_CHARS:
            raise _refuse("", f"the spec is {len(raw)} characters long (at most {MAX_SPEC_CHARS})")
        try:
            raw = json.loads(raw)
        except RecursionError:
            raise _refuse("", f"the spec nests deeper than {MAX_DEPTH} levels") from None
        except ValueError as error:
            raise _refuse("", f"not valid JSON: {error}") from None
    _check_json(raw)
    return _checked(raw, "")


def _checked(spec: Any, path: str) -> dict[str, Any]:
    """`spec` checked against its kind's fields (types, required keys, no unknown key), with defaults filled."""
    if not isinstance(spec, Mapping):
        raise _refuse(path, f"must be a constraint spec object with a 'kind', got {_describe(spec)}")
    kind = spec.get("kind")
    if not isinstance(kind, str) or kind not in _KINDS:
        known = ", ".join(_KINDS)
        raise _refuse(f"{path}.kind", f"{'missing' if kind is None else f'unknown kind {kind!r}'}; one of {known}")
    fields = _KINDS[kind]
    unknown = sorted(set(spec) - set(fields) - {"kind"})
    if unknown:
        raise _refuse(path, f"unknown key {unknown[0]!r} for kind {kind!r} (its keys: kind, {', '.join(fields)})")
    out: dict[str, Any] = {"kind": kind}
    for name, default in fields.items():
        if name not in spec:
            if default is _REQUIRED:
                raise _refuse(path, f"missing key {name!r}: kind {kind!r} needs {name} ({_TYPES[name][1]})")
            out[name] = default
            continue
        value = spec[name]
        types, wanted = _TYPES[name]
        if not isinstance(value, types):
            raise _refuse(f"{path}.{name}", f"must be {wanted}, got {_describe(value)}")
        out[name] = value
    _check_values(out, path)
    return out


def _check_values(spec: dict[str, Any], path: str) -> None:
    """The checks past a field's type: list members, allowed words, a nested content spec."""
    kind = spec["kind"]
    if kind == "choice":
        choices = spec["choices"]
        if not choices:
            raise _refuse(f"{path}.choices", "must be a non-empty list of strings, got an empty list")
        for i, choice in enumerate(choices):
            if not isinstance(choice, str):
                raise _refuse(f"{path}.choices[{i}]", f"must be a string, got {_describe(choice)}")
    elif kind == "grammar" and spec["syntax"] not in SYNTAXES:
        raise _refuse(f"{path}.syntax", f"must be one of {', '.join(SYNTAXES)}, got {spec['syntax']!r}")
    elif kind == "tools":
        for i, tool in enumerate(spec["tools"]):
            where = f"{path}.tools[{i}]"
            if not isinstance(tool, Mapping) or not {"name", "parameters"} <= set(tool) <= {"name", "parameters",
                                                                                          "strict"}:
                raise _refuse(where, f"must be {{\"name\": string, \"parameters\": object, \"strict\": boolean "
                                     f"(optional)}}, got {_describe(tool)}")
            if not isinstance(tool["name"], str) or not isinstance(tool["parameters"], Mapping):
                raise _refuse(where, "needs a string 'name' and an object 'parameters'")
            if not isinstance(tool.get("strict", True), bool):
                raise _refuse(f"{where}.strict", f"must be a boolean, got {_describe(tool['strict'])}")
        if spec["content"] is not None:
            spec["content"] = _checked(spec["content"], f"{path}.content")


def _build(spec: Mapping[str, Any]) -> Any:
    """Compile a checked spec within COMPILE_SECONDS (a grammar with its start rule here, the other kinds as the
    server compiles them)."""
    if spec["kind"] == "grammar":
        grammar = Grammar(spec["grammar"], spec["syntax"], spec["start"], f"{FIELD}.grammar")
        return compile_constraint(grammar, max_seconds=COMPILE_SECONDS)
    return build_constraint(spec, COMPILE_SECONDS)


def compiled_constraint(spec: Mapping[str, Any]) -> Any:
    """The compiled constraint of a checked spec, kept by its canonical text (the last MAX_COMPILED used).

    Anything the compiler raises that is not a StdslError becomes a CompileError naming it, never a crash.
    """
    return _COMPILED.get((), lambda: _compiled(spec), (canonical_text(spec),))


def _compiled(spec: Mapping[str, Any]) -> Any:
    try:
        return _build(spec)
    except StdslError:
        raise
    except RecursionError:
        raise CompileError("the constraint nests too deeply to compile") from None
    except (ValueError, TypeError, KeyError) as error:
        reason = error.args[0] if len(error.args) == 1 else error
        raise CompileError(f"cannot compile this constraint: {reason}") from None
