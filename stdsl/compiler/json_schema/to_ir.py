"""JSON Schema (draft 2020-12 core) → byte-level IR, exactly: every accepted text is a valid instance.

`schema_to_ir(schema)` accepts compact JSON (no whitespace) unless a `Whitespace` option
allows bounded whitespace between tokens.  Objects are written with declared properties in
schema order (then `required` names not in `properties`, then any additional keys);
`json_order.dump_in_schema_order` writes an instance in exactly that form.  Strict (the default), an
object that declares members and says nothing of others (`closes_object`) has no additional key, and a
`prefixItems` tuple without `items` no item past its prefix (a subset of the valid texts); `strict=False`
keeps every spelling below.

Choices that keep the language regular and exact:
- An unconstrained value (`true`, `{}`, a property without type) is a generic JSON value whose
  arrays/objects nest at most `ANY_VALUE_DEPTH` (3) levels here; `stdsl.compile` makes it a pushdown
  nonterminal instead (`recursive.free_form_grammar`), which nests to any depth (written out some levels
  where a call would clash, `recursive.MAX_ANY_LEVELS`), and keeps this bounded value where a DFA is required.
- Numbers with bounds are written without exponent (`-?int(.digits)?`), compared exactly to
  the bounds; integers are canonical (no `-0`, no leading zeros); unbounded numbers use the
  RFC 8259 grammar kept finite (at most 20 integer digits, a two-digit exponent: `float` never reads infinity).
- `const`/`enum` values are written compactly in their own key order, strings in their
  canonical spelling (`json.dumps(ensure_ascii=False)`), integral numbers with or without a zero
  fraction (`1`, `1.0`); so are integers, except under draft 4 (or 3), where `1.0` is no integer.
- Keys, declared or additional, are written in their canonical spelling (as `json.dumps(ensure_ascii=False)`
  writes them); an additional key is any string whose value differs from every declared name.  Lone
  surrogate escapes are never accepted.
- `format` is an assertion (see `scalars/formats.py`); `pattern` matches anywhere in the decoded
  string, with the matched part written without escapes (see `strings.pattern_search`);
  length bounds, `pattern` and `format` on one string are intersected as automata.
- `oneOf` compiles as a union only when its branches are provably disjoint (different kinds,
  different enum values, non-overlapping numeric bounds, or a required discriminator property
  with disjoint schemas); `allOf` and `$ref` siblings are merged keyword by keyword.
- `minLength`/`minItems` above 1000 are refused (that many copies); `maxLength`/`maxItems` above
  1000 are lowered to 1000 (longer valid strings and arrays are not produced).
Everything else that constrains instances is refused with a SchemaError naming the keyword path,
and so is an unknown keyword that looks like a misspelled constraint (`minimun`); other unknown
keywords are annotations in JSON Schema and are ignored.
"""

from __future__ import annotations

from decimal import Decimal
from itertools import product
from typing import Any

from stdsl.compiler import ir
from stdsl.compiler.automata.nfa import estimated_states
from stdsl.compiler.deadline import check_deadline
from stdsl.compiler.ir import Node
from stdsl.compiler.json_schema.flatten import within_document
from stdsl.compiler.json_schema.json_tokens import JsonTokens, Whitespace
from stdsl.compiler.json_schema.member_counts import counted_object
from stdsl.compiler.json_schema.presence import allowed_patterns, dependent_members
from stdsl.compiler.json_schema.refusal_probe import KeyClassShapes, ProbeGivenUp
from stdsl.compiler.json_schema.resolve import (
    Context,
    Schema,
    flatten,
    json_key,
    pointer_token,
)
from stdsl.compiler.json_schema.scalars.keys import key_classes, name_matches, names_body, pattern_matcher
from stdsl.compiler.json_schema.scalars.number_schema import number_node
from stdsl.compiler.json_schema.scalars.numbers import NUMBER
from stdsl.compiler.json_schema.scalars.strings import (
    QUOTE,
    json_string,
    string_body,
    string_literal,
    string_not_in,
)
from stdsl.compiler.json_schema.schema_merge import merge
from stdsl.compiler.json_schema.validate import conforms
from stdsl.errors import SchemaError

