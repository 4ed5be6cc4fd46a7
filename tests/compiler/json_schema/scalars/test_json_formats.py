"""The string formats against independent oracles: RFC ABNF rewritten as Python regexes, `jsonschema`'s
FormatChecker, the JSON-Schema-Test-Suite format tests and the MaskBench sample's labelled instances.

Each format is compiled as `{"type": "string", "format": F}` and fed `json.dumps(text, ensure_ascii=False)`.
The automaton must agree exactly with the RFC regex (with the documented narrowings: `hostname` at most
63 characters and no `xn--` labels); everything it accepts must also pass `jsonschema` where that
implements the format, except where jsonschema is stricter than both the RFC and the test suite
(`validator_stricter`).
"""

from __future__ import annotations

import json
import re
import warnings
from functools import cache

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stdsl.compiler.automata.automaton import Automaton
from stdsl.compiler.automata.build import build_automaton
from stdsl.compiler.json_schema.scalars.formats import (
    DEFINED_FORMATS,
    FORMATS,
    REFUSED_FORMATS,
    format_body,
    unsupported_format_message,
)
from stdsl.compiler.json_schema.to_ir import schema_to_ir
from stdsl.errors import SchemaError
from tests.data_files import JSON_SCHEMA_SUITE, MASKBENCH, MASKBENCH_ABSENT

SUITE_FORMATS = JSON_SCHEMA_SUITE / "optional" / "format"
PLAIN_VARIANTS = ("json-pointer", "relative-json-pointer")
NEW_FORMATS = ("uri-reference", "iri", "iri-reference", "uri-template", "hostname", "duration", "json-pointer",
               "relative-json-pointer")

# RFC 3986 appendix A / RFC 3987 section 2.2, written out independently of the IR builders.
HEXDIG = "[0-9A-Fa-f]"
PCT = f"%{HEXDIG}{HEXDIG}"
SUB_DELIMS = "[!$&'()*+,;=]"
UCSCHAR = ("\u00a0-\ud7ff\uf900-\ufdcf\ufdf0-\uffef\U00010000-\U0001fffd\U00020000-\U0002fffd\U00030000-\U0003fffd"
           "\U00040000-\U0004fffd\U00050000-\U0005fffd\U00060000-\U0006fffd\U00070000-\U0007fffd"
           "\U00080000-\U0008fffd\U00090000-\U0009fffd\U000a0000-\U000afffd\U000b0000-\U000bfffd"
           "\U000c0000-\U000cfffd\U000d0000-\U000dfffd\U000e1000-\U000efffd")
IPRIVATE = "\ue000-\uf8ff\U000f0000-\U000ffffd\U00100000-\U0010fffd"
H16 = f"{HEXDIG}{{1,4}}"
DEC_OCTET = "(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9][0-9]|[0-9])"
IPV4 = rf"{DEC_OCTET}\.{DEC_OCTET}\.{DEC_OCTET}\.{DEC_OCTET}"
LS32 = f"(?:{H16}:{H16}|{IPV4})"
IPV6 = "(?:" + "|".join([
    f"(?:{H16}:){{6}}{LS32}", f"::(?:{H16}:){{5}}{LS32}", f"(?:{H16})?::(?:{H16}:){{4}}{LS32}",
    f"(?:(?:{H16}:)?{H16})?::(?:{H16}:){{3}}{LS32}", f"(?:(?:{H16}:){{0,2}}{H16})?::(?:{H16}:){{2}}{LS32}",
    f"(?:(?:{H16}:){{0,3}}{H16})?::{H16}:{LS32}", f"(?:(?:{H16}:){{0,4}}{H16})?::{LS32}",
    f"(?:(?:{H16}:){{0,5}}{H16})?::{H16}", f"(?:(?:{H16}:){{0,6}}{H16})?::"]) + ")"


