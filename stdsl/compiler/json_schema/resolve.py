"""JSON Schema keyword checking and `$ref` resolution (shared by compiler and dumper; exact `allOf` merging is
`schema_merge.py`).

`flatten(schema, path, ctx)` turns one schema into a single dict of supported keywords with
`$ref`, `allOf`, `const`, `not`, `oneOf`, `if`/`then`/`else` and `dependentSchemas` folded away
(`$ref` siblings are an `allOf`; the logic keywords become exact `anyOf`s and negations, see
`logic/keywords.py`); what cannot be expressed exactly raises SchemaError.  The folding itself lives in
`flatten.py`, above `logic/keywords.py`; the context carries it here.
"""

from __future__ import annotations

import json
import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from decimal import Decimal
from typing import Any, NamedTuple, Protocol
from urllib.parse import unquote

from stdsl.errors import SchemaError

Schema = dict | bool
TYPES = ("null", "boolean", "object", "array", "number", "string", "integer")
KINDS = ("null", "boolean", "object", "array", "string", "integer", "fraction")
ANNOTATIONS = frozenset({
    "title", "description", "default", "examples", "$schema", "$id", "$comment", "deprecated", "readOnly",
    "writeOnly", "contentMediaType", "contentEncoding", "contentSchema", "$anchor", "$dynamicAnchor",
    "$vocabulary", "$defs", "definitions", "discriminator"})
SUPPORTED = frozenset({
    "type", "enum", "const", "properties", "required", "additionalProperties", "items", "prefixItems",
    "minItems", "maxItems", "uniqueItems", "$ref", "anyOf", "oneOf", "allOf", "minLength", "maxLength",
    "pattern", "format", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf",
    "patternProperties", "propertyNames", "minProperties", "maxProperties", "not", "dependentRequired",
    "if", "then", "else", "dependentSchemas"})
LOGIC = frozenset({"allOf", "anyOf", "oneOf", "not", "if", "then", "else", "dependentSchemas"})
FOLDED = LOGIC - {"anyOf"} | {"$ref", "const"}
UNSUPPORTED = frozenset({
    "contains", "minContains", "maxContains", "unevaluatedItems", "unevaluatedProperties", "$dynamicRef",
    "$recursiveRef", "$recursiveAnchor", "divisibleBy", "disallow", "extends"})
CONSTRAINING_KEYWORDS = {k.lower(): k for k in SUPPORTED | UNSUPPORTED | {"dependencies", "additionalItems"}}
NON_NEGATIVE_INTS = ("minItems", "maxItems", "minLength", "maxLength", "minProperties", "maxProperties")
SPEC_FORMATS = frozenset({
    "date-time", "date", "time", "duration", "email", "idn-email", "hostname", "idn-hostname", "ipv4", "ipv6",
    "uri", "uri-reference", "iri", "iri-reference", "uuid", "uri-template", "json-pointer",
    "relative-json-pointer", "regex"})
"""The formats drafts 4 to 2020-12 define (asserted or refused); others (draft 3's `color`, `int32`) are annotations."""
NUMBERS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")
KNOWN_METASCHEMAS = frozenset(
    f"{scheme}://json-schema.org/{name}{end}" for scheme in ("http", "https") for end in ("", "#")
    for name in ("draft/2020-12/schema", "draft/2019-09/schema", "draft-07/schema", "draft-06/schema",
                 "draft-04/schema"))
MAX_COUNT = 1000
MAX_ANYOF_BRANCHES = 256
MAX_NESTING = 64
INEXACT = "_inexact"
MORE_PATTERNS = "_more_patterns"
"""Flattened schemas only: patterns met by `allOf`/`$ref` merging beside `pattern`, every one of them asserted."""


class IgnoredKeywordWarning(UserWarning):
    """An unknown keyword that looks like a misspelled constraint was ignored, as JSON Schema specifies."""


Negation = tuple[Schema, str, "Context"]