ANY_VALUE_DEPTH = 3
ZERO_FRACTION = ir.optional(ir.literal(".0"))
"""The zero fraction an integral number may be written with (`1.0` is the number 1): one zero, so that a
bounded integer stays a finite language and an output cannot run on writing zeros (`8.000…`)."""
EMBED_ABOVE_STATES = 20_000
ALL_TYPES = ("null", "boolean", "object", "array", "number", "string")
OBJECT_KEYWORDS = ("properties", "required", "additionalProperties", "patternProperties", "propertyNames",
                   "minProperties", "maxProperties", "dependentRequired")
MAX_DEPENDENT_PROPERTIES = 6
MAX_UNIQUE_VALUES = 24
ARRAY_KEYWORDS = ("items", "prefixItems", "minItems", "maxItems", "uniqueItems")


def schema_to_ir(schema: dict | bool, *, whitespace: Whitespace | None = None, zero_fractions: bool = True,
                 strict: bool = True) -> Node:
    """The byte-level IR of the JSON texts valid against `schema` (compact unless `whitespace` is given).

    With `zero_fractions` off, integral numbers are written without a fraction only (a Pydantic
    model reads `1.0` as a float, not as its int field).  With `strict` (the default) objects and tuples are
    closed where the schema says nothing of undeclared members (see `closes_object`); `strict=False` is the
    schema's exact language.

    Raises SchemaError (with the JSON pointer of the offending keyword) for invalid schemas and
    for constraints that cannot be enforced exactly.
    """
    if not isinstance(schema, (dict, bool)):
        raise SchemaError(f"a schema must be an object or a boolean, got {type(schema).__name__}", "#")
    compiler = _Compiler(JsonTokens(whitespace), zero_fractions, strict)
    node = within_document(schema, lambda context: compiler.value(schema, "#", context))
    return ir.seq(compiler.tokens.ws, node, compiler.tokens.ws) if node != ir.NOTHING else node