def rfc3986(international: bool) -> tuple[str, str]:
    """(absolute, relative) reference regexes of RFC 3986, or of RFC 3987 when `international`."""
    unreserved = f"[A-Za-z0-9._~{UCSCHAR if international else ''}-]"
    pchar = f"(?:{unreserved}|{PCT}|{SUB_DELIMS}|[:@])"
    segment, segment_nz = f"{pchar}*", f"{pchar}+"
    segment_nz_nc = f"(?:{unreserved}|{PCT}|{SUB_DELIMS}|@)+"
    path_abempty = f"(?:/{segment})*"
    ip_future = rf"[vV]{HEXDIG}+\.(?:[A-Za-z0-9._~-]|{SUB_DELIMS}|:)+"
    host = rf"(?:\[(?:{IPV6}|{ip_future})\]|{IPV4}|(?:{unreserved}|{PCT}|{SUB_DELIMS})*)"
    authority = f"(?:(?:{unreserved}|{PCT}|{SUB_DELIMS}|:)*@)?{host}(?::[0-9]*)?"
    path_absolute = f"/(?:{segment_nz}{path_abempty})?"
    query = rf"(?:\?(?:{pchar}|{f'[{IPRIVATE}]|' if international else ''}[/?])*)?"
    fragment = rf"(?:#(?:{pchar}|[/?])*)?"
    hier = f"(?://{authority}{path_abempty}|{path_absolute}|{segment_nz}{path_abempty}|)"
    relative = f"(?://{authority}{path_abempty}|{path_absolute}|{segment_nz_nc}{path_abempty}|)"
    return f"[A-Za-z][A-Za-z0-9+.-]*:{hier}{query}{fragment}", f"{relative}{query}{fragment}"


def duration_regex() -> str:
    """RFC 3339 appendix A."""
    second, number = "[0-9]+S", "[0-9]+"
    minute = f"{number}M(?:{second})?"
    time = f"T(?:{number}H(?:{minute})?|{minute}|{second})"
    day = f"{number}D"
    month = f"{number}M(?:{day})?"
    date = f"(?:{day}|{month}|{number}Y(?:{month})?)(?:{time})?"
    return f"P(?:{date}|{time}|{number}W)"


def template_regex() -> str:
    """RFC 6570 section 2 (plus `'` in literals; operators of levels 2 and 3 only)."""
    literal = rf"(?:[!#$&-;=?-\[\]_a-z~{UCSCHAR}{IPRIVATE}]|{PCT})"
    varchar = f"(?:[A-Za-z0-9_]|{PCT})"
    varspec = rf"{varchar}(?:\.?{varchar})*(?::[1-9][0-9]{{0,3}}|\*)?"
    return rf"(?:{literal}|\{{[+#./;?&]?{varspec}(?:,{varspec})*\}})*"


POINTER = "(?:/(?:[^/~]|~[01])*)*"
LABEL = "(?!-)[A-Za-z0-9-]{1,63}(?<!-)"
URI_ABSOLUTE, URI_RELATIVE = rfc3986(False)
IRI_ABSOLUTE, IRI_RELATIVE = rfc3986(True)
RFC_REGEX = {
    "uri": URI_ABSOLUTE, "uri-reference": f"{URI_ABSOLUTE}|{URI_RELATIVE}", "iri": IRI_ABSOLUTE,
    "iri-reference": f"{IRI_ABSOLUTE}|{IRI_RELATIVE}", "uri-template": template_regex(), "duration": duration_regex(),
    "json-pointer": POINTER, "relative-json-pointer": f"(?:0|[1-9][0-9]*)(?:#|{POINTER})",
    "hostname": rf"{LABEL}(?:\.{LABEL})*",
}


def rfc_valid(name: str, text: str) -> bool:
    """The RFC regex verdict, with the documented narrowing of `hostname`."""
    if re.fullmatch(RFC_REGEX[name], text, re.DOTALL) is None:
        return False
    if name == "hostname":
        return len(text) <= 63 and not any(label.lower().startswith("xn--") for label in text.split("."))
    return True


def jsonschema_verdict(name: str, text: str) -> bool | None:
    """jsonschema's FormatChecker verdict, or None where it does not check the format (a package is missing)."""
    jsonschema = pytest.importorskip("jsonschema")
    checker = jsonschema.FormatChecker()
    if name not in checker.checkers:
        return None
    return checker.conforms(text, name)


def validator_stricter(name: str, text: str) -> bool:
    """Where jsonschema rejects what both the RFC and the JSON-Schema-Test-Suite accept (the suite is followed):
    IPvFuture `V` (rfc3987 takes `v` only), IP literals and characters beyond U+FFFF in IRIs (`rfc3987-syntax`,
    the checker of jsonschema's format-nongpl extra, rejects `http://[::1]` and `a\U0001f600`, which RFC 3987's
    ucschar includes), 4-digit template prefixes and varnames starting with `%`
    (uri_template), a `0` followed by a digit anywhere in a relative pointer's integer (jsonschema's loop)."""
    if name in ("iri", "iri-reference"):
        return "[" in text or any(ord(c) > 0xFFFF for c in text)
    if name in ("uri", "uri-reference"):
        return "[V" in text
    if name == "uri-template":
        return re.search(r":[0-9]{4}|[{,][+#./;?&]?%", text) is not None
    if name == "relative-json-pointer":
        return re.match("[0-9]*0[0-9]", text) is not None
    return False


