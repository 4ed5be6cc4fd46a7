"""`compile(spec)`: every kind of constraint a user can hand us, lowered to one `Constraint`.

A constraint is an automaton plus what is needed to read its output back (a JSON Schema,
a Pydantic class).  Nothing downstream knows which front end produced the automaton.
"""

from __future__ import annotations

import json
import math
import numbers
import reprlib
import time
from dataclasses import dataclass, field
from typing import Any, ClassVar

from stdsl.caches import CacheKind
from stdsl.compiler import ir
from stdsl.compiler.automata.automaton import Automaton
from stdsl.compiler.automata.build import build_automaton, frames_cleared_on_refusal
from stdsl.compiler.collector_pause import collector_paused
from stdsl.compiler.deadline import compile_deadline
from stdsl.compiler.grammar import Grammar
from stdsl.compiler.json_schema.json_tokens import Whitespace
from stdsl.compiler.json_schema.pushdown_constraint import compile_free_form, compile_recursive
from stdsl.compiler.json_schema.recursive import is_recursive_schema
from stdsl.compiler.json_schema.resolve import pointer_token
from stdsl.compiler.json_schema.to_ir import schema_to_ir
from stdsl.compiler.pushdown.constraint import PushdownConstraint
from stdsl.compiler.regex.parser import parse_regex
from stdsl.compiler.special_tokens import output_bytes
from stdsl.errors import (
    CompileError,
    CompileTimeError,
    EmptyLanguageError,
    OptionError,
    SchemaError,
    StateBudgetError,
)

DEFAULT_MAX_STATES = 200_000
DEFAULT_MAX_SECONDS = 60.0


@dataclass(frozen=True)
class Regex:
    """A regular-expression constraint (Python `re` syntax, matched against the whole output)."""

    pattern: str

    def __post_init__(self) -> None:
        if not isinstance(self.pattern, str):
            raise OptionError("pattern", f"a Regex pattern must be a str, got {reprlib.repr(self.pattern)}")


@dataclass
class Constraint:
    """A compiled constraint: the byte automaton and how to turn accepted text into a value."""

    NBYTES_FIXED: ClassVar[bool] = True
    """Its bytes are its automaton's, which never change: `stdsl.caches` measures it once."""
    automaton: Automaton
    kind: str
    source: Any = None
    model_class: Any = None
    compile_seconds: float = 0.0
    _extra: dict[str, Any] = field(default_factory=dict)
    special_tokens: tuple[str, ...] = ()
    """The special tokens the constraint uses (by their text), each spelled privately (`compiler.special_tokens`)."""
    strict: bool | None = None
    """For a JSON Schema: whether objects were closed to their declared members (`compile`'s `strict`); None for
    other kinds."""

    @property
    def num_states(self) -> int:
        """Number of states of the trim DFA (minimal up to `MINIMIZE_UP_TO` states)."""
        return self.automaton.num_states

    @property
    def nbytes(self) -> int:
        """Bytes the automaton holds (what this constraint costs beyond the shared vocabulary)."""
        return self.automaton.nbytes

    def accepts(self, data: bytes | str) -> bool:
        """Whether the whole of `data` is an output this constraint allows (text: each used special token's text
        read as that token; bytes: read as they are, special tokens in their private spelling).

        For a JSON Schema that is the language generation uses: with `strict` (the default) objects closed to
        their declared members, so a valid instance with undeclared members is refused; compile with
        `strict=False` to test the schema's exact language."""
        return self.automaton.accepts(output_bytes(data, self.special_tokens))

    def parse(self, text: str) -> Any:
        """The typed value of an accepted output: a Pydantic instance, parsed JSON, or the text."""
        if self.model_class is not None:
            return self.model_class.model_validate_json(text)
        if self.kind == "json_schema":
            return json.loads(text)
        return text

    def __repr__(self) -> str:
        return f"Constraint({self.kind}, states={self.num_states}, bytes={self.nbytes})"


