"""A tool list compiles on the worker that compiled that format's last list, whose caches hold its calls: with one
tool changed it costs one tool there, not the whole list again on a worker that never saw it."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from stdsl.server.constraints.compile_pool import affinity, take_idle
from stdsl.server.constraints.constraint_cache import ConstraintCache


@dataclass
class Idle:
    name: str
    affinity: tuple[str, ...] | None


def test_a_job_takes_the_worker_warm_for_its_kind_and_others_leave_it_free() -> None:
    hermes, harmony = affinity({"kind": "tools", "format": "hermes"}), affinity({"kind": "tools", "format": "harmony"})
    assert affinity({"kind": "json_schema", "schema": {}}) is None and hermes != harmony
    idle = [Idle("a", hermes), Idle("b", None), Idle("c", harmony), Idle("d", None)]
    assert take_idle(idle, hermes).name == "a"
    assert take_idle(idle, None).name == "d"
    assert take_idle(idle, ("tools", "qwen_xml")).name == "b"
    assert take_idle(idle, None).name == "c"
    assert idle == []


def _tools(changed: int | None = None) -> dict[str, Any]:
    tools = [{"name": f"tool_{i}", "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "maxLength": 10 + i}, "n": {"type": "integer", "minimum": i}},
        "required": ["city"] if i != changed else ["n"], "additionalProperties": False}} for i in range(24)]
    return {"kind": "tools", "format": "hermes", "tools": tools, "choice": "auto", "parallel": True, "content": None}


def test_a_changed_tool_list_compiles_on_the_worker_that_holds_its_calls() -> None:
    async def run() -> None:
        cache = ConstraintCache(compile_seconds=120.0, workers=2, reserved_workers=1)
        try:
            cold = await cache.get(_tools())
            schemas = [{"kind": "json_schema", "strict": True, "schema": {"type": "object", "properties": {
                f"k{i}": {"type": "integer"}}, "required": [f"k{i}"]}} for i in range(3)]
            await asyncio.gather(*(cache.get(spec) for spec in schemas))  # every worker ran last since
            changed = await cache.get(_tools(changed=12))
        finally:
            cache.close()
        assert changed.compile_seconds < cold.compile_seconds / 3, (changed.compile_seconds, cold.compile_seconds)

    asyncio.run(run())
