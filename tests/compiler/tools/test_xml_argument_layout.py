"""An XML argument style's tag laid out from its parameters accepts exactly what the same tag as one expression
accepts (random schemas, styles and ends), and a tag it cannot lay out deterministically is left to the expression."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from stdsl.compiler import ir
from stdsl.compiler.automata.build import build_automaton
from stdsl.compiler.constraint_spec import _Deadline, _embedder
from stdsl.compiler.tools.formats.xml_arguments import (
    STYLES,
    WHITESPACE,
    _whitespace,
    arguments_expression,
    xml_parameters,
)
from stdsl.compiler.tools.xml_argument_layout import XmlParameter, xml_tag_layout
from tests.compiler.language_difference import assert_agree_on_walks, difference
from tests.compiler.tools.formats.xml_argument_texts import BOUNDED, CONTAINERS, SCALARS, mixed_enum, schemas

ENDS = st.sampled_from([["\n</function>\n</tool_call>"], ["</f>", "\n\n</g>"], [" x"], ["<parameter=zz>"],
                        ["\t", "\n"]])


def _value_ir(schema: Any, path: str) -> ir.Node:
    return _embedder(_Deadline(60))(("json_schema", schema), path)


@settings(max_examples=60, deadline=None)
@given(schema=schemas(st.one_of(SCALARS, BOUNDED, CONTAINERS)), style=st.sampled_from(sorted(STYLES)), ends=ENDS,
       seed=st.integers(0, 2**32 - 1))
def test_a_laid_out_tag_accepts_exactly_its_expression(schema: dict[str, Any], style: str, ends: list[str],
                                                       seed: int) -> None:
    if mixed_enum(schema, style):
        return  # refused (`formats/test_xml_arguments`)
    parameters = xml_parameters(schema, style, "#", _value_ir, None)
    laid_out = xml_tag_layout(parameters, [end.encode() for end in ends], WHITESPACE)
    whole = build_automaton(ir.seq(arguments_expression(parameters, _whitespace(None)),
                                   ir.alt(*(ir.literal(end) for end in ends))))
    if laid_out is None:
        assert any(end[0] in "\t\n" and end[-1] in "\t\n" for end in ends) or "<parameter=zz>" in ends
        return
    assert laid_out.is_trim()
    assert difference(whole, laid_out) is None
    assert_agree_on_walks(whole, laid_out, np.random.default_rng(seed))


def test_an_end_a_head_could_go_on_from_is_not_laid_out() -> None:
    """An end that is a parameter's head, or whitespace where the junction loops, is not deterministic here."""
    head = XmlParameter(b"<p>", ir.literal("v"), None, b"</p>", False)
    assert xml_tag_layout([head], [b"<p>"], WHITESPACE) is None
    assert xml_tag_layout([head], [b"\n"], WHITESPACE) is None
    assert xml_tag_layout([head], [b"\n</f>"], WHITESPACE) is not None