class Flattener(Protocol):
    """Flattens one schema within a context (`flatten.flatten_schema`); see `flatten`."""

    def __call__(self, schema: Schema, path: str, ctx: Context,
                 negations: list[Negation] | None = None) -> tuple[Schema, Context, str]: ...


class OneOfReading(NamedTuple):
    """A `oneOf` list read exactly (`logic.keywords.one_of_as_any_of`), as `Context.one_of` keeps it."""

    parts: list
    """The list (held, so that its id is not reused)."""
    depth: int
    """The depth it was read at."""
    refs: frozenset[str]
    """The references entered where it was read."""
    result: Any
    """The schema it gave, or the SchemaError it raised."""
    below: int
    """How many levels below `depth` the reading called `entering` (`Context.reach`)."""
    path: str
    """The path it was read at."""


@dataclass
class Context:
    """The document being compiled, how to flatten its schemas, and the `$ref` targets entered on the
    current path (for cycles).

    `anchors`, `draft_neutral` (ids of subschemas found free of draft-dependent keywords), `one_of`, `enum_keys`,
    `string_matchers`, `warned`, `approximated` and `flattened` are caches shared by every context of one document.
    `flatten.document_context(root)` makes the first one.
    """

    root: Schema
    flattener: Flattener
    refs: tuple[str, ...] = ()
    depth: int = 0
    anchors: dict[str, tuple[Any, str]] = field(default_factory=dict)
    draft_neutral: set[int] = field(default_factory=set)
    one_of: dict[int, OneOfReading] = field(default_factory=dict)
    """`oneOf` lists read exactly (`logic.keywords.one_of_as_any_of`), by the list's id."""
    enum_keys: dict[int, tuple[list, frozenset[str]]] = field(default_factory=dict)
    """`enum` lists' member keys (`json_key`), by the list's id (the list held): an enum's members are each checked
    against the schema that holds it, once per member."""
    string_matchers: dict[tuple[str, str], Callable[[str], bool]] = field(default_factory=dict)
    """Whether a string is in a `pattern`'s or a `format`'s language (`validate`), by keyword and value: built once
    per document, however many strings (an enum's members) are checked against it."""
    warned: set[str] = field(default_factory=set)
    """The places (JSON pointers) of ignored keywords already warned of (`check_keywords`): one warning per place,
    though a schema under a `not` is read both flattened and raw (`logic.satisfies`), once per enum member."""
    reach: list[int] = field(default_factory=lambda: [0])
    """The greatest depth `entering` was called at since `logic.keywords.one_of_as_any_of` last reset it (one cell
    shared by every context of the document): how near `MAX_NESTING` a kept `oneOf` reading went, so that it can
    serve a deeper reading that would not reach it either."""
    approximated: dict[int, tuple[Any, bool]] = field(default_factory=dict)
    """Whether a schema part holds an `INEXACT` mark at any depth (`logic.disjoint.approximated`), by the part's id
    (the part held): a `oneOf`'s disjointness proofs ask it of every pair of branches and again of their members,
    each ask a walk of the whole part (a third of o84330's `oneOf` readings)."""
    flattened: dict[tuple[int, str], list[Flattened]] = field(default_factory=dict)
    """Schemas flattened (`flatten`), by the schema's id and path: the checks that read a schema (`conforms`, a
    `oneOf`'s disjointness proofs, a member's outline check) and a second lowering of the document flatten the same
    schema again."""

    def entering(self, ref_path: str | None = None) -> Context:
        """A child context one level deeper, with `ref_path` pushed when a reference is followed."""
        if self.depth > self.reach[0]:
            self.reach[0] = self.depth
        if self.depth >= MAX_NESTING:
            raise SchemaError(f"schema nests deeper than {MAX_NESTING} levels", ref_path or "#")
        refs = self.refs + (ref_path,) if ref_path else self.refs
        return Context(self.root, self.flattener, refs, self.depth + 1, self.anchors, self.draft_neutral, self.one_of,
                       self.enum_keys, self.string_matchers, self.warned, self.reach, self.approximated,
                       self.flattened)

    def forget(self) -> None:
        """Drop the document's memos (not its anchors or warnings): what they keep can be computed again.

        A refused compile's traceback keeps its comprehensions' closures, and through them a context: its memos
        would outlive the refusal (a million entries after a `oneOf`'s disjointness proofs), and the collector's
        first pass after the compile would walk them all."""
        for memo in (self.draft_neutral, self.one_of, self.enum_keys, self.string_matchers, self.approximated,
                     self.flattened):
            memo.clear()

    def member_keys(self, values: list) -> frozenset[str]:
        """The `json_key`s of an enum's members, computed once per list."""
        known = self.enum_keys.get(id(values))
        if known is None or known[0] is not values:
            known = self.enum_keys[id(values)] = (values, frozenset(json_key(v) for v in values))
        return known[1]

    def descending(self) -> Context:
        """The context of a value one instance level down (a member, an item): the references followed so far
        are dropped, since a cycle through an instance level ends with the instance, which is finite."""
        return replace(self, refs=()) if self.refs else self


