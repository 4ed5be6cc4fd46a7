"""The `\\d`, `\\w` and `\\s` ranges shipped in the package equal the ones computed from Python's str methods."""

from __future__ import annotations

import unicodedata

import pytest

from stdsl.compiler.regex.categories import UNIDATA_VERSION, shipped_category_ranges
from stdsl.compiler.regex.parser import category_ranges, computed_category_ranges


@pytest.mark.skipif(unicodedata.unidata_version != UNIDATA_VERSION, reason="the table is for another Unicode version")
@pytest.mark.parametrize("letter", ["d", "w", "s"])
def test_shipped_ranges_equal_the_str_methods(letter: str) -> None:
    assert shipped_category_ranges(letter) == computed_category_ranges(letter)
    assert category_ranges(letter) == computed_category_ranges(letter)


def test_no_table_for_another_class_or_another_unicode_version(monkeypatch: pytest.MonkeyPatch) -> None:
    assert shipped_category_ranges("x") is None
    monkeypatch.setattr(unicodedata, "unidata_version", "0.0.0")
    assert shipped_category_ranges("d") is None
