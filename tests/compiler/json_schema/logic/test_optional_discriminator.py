"""`keywords._optional_discriminator` tells branches equal but for one property with `same_schema` (a walk that stops
at the first difference) where it wrote every branch out: the same answer as comparing the written texts."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from stdsl.compiler.json_schema.flatten import document_context
from stdsl.compiler.json_schema.logic.disjoint import disjoint
from stdsl.compiler.json_schema.logic.keywords import _optional_discriminator
from stdsl.compiler.json_schema.resolve import Context, flatten
from stdsl.compiler.json_schema.schema_merge import merge


def _by_written_texts(branches: list[Any], ctx: Context) -> list[Any] | None:
    """The reading as it was: each branch less the property written out, the set of texts of size one."""
    objects = [b for b in branches if isinstance(b, dict) and isinstance(b.get("properties"), dict)]
    if len(branches) < 2 or len(objects) != len(branches):
        return None
    for name in objects[0]["properties"]:
        if not all(name in b["properties"] for b in objects):
            continue
        rests = {json.dumps({**b, "properties": {k: v for k, v in b["properties"].items() if k != name}},
                            sort_keys=True, default=str) for b in objects}
        if len(rests) != 1:
            continue
        values = [flatten(b["properties"][name], "#", ctx)[0] for b in objects]
        if all(disjoint(values[i], values[j], ctx) for i in range(len(values)) for j in range(i + 1, len(values))):
            return [merge(b, {"type": "object", "required": [name]}, "#") for b in objects]
    return None


_VALUES = st.sampled_from([{"const": "a"}, {"const": "b"}, {"type": "integer"}, {"type": "string", "maxLength": 2},
                           {"enum": [1, 1.0]}, {"enum": [1]}])
_BRANCHES = st.lists(
    st.fixed_dictionaries({"type": st.just("object"),
                           "properties": st.dictionaries(st.sampled_from(["kind", "x", "y"]), _VALUES, min_size=1),
                           "title": st.sampled_from(["t", "u"])}),
    min_size=1, max_size=4)


@settings(max_examples=300, deadline=None)
@given(_BRANCHES)
def test_the_discriminator_found_is_the_one_written_texts_find(branches: list[dict]) -> None:
    ctx = document_context({"oneOf": branches})
    assert _optional_discriminator(branches, ctx) == _by_written_texts(branches, ctx)