def pointer_token(name: str) -> str:
    """Escape one JSON pointer segment (`~` and `/`)."""
    return name.replace("~", "~0").replace("/", "~1")


def json_key(value: Any) -> str:
    """A key equal for JSON-equal values (1 == 1.0, true != 1, object key order ignored)."""
    return json.dumps(_normalized(value), sort_keys=True)


def _normalized(v: Any) -> Any:
    """`json_key`'s value: its kind beside it, numbers as normalized decimals, objects' members sorted."""
    if isinstance(v, bool) or v is None or isinstance(v, str):
        return [type(v).__name__, v]
    if isinstance(v, (int, float)):
        return ["num", str(Decimal(repr(v)).normalize()) if isinstance(v, float) else str(Decimal(v))]
    if isinstance(v, list):
        return ["arr", [_normalized(i) for i in v]]
    return ["obj", sorted((k, _normalized(x)) for k, x in v.items())]


def kinds_of_value(value: Any) -> set[str]:
    """The kind of one JSON value: a JSON type, with numbers split into integer and fraction."""
    if value is None:
        return {"null"}
    if isinstance(value, bool):
        return {"boolean"}
    if isinstance(value, int) or (isinstance(value, float) and value.is_integer()):
        return {"integer"}
    if isinstance(value, float):
        return {"fraction"}
    if isinstance(value, str):
        return {"string"}
    return {"array"} if isinstance(value, list) else {"object"}


def kinds_of_types(types: list[str]) -> set[str]:
    """The kinds a `type` list admits."""
    out: set[str] = set()
    for t in types:
        out |= {"integer", "fraction"} if t == "number" else {t}
    return out


def check_schema(value: Any, path: str) -> None:
    """Refuse a schema that is neither an object nor a boolean."""
    if not isinstance(value, (dict, bool)):
        raise SchemaError(f"a schema must be an object or a boolean, got {type(value).__name__}", path)