def _is_pydantic_class(spec: Any) -> bool:
    return isinstance(spec, type) and hasattr(spec, "model_json_schema") and hasattr(spec, "model_validate_json")


_COMPILED: CacheKind[Constraint | PushdownConstraint] = CacheKind("compiled constraints")
"""Compilations by what identifies them (a `stdsl.caches` entry each: least recently used go first past the
registry's byte budget; a Pydantic class is keyed by identity, and its constraint keeps it to read values back)."""


def _cache_key(spec: Any, whitespace: Whitespace | None, max_states: int, bounded: bool, strict: bool,
               zero_fractions: bool = True) -> tuple[tuple[Any, ...], tuple[Any, ...]] | None:
    """What identifies a compilation, as (owners by identity, values): the schema's JSON with its key order kept
    (properties are written in the order they are declared, so two orders are two programs) and whether its
    objects are closed, the pattern or grammar, or the class itself.

    A schema that is not plain JSON (json.dumps would turn its key 1 into "1") has no key, so it is
    compiled, and refused, rather than matched to the JSON schema it resembles.
    """
    if isinstance(spec, (dict, bool)):
        try:
            text = json.dumps(spec, allow_nan=False)
        except (TypeError, ValueError):
            return None
        if json.loads(text) != spec:
            return None
        return (), ("schema", text, whitespace, max_states, bounded, strict, zero_fractions)
    if _is_pydantic_class(spec):
        return (spec,), ("class", whitespace, max_states, bounded, strict)
    if isinstance(spec, (Regex, Grammar)):
        return (), ("spec", spec, whitespace, max_states, bounded)
    return None


def compile(
    spec: Any,
    *,
    whitespace: Whitespace | None = None,
    max_states: int = DEFAULT_MAX_STATES,
    max_seconds: float | None = DEFAULT_MAX_SECONDS,
    strict: bool = True,
    **unknown: Any,
) -> Constraint | PushdownConstraint:
    """Compile a JSON Schema (dict or bool), a `Regex`, a `Grammar` (Lark, GBNF, EBNF), a Pydantic class, a
    `Program` or `@program` function (its output under the declared parameter defaults) or a `Constraint`.

    A compilation that passes `max_seconds` is refused with CompileTimeError (None: no limit).

    A JSON Schema or Pydantic class is compiled `strict` by default: an object whose schema declares members and
    says nothing of others (no `additionalProperties`, `patternProperties` or `propertyNames`) gets its declared
    members only, and a `prefixItems` tuple without `items` no item past its prefix, so every output is valid
    and holds no member the schema did not name (docs/json_schema.md lists the exceptions).  `strict=False`
    compiles the schema's exact language.  Other kinds ignore `strict`.

    A JSON Schema whose `$ref`s form a cycle compiles to a `PushdownConstraint` (nesting capped at 64),
    and so does one too large for a single DFA whose definitions can each be a nonterminal.
    Compilations are kept in `stdsl.caches` (least recently used dropped first), so calling `generate` in a loop
    with the same schema compiles it (and builds its tables) once, even from several threads at once.
    """
    _check_keywords(unknown, whitespace, max_states, max_seconds, strict)
    if isinstance(spec, (Constraint, PushdownConstraint)):
        return spec
    program_constraint = getattr(spec, "program_constraint", None)
    if callable(program_constraint):
        with collector_paused(), compile_deadline(max_seconds), frames_cleared_on_refusal():
            compiled: Constraint | PushdownConstraint = program_constraint()
        return compiled
    return _compile_cached(spec, whitespace, max_states, max_seconds, False, strict)


