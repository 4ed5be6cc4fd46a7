"""Every example program runs on the embedded model and returns values of its declared types."""

from __future__ import annotations

import datetime as dt
import runpy
from pathlib import Path

import pytest

from stdsl.programs import Program

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"

ARGS = {
    "review.stc": {"abstract": "We show that sorting networks of depth 9 exist for 16 inputs, improving the known "
                               "bound."},
    "classify.stc": {"message": "I was charged twice for my subscription this month, please refund one payment."},
    "report.stc": {"notes": "api-gateway returned 502 errors from 14:02 to 14:49 on 2026-03-04 after a bad config "
                            "push; rolled back."},
    "tool_call.stc": {"request": "What is the weather in Lisbon in celsius?"},
}


@pytest.mark.parametrize("name", sorted(ARGS))
def test_stc_example(name: str, smollm2) -> None:
    prog = Program.from_file(EXAMPLES / name)
    result = prog.run(smollm2, ARGS[name], max_tokens=160)
    assert prog.constraint(prog.arguments(ARGS[name])).accepts(result.text)
    assert result.stats.passes == result.stats.sampled_tokens
    values = result.to_dict()
    assert set(values) == set(prog.fields)
    if name == "review.stc":
        assert result.verdict in ("accept", "reject", "revise") and 1 <= result.score <= 10
        assert all("\n" not in r for r in result.reasons)
    if name == "classify.stc":
        assert result.label in ("billing", "technical", "shipping", "account", "other")
    if name == "report.stc":
        assert isinstance(result.record.started, dt.date)
        assert result.record.severity in ("low", "medium", "high", "critical")
    if name == "tool_call.stc":
        assert result.call["name"] in ("get_weather", "search_web")


def test_recursive_example_compiles_to_the_pushdown_engine() -> None:
    constraint = Program.from_file(EXAMPLES / "tree.stc").constraint({"text": "a"})
    text = '{"name":"root","children":[{"name":"leaf","children":[]}]}'
    assert constraint.accepts(text)
    assert constraint.parse(text)["tree"].children[0].name == "leaf"


def test_recursive_example_runs(smollm2) -> None:
    prog = Program.from_file(EXAMPLES / "tree.stc")
    args = {"text": "The Sun has planets; Earth has the Moon; Mars has Phobos and Deimos."}
    result = prog.run(smollm2, args, max_tokens=120)
    assert prog.constraint(args).accepts(result.text)
    assert result.stats.passes == result.stats.sampled_tokens

    def check(node: object, depth: int) -> None:
        assert 1 <= len(node.name) <= 40 and len(node.children) <= 5 and depth <= 64
        for child in node.children:
            check(child, depth + 1)

    check(result.tree, 1)


def test_python_example(smollm2) -> None:
    module = runpy.run_path(str(EXAMPLES / "extract_person.py"))
    result = module["extract"](module["TEXT"], model=smollm2, max_tokens=120)
    assert isinstance(result.applicant, module["Applicant"])
    assert isinstance(result.status, module["Status"])