def check_keywords(schema: dict, path: str, warned: set[str]) -> None:
    """Refuse unsupported keywords and malformed keyword values; warn about likely misspellings.

    Unknown keywords constrain nothing in JSON Schema (they are annotations) and are ignored; one
    that looks like a misspelled constraint (`require`, `additonalProperties`) is ignored too, with
    an `IgnoredKeywordWarning` naming it, once per place (`warned`, the places warned of so far, which it joins);
    names starting with `x-` or `_` are never taken as misspellings.
    """
    _check_string_keys(schema, path)
    for key, value in schema.items():
        where = f"{path}/{pointer_token(key)}"
        if key in SUPPORTED:
            _check_value(key, value, where, schema)
        elif key in UNSUPPORTED:
            raise SchemaError(f"keyword '{key}' is not supported: it cannot be enforced exactly", where)
        elif key == "$schema" and (not isinstance(value, str) or value not in KNOWN_METASCHEMAS):
            raise SchemaError(f"unknown meta-schema {value!r}: its vocabulary cannot be known", where)
        elif (key in ("$id", "id") and path != "#" and isinstance(value, str) and not value.startswith("#")
              and _uses_base_uri(schema)):
            raise SchemaError(f"embedded resources ({key} below the root) whose references resolve against it are "
                              "not supported", where)
        elif key not in ANNOTATIONS and not key.startswith(("x-", "_")):
            meant = misspelled_keyword(key)
            if meant is not None and where not in warned:
                warned.add(where)
                warnings.warn(f"unknown keyword '{key}' at {where} ignored, as JSON Schema specifies "
                              f"(did you mean '{meant}'?)", IgnoredKeywordWarning, stacklevel=2)


MISSPELLING_CUTOFF = 0.8


def misspelled_keyword(key: str) -> str | None:
    """The constraining keyword that `key` most likely misspells (difflib's closest match at ratio 0.8), or None.

    difflib keeps a keyword only when its two cheap upper bounds on the ratio (by length, and by the characters
    shared) reach the cutoff; they are computed here first, by its formulas, so difflib is imported and run only
    for a key that may match.  A quarter of the MaskBench schemas hold unknown keywords (annotations far from
    every keyword), and difflib's import and search cost a fresh process 1-5 ms of a 5 ms compile."""
    word = key.lower()
    counts: dict[str, int] = {}
    for char in word:
        counts[char] = counts.get(char, 0) + 1
    for keyword in CONSTRAINING_KEYWORDS:
        length = len(word) + len(keyword)
        if 2.0 * min(len(word), len(keyword)) / length < MISSPELLING_CUTOFF:
            continue
        shared = sum(min(count, keyword.count(char)) for char, count in counts.items())
        if 2.0 * shared / length >= MISSPELLING_CUTOFF:
            break
    else:
        return None
    import difflib  # only for a key near a keyword: a fresh process's compile does not pay its import

    close = difflib.get_close_matches(word, list(CONSTRAINING_KEYWORDS), n=1, cutoff=MISSPELLING_CUTOFF)
    return CONSTRAINING_KEYWORDS[close[0]] if close else None


BASE_DEPENDENT = ("$ref", "$anchor", "$dynamicRef", "$dynamicAnchor", "$recursiveRef", "$recursiveAnchor")
INSTANCE_DATA = ("enum", "const", "default", "examples")


def _uses_base_uri(node: Any) -> bool:
    """Whether a schema holds a reference or anchor anywhere inside (its meaning then depends on the base URI).

    An `$id` below the root only changes the base URI, so a subschema without any is compiled as if it had none.
    """
    if isinstance(node, dict):
        return any(key in BASE_DEPENDENT or (key not in INSTANCE_DATA and _uses_base_uri(value))
                   for key, value in node.items())
    if isinstance(node, list):
        return any(_uses_base_uri(item) for item in node)
    return False


MAX_BOUND_DIGITS = 309
MAX_INSTANCE_DIGITS = 4300
_BOUND_LIMIT = 10**MAX_BOUND_DIGITS
_INSTANCE_LIMIT = 10**MAX_INSTANCE_DIGITS


def _finite(value: int | float) -> bool:
    """Whether a number is finite (an int always is; `math.isfinite` overflows on one past the float range)."""
    return isinstance(value, int) or math.isfinite(value)


def _check_bound_size(key: str, value: int | float, where: str) -> None:
    """Refuse a numeric keyword with more integer digits than a double holds (its range automaton nests per digit)."""
    if isinstance(value, int) and abs(value) >= _BOUND_LIMIT:
        raise SchemaError(f"'{key}' has more than {MAX_BOUND_DIGITS} digits; not supported", where)