class _Compiler:
    """Lowers flattened schemas to IR nodes, sharing the token and generic-value nodes."""

    def __init__(self, tokens: JsonTokens, zero_fractions: bool = True, strict: bool = True) -> None:
        self.tokens = tokens
        self.zero_fractions = zero_fractions
        self.strict = strict
        self.string = json_string()
        self._any_by_depth: dict[int, Node] = {}
        self._lowered: dict[int, tuple[Schema, Node]] = {}
        self.key_shapes: KeyClassShapes | None = None
        """Set on a probe's compiler (`refusal_probe`): undeclared-key classes with stand-in key nodes."""

    def _any(self, depth: int) -> Node:
        """`_any_value(depth)`, built once per depth: a dictionary, not an `lru_cache` of the bound method, which
        would be a reference cycle (compiler, cache, method) holding everything the compiler lowered until the
        collector runs."""
        known = self._any_by_depth.get(depth)
        if known is None:
            known = self._any_by_depth[depth] = self._any_value(depth)
        return known

    @property
    def any_depth(self) -> int:
        """How many levels an unconstrained value's containers nest (`_any_value`)."""
        return ANY_VALUE_DEPTH

    def value(self, schema: Schema, path: str, ctx: Context) -> Node:
        """The IR of one (sub)schema; a schema object lowered before is not lowered again.

        Its lowering depends on the schema alone (references resolve in the one document), so a
        definition referred to from many places is walked once.  The memo holds the schema, which
        keeps its `id` from being reused for another object.
        """
        if isinstance(schema, dict):
            found = self._lowered.get(id(schema))
            if found is not None and found[0] is schema:
                return found[1]
        node = self._lower(schema, path, ctx)
        if isinstance(schema, dict):
            self._lowered[id(schema)] = (schema, node)
        return node

    def _lower(self, schema: Schema, path: str, ctx: Context) -> Node:
        """The IR of one (sub)schema, walked (each one checks the compile time limit)."""
        check_deadline("lowering the schema")
        flat, ctx, path = flatten(schema, path, ctx.entering())
        if flat is False:
            return ir.NOTHING
        if flat is True or not flat:
            return self._any(self.any_depth)
        if "anyOf" in flat:
            rest = {k: v for k, v in flat.items() if k != "anyOf"}
            branches = []
            for i, branch in enumerate(flat["anyOf"]):
                branch_flat = flatten(branch, f"{path}/anyOf/{i}", ctx.entering())[0]
                branches.append(self.value(merge(rest, branch_flat, path), path, ctx))
            return ir.alt(*branches)
        if "enum" in flat:
            rest = {k: v for k, v in flat.items() if k != "enum"}
            return ir.alt(*(self.const(v) for v in flat["enum"] if not rest or conforms(v, rest, ctx, path)))
        types = flat.get("type", list(ALL_TYPES))
        types = types if isinstance(types, list) else [types]
        parts = []
        for name in ALL_TYPES + ("integer",):
            if name in types and not (name == "integer" and "number" in types):
                parts.append(self._typed(name, flat, path, ctx))
        return ir.alt(*parts)

    def member(self, schema: Schema, path: str, ctx: Context) -> Node:
        """The IR of a whole member value or array item: here `value`; the pushdown compiler may call a nonterminal."""
        return self.value(schema, path, ctx)

    def _compact(self, node: Node) -> Node:
        """A large node as its automaton (`build_automaton`), so the copies a counted repeat makes stay small.

        The NFA builder shares a sub-node wherever it has one continuation; the items of an
        array with `minItems`/`maxItems` have one per count, and the minimized DFA is the cheaper copy.
        """
        if self.key_shapes is not None and self.key_shapes.made:
            raise ProbeGivenUp("a node's size is asked for where its key nodes may be stand-ins")
        if estimated_states(node) <= EMBED_ABOVE_STATES:
            return node
        from stdsl.compiler.automata.build import build_automaton, embedded_leaf, subset_automaton
        from stdsl.errors import EmptyLanguageError
        try:
            automaton = subset_automaton(node) or build_automaton(node)
        except EmptyLanguageError:
            return ir.NOTHING
        return embedded_leaf(automaton, minimal=True)

    def _typed(self, name: str, flat: dict, path: str, ctx: Context) -> Node:
        if name == "null":
            return ir.literal("null")
        if name == "boolean":
            return ir.alt(ir.literal("true"), ir.literal("false"))
        if name == "string":
            if any(k in flat for k in ("minLength", "maxLength", "pattern", "format")):
                return ir.seq(QUOTE, string_body(flat, path), QUOTE)
            return self.string
        if name in ("number", "integer"):
            number = number_node(name, flat, path)
            integral = name == "integer" and self.zero_fractions and _floats_may_be_integers(ctx)
            return ir.seq(number, ZERO_FRACTION) if integral else number
        if name == "object":
            if not any(k in flat for k in OBJECT_KEYWORDS):
                return self._any_object(self.any_depth)
            return self._object(flat, path, ctx)
        if not any(k in flat for k in ARRAY_KEYWORDS):
            return self._any_array(self.any_depth)
        return self._array(flat, path, ctx)

    def _object(self, flat: dict, path: str, ctx: Context) -> Node:
        """Declared members in schema order (optional ones may be absent), then additional members.

        The body is (non-empty ordered choice of declared members, then extras) or, when every
        declared member is optional, extras alone; the extras tail appears at most twice.
        Strict, an object that `closes_object` has no additional member, unless `minProperties` asks for more
        members than are declared (closing would leave no valid object: its exact language is kept).
        """
        if flat.get("dependentRequired"):
            return self._dependent_objects(flat, path, ctx)
        t = self.tokens
        declared = _declared_names(flat)
        names = _property_names(flat, path, ctx)
        found = self._members(flat, declared, names, path, ctx)
        if found is None:
            return ir.NOTHING
        members = [(member, is_required) for _, member, is_required in found]
        low, high = int(flat.get("minProperties", 0)), flat.get("maxProperties")
        closed = self.strict and closes_object(flat) and low <= len(members)
        extra = ir.NOTHING if closed else self._extra_members(flat, declared, names, path, ctx)
        starts, after, nullable = [], ir.EMPTY, True
        for member, is_required in reversed(members):
            if is_required:
                starts, after = [ir.seq(member, after)], ir.seq(t.comma, member, after)
                nullable = False
            else:
                starts.append(ir.seq(member, after))
                after = ir.seq(ir.optional(ir.seq(t.comma, member)), after)
        first = ir.alt(*reversed(starts)) if starts else ir.NOTHING
        if high is not None and int(high) < low:
            return ir.NOTHING
        if high == 0 and not any(is_required for _, is_required in members):
            return t.empty_object
        required_count = sum(1 for _, is_required in members if is_required)
        if (high is not None and (extra != ir.NOTHING or len(members) > int(high))) or low > max(required_count, 1):
            return counted_object(members, extra, t.comma, (t.open_object, t.close_object), t.empty_object, low,
                                  None if high is None else int(high), path)
        return self._ordered_object(first, nullable, extra, low == 0)

    def _ordered_object(self, first: Node, nullable: bool, extra: Node, may_be_empty: bool) -> Node:
        """An object whose declared members are `first` (at least one, in order), then `extra` members; with
        `nullable` the declared members may all be absent (then the extras alone, or with `may_be_empty` none)."""
        t = self.tokens
        extras_after = ir.star(ir.seq(t.comma, extra))
        body = ir.seq(first, extras_after)
        if nullable:
            body = ir.alt(body, ir.seq(extra, extras_after))
        full = ir.seq(t.open_object, body, t.close_object)
        return ir.alt(full, t.empty_object) if nullable and may_be_empty else full

    def _members(self, flat: dict, declared: list[str], names: Schema | None, path: str, ctx: Context
                 ) -> list[tuple[str, Node, bool]] | None:
        """The declared members that may be present, in order: (name, `"name":value` node, required); None when a
        required one cannot be (no value is valid for it)."""
        t = self.tokens
        props: dict = flat.get("properties", {})
        required = flat.get("required", [])
        extra_schema = flat.get("additionalProperties", True)
        patterns: dict = flat.get("patternProperties", {})
        matchers = {p: pattern_matcher(p, f"{path}/patternProperties") for p in patterns}
        members: list[tuple[str, Node, bool]] = []
        for name in declared:
            where = f"{path}/properties/{pointer_token(name)}" if name in props else f"{path}/additionalProperties"
            matched = [patterns[p] for p, m in matchers.items() if name_matches(m, name, f"{path}/patternProperties")]
            own = props.get(name, extra_schema if not matched else True)
            allowed = names is None or conforms(name, names, ctx, f"{path}/propertyNames")
            value = self.member({"allOf": [own, *matched]} if matched else own, where, ctx) if allowed else ir.NOTHING
            if value == ir.NOTHING:
                if name in required:
                    return None
                continue
            members.append((name, ir.seq(string_literal(name), t.colon, value), name in required))
        return members

    def _dependent_objects(self, flat: dict, path: str, ctx: Context) -> Node:
        """`dependentRequired` as one member chain that tracks which involved members are present
        (`presence.dependent_members`); beside `minProperties`/`maxProperties`, as a union over the presence
        patterns of the properties it involves (each pattern an object of its own, counted).

        Undeclared names involved are declared with the `additionalProperties` schema (so written before other extras).
        """
        deps: dict = flat["dependentRequired"]
        props: dict = flat.get("properties", {})
        required = list(flat.get("required", []))
        involved = list(dict.fromkeys([*deps, *(n for names in deps.values() for n in names)]))
        undeclared = [n for n in involved if n not in props]
        if undeclared and flat.get("patternProperties"):
            raise SchemaError(f"'dependentRequired' on undeclared properties ({', '.join(undeclared[:3])}) beside "
                              "'patternProperties' is not supported", f"{path}/dependentRequired")
        props = {**props, **{n: flat.get("additionalProperties", True) for n in undeclared}}
        optional = [n for n in involved if n not in required]
        if len(optional) > MAX_DEPENDENT_PROPERTIES:
            raise SchemaError(f"'dependentRequired' involving more than {MAX_DEPENDENT_PROPERTIES} optional "
                              "properties is not supported (2^n presence patterns)", f"{path}/dependentRequired")
        rest = {k: v for k, v in flat.items() if k != "dependentRequired"}
        if "minProperties" in flat or "maxProperties" in flat:
            return self._presence_variants(rest, deps, props, required, optional, path, ctx)
        declared_flat = {**rest, "properties": props}
        declared = _declared_names(declared_flat)
        names = _property_names(flat, path, ctx)
        members = self._members(declared_flat, declared, names, path, ctx)
        if members is None:
            return ir.NOTHING
        chained = [name for name, _, is_required in members if name in optional and not is_required]
        allowed = allowed_patterns(chained, set(required), deps)
        if not allowed:
            return ir.NOTHING
        first, nullable = dependent_members(members, set(chained), allowed, self.tokens.comma)
        closed = self.strict and closes_object(declared_flat)
        extra = ir.NOTHING if closed else self._extra_members(declared_flat, declared, names, path, ctx)
        return self._ordered_object(first, nullable, extra, True)

    def _presence_variants(self, rest: dict, deps: dict, props: dict, required: list[str], optional: list[str],
                           path: str, ctx: Context) -> Node:
        """`dependentRequired` as a union of objects, one per allowed presence pattern of the `optional` names
        (each required in its object or declared absent), for `_object` to count their members."""
        variants = []
        for choice in product((True, False), repeat=len(optional)):
            present = set(required) | {n for n, keep in zip(optional, choice) if keep}
            if all(set(deps[name]) <= present for name in deps if name in present):
                absent = {n: False for n, keep in zip(optional, choice) if not keep}
                variant = {**rest, "required": required + [n for n in optional if n in present],
                           "properties": {**props, **absent}}
                variants.append(self._object(variant, path, ctx))
        return ir.alt(*variants)

    def _extra_members(self, flat: dict, declared: list[str], names: Schema | None, path: str, ctx: Context) -> Node:
        """Undeclared members: keys outside `properties`, valued by the patterns they match or additionalProperties."""
        t = self.tokens
        extra_schema = flat.get("additionalProperties", True)
        patterns = telling_patterns(flat)
        extra_where = f"{path}/additionalProperties"
        if not patterns and names is None:
            if extra_schema is False:
                return ir.NOTHING
            return ir.seq(string_not_in(declared), t.colon, self.member(extra_schema, extra_where, ctx))
        names_flat = flatten(names, f"{path}/propertyNames", ctx)[0] if names is not None else True
        if names_flat is False:
            return ir.NOTHING
        if names_flat is not True and names_flat:
            unsupported = sorted(set(names_flat) - {"type", "minLength", "maxLength", "pattern", "format", "enum"})
            if unsupported:
                raise SchemaError(f"'propertyNames' with {', '.join(unsupported)} is not supported",
                                  f"{path}/propertyNames")
            types = names_flat.get("type", "string")
            if "string" not in (types if isinstance(types, list) else [types]):
                return ir.NOTHING
            if "enum" in names_flat:
                if patterns:
                    raise SchemaError("'propertyNames' enum with patternProperties is not supported", path)
                keys = [v for v in names_flat["enum"] if isinstance(v, str) and v not in declared
                        and conforms(v, names_flat, ctx, f"{path}/propertyNames")]
                value = self.member(extra_schema, extra_where, ctx)
                return ir.alt(*(ir.seq(string_literal(k), t.colon, value) for k in keys))
        body = names_body(names_flat, f"{path}/propertyNames") if isinstance(names_flat, dict) else None
        with_unmatched = extra_schema is not False
        members = []
        classes = key_classes if self.key_shapes is None else self.key_shapes.key_classes
        for key, matched in classes(patterns, declared, body, with_unmatched, f"{path}/patternProperties"):
            schema = {"allOf": [patterns[p] for p in matched]} if matched else extra_schema
            members.append(ir.seq(key, t.colon, self.member(schema, f"{path}/patternProperties", ctx)))
        return ir.alt(*members)

    def _array(self, flat: dict, path: str, ctx: Context) -> Node:
        """Positional `prefixItems`, then `items`, with the length within minItems..maxItems.

        Strict, a tuple (`prefixItems`) without `items` has no item past its prefix, unless `minItems` asks for
        more (its exact language is kept).
        """
        if flat.get("uniqueItems") and flat.get("maxItems", 2) > 1:
            return self._unique_array(flat, path, ctx)
        t = self.tokens
        prefix = [self.member(s, f"{path}/prefixItems/{i}", ctx) for i, s in enumerate(flat.get("prefixItems", []))]
        low, high = int(flat.get("minItems", 0)), flat.get("maxItems")
        high = None if high is None else int(high)
        closed = self.strict and bool(prefix) and "items" not in flat and low <= len(prefix)
        item = ir.NOTHING if closed else self.member(flat.get("items", True), f"{path}/items", ctx)
        if high is not None or low > 1:
            item = self._compact(item)
        if high is not None and high < low:
            return ir.NOTHING
        k = len(prefix)
        tail_low = max(low - k, 0)
        tail_high = None if high is None else high - k
        if tail_high is not None and tail_high < 0:
            tail = ir.NOTHING
        else:
            tail = ir.repeat(ir.seq(t.comma, item), tail_low, tail_high)
        rest = tail
        for j in range(k - 1, 0, -1):
            stop = ir.EMPTY if low <= j and (high is None or j <= high) else ir.NOTHING
            rest = ir.alt(stop, ir.seq(t.comma, prefix[j], rest)) if high is None or j < high else stop
        if k:
            first = ir.seq(prefix[0], rest) if high is None or high >= 1 else ir.NOTHING
        else:
            first_low = max(low - 1, 0)
            first_high = None if high is None else high - 1
            first = ir.seq(item, ir.repeat(ir.seq(t.comma, item), first_low, first_high)) \
                if high is None or high >= 1 else ir.NOTHING
        empty = t.empty_array if low == 0 else ir.NOTHING
        return ir.alt(ir.seq(t.open_array, first, t.close_array), empty)

    def _unique_array(self, flat: dict, path: str, ctx: Context) -> Node:
        """`uniqueItems` over a small finite item set: distinct items written in the order the set lists them.

        Each value occurs at most once and in enumeration order, so every accepted array is unique;
        the same values in another order are valid but not produced.
        """
        t = self.tokens
        where = f"{path}/uniqueItems"
        if flat.get("prefixItems"):
            raise SchemaError("'uniqueItems: true' with 'prefixItems' is not supported", where)
        items, items_ctx, items_path = flatten(flat.get("items", True), f"{path}/items", ctx.entering())
        if items is False:
            values: list = []
        elif isinstance(items, dict) and "enum" in items:
            values = items["enum"]
        elif isinstance(items, dict) and set(items) == {"type"} and set(_as_list(items["type"])) <= {"boolean", "null"}:
            values = [v for v in (True, False, None) if conforms(v, items, items_ctx, items_path)]
        else:
            raise SchemaError("'uniqueItems: true' is supported only for items from a finite set (enum, const, "
                              "boolean, null): uniqueness over an open item language is not regular", where)
        values = [v for v in {json_key(v): v for v in values}.values() if conforms(v, items, items_ctx, items_path)]
        if len(values) > MAX_UNIQUE_VALUES:
            raise SchemaError(f"'uniqueItems: true' over more than {MAX_UNIQUE_VALUES} values is not supported", where)
        low, high = int(flat.get("minItems", 0)), flat.get("maxItems")
        if low > 1 or (high is not None and int(high) < len(values)):
            if low > len(values):
                return ir.NOTHING
            raise SchemaError("'uniqueItems: true' with minItems above 1 or maxItems below the number of values is "
                              "not supported", where)
        nodes = [self.const(v) for v in values]
        first, after = ir.NOTHING, ir.EMPTY
        for node in reversed(nodes):
            first = ir.alt(ir.seq(node, after), first)
            after = ir.seq(ir.optional(ir.seq(t.comma, node)), after)
        full = ir.seq(t.open_array, first, t.close_array)
        return full if low == 1 else ir.alt(full, t.empty_array)

    def const(self, value: Any) -> Node:
        """One JSON value written compactly (canonical strings and numbers, its own key order)."""
        t = self.tokens
        if isinstance(value, dict):
            if not value:
                return t.empty_object
            members = [ir.seq(string_literal(k), t.colon, self.const(v)) for k, v in value.items()]
            body = [members[0]] + [ir.seq(t.comma, m) for m in members[1:]]
            return ir.seq(t.open_object, *body, t.close_object)
        if isinstance(value, list):
            if not value:
                return t.empty_array
            items = [self.const(v) for v in value]
            body = [items[0]] + [ir.seq(t.comma, i) for i in items[1:]]
            return ir.seq(t.open_array, *body, t.close_array)
        integral = (isinstance(value, int) and not isinstance(value, bool)) or (isinstance(value, float)
                                                                                and value.is_integer())
        if integral and self.zero_fractions:
            return ir.seq(ir.literal(canonical_scalar(value)), ZERO_FRACTION)
        return ir.literal(canonical_scalar(value))

    def _any_value(self, depth: int) -> Node:
        """A generic JSON value whose containers nest at most `depth` levels."""
        scalars = ir.alt(ir.literal("null"), ir.literal("true"), ir.literal("false"), NUMBER, self.string)
        if depth == 0:
            return scalars
        return ir.alt(scalars, self._any_object(depth), self._any_array(depth))

    def _any_object(self, depth: int) -> Node:
        """Any object whose member values are generic values of depth `depth - 1`."""
        t = self.tokens
        member = ir.seq(self.string, t.colon, self._any(depth - 1))
        return ir.alt(t.empty_object, ir.seq(t.open_object, member, ir.star(ir.seq(t.comma, member)), t.close_object))

    def _any_array(self, depth: int) -> Node:
        """Any array whose items are generic values of depth `depth - 1`."""
        t = self.tokens
        inner = self._any(depth - 1)
        return ir.alt(t.empty_array, ir.seq(t.open_array, inner, ir.star(ir.seq(t.comma, inner)), t.close_array))


