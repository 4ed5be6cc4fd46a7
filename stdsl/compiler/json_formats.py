"""The string formats enforced exactly (as assertions, not annotations), each a byte-level IR regex.

All formats are ASCII-only, so their text is also the JSON string body (no character needs
escaping except none: `"`, `\\` and controls never occur in them).  What each accepts:

- `date`: RFC 3339 full-date `YYYY-MM-DD`, month 01-12, day valid for the month, 29 February
  only in Gregorian leap years.
- `time`: RFC 3339 full-time `HH:MM:SS[.frac](Z|±HH:MM)`, hours 00-23, minutes 00-59, seconds
  00-59; a leap second `60` only at 23:59:60 with a zero offset (`Z`, `+00:00`, `-00:00`) --
  leap seconds at other offsets are valid but refused, since pairing local time with the
  offset would cost about 1,400 automaton states per field; `T`/`Z` in either case.
- `date-time`: `date` `T` `time` (`T`/`t`).
- `email`: dot-atom local part (RFC 5322 atext) `@` a hostname of LDH labels (1-63 characters,
  no leading or trailing hyphen) separated by dots; quoted local parts and `[address]`
  literals are valid RFC 5321 addresses that are not produced.
- `uuid`: RFC 4122 8-4-4-4-12 hex digits, either case.
- `uri`: RFC 3986 `URI` (absolute, with optional fragment): scheme, then `//authority` (userinfo,
  reg-name / IPv4 / bracketed IPv6 or IPvFuture host, numeric port) and path, or a path; then
  optional `?query` and `#fragment`; every character from the RFC's sets or `%HH`.
- `ipv4`: dotted quad of 0-255 without leading zeros.
- `ipv6`: RFC 4291 text forms: eight 1-4 digit hex groups, `::` compression, an embedded
  IPv4 tail; no zone index.
"""

from __future__ import annotations

from stdsl.compiler import ir
from stdsl.compiler.ir import Node
from stdsl.compiler.json_numbers import digit_class, fixed_width_range, integer_in_range

DIGIT = digit_class(0, 9)
HEX = digit_class(0, 15, 16)
ALPHA = ir.byte_set([(0x41, 0x5A), (0x61, 0x7A)])
ALNUM = ir.byte_set([(0x30, 0x39), (0x41, 0x5A), (0x61, 0x7A)])


def _chars(text: str) -> Node:
    """One byte from the given ASCII characters."""
    return ir.byte_set((ord(c), ord(c)) for c in text)


def _two(lo: int, hi: int) -> Node:
    return fixed_width_range(lo, hi, 2)


def _leap_years() -> Node:
    """Four-digit Gregorian leap years: divisible by 4, and centuries only when divisible by 400."""
    div4_two = ir.alt(ir.seq(_chars("02468"), _chars("48")), ir.seq(_chars("13579"), _chars("26")),
                      ir.seq(_chars("2468"), _chars("0")))
    century400 = ir.alt(ir.seq(_chars("02468"), _chars("048")), ir.seq(_chars("13579"), _chars("26")))
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
    zero_offset = ir.alt(_chars("Zz"), ir.literal("+00:00"), ir.literal("-00:00"))
    offset = ir.alt(_chars("Zz"), ir.seq(_chars("+-"), _two(0, 23), ir.literal(":"), _two(0, 59)))
    normal = ir.seq(_two(0, 23), ir.literal(":"), _two(0, 59), ir.literal(":"), _two(0, 59), frac, offset)
    leap = ir.seq(ir.literal("23:59:60"), frac, zero_offset)
    return ir.alt(normal, leap)


def date_time() -> Node:
    """RFC 3339 date-time."""
    return ir.seq(date(), _chars("Tt"), time())


def email() -> Node:
    """Dot-atom local part `@` hostname."""
    atext = ir.byte_set([(0x30, 0x39), (0x41, 0x5A), (0x61, 0x7A)] + [(ord(c), ord(c)) for c in "!#$%&'*+-/=?^_`{|}~"])
    atom = ir.plus(atext)
    local = ir.seq(atom, ir.star(ir.seq(ir.literal("."), atom)))
    return ir.seq(local, ir.literal("@"), hostname())


