"""The exact budget rule on a merged pushdown (a recursive tool parameter schema inside Hermes' reply grammar): need(c)
equals the brute-force token search, and every budget from the least one up decodes to a reply whose call's
arguments validate; the one below is refused naming it."""

from __future__ import annotations

import json
import random

import jsonschema
import numpy as np
import pytest
from row_driver import RowDriver

from stdsl.compiler.constraint_spec import build_constraint
from stdsl.compiler.pushdown.constraint import PushdownConstraint
from stdsl.compiler.tools.formats import FORMATS
from stdsl.control.special_vocabulary import vocabulary_of
from stdsl.control.tables import Tables
from stdsl.errors import BudgetError
from tests.control.budget.test_pushdown_budget import oracle_need, random_walk_configs
from tests.control.budget.test_pushdown_budget import small_tokenizer as small_tokenizer  # noqa: F401 (the fixture)


def _tool_parameters(tree: dict) -> dict:
    """A tool's object parameters holding the tree schema as its one required member `t`."""
    return {"type": "object", "properties": {"t": {"$ref": tree["$ref"]}}, "required": ["t"],
            "additionalProperties": False, "$defs": tree["$defs"]}


TREES = [
    {"$ref": "#/$defs/v", "$defs": {"v": {"anyOf": [{"type": "integer"}, {"type": "array",
                                                                          "items": {"$ref": "#/$defs/v"}}]}}},
    {"$ref": "#/$defs/node", "$defs": {"node": {"type": "object", "properties": {
        "n": {"enum": ["a", "bc"]}, "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
        "required": ["kids"], "additionalProperties": False}}},
]
"""Closed trees (an open node's free-form members make the brute-force oracle take minutes)."""


@pytest.mark.parametrize(("tree", "seed"), [(tree, seed) for tree in TREES for seed in (1, 2)])
def test_a_merged_pushdown_keeps_the_exact_budget(small_tokenizer, tree: dict, seed: int) -> None:  # noqa: F811
    parameters = _tool_parameters(tree)
    spec = {"kind": "tools", "format": "hermes", "tools": [{"name": "q", "parameters": parameters}],
            "choice": "required", "parallel": False, "content": None}
    constraint = build_constraint(spec, 60)
    assert isinstance(constraint, PushdownConstraint)
    machine, vocab = constraint.machine, vocabulary_of(small_tokenizer)
    walker = RowDriver(machine, small_tokenizer, vocab)
    walker.start()
    budget = Tables.of(machine, vocab).budget(walker.planner)
    rng = random.Random(seed)
    for config in random_walk_configs(walker, rng, 8):
        assert budget.need_at(config) == oracle_need(machine, small_tokenizer, config), machine.configuration(config)
    probe = RowDriver(machine, small_tokenizer, vocab, max_tokens=1)
    try:
        probe.start()
    except BudgetError:
        pass
    least = probe.least_output_tokens
    assert least is not None and least > 1
    with pytest.raises(BudgetError, match=f"max_tokens={least - 1}: the shortest valid output needs {least} "):
        RowDriver(machine, small_tokenizer, vocab, max_tokens=least - 1).start()
    for max_tokens in range(least, least + 3):
        control = RowDriver(machine, small_tokenizer, vocab, max_tokens=max_tokens)
        control.start()
        while not control.finished:
            choices = np.flatnonzero(control.mask() & ~vocab.eos)
            if choices.size == 0 or (control.accepting and rng.random() < 0.2):
                control.advance(int(vocab.eos_ids[0]))
            else:
                control.advance(int(rng.choice(choices.tolist())))
        assert control.accepting and len(control.tokens) <= max_tokens
        _, calls = FORMATS["hermes"].parse(control.decided.decode("utf-8"), {"q": parameters})
        assert [call.name for call in calls] == ["q"]
        jsonschema.validate(json.loads(calls[0].arguments), parameters)