EXTRA_MEMBER_KEYWORDS = ("additionalProperties", "patternProperties")
UNCONSTRAINING_KEYWORDS = frozenset({"title", "description", "default", "examples", "$comment", "deprecated",
                                     "readOnly", "writeOnly"})
"""Annotations that nothing reads: a subschema of these only is unconstrained.  The other annotations
(`resolve.ANNOTATIONS`: `$schema`, `$id`, anchors, definitions...) may be checked or read by the compile, so a
subschema holding one is lowered as written."""


def telling_patterns(flat: dict) -> dict:
    """`patternProperties` less the patterns that tell nothing apart: one valued by an unconstrained schema (`true`,
    `{}`, annotations only) where the keys no pattern matches are unconstrained too (`additionalProperties` absent or
    unconstrained) gives the keys it matches what every other undeclared key has, and a key it matches beside other
    patterns gets their schemas with `true` among them; splitting the undeclared keys by it changes no value, but
    built its key automata (o9908's `^.{1,255}$`: 0.37 s for an object of any members).  Declared names still
    match every pattern (`_members`), which checks each one."""
    patterns: dict = flat.get("patternProperties", {})
    if not patterns or not _unconstrained(flat.get("additionalProperties", True)):
        return patterns
    return {pattern: schema for pattern, schema in patterns.items() if not _unconstrained(schema)}