def _check_string_keys(node: dict, path: str) -> None:
    """Refuse an object key that is not a string (a Python dict that is no JSON object)."""
    for key in node:
        if not isinstance(key, str):
            raise SchemaError(f"object keys must be strings, got {key!r} ({type(key).__name__})", path)


def _check_instance_keys(value: Any, path: str) -> None:
    """Refuse a non-string object key, or an integer too long to write, anywhere inside an `enum` or `const` value."""
    pending = [(value, path)]
    while pending:
        node, where = pending.pop()
        if isinstance(node, dict):
            _check_string_keys(node, where)
            pending.extend((item, f"{where}/{pointer_token(key)}") for key, item in node.items())
        elif isinstance(node, list):
            pending.extend((item, f"{where}/{index}") for index, item in enumerate(node))
        elif isinstance(node, int) and abs(node) >= _INSTANCE_LIMIT:
            raise SchemaError(f"an integer with more than {MAX_INSTANCE_DIGITS} digits cannot be written out", where)


def _check_value(key: str, value: Any, where: str, schema: dict) -> None:
    """Validate the value of one supported keyword."""
    if isinstance(value, dict) and key not in ("enum", "const"):
        _check_string_keys(value, where)
    if key in ("enum", "const"):
        _check_instance_keys(value, where)
    if key == "type":
        names = value if isinstance(value, list) else [value]
        if not names or any(n not in TYPES for n in names) or len(set(map(str, names))) != len(names):
            raise SchemaError(f"'type' must be one of {', '.join(TYPES)} or a list of distinct ones, got {value!r}",
                              where)
    elif key == "enum" and not isinstance(value, list):
        raise SchemaError("'enum' must be an array", where)
    elif key == "properties":
        if not isinstance(value, dict):
            raise SchemaError("'properties' must be an object", where)
        for name, sub in value.items():
            check_schema(sub, f"{where}/{pointer_token(name)}")
    elif key == "required":
        if not isinstance(value, list) or any(not isinstance(n, str) for n in value) or len(set(value)) != len(value):
            raise SchemaError("'required' must be an array of distinct strings", where)
    elif key in ("additionalProperties", "items", "propertyNames", "if", "then", "else"):
        check_schema(value, where)
    elif key in ("patternProperties", "dependentSchemas"):
        if not isinstance(value, dict):
            raise SchemaError(f"'{key}' must be an object", where)
        for name, sub in value.items():
            check_schema(sub, f"{where}/{pointer_token(name)}")
    elif key == "not":
        check_schema(value, where)
    elif key == "dependentRequired":
        if not isinstance(value, dict) or not all(isinstance(v, list) and all(isinstance(n, str) for n in v)
                                                  for v in value.values()):
            raise SchemaError("'dependentRequired' must map names to arrays of names", where)
    elif key == "multipleOf":
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not _finite(value) or value <= 0:
            raise SchemaError(f"'multipleOf' must be a positive number, got {value!r}", where)
        _check_bound_size(key, value, where)
    elif key in ("prefixItems", "anyOf", "oneOf", "allOf"):
        if not isinstance(value, list) or not value:
            raise SchemaError(f"'{key}' must be a non-empty array of schemas", where)
        for i, sub in enumerate(value):
            check_schema(sub, f"{where}/{i}")
    elif key in NON_NEGATIVE_INTS:
        if (isinstance(value, bool) or not isinstance(value, (int, float)) or not _finite(value) or value < 0
                or value != int(value)):
            raise SchemaError(f"'{key}' must be a non-negative integer, got {value!r}", where)
        if value > MAX_COUNT and key.startswith("min"):
            raise SchemaError(f"'{key}' above {MAX_COUNT} would need that many automaton copies; not supported", where)
    elif key in NUMBERS:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not _finite(value):
            raise SchemaError(f"'{key}' must be a number, got {value!r}", where)
        _check_bound_size(key, value, where)
    elif key in ("pattern", "format", "$ref") and not isinstance(value, str):
        raise SchemaError(f"'{key}' must be a string", where)
    elif key == "uniqueItems":
        if not isinstance(value, bool):
            raise SchemaError("'uniqueItems' must be a boolean", where)


