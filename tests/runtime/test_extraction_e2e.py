"""End to end on SmolLM2-135M-Instruct: the six extraction tasks give outputs valid under their schemas.

Validity is the engine's guarantee; which gold fields the 135M model gets right is its own
quality and is only reported (run with -s to see it).
"""

from __future__ import annotations

import json

import jsonschema
import pytest

import stdsl
from tests.data_files import EXTRACTION

TASKS = sorted(p.stem for p in EXTRACTION.glob("*.json"))


def _pointer(doc: object, pointer: str) -> object:
    for part in pointer.lstrip("/").split("/"):
        if isinstance(doc, list):
            doc = doc[int(part)] if int(part) < len(doc) else None
        else:
            doc = doc.get(part) if isinstance(doc, dict) else None
    return doc


@pytest.mark.parametrize("task", TASKS)
def test_extraction_task_is_valid(task: str, smollm2) -> None:
    spec = json.loads((EXTRACTION / f"{task}.json").read_text())
    prompt = spec["prompts"][2].format(source=spec["source"], schema=json.dumps(spec["schema"]))
    result = stdsl.generate(smollm2, prompt, constraint=spec["schema"], max_tokens=160)
    value = json.loads(result.text)
    jsonschema.validate(value, spec["schema"], format_checker=jsonschema.FormatChecker())
    assert result.stats.passes == result.stats.sampled_tokens
    assert result.stats.forced_tokens > 0
    right = sum(
        str(_pointer(value, p)).strip().lower() == str(_pointer(spec["gold"], p)).strip().lower()
        for p in spec["gold_fields"]
    )
    print(f"{task}: {right}/{len(spec['gold_fields'])} gold fields, {result.stats.as_dict()}")