def _check_keywords(unknown: dict[str, Any], whitespace: Any, max_states: Any, max_seconds: Any,
                    strict: Any) -> None:
    """Refuse an unknown keyword or a bad value of a known one with an OptionError naming it."""
    known = ["whitespace", "max_states", "max_seconds", "strict"]
    for name in unknown:
        import difflib  # only to name the keyword meant: a fresh process's compile does not pay its import

        close = difflib.get_close_matches(name, known, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise OptionError(name, f"compile() has no keyword {name!r}{hint}; its keywords are {', '.join(known)}")
    if whitespace is not None and not isinstance(whitespace, Whitespace):
        raise OptionError("whitespace", f"whitespace must be None or a Whitespace, got {reprlib.repr(whitespace)}")
    if isinstance(max_states, bool) or not isinstance(max_states, numbers.Integral) or max_states < 1:
        raise OptionError("max_states", f"max_states must be an integer >= 1, got {reprlib.repr(max_states)}")
    if max_seconds is not None and (isinstance(max_seconds, bool) or not isinstance(max_seconds, numbers.Real)
                                    or not math.isfinite(max_seconds) or max_seconds <= 0):
        raise OptionError("max_seconds", f"max_seconds must be None or a finite number of seconds > 0, got "
                                         f"{reprlib.repr(max_seconds)}")
    if not isinstance(strict, bool):
        raise OptionError("strict", f"strict must be True or False, got {reprlib.repr(strict)}")


def compile_embeddable(spec: Any, *, whitespace: Whitespace | None = None,
                       max_seconds: float | None = DEFAULT_MAX_SECONDS, strict: bool = True,
                       zero_fractions: bool = True) -> Constraint:
    """A DFA for `spec`, to embed in a larger automaton (a tool call's arguments, a reply beside tools): its
    free-form values nest at most `ANY_VALUE_DEPTH` levels; a schema that needs the pushdown is refused.
    `strict` as `compile`'s; without `zero_fractions` an integer is never written `1.0` (as XGrammar writes
    integers; a schema's DFA, not a pushdown's)."""
    compiled = _compile_cached(spec, whitespace, DEFAULT_MAX_STATES, max_seconds, True, strict, zero_fractions)
    if isinstance(compiled, PushdownConstraint):
        raise SchemaError("a recursive schema, or one too large for one DFA, cannot be embedded in another "
                          "constraint", "#")
    return compiled


def _compile_cached(spec: Any, whitespace: Whitespace | None, max_states: int, max_seconds: float | None,
                    bounded: bool, strict: bool, zero_fractions: bool = True) -> Constraint | PushdownConstraint:
    """`compile` past its argument checks; `bounded` keeps free-form values in the DFA (see `compile_embeddable`)."""
    key = _cache_key(spec, whitespace, max_states, bounded, strict, zero_fractions)

    def build() -> Constraint | PushdownConstraint:
        with collector_paused(), compile_deadline(max_seconds), frames_cleared_on_refusal():
            return _compile(spec, whitespace, max_states, bounded, strict, zero_fractions)

    if key is None:
        return build()
    owners, values = key
    return _COMPILED.get(owners, build, values)


def _compile(spec: Any, whitespace: Whitespace | None, max_states: int, bounded: bool, strict: bool,
             zero_fractions: bool = True) -> Constraint | PushdownConstraint:
    start = time.perf_counter()
    if _is_pydantic_class(spec):
        from stdsl.compiler.json_schema.pydantic import pydantic_schema  # Pydantic is imported only for its classes

        return _compile_schema(pydantic_schema(spec), spec, whitespace, max_states, start, bounded, strict)
    if isinstance(spec, (dict, bool)):
        return _compile_schema(spec, None, whitespace, max_states, start, bounded, strict, zero_fractions)
    if isinstance(spec, Regex):
        automaton = build_automaton(parse_regex(spec.pattern), max_states=max_states)
        return Constraint(automaton, "regex", spec, None, time.perf_counter() - start)
    if isinstance(spec, Grammar):
        from stdsl.compiler.grammar.lowering import lower_grammar

        specials: dict[str, None] = {}
        lowered = lower_grammar(spec, max_states=max_states, specials=specials)
        if isinstance(lowered, Automaton):
            return Constraint(lowered, "grammar", spec, None, time.perf_counter() - start,
                              special_tokens=tuple(specials))
        return lowered
    if isinstance(spec, str):
        raise CompileError(
            "a bare string is ambiguous as a constraint: pass stdsl.Regex(pattern) for a regular "
            "expression or a dict for a JSON Schema"
        )
    raise CompileError(f"cannot compile a constraint from {type(spec).__name__}")


def _free_form(schema: dict, whitespace: Whitespace | None, max_states: int,
               model_class: Any, strict: bool) -> PushdownConstraint | ir.Node | None:
    """The schema as a pushdown whose free-form values nest to any depth; its IR for a DFA when it has none
    (or a call of one clashed with the bytes around it past `recursive.MAX_ANY_LEVELS` levels and the value
    bounded at `ANY_VALUE_DEPTH` levels was inlined); None when the pushdown failed otherwise (the DFA compiler
    is then tried from the start)."""
    try:
        return compile_free_form(schema, whitespace=whitespace, max_states=max_states, model_class=model_class,
                                 outline=None, strict=strict)
    except (StateBudgetError, CompileTimeError, SchemaError, EmptyLanguageError):
        raise
    except CompileError:
        return None


MAX_INTEGER_DIGITS = 4300
_INTEGER_LIMIT = 10**MAX_INTEGER_DIGITS


def _check_integer_sizes(schema: Any) -> None:
    """Refuse an integer anywhere in the schema too long to write as JSON text (Python's `json` neither writes
    nor reads one over 4,300 digits, and no message could show it), naming its path."""
    pending: list[tuple[Any, str]] = [(schema, "#")]
    while pending:
        node, path = pending.pop()
        if isinstance(node, dict):
            pending.extend((value, f"{path}/{pointer_token(str(key))}") for key, value in node.items())
        elif isinstance(node, list):
            pending.extend((value, f"{path}/{index}") for index, value in enumerate(node))
        elif isinstance(node, int) and abs(node) >= _INTEGER_LIMIT:
            raise SchemaError(f"an integer with more than {MAX_INTEGER_DIGITS} digits cannot be written as JSON", path)


def _compile_schema(schema: dict | bool, model_class: Any, whitespace: Whitespace | None, max_states: int,
                    start: float, bounded: bool = False, strict: bool = True, zero_fractions: bool = True
                    ) -> Constraint | PushdownConstraint:
    """A JSON Schema (of a Pydantic class, if given) as a DFA, or as a pushdown when it recurses, when it holds
    a free-form value (any JSON, which nests to any depth), or when one DFA would pass `max_states` (its
    container members then become nonterminals, compiled once each)."""
    _check_integer_sizes(schema)
    if isinstance(schema, dict) and is_recursive_schema(schema):
        return compile_recursive(schema, whitespace=whitespace, max_states=max_states, model_class=model_class,
                                 outline=None, strict=strict)
    node = None
    if not bounded and (isinstance(schema, dict) or schema is True):
        free_form = _free_form(schema if schema is not True else {}, whitespace, max_states, model_class, strict)
        if isinstance(free_form, PushdownConstraint):
            return free_form
        node = free_form
    try:
        if node is None:
            node = schema_to_ir(schema, whitespace=whitespace, zero_fractions=zero_fractions and model_class is None,
                                strict=strict)
        automaton = build_automaton(node, max_states=max_states)
    except StateBudgetError as budget:
        if not isinstance(schema, dict):
            raise
        try:
            return compile_recursive(schema, whitespace=whitespace, max_states=max_states, model_class=model_class,
                                     outline=True, strict=strict)
        except (StateBudgetError, CompileTimeError):
            raise
        except CompileError as error:
            raise budget from error
    return Constraint(automaton, "json_schema", schema, model_class, time.perf_counter() - start, strict=strict)