def _anchor_index(node: Any, path: str, out: dict[str, tuple[Any, str]]) -> None:
    """Collect `$anchor` names of the document."""
    if isinstance(node, dict):
        if isinstance(node.get("$anchor"), str):
            out.setdefault(node["$anchor"], (node, path))
        _check_string_keys(node, path)
        for key, value in node.items():
            if key not in ("enum", "const", "default", "examples"):
                _anchor_index(value, f"{path}/{pointer_token(key)}", out)
    elif isinstance(node, list):
        for i, value in enumerate(node):
            _anchor_index(value, f"{path}/{i}", out)


def resolve_ref(ref: str, ctx: Context, where: str) -> tuple[Any, str]:
    """The schema a local reference (`#`, `#/json/pointer`, `#anchor`) points to, and its path."""
    if not isinstance(ref, str):
        raise SchemaError(f"'$ref' must be a string, got {type(ref).__name__}", where)
    root_id = ctx.root.get("$id") if isinstance(ctx.root, dict) else None
    base = root_id.split("#")[0] if isinstance(root_id, str) else ""
    if base and ref.startswith(base):
        ref = ref[len(base):] or "#"
    if not ref.startswith("#"):
        raise SchemaError(f"only references inside the document are supported, got '{ref}'", where)
    fragment = unquote(ref[1:])
    if fragment and not fragment.startswith("/"):
        if not ctx.anchors:
            _anchor_index(ctx.root, "#", ctx.anchors)
        if fragment not in ctx.anchors:
            raise SchemaError(f"reference '{ref}' names no $anchor in the document", where)
        return ctx.anchors[fragment]
    node: Any = ctx.root
    for token in fragment.split("/")[1:] if fragment else []:
        token = token.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and token in node:
            node = node[token]
        elif isinstance(node, list) and token.isdigit() and int(token) < len(node):
            node = node[int(token)]
        else:
            raise SchemaError(f"reference '{ref}' does not resolve in the document", where)
    check_schema(node, ref)
    return node, ref if ref != "#" else "#"


class Flattened(NamedTuple):
    """One schema flattened at one path in one context (`Context.flattened`)."""

    schema: Schema
    """The schema object (held, so that its id is not reused)."""
    result: Schema
    refs: tuple[str, ...]
    """The references entered where it was flattened."""
    depth: int
    """The depth it was flattened at."""
    returned: tuple[tuple[str, ...], int] | None
    """The references entered and the depth of the context returned, None where it is the one asked with: the
    context itself is not held, since it holds the document's `flattened` cache that holds this (a reference cycle
    only the collector frees: after a refusal at the time limit, 0.5 s of collection past the limit)."""
    path: str
    """The path returned."""
    below: int | None
    """How many levels below `depth` the flattening called `entering` at most (`Context.reach`); None where it called
    it at no depth."""

    def serves(self, ctx: Context) -> bool:
        """Whether flattening in `ctx` gives this: no reference entered there that was not entered here (a reference
        is read nowhere but where a cycle through it is refused), and no call of `entering` at or past `MAX_NESTING`
        when the same calls are made from `ctx`'s depth (the depth is read nowhere else)."""
        reaches = self.below is not None and ctx.depth + self.below >= MAX_NESTING
        return not reaches and all(ref in self.refs for ref in ctx.refs)

    def context_in(self, ctx: Context) -> Context:
        """The context returned, for an ask in `ctx`: the references and levels the flattening entered (a `$ref`
        followed) on top of `ctx`'s own."""
        if self.returned is None:
            return ctx
        refs, depth = self.returned
        return replace(ctx, refs=ctx.refs + refs[len(self.refs):], depth=ctx.depth + depth - self.depth)


