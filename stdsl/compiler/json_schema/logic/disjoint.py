"""Proofs that two flattened schemas share no instance, kind by kind (used to read `oneOf` as `anyOf`).

Beyond `validate.provably_disjoint` (kinds, enums, numeric bounds, a required discriminator
property) this looks inside: strings whose decoded languages (patterns and lengths, as
automata) do not intersect, objects where a member one side requires is valued disjointly by
the other (its property, the patterns its name matches, or `additionalProperties`, `false`
for a closed object), arrays with disjoint items at a position both must have, bounds that
contradict once merged, and `anyOf` branch by branch.  `False` means "not proven", never "overlap".
Formats are left out of the string languages: under the annotation reading they constrain nothing.
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

from stdsl.compiler import ir
from stdsl.compiler.automata.automaton import Automaton
from stdsl.compiler.automata.build import build_automaton
from stdsl.compiler.automata.ops import intersect
from stdsl.compiler.deadline import check_deadline
from stdsl.compiler.json_schema.logic.complement import NUMBER_KINDS, possible_kinds, typed
from stdsl.compiler.json_schema.resolve import INEXACT, MAX_COUNT, Context, Schema, flatten
from stdsl.compiler.json_schema.scalars.keys import complement_within, name_matches, pattern_matcher
from stdsl.compiler.json_schema.scalars.strings import pattern_search, string_body
from stdsl.compiler.json_schema.schema_merge import merge
from stdsl.compiler.json_schema.validate import conforms, provably_disjoint
from stdsl.errors import EmptyLanguageError, SchemaError, StateBudgetError

MAX_DEPTH = 8
MAX_POSITIONS = 8
LANGUAGE_STATES = 20_000


def same_schema(a: Schema, b: Schema) -> bool:
    """Whether two flattened schemas are written identically (then they accept the same instances).  Two that a walk
    finds written apart are told without writing them (most asks: a `oneOf`'s branches differ, and writing both
    out at each of their differences was a sixth of o84330's lowering)."""
    if a is b:
        return True
    if _written_apart(a, b):
        return False
    return json.dumps(a, sort_keys=True, default=str) == json.dumps(b, sort_keys=True, default=str)


_PLAIN_TYPES = frozenset({str, int, bool, type(None)})
"""The types of values `json.dumps` writes apart exactly when they differ (a float may not: NaN)."""
_WRITTEN_APART_TYPES = _PLAIN_TYPES | {dict, list}
"""Types whose values `json.dumps` writes apart from those of each other type here (`1`, `true`, `"1"`, `{`, `[`)."""


def _written_apart(a: Any, b: Any) -> bool:
    """Whether `json.dumps(.., sort_keys=True)` surely writes `a` and `b` differently (False: not known), at the first
    place found: objects with other (string) keys, arrays of other lengths, plain values of another type or value."""
    kind = type(a)
    if kind is not type(b):
        return kind in _WRITTEN_APART_TYPES and type(b) in _WRITTEN_APART_TYPES
    if kind is dict:
        if a.keys() != b.keys():
            return all(type(key) is str for key in a) and all(type(key) is str for key in b)
        return any(_written_apart(value, b[key]) for key, value in a.items())
    if kind is list:
        return len(a) != len(b) or any(_written_apart(x, y) for x, y in zip(a, b))
    return kind in _PLAIN_TYPES and a != b


def approximated(node: Any, known: dict[int, tuple[Any, bool]] | None = None) -> bool:
    """Whether a schema holds, at any depth, a part marked `_inexact` (an under-approximation of its meaning); with
    `known` (`Context.approximated`), each dict or list is walked once and its answer kept there."""
    if not isinstance(node, (dict, list)):
        return False
    if known is not None:
        found = known.get(id(node))
        if found is not None and found[0] is node:
            return found[1]
    if isinstance(node, dict):
        answer = node.get(INEXACT) is True or any(approximated(v, known) for k, v in node.items() if k != "enum")
    else:
        answer = any(approximated(v, known) for v in node)
    if known is not None:
        known[id(node)] = (node, answer)
    return answer


def relaxed(node: Any) -> Any:
    """A schema accepting at least what an approximated one stands for: lowered length bounds of 1000
    dropped, and numbers admitted where non-integers may have been left out."""
    if isinstance(node, list):
        return [relaxed(v) for v in node]
    if not isinstance(node, dict):
        return node
    out = {k: (v if k == "enum" else relaxed(v)) for k, v in node.items() if k != INEXACT}
    if node.get(INEXACT) is True:
        for key in ("maxLength", "maxItems"):
            if out.get(key) == MAX_COUNT:
                del out[key]
        if out.get("enum") == []:
            del out["enum"]
            out["type"] = "number"
        elif "type" in out:
            types = out["type"] if isinstance(out["type"], list) else [out["type"]]
            out["type"] = [t for t in types if t != "integer"] + ["number"] * ("number" not in types)
    return out


def disjoint(a: Schema, b: Schema, ctx: Context, depth: int = 0) -> bool:
    """True only if no instance satisfies both flattened schemas (approximated ones are relaxed first).

    It recurses into members, items and `anyOf` branches, so every call checks the compile time limit."""
    check_deadline("proving schemas disjoint (oneOf)")
    if approximated(a, ctx.approximated) or approximated(b, ctx.approximated):
        a, b = relaxed(a), relaxed(b)
    if a is False or b is False:
        return True
    if a is True or b is True or a == {} or b == {} or depth > MAX_DEPTH:
        return False
    try:
        if provably_disjoint(a, b, ctx):
            return True
        if "enum" in a or "enum" in b:
            return False
        for one, other in ((a, b), (b, a)):
            if "anyOf" in one:
                rest = {k: v for k, v in one.items() if k != "anyOf"}
                return all(disjoint(merge(rest, flatten(branch, "#", ctx.entering())[0], "#"), other, ctx, depth + 1)
                           for branch in one["anyOf"])
        return all(_kind_disjoint(kind, a, b, ctx, depth) for kind in possible_kinds(a) & possible_kinds(b))
    except (SchemaError, StateBudgetError):
        return False


def overlapping_kinds(a: Schema, b: Schema, ctx: Context) -> frozenset[str]:
    """The kinds on which `a` and `b` may share an instance (integers and fractions go together)."""
    shared = possible_kinds(a) & possible_kinds(b)
    groups = [frozenset({kind}) for kind in shared - NUMBER_KINDS] + ([shared & NUMBER_KINDS] if shared & NUMBER_KINDS
                                                                      else [])
    out: set[str] = set()
    for group in groups:
        name = "number" if group & NUMBER_KINDS else next(iter(group))
        try:
            if disjoint(merge(a, {"type": name}, "#"), merge(b, {"type": name}, "#"), ctx):
                continue
        except SchemaError:
            pass
        out |= group
    return frozenset(out)


def _kind_disjoint(kind: str, a: dict, b: dict, ctx: Context, depth: int) -> bool:
    """Whether `a` and `b` share no instance of one kind."""
    only = typed({kind} if kind != "fraction" else {"integer", "fraction"})
    try:
        if kind not in possible_kinds(merge(merge(a, only, "#"), merge(b, only, "#"), "#")):
            return True
    except SchemaError:
        pass
    if kind == "string":
        return _strings_disjoint(a, b)
    if kind == "object":
        return _objects_disjoint(a, b, ctx, depth)
    if kind == "array":
        low = max(int(a.get("minItems", 0)), int(b.get("minItems", 0)))
        return any(disjoint(item_at(a, i, ctx), item_at(b, i, ctx), ctx, depth + 1)
                   for i in range(min(low, MAX_POSITIONS)))
    return False


def _objects_disjoint(a: dict, b: dict, ctx: Context, depth: int) -> bool:
    """A member one side requires that the other side values disjointly (or forbids by name)."""
    for one, other in ((a, b), (b, a)):
        for name in one.get("required", []):
            names = other.get("propertyNames")
            if names is not None and names is not True and not conforms(name, names, ctx):
                return True
            if disjoint(member_schema(one, name, ctx), member_schema(other, name, ctx), ctx, depth + 1):
                return True
    return False


def member_schema(flat: dict, name: str, ctx: Context) -> Schema:
    """The flattened schema a member `name` of an object valid against `flat` must meet.

    Its property schema and the schemas of the patterns its name matches, or `additionalProperties`
    when it is neither declared nor matched.
    """
    props: dict = flat.get("properties", {})
    patterns: dict = flat.get("patternProperties", {})
    parts = [s for p, s in patterns.items() if name_matches(pattern_matcher(p, "#/patternProperties"), name)]
    if name in props:
        parts.append(props[name])
    elif not parts:
        parts.append(flat.get("additionalProperties", True))
    return flatten({"allOf": parts} if len(parts) > 1 else parts[0], "#", ctx.entering())[0]


def item_at(flat: dict, index: int, ctx: Context) -> Schema:
    """The flattened schema the item at `index` of an array valid against `flat` must meet."""
    prefix = flat.get("prefixItems", [])
    return flatten(prefix[index] if index < len(prefix) else flat.get("items", True), "#", ctx.entering())[0]


def _strings_disjoint(a: dict, b: dict, with_format: bool = False) -> bool:
    """Whether the decoded strings meeting `a`'s (format too, `with_format`) and `b`'s patterns and lengths
    never meet; StateBudgetError and SchemaError reach the caller."""
    try:
        la, lb = string_language(a, with_format), string_language(b, False)
        if la is None or lb is None:
            return False
        intersect(la, lb, LANGUAGE_STATES)
    except EmptyLanguageError:
        return True
    return False


def string_language(flat: dict, with_format: bool) -> Automaton | None:
    """The decoded text (UTF-8) meeting a schema's pattern, lengths and (when asked) format; None: any text.

    Raises EmptyLanguageError when no text does, StateBudgetError past `LANGUAGE_STATES`.
    """
    keys = ["pattern", "minLength", "maxLength"] + (["format"] if with_format else [])
    key = json.dumps({k: flat[k] for k in keys if k in flat}, sort_keys=True)
    return None if key == "{}" else _language(key)


@lru_cache(maxsize=512)
def _language(key: str) -> Automaton:
    """`string_language` of the keywords serialized in `key` (cached: oneOf branches repeat them)."""
    keys: dict[str, Any] = json.loads(key)
    parts = []
    if "pattern" in keys:
        parts.append(pattern_search(keys["pattern"], "#/pattern", True))
    if "format" in keys:
        parts.append(string_body({"format": keys["format"]}, "#", plain=True))
    if "minLength" in keys or "maxLength" in keys:
        low, high = int(keys.get("minLength", 0)), keys.get("maxLength")
        if high is not None and int(high) < low:
            raise EmptyLanguageError("a minLength above the maxLength admits no string")
        parts.append(ir.repeat(ir.any_char(), low, None if high is None else int(high)))
    result = build_automaton(parts[0], LANGUAGE_STATES)
    for part in parts[1:]:
        result = intersect(result, build_automaton(part, LANGUAGE_STATES), LANGUAGE_STATES)
    return result


def string_subset(a: dict, b: dict) -> bool:
    """Whether every decoded string meeting `a` (format included) meets `b`'s pattern, lengths and format."""
    try:
        la = string_language(a, True)
    except EmptyLanguageError:
        return True
    except (StateBudgetError, SchemaError):
        return False
    try:
        lb = string_language(b, True)
    except (EmptyLanguageError, StateBudgetError, SchemaError):
        return False
    if lb is None:
        return True
    if la is None:
        return False
    try:
        complement_within(la, lb)
    except EmptyLanguageError:
        return True
    except StateBudgetError:
        return False
    return False


def strings_never_meet(a: dict, b: dict) -> bool:
    """Whether no decoded string meeting `a` (format included) meets `b`'s pattern and lengths (False when
    that cannot be decided within the budget)."""
    try:
        return _strings_disjoint(a, b, with_format=True)
    except (StateBudgetError, SchemaError):
        return False