@cache
def automaton(name: str) -> Automaton:
    """The compiled schema `{"type": "string", "format": name}`."""
    return build_automaton(schema_to_ir({"type": "string", "format": name}))


@cache
def plain_automaton(name: str) -> Automaton:
    """The format's decoded-text language."""
    body = format_body(name, plain=True)
    assert body is not None
    return build_automaton(body)


def accepts(name: str, text: str) -> bool:
    """Whether the compiled schema accepts the canonical JSON spelling of `text`."""
    return automaton(name).accepts(json.dumps(text, ensure_ascii=False).encode())


URI_TOKENS = ["http", "urn", "a", "Z9", "+", "-", ".", "_", "~", ":", "//", "/", "?", "#", "@", "[", "]", "::", "1",
              "255", "256", "01", "1.2.3.4", "ffff", "v1.x", "V7.a:b", "%41", "%4", "%zz", "!", "$", "'", "(", "*",
              ",", ";", "=", " ", '"', "\\", "{", "}", "<", "|", "\u00e9", "\u2028", "\ue000", "\U0001f600",
              "\U000f0000", "\ufffe", "\n"]
TOKENS = {
    "uri": URI_TOKENS, "uri-reference": URI_TOKENS, "iri": URI_TOKENS, "iri-reference": URI_TOKENS,
    "uri-template": ["{", "}", "a", "B_9", ".", ",", "*", ":", "1", "0", "9999", "10000", "+", "#", "/", ";", "?",
                     "&", "=", "!", "@", "|", "%41", "%4", "'", '"', " ", "\u00e9", "\ue000", "\x7f", "<", "-", "~"],
    "hostname": ["a", "Z", "9", "-", ".", "xn--", "XN--", "x", "n", "_", "a" * 30, "b" * 63, "\u212a", "\n", " "],
    "duration": ["P", "T", "Y", "M", "W", "D", "H", "S", "1", "0", "42", ".5", ",", "-", "p", "t", "\u09e8", " "],
    "json-pointer": ["/", "~", "~0", "~1", "~2", "a", "0", "#", '"', "\\", "\n", "\x00", "\x7f", "\u00e9",
                     "\U0001f60e", " ", "%"],
}
TOKENS["relative-json-pointer"] = TOKENS["json-pointer"] + ["1", "10", "00", "+1", "-1", "\u0661"]


def structured(name: str) -> st.SearchStrategy[str]:
    """Mostly valid strings of the format, built from its grammar."""
    word = st.text("abcXYZ019-._~", min_size=1, max_size=6)
    if name == "hostname":
        label = st.from_regex(r"[a-z0-9]([a-z0-9-]{0,8}[a-z0-9])?", fullmatch=True)
        return st.lists(label, min_size=1, max_size=5).map(".".join)
    if name == "duration":
        return st.from_regex(duration_regex(), fullmatch=True)
    if name in ("json-pointer", "relative-json-pointer"):
        token = st.lists(st.one_of(st.text(min_size=0, max_size=4).map(lambda t: t.replace("~", "~0")),
                                   st.sampled_from(["~0", "~1"])), max_size=3).map("".join)
        pointer = st.lists(token, max_size=4).map(lambda ts: "".join("/" + t.replace("/", "~1") for t in ts))
        if name == "json-pointer":
            return pointer
        return st.tuples(st.integers(0, 120), st.one_of(pointer, st.just("#"))).map(lambda p: f"{p[0]}{p[1]}")
    if name == "uri-template":
        var = st.from_regex(r"[a-z_][a-z0-9_]{0,3}(\.[a-z]{1,3})?(:[1-9][0-9]{0,3}|\*)?", fullmatch=True)
        operator = st.sampled_from(["", "+", "#", ".", "/", ";", "?", "&"])
        variables = st.lists(var, min_size=1, max_size=3).map(",".join)
        expr = st.tuples(operator, variables).map(lambda e: "{" + e[0] + e[1] + "}")
        return st.lists(st.one_of(word, expr), max_size=4).map("".join)
    host = st.one_of(word, st.sampled_from(["[::1]", "[2001:db8::7]", "[v1.fe]", "1.2.3.4", "[::ffff:1.2.3.4]"]))
    authority = st.tuples(st.sampled_from(["", "user@", "u:p@"]), host, st.sampled_from(["", ":80", ":"])).map("".join)
    segments = st.lists(st.one_of(word, st.just("\u00e9"), st.just("%20")), max_size=3)
    path = segments.map(lambda ps: "".join("/" + p for p in ps))
    tail = st.tuples(st.sampled_from(["", "?q=1", "?\ue000", "?"]), st.sampled_from(["", "#f", "#\u00e9/?"]))
    hier = st.one_of(authority.map(lambda a: "//" + a), st.just(""))
    absolute = st.tuples(st.sampled_from(["http:", "urn:", "a+b.c-d:"]), hier, path, tail.map("".join)).map("".join)
    relative = st.tuples(st.sampled_from(["", "//x.org", "./a:b", "a", "/"]), path, tail.map("".join)).map("".join)
    return st.one_of(absolute, relative)