def flatten(schema: Schema, path: str, ctx: Context,
            negations: list[Negation] | None = None) -> tuple[Schema, Context, str]:
    """One schema with `$ref`, `allOf`, `const` and the logic keywords folded into plain keywords (exactly).

    Done by the context's flattener (`flatten.flatten_schema`): the logic keywords flatten their own
    branches, so they reach it through the context rather than importing the module that imports them.
    Kept in the document's context per schema object and path: the checks that read a member (`conforms`, a
    `oneOf`'s disjointness proofs, an outline check) and each lowering of the document flatten it again, from other
    depths and with other references entered.  A kept flattening serves a context where it would be the same
    (`Flattened.serves`); each ask gets a fresh copy of the top level, as flattening makes one each time, and the
    deepest level the flattening entered counts again in `Context.reach`.  Refusals, and asks that collect
    `negations`, are not kept.
    """
    if negations is not None or type(schema) is not dict:
        return ctx.flattener(schema, path, ctx, negations)
    key = (id(schema), path)
    reach = ctx.reach
    kept = ctx.flattened.get(key)
    if kept and kept[0].schema is schema:
        for known in kept:
            if known.serves(ctx):
                if known.below is not None and ctx.depth + known.below > reach[0]:
                    reach[0] = ctx.depth + known.below
                result = known.result
                return (dict(result) if type(result) is dict else result), known.context_in(ctx), known.path
    else:
        kept = ctx.flattened[key] = []
    outer = reach[0]
    reach[0] = -1
    try:
        result, result_ctx, result_path = ctx.flattener(schema, path, ctx)
    finally:
        entered = reach[0]
        if outer > entered:
            reach[0] = outer
    returned = None if result_ctx is ctx else (result_ctx.refs, result_ctx.depth)
    fields = (schema, result, ctx.refs, ctx.depth, returned, result_path, None if entered < 0 else entered - ctx.depth)
    kept.append(tuple.__new__(Flattened, fields))
    return (dict(result) if type(result) is dict else result), result_ctx, result_path


def older_drafts(schema: dict, path: str) -> dict:
    """Draft 4-2019 spellings in their 2020-12 form: array `items` + `additionalItems` as `prefixItems` + `items`,
    `dependencies` as `dependentRequired` (array values) and `dependentSchemas` (schema values);
    `additionalItems` beside a schema `items` does nothing."""
    if "additionalItems" not in schema and "dependencies" not in schema and not isinstance(schema.get("items"), list):
        return schema
    out = {k: v for k, v in schema.items() if k not in ("items", "additionalItems", "dependencies")}
    if isinstance(schema.get("items"), list):
        if "prefixItems" in schema:
            raise SchemaError("an array 'items' beside 'prefixItems' is ambiguous", f"{path}/items")
        out["prefixItems"] = schema["items"]
        if "additionalItems" in schema:
            out["items"] = schema["additionalItems"]
    elif "items" in schema:
        out["items"] = schema["items"]
    if "dependencies" in schema:
        deps = schema["dependencies"]
        if not isinstance(deps, dict):
            raise SchemaError("'dependencies' must be an object", f"{path}/dependencies")
        for kind, keyword in ((list, "dependentRequired"), ((dict, bool), "dependentSchemas")):
            part = {name: value for name, value in deps.items() if isinstance(value, kind)}
            if part:
                if keyword in schema:
                    raise SchemaError(f"'dependencies' beside '{keyword}' is ambiguous", f"{path}/dependencies")
                out[keyword] = part
        if any(not isinstance(v, (list, dict, bool)) for v in deps.values()):
            raise SchemaError("'dependencies' values must be arrays of names or schemas", f"{path}/dependencies")
    if out.get("prefixItems") == []:
        del out["prefixItems"]
    return out
