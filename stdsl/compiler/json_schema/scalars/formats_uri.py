"""URI-like string formats as byte-level IR: RFC 3986 URIs, RFC 3987 IRIs, RFC 6570 URI templates, IP addresses.

Every character is written raw (the IRI sets are raw UTF-8); none of these languages contains
`"`, `\\` or a control character, so each is also its own JSON string body.  Where the RFCs and
common validators disagree the smaller language is taken (see each builder), so that every
accepted text is valid under both.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from stdsl.compiler import ir
from stdsl.compiler.ir import Node
from stdsl.compiler.json_schema.scalars.numbers import digit_class, integer_in_range

DIGIT = digit_class(0, 9)
HEX = digit_class(0, 15, 16)
ALPHA = ir.byte_set([(0x41, 0x5A), (0x61, 0x7A)])
ALNUM = ir.byte_set([(0x30, 0x39), (0x41, 0x5A), (0x61, 0x7A)])
PCT_ENCODED = ir.seq(ir.literal("%"), HEX, HEX)
SUB_DELIMS = "!$&'()*+,;="
UCSCHAR = ((0xA0, 0xD7FF), (0xF900, 0xFDCF), (0xFDF0, 0xFFEF)) + tuple(
    (plane << 16, (plane << 16) + 0xFFFD) for plane in range(1, 14)) + ((0xE1000, 0xEFFFD),)
IPRIVATE = ((0xE000, 0xF8FF), (0xF0000, 0xFFFFD), (0x100000, 0x10FFFD))
TEMPLATE_LITERAL_ASCII = ((0x21, 0x21), (0x23, 0x24), (0x26, 0x3B), (0x3D, 0x3D), (0x3F, 0x5B), (0x5D, 0x5D),
                          (0x5F, 0x5F), (0x61, 0x7A), (0x7E, 0x7E))


def chars(text: str) -> Node:
    """One byte from the given ASCII characters."""
    return ir.byte_set((ord(c), ord(c)) for c in text)


def ipv4() -> Node:
    """Dotted quad, each part 0-255 in canonical decimal (RFC 3986 `dec-octet`: no leading zeros)."""
    octet = integer_in_range(0, 255)
    dot = ir.literal(".")
    return ir.seq(octet, dot, octet, dot, octet, dot, octet)


def ipv6() -> Node:
    """RFC 4291 / RFC 3986 `IPv6address` text forms with optional `::` and embedded IPv4; no zone index."""
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


@dataclass(frozen=True)
class _References:
    """The two top-level rules of RFC 3986 (or their RFC 3987 `i`-forms): absolute and relative references."""

    absolute: Node
    relative: Node


@lru_cache(maxsize=2)
def _references(international: bool) -> _References:
    """RFC 3986 appendix A (URI) or RFC 3987 section 2.2 (IRI: `ucschar` in names, `iprivate` in queries)."""
    extra = ir.codepoints(UCSCHAR) if international else ir.NOTHING
    unreserved = ir.alt(ALNUM, chars("-._~"), extra)
    reg_char = ir.alt(unreserved, PCT_ENCODED, chars(SUB_DELIMS))
    pchar = ir.alt(reg_char, chars(":@"))
    segment, segment_nz = ir.star(pchar), ir.plus(pchar)
    segment_nz_nc = ir.plus(ir.alt(reg_char, chars("@")))
    path_abempty = ir.star(ir.seq(ir.literal("/"), segment))
    path_absolute = ir.seq(ir.literal("/"), ir.optional(ir.seq(segment_nz, path_abempty)))
    ip_future = ir.seq(chars("vV"), ir.plus(HEX), ir.literal("."),
                       ir.plus(ir.alt(ALNUM, chars("-._~" + SUB_DELIMS + ":"))))
    host = ir.alt(ir.seq(ir.literal("["), ir.alt(ipv6(), ip_future), ir.literal("]")), ir.star(reg_char))
    userinfo = ir.star(ir.alt(reg_char, chars(":")))
    port = ir.optional(ir.seq(ir.literal(":"), ir.star(DIGIT)))
    network_path = ir.seq(ir.literal("//"), ir.optional(ir.seq(userinfo, ir.literal("@"))), host, port, path_abempty)
    query_extra = ir.codepoints(IPRIVATE) if international else ir.NOTHING
    query = ir.optional(ir.seq(ir.literal("?"), ir.star(ir.alt(pchar, query_extra, chars("/?")))))
    fragment = ir.optional(ir.seq(ir.literal("#"), ir.star(ir.alt(pchar, chars("/?")))))
    scheme = ir.seq(ALPHA, ir.star(ir.alt(ALNUM, chars("+-."))))
    hier_part = ir.alt(network_path, path_absolute, ir.seq(segment_nz, path_abempty), ir.EMPTY)
    relative_part = ir.alt(network_path, path_absolute, ir.seq(segment_nz_nc, path_abempty), ir.EMPTY)
    return _References(absolute=ir.seq(scheme, ir.literal(":"), hier_part, query, fragment),
                       relative=ir.seq(relative_part, query, fragment))


def uri() -> Node:
    """RFC 3986 `URI`: scheme ":" hier-part ["?" query] ["#" fragment], the authority parsed.

    IPvFuture hosts take `v` or `V` (ABNF strings ignore case); the `rfc3987` package takes `v` only.
    """
    return _references(False).absolute


def uri_reference() -> Node:
    """RFC 3986 `URI-reference`: a `URI` or a relative reference (network-path, absolute-path,
    relative-path without a colon in its first segment, or empty), each with optional query and fragment."""
    refs = _references(False)
    return ir.alt(refs.absolute, refs.relative)


def iri() -> Node:
    """RFC 3987 `IRI`: `URI` with `ucschar` (raw UTF-8) allowed in names and `iprivate` in the query."""
    return _references(True).absolute


def iri_reference() -> Node:
    """RFC 3987 `IRI-reference`: an `IRI` or an `irelative-ref`."""
    refs = _references(True)
    return ir.alt(refs.absolute, refs.relative)


@lru_cache(maxsize=1)
def uri_template() -> Node:
    """RFC 6570 `URI-Template`: literals and `{` [operator] varspec *("," varspec) `}` expressions.

    Literals are the RFC's set plus `'` (erratum 6937, as the JSON Schema test suite has it);
    operators are `+ # . / ; ? &` -- the five the RFC reserves for future use (`= , ! @ |`) are
    refused by common validators and not produced; prefix lengths are 1-9999 without leading zero.
    """
    literal = ir.alt(ir.codepoints(TEMPLATE_LITERAL_ASCII + UCSCHAR + IPRIVATE), PCT_ENCODED)
    varchar = ir.alt(ALNUM, ir.literal("_"), PCT_ENCODED)
    varname = ir.seq(varchar, ir.star(ir.seq(ir.optional(ir.literal(".")), varchar)))
    prefix = ir.seq(ir.literal(":"), digit_class(1, 9), ir.repeat(DIGIT, 0, 3))
    varspec = ir.seq(varname, ir.optional(ir.alt(prefix, ir.literal("*"))))
    expression = ir.seq(ir.literal("{"), ir.optional(chars("+#./;?&")), varspec,
                        ir.star(ir.seq(ir.literal(","), varspec)), ir.literal("}"))
    return ir.star(ir.alt(literal, expression))
