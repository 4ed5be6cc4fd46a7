"""A structural tag's regex reads `\\d \\w \\s`, their capitals and `.` as XGrammar does, in a class or out of one
(hand-checked texts, also checked against xgrammar's matcher in `tests/server/test_structural_tags.py`)."""

from __future__ import annotations

import pytest

from stdsl.compiler.constraint_spec import build_constraint
from stdsl.compiler.tools.formats.xgrammar_regex import xgrammar_regex

REGEX_TEXTS = [
    (r"\d+", "0123", True), (r"\d+", "\u0663", False), (r"\d+", "\uff11", False),
    (r"\w", "_", True), (r"\w", "\u00e9", False), (r"\W", "\u00e9", True), (r"\D", "\u0663", True),
    (r"\s", "\ufeff", True), (r"\s", "\x85", False), (r"\s", "\x1c", False), (r"\s", "\u2028", True),
    (r"\S", "\x85", True), (r"[\s]", "\u3000", True), (r"[^\s]", "\u3000", False), (r"[a\dz]", "\u0663", False),
    (r"[a\dz]", "5", True), (r".", "\n", True), (r"[.]", "\n", False), (r"\.", ".", True), (r"\\d", "\\d", True),
    (r"[\D]", "7", False), (r"[\d-z]", "-", True),
]
"""(pattern, text, whether XGrammar 0.2.9's matcher accepts the text)."""


@pytest.mark.parametrize(("pattern", "text", "accepted"), REGEX_TEXTS)
def test_a_tag_regex_reads_classes_as_xgrammar(pattern: str, text: str, accepted: bool) -> None:
    ours = build_constraint({"kind": "structural_tag", "tag": {"format": {"type": "regex", "pattern": pattern}}}, 30)
    assert ours.accepts(text.encode()) == accepted


def test_other_escapes_and_literals_are_copied() -> None:
    assert xgrammar_regex(r"a\.b\[c\]\\(x|y){2}\u00e9") == r"a\.b\[c\]\\(x|y){2}\u00e9"