def mutated(name: str) -> st.SearchStrategy[str]:
    """Structured strings with random edits, and free concatenations of the format's tokens."""
    tokens = st.sampled_from(TOKENS[name])
    soup = st.lists(tokens, max_size=8).map("".join)

    @st.composite
    def edited(draw: st.DrawFn) -> str:
        """A structured string after zero to three token edits."""
        text = draw(structured(name))
        for _ in range(draw(st.integers(0, 3))):
            at = draw(st.integers(0, len(text)))
            action = draw(st.sampled_from(["insert", "delete", "replace"]))
            token = draw(tokens)
            if action == "insert":
                text = text[:at] + token + text[at:]
            elif action == "delete":
                text = text[:at] + text[at + 1:]
            else:
                text = text[:at] + token + text[at + len(token):]
        return text

    return st.one_of(soup, edited(), structured(name))


@pytest.mark.parametrize("name", NEW_FORMATS + ("uri",))
def test_formats_match_rfc_and_jsonschema(name: str) -> None:
    """Same verdict as the RFC regex on grammar-built and mutated strings; nothing jsonschema rejects is accepted."""
    warnings.simplefilter("ignore", DeprecationWarning)

    @settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(mutated(name))
    def check(text: str) -> None:
        verdict = accepts(name, text)
        assert verdict == rfc_valid(name, text), (name, text)
        if name in PLAIN_VARIANTS:
            assert plain_automaton(name).accepts(text.encode()) == verdict, (name, text)
        reference = jsonschema_verdict(name, text)
        if verdict and reference is not None and not validator_stricter(name, text):
            assert reference, (name, text)

    check()


def test_typical_values_are_accepted() -> None:
    """One everyday value of each new format compiles and is accepted."""
    samples = {"uri-reference": "//x.org/a?q#f", "iri": "http://\u00e9.org/\u00e9?\ue000#f", "iri-reference": "\u00e9",
               "uri-template": "http://x/{+a.b,c:3}{?q*}/'", "hostname": "a-1.example.com",
               "duration": "P1Y2M3DT4H5M6S", "json-pointer": '/a~0b/"\\\n/', "relative-json-pointer": "0#"}
    for name, text in samples.items():
        assert accepts(name, text), (name, text)


DOCUMENTED = {
    "uri-reference": [("", True), ("./this:that", True), ("1:b", False), ("//a@b@c/", False), ("/[::1]", False),
                      ("\\\\x", False), ("//[::ffff:192.168.0.01]/p", False), ("http://a\n", False)],
    "iri": [("http://[V1.fe]", True), ("\u00e2\u03c0\u03c0", False), ("http://x/#\ue000", False),
            ("http://x/?\ue000", True)],
    "iri-reference": [("\u00e2\u03c0\u03c0", True), ("#\u0192r\u00e4g\\m\u00eant", False),
                      ("\U0001f600", True), ("a\U0001fffe", False), ("?\U000f0000", True), ("\ue000", False)],
    "uri-template": [("", True), ("a'b", True), ("{=a}", False), ("{,a}", False), ("{a:01}", False), ("a b", False),
                     ("{a..b}", False), ("{v:9999}", True), ("{v:10000}", False), ("}", False)],
    "hostname": [("a--b.com", True), ("example.", False), ("example.com\n", False), ("xn--ll-0ea", False),
                 ("\u212aelvin.com", False), ("a" * 63, True), ("a" * 64, False), ("a" * 30 + "." + "b" * 33, False)],
    "duration": [("P1Y2D", False), ("PT1H2S", False), ("PT0.5S", False), ("P1W", True), ("P1WT1H", False),
                 ("p1d", False), ("P01D", True), ("P1D\n", False), ("PT36H", True)],
    "json-pointer": [("", True), ("/k\"l", True), ("/i\\j", True), ("/foo\x00bar\n\tbaz", True), ("#/", False),
                     ("/~2", False)],
    "relative-json-pointer": [("0#", True), ("0+1/a", False), ("\u0661/foo", False), ("01/a", False), ("120/a", True),
                              ("1\n", False)],
}