def _unconstrained(schema: Any) -> bool:
    """Whether `schema` is `true` or an object of annotations only (`UNCONSTRAINING_KEYWORDS`, `x-` and `_` keys)."""
    return schema is True or (type(schema) is dict
                              and all(k in UNCONSTRAINING_KEYWORDS or k.startswith(("x-", "_")) for k in schema))


def closes_object(flat: dict) -> bool:
    """Whether strict generation closes this (flattened) object schema to its declared members: it declares some
    (`properties`, even empty, or `required`) and says nothing of others (no `additionalProperties`, even `true`,
    no `patternProperties`, no `propertyNames`).  A schema that only says "an object" stays free-form."""
    declares = "properties" in flat or bool(flat.get("required"))
    names = flat.get("propertyNames")
    return declares and not any(k in flat for k in EXTRA_MEMBER_KEYWORDS) and names in (None, True, {})


def _floats_may_be_integers(ctx: Context) -> bool:
    """Whether `1.0` is an integer in the document's draft: from draft 6 on, draft 4 (and 3) say no."""
    meta = ctx.root.get("$schema", "") if isinstance(ctx.root, dict) else ""
    return not (isinstance(meta, str) and ("draft-04" in meta or "draft-03" in meta))


def _as_list(value: Any) -> list:
    """A keyword value that may be one item or a list, as a list."""
    return value if isinstance(value, list) else [value]


def _declared_names(flat: dict) -> list[str]:
    """The names an object schema declares, in the order they are written: `properties`, then other `required`."""
    props: dict = flat.get("properties", {})
    return list(props) + [n for n in flat.get("required", []) if n not in props]


def _property_names(flat: dict, path: str, ctx: Context) -> Schema | None:
    """The `propertyNames` schema, or None when names are unconstrained."""
    names = flat.get("propertyNames")
    return None if names is None or names is True or names == {} else names


def canonical_scalar(value: Any) -> str:
    """The compact spelling of a JSON scalar: integral numbers without fraction, others positional."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if value.is_integer():
            return str(int(value))
        return format(Decimal(repr(value)), "f")
    if isinstance(value, str):
        from stdsl.compiler.json_schema.scalars.strings import canonical_string
        return canonical_string(value)
    raise SchemaError(f"not a JSON value: {value!r}", "#")
