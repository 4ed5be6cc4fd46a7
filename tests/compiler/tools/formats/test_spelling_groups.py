"""Tags that differ only in their begin are grouped where their begins' common prefix tells them apart from every
other tag: checked against a brute-force reading of that rule."""

from __future__ import annotations

from os.path import commonprefix

from hypothesis import given
from hypothesis import strategies as st

from stdsl.compiler import ir
from stdsl.compiler.tools.formats.structural_tag import spelling_groups

RESTS = [ir.literal("x"), ir.literal("y"), ir.literal("zz")]
spelled_tags = st.lists(st.tuples(st.text(alphabet="ab<", min_size=1, max_size=5), st.sampled_from(RESTS)),
                        min_size=1, max_size=10)


@given(spelled_tags)
def test_groups_cover_every_tag_and_each_group_is_alone_past_its_prefix(spelled) -> None:
    groups = spelling_groups(spelled)
    assert sorted((begin, ir.literal_bytes(rest)) for _, begins, rest in groups for begin in begins) == sorted(
        {(begin, ir.literal_bytes(rest)) for begin, rest in spelled})
    for prefix, begins, rest in groups:
        assert prefix == commonprefix(begins)
        if len(begins) > 1:
            outside = {other for other, other_rest in spelled if other not in begins or other_rest != rest}
            assert all(len(commonprefix([begin, other])) < len(prefix) for begin in begins for other in outside)
    firsts = [min(i for i, (begin, rest) in enumerate(spelled) if begin in begins and rest == group_rest)
              for _, begins, group_rest in groups]
    assert firsts == sorted(firsts)


def test_harmony_spellings_of_one_tool_group_two_of_three() -> None:
    """Each tool's arguments are its own (the rest differs by tool); a name that is a prefix of another's does not
    join their spellings."""
    spelled = [(f"{head}{name}{tail}", ir.literal(name)) for name in ("get", "get_all")
               for head, tail in (("<c>to=", "<k>"), (" to=", "<c><k>"), (" to=", "<c>"))]
    groups = spelling_groups(spelled)
    assert [(prefix, begins) for prefix, begins, _ in groups] == [
        ("<c>to=get<k>", ["<c>to=get<k>"]), (" to=get<c>", [" to=get<c>", " to=get<c><k>"]),
        ("<c>to=get_all<k>", ["<c>to=get_all<k>"]), (" to=get_all<c>", [" to=get_all<c>", " to=get_all<c><k>"])]