@pytest.mark.parametrize("name", sorted(DOCUMENTED))
def test_documented_choices(name: str) -> None:
    """The cases where the RFCs, the test suite and jsonschema disagree, decided as the module notes say."""
    for text, expected in DOCUMENTED[name]:
        assert accepts(name, text) is expected, (name, text)


def test_draft_defined_formats_are_refused_with_a_reason() -> None:
    """`regex`, `idn-email`, `idn-hostname` raise SchemaError at the format; the reason names why."""
    assert "nest parentheses" in unsupported_format_message("regex")
    assert DEFINED_FORMATS == frozenset(FORMATS) | frozenset(REFUSED_FORMATS)
    for name in REFUSED_FORMATS:
        with pytest.raises(SchemaError) as info:
            schema_to_ir({"type": "string", "format": name})
        assert info.value.path.endswith("/format")


def test_draft3_and_unknown_formats_are_not_defined() -> None:
    """Formats no draft from 4 on defines (`color`, `utc-millisec`, `int32`) are outside DEFINED_FORMATS."""
    for name in ("color", "style", "phone", "utc-millisec", "host-name", "ip-address", "int32"):
        assert name not in DEFINED_FORMATS
        assert build_automaton(schema_to_ir({"type": "string", "format": name})).accepts(b'"not #fff"')


@pytest.mark.parametrize("name", NEW_FORMATS)
def test_json_schema_test_suite(name: str) -> None:
    """Every invalid suite string is rejected; every valid one accepted except the documented hostname narrowing."""
    for group in json.loads((SUITE_FORMATS / f"{name}.json").read_text()):
        for case in group["tests"]:
            text = case["data"]
            if not isinstance(text, str):
                continue
            if case["valid"] and not rfc_valid(name, text):
                assert name == "hostname" and (len(text) > 63 or "xn--" in text.lower()), case["description"]
                continue
            assert accepts(name, text) is case["valid"], (name, case["description"])


def _maskbench_format_strings() -> list[tuple[str, str, str, bool]]:
    """(file, format, string, instance valid) for every string jsonschema checks against one of the new formats."""
    jsonschema = pytest.importorskip("jsonschema")
    seen: list[tuple[str, str]] = []
    checker = jsonschema.FormatChecker()
    for name in NEW_FORMATS:
        checker.checkers[name] = (lambda n: (lambda value: seen.append((n, value)) or True))(name), ()
    out = []
    for path in sorted(MASKBENCH.glob("*.json")):
        raw = path.read_text()
        if not any(f'"{name}"' in raw for name in NEW_FORMATS):
            continue
        document = json.loads(raw)
        validator = jsonschema.validators.validator_for(document["schema"])(document["schema"], format_checker=checker)
        for case in document["tests"]:
            seen.clear()
            try:
                list(validator.iter_errors(case["data"]))
            except Exception:  # noqa: BLE001 -- a schema jsonschema cannot walk is not this test's concern
                continue
            out.extend((path.name, name, value, case["valid"]) for name, value in seen if isinstance(value, str))
    return out


@pytest.mark.slow
@pytest.mark.skipif(not MASKBENCH.is_dir(), reason=MASKBENCH_ABSENT)
def test_maskbench_instances() -> None:
    """Strings in valid MaskBench instances are accepted; format failures the labels rely on are rejected."""
    warnings.simplefilter("ignore", DeprecationWarning)
    jsonschema = pytest.importorskip("jsonschema")
    reference = jsonschema.FormatChecker()
    checked = 0
    for file, name, text, valid in _maskbench_format_strings():
        if valid:
            assert accepts(name, text), (file, name, text)
        elif name in reference.checkers and not reference.conforms(text, name):
            assert not accepts(name, text), (file, name, text)
        checked += 1
    assert checked > 0