def hostname() -> Node:
    """Dot-separated LDH labels of 1-63 characters, no hyphen at either end of a label."""
    ldh = ir.alt(ALNUM, ir.literal("-"))
    label = ir.seq(ALNUM, ir.optional(ir.seq(ir.repeat(ldh, 0, 61), ALNUM)))
    return ir.seq(label, ir.star(ir.seq(ir.literal("."), label)))


def uuid() -> Node:
    """8-4-4-4-12 hex digits."""
    groups = [ir.repeat(HEX, n, n) for n in (8, 4, 4, 4, 12)]
    dash = ir.literal("-")
    return ir.seq(groups[0], dash, groups[1], dash, groups[2], dash, groups[3], dash, groups[4])


def uri() -> Node:
    """RFC 3986 `URI`: scheme ":" hier-part ["?" query] ["#" fragment], with the authority parsed."""
    scheme = ir.seq(ALPHA, ir.star(ir.alt(ALNUM, _chars("+-."))))
    pct = ir.seq(ir.literal("%"), HEX, HEX)
    unreserved_sub = ir.alt(ALNUM, _chars("-._~!$&'()*+,;="), pct)
    pchar = ir.alt(unreserved_sub, _chars(":@"))
    segment, segment_nz = ir.star(pchar), ir.plus(pchar)
    path_abempty = ir.star(ir.seq(ir.literal("/"), segment))
    userinfo = ir.star(ir.alt(unreserved_sub, _chars(":")))
    ip_future = ir.seq(_chars("vV"), ir.plus(HEX), ir.literal("."), ir.plus(ir.alt(ALNUM, _chars("-._~!$&'()*+,;=:"))))
    ip_literal = ir.seq(ir.literal("["), ir.alt(ipv6(), ip_future), ir.literal("]"))
    host = ir.alt(ip_literal, ir.star(unreserved_sub))
    port = ir.optional(ir.seq(ir.literal(":"), ir.star(DIGIT)))
    authority = ir.seq(ir.optional(ir.seq(userinfo, ir.literal("@"))), host, port)
    hier = ir.alt(ir.seq(ir.literal("//"), authority, path_abempty),
                  ir.seq(ir.literal("/"), ir.optional(ir.seq(segment_nz, path_abempty))),
                  ir.seq(segment_nz, path_abempty), ir.EMPTY)
    query = ir.star(ir.alt(pchar, _chars("/?")))
    return ir.seq(scheme, ir.literal(":"), hier, ir.optional(ir.seq(ir.literal("?"), query)),
                  ir.optional(ir.seq(ir.literal("#"), query)))


def ipv4() -> Node:
    """Dotted quad, each part 0-255 in canonical decimal."""
    octet = integer_in_range(0, 255)
    dot = ir.literal(".")
    return ir.seq(octet, dot, octet, dot, octet, dot, octet)


def ipv6() -> Node:
    """RFC 4291 text forms with optional `::` and embedded IPv4."""
    group = ir.repeat(HEX, 1, 4)
    colon = ir.literal(":")

    def groups(n: int) -> Node:
        """n groups joined by colons."""
        return ir.EMPTY if n == 0 else ir.seq(group, ir.repeat(ir.seq(colon, group), n - 1, n - 1))

    forms: list[Node] = []
    for tail, width in ((ir.EMPTY, 8), (ipv4(), 6)):
        joiner = colon if tail != ir.EMPTY else ir.EMPTY
        forms.append(ir.seq(groups(width), joiner, tail))
        for left in range(width):
            for right in range(width - left):
                right_part = ir.seq(groups(right), colon, tail) if right and tail != ir.EMPTY else (
                    groups(right) if right else tail)
                forms.append(ir.seq(groups(left), ir.literal("::"), right_part))
    return ir.alt(*forms)


FORMATS = {"date": date, "time": time, "date-time": date_time, "email": email, "uuid": uuid, "uri": uri,
           "ipv4": ipv4, "ipv6": ipv6}


def format_body(name: str) -> Node | None:
    """The IR of a supported format's text (also its JSON string body), or None if unsupported."""
    build = FORMATS.get(name)
    return build() if build else None
