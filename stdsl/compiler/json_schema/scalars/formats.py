"""The string formats enforced exactly (as assertions, not annotations), each a byte-level IR regex.

Each language is over the decoded text, written raw inside the JSON string: every character
that may appear raw in JSON is spelled raw (no `\\uXXXX` for it).  Only the JSON pointers can
contain `"`, `\\` or control characters; as JSON string bodies they spell those with JSON escapes
(any spelling), and `format_body(name, plain=True)` gives their decoded-text language.  Where the
RFC, the JSON-Schema-Test-Suite and the `jsonschema` package disagree, the suite decides; where it
is silent, only what both the RFC and `jsonschema` accept is produced.  What each accepts:

- `date`: RFC 3339 full-date `YYYY-MM-DD`, month 01-12, day valid for the month, 29 February
  only in Gregorian leap years.
- `time`: RFC 3339 full-time `HH:MM:SS[.frac](Z|±HH:MM)`, hours 00-23, minutes 00-59, seconds
  00-59; a leap second `60` only at 23:59:60 with a zero offset (`Z`, `+00:00`, `-00:00`) --
  leap seconds at other offsets are valid but refused, since pairing local time with the
  offset would cost about 1,400 automaton states per field; `T`/`Z` in either case.
- `date-time`: `date` `T` `time` (`T`/`t`).
- `duration`: RFC 3339 appendix A `P` (date [`T` time] | `T` time | n`W`), each part ascending
  without gaps (`P1Y2M`, `PT1M2S`, not `P1Y2D`); digits only, upper-case designators.
- `email`: dot-atom local part (RFC 5322 atext) `@` a hostname of LDH labels (1-63 characters,
  no leading or trailing hyphen) separated by dots; quoted local parts and `[address]`
  literals are valid RFC 5321 addresses that are not produced.
- `hostname`: RFC 1123 names: dot-separated labels of letters, digits and `-`, no hyphen at either
  end of a label, no trailing dot, at most 63 characters in all.  Names of 64-253 characters are
  valid but not produced (counting both label and total length needs about 24,000 states
  per field); labels starting `xn--` (Punycode A-labels, valid only if they decode to a valid
  IDNA2008 label) are not produced either.
- `uuid`: RFC 4122 8-4-4-4-12 hex digits, either case.
- `uri`, `uri-reference`, `iri`, `iri-reference`, `uri-template`, `ipv4`, `ipv6`: see
  `json_formats_uri`.
- `json-pointer`: RFC 6901, `*("/" token)`, `~` only in `~0`/`~1`; any other character.
- `relative-json-pointer`: a non-negative integer without leading zeros, then `#` or a JSON
  pointer; the index manipulation (`0+1/a`) of the 2020-12 draft is refused by common
  validators and not produced.

`regex`, `idn-hostname` and `idn-email` are refused (`REFUSED_FORMATS` says why).  The draft 3
names (`color`, `utc-millisec`, `host-name`, ...) are not in `DEFINED_FORMATS`: later drafts do
not define them, so they are annotations.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache

from stdsl.compiler import ir
from stdsl.compiler.automata.build import build_automaton
from stdsl.compiler.automata.ops import intersect
from stdsl.compiler.ir import Node
from stdsl.compiler.json_schema.scalars.formats_uri import (
    ALNUM,
    DIGIT,
    HEX,
    chars,
    ipv4,
    ipv6,
    iri,
    iri_reference,
    uri,
    uri_reference,
    uri_template,
)
from stdsl.compiler.json_schema.scalars.numbers import digit_class, fixed_width_range
from stdsl.compiler.json_schema.scalars.string_units import string_unit

HOSTNAME_MAX_CHARS = 63


def _two(lo: int, hi: int) -> Node:
    return fixed_width_range(lo, hi, 2)


def _leap_years() -> Node:
    """Four-digit Gregorian leap years: divisible by 4, and centuries only when divisible by 400."""
    div4_two = ir.alt(ir.seq(chars("02468"), chars("48")), ir.seq(chars("13579"), chars("26")),
                      ir.seq(chars("2468"), chars("0")))
    century400 = ir.alt(ir.seq(chars("02468"), chars("048")), ir.seq(chars("13579"), chars("26")))
    return ir.alt(ir.seq(DIGIT, DIGIT, div4_two), ir.seq(century400, ir.literal("00")))


def date() -> Node:
    """RFC 3339 full-date with the right number of days in each month."""
    year = ir.repeat(DIGIT, 4, 4)
    dash = ir.literal("-")
    long_months = ir.alt(*(ir.literal(m) for m in ("01", "03", "05", "07", "08", "10", "12")))
    short_months = ir.alt(*(ir.literal(m) for m in ("04", "06", "09", "11")))
    regular = ir.alt(ir.seq(long_months, dash, _two(1, 31)), ir.seq(short_months, dash, _two(1, 30)),
                     ir.seq(ir.literal("02"), dash, _two(1, 28)))
    return ir.alt(ir.seq(year, dash, regular), ir.seq(_leap_years(), ir.literal("-02-29")))


def time() -> Node:
    """RFC 3339 full-time; leap seconds only at 23:59:60 UTC."""
    frac = ir.optional(ir.seq(ir.literal("."), ir.plus(DIGIT)))
    zero_offset = ir.alt(chars("Zz"), ir.literal("+00:00"), ir.literal("-00:00"))
    offset = ir.alt(chars("Zz"), ir.seq(chars("+-"), _two(0, 23), ir.literal(":"), _two(0, 59)))
    normal = ir.seq(_two(0, 23), ir.literal(":"), _two(0, 59), ir.literal(":"), _two(0, 59), frac, offset)
    leap = ir.seq(ir.literal("23:59:60"), frac, zero_offset)
    return ir.alt(normal, leap)


def date_time() -> Node:
    """RFC 3339 date-time."""
    return ir.seq(date(), chars("Tt"), time())


def email() -> Node:
    """Dot-atom local part `@` hostname."""
    atext = ir.byte_set([(0x30, 0x39), (0x41, 0x5A), (0x61, 0x7A)] + [(ord(c), ord(c)) for c in "!#$%&'*+-/=?^_`{|}~"])
    atom = ir.plus(atext)
    local = ir.seq(atom, ir.star(ir.seq(ir.literal("."), atom)))
    return ir.seq(local, ir.literal("@"), _ldh_names())


def _ldh_names() -> Node:
    """Dot-separated LDH labels of 1-63 characters, no hyphen at either end of a label."""
    ldh = ir.alt(ALNUM, ir.literal("-"))
    label = ir.seq(ALNUM, ir.optional(ir.seq(ir.repeat(ldh, 0, 61), ALNUM)))
    return ir.seq(label, ir.star(ir.seq(ir.literal("."), label)))


def _label_without_ace_prefix() -> Node:
    """An LDH label (any length, no hyphen at either end) that does not start with `xn--` in any case."""
    ldh = ir.alt(ALNUM, ir.literal("-"))
    after_alnum = ir.optional(ir.seq(ir.star(ldh), ALNUM))
    after_hyphen = ir.seq(ir.star(ldh), ALNUM)
    x, n = chars("xX"), chars("nN")
    not_x = ir.byte_set([(0x30, 0x39), (0x41, 0x57), (0x59, 0x5A), (0x61, 0x77), (0x79, 0x7A)])
    not_n = ir.byte_set([(0x30, 0x39), (0x41, 0x4D), (0x4F, 0x5A), (0x61, 0x6D), (0x6F, 0x7A)])
    after_xn = ir.alt(ir.EMPTY, ir.seq(ALNUM, after_alnum), ir.seq(ir.literal("-"), ALNUM, after_alnum))
    after_x = ir.alt(ir.EMPTY, ir.seq(not_n, after_alnum), ir.seq(ir.literal("-"), after_hyphen), ir.seq(n, after_xn))
    return ir.alt(ir.seq(not_x, after_alnum), ir.seq(x, after_x))


@lru_cache(maxsize=1)
def hostname() -> Node:
    """RFC 1123 host names of at most 63 characters, without `xn--` labels (see the module notes)."""
    label = _label_without_ace_prefix()
    names = build_automaton(ir.seq(label, ir.star(ir.seq(ir.literal("."), label))))
    short = build_automaton(ir.repeat(ir.alt(ALNUM, chars("-.")), 1, HOSTNAME_MAX_CHARS))
    both = intersect(names, short)
    return ir.Embedded(both.transitions, both.accepting)


def duration() -> Node:
    """RFC 3339 appendix A `duration`."""
    number = ir.plus(DIGIT)

    def part(unit: str, smaller: Node | None = None) -> Node:
        """Digits and the unit letter, then optionally the next smaller part."""
        return ir.seq(number, ir.literal(unit), ir.EMPTY if smaller is None else ir.optional(smaller))

    second = part("S")
    minute = part("M", second)
    time_part = ir.seq(ir.literal("T"), ir.alt(part("H", minute), minute, second))
    day = part("D")
    date_part = ir.seq(ir.alt(day, part("M", day), part("Y", part("M", day))), ir.optional(time_part))
    return ir.seq(ir.literal("P"), ir.alt(date_part, time_part, part("W")))


def json_pointer(plain: bool = False) -> Node:
    """RFC 6901 JSON pointer: `*("/" reference-token)`, a token being characters other than `/` and `~`,
    or `~0` / `~1`.  As a JSON string body (`plain=False`) `"`, `\\` and controls are written as JSON
    escapes and every other character raw; `plain=True` is the decoded text itself."""
    special = [(0x00, 0x1F), (0x22, 0x22), (0x5C, 0x5C)]
    if plain:
        character = ir.codepoints([(0x2F, 0x2F), (0x7E, 0x7E)], negate=True)
    else:
        character = ir.alt(ir.codepoints(special + [(0x2F, 0x2F), (0x7E, 0x7E)], negate=True),
                           string_unit(tuple(special)))
    token = ir.star(ir.alt(character, ir.seq(ir.literal("~"), chars("01"))))
    return ir.star(ir.seq(ir.literal("/"), token))


def relative_json_pointer(plain: bool = False) -> Node:
    """A non-negative integer (no leading zeros), then `#` or a JSON pointer (see `json_pointer`)."""
    integer = ir.alt(ir.literal("0"), ir.seq(digit_class(1, 9), ir.star(DIGIT)))
    return ir.seq(integer, ir.alt(ir.literal("#"), json_pointer(plain)))


def uuid() -> Node:
    """8-4-4-4-12 hex digits."""
    groups = [ir.repeat(HEX, n, n) for n in (8, 4, 4, 4, 12)]
    dash = ir.literal("-")
    return ir.seq(groups[0], dash, groups[1], dash, groups[2], dash, groups[3], dash, groups[4])


FORMATS: dict[str, Callable[[], Node]] = {
    "date": date, "time": time, "date-time": date_time, "duration": duration, "email": email, "hostname": hostname,
    "uuid": uuid, "uri": uri, "uri-reference": uri_reference, "iri": iri, "iri-reference": iri_reference,
    "uri-template": uri_template, "ipv4": ipv4, "ipv6": ipv6, "json-pointer": json_pointer,
    "relative-json-pointer": relative_json_pointer}

REFUSED_FORMATS = {
    "regex": "ECMA-262 regular expressions nest parentheses to any depth, so their syntax is not a regular "
             "language",
    "idn-hostname": "IDNA2008 host names depend on Unicode property tables, Bidi and contextual rules and "
                    "Punycode-decoded A-labels, which have no exact automaton of practical size",
    "idn-email": "RFC 6531 addresses end in an IDNA2008 host name (see idn-hostname), which has no exact "
                 "automaton of practical size",
}

DEFINED_FORMATS = frozenset(FORMATS) | frozenset(REFUSED_FORMATS)

PLAIN_TEXT_FORMATS: dict[str, Callable[[], Node]] = {
    "json-pointer": lambda: json_pointer(plain=True),
    "relative-json-pointer": lambda: relative_json_pointer(plain=True)}


def format_body(name: str, plain: bool = False) -> Node | None:
    """The IR of a supported format as a JSON string body, or (`plain=True`) as decoded text; None if unsupported.

    The two differ only for the JSON pointers, whose `"`, `\\` and controls need escapes in JSON.
    """
    build = (PLAIN_TEXT_FORMATS.get(name) if plain else None) or FORMATS.get(name)
    return build() if build else None


def unsupported_format_message(name: str) -> str:
    """Why a format that JSON Schema (draft 4 to 2020-12) defines is refused, naming the supported ones."""
    reason = REFUSED_FORMATS.get(name, "it has no exact byte-level language here")
    return f"format '{name}' is not supported: {reason} (supported: {', '.join(FORMATS)})"
