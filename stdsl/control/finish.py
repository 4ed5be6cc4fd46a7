"""How an output ends: its `Generation`, built the same way on every surface.

The engine, certified drafts and the transformers and vLLM processors all end a row here, with the
controller's finish reason (`Controller.finish_reason`), so "eos", "stop" and "length" mean the same thing
whichever decoded it, and every result is built from the row's log the same way (its tokens, decided bytes
and forced count).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from stdsl.control.controller import Controller
from stdsl.control.log import Log
from stdsl.errors import GenerationError
from stdsl.generation import Generation, Stats


def finished_generation(controller: Controller, log: Log, stats: Stats, reason: str,
                        parser: Callable[[str], Any] | None, *, data: bytes | None = None, text: str | None = None,
                        reasoning: str | None = None, partial: bool = False) -> Generation:
    """The `Generation` of a row's finished log under its controller (GenerationError when its output is not in the
    language, unless it is `partial`: a certified draft, or free text cut at a stop string, may end anywhere).

    `data` and `text` default to the log's decided bytes and their UTF-8 text (a surface that shows only part of
    them, such as the answer after a thinking block, passes its own). `reason` is the controller's
    (`Controller.finish_reason`).
    """
    data = log.decided if data is None else data
    return output_generation(data, list(log.tokens), log.forced, controller.accepting(log.configuration), stats,
                             reason, parser, text=text, reasoning=reasoning, partial=partial)


def output_generation(data: bytes, tokens: list[int], forced: int, accepting: bool, stats: Stats, reason: str,
                      parser: Callable[[str], Any] | None, *, text: str | None = None, reasoning: str | None = None,
                      partial: bool = False) -> Generation:
    """The `Generation` of an output given by its bytes, tokens, how many were forced, and whether it is in the
    language."""
    if not accepting and not partial:
        raise GenerationError("decoding ended outside an accepting state")
    stats.forced_tokens = forced
    stats.emitted_tokens = len(tokens)
    return Generation(text=data.decode("utf-8", errors="replace") if text is None else text,
                      tokens=list(tokens), stats=stats, accepted=accepting, finish_reason=reason,
                      data=data, parser=parser, reasoning=reasoning)
