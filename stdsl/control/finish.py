"""How an output ends: its finish reason and its `Generation`, one rule for every surface.

The engine, certified drafts and the transformers and vLLM processors all end a row here, so
"eos", "stop" and "length" mean the same thing whichever decoded it, and every result is built
from the controller the same way (its tokens, decided bytes and forced count).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from stdsl.control.constraint_state import ConstraintState
from stdsl.errors import GenerationError
from stdsl.generation import Generation, Stats


def finish_reason(control: ConstraintState, eos_sampled: bool, stopped: bool = False) -> str:
    """'length' when the token budget shaped the output (or the output could go on), 'stop' for a stop string
    (`stopped`), 'eos' when the model drew eos, 'stop' when the constraint admits nothing more: the controller's
    rule (`Controller.finish_reason`)."""
    return control.controller.finish_reason(control.configuration, eos_sampled, stopped)


def finished_generation(control: ConstraintState, stats: Stats, reason: str, parser: Callable[[str], Any] | None,
                        *, data: bytes | None = None, text: str | None = None, reasoning: str | None = None,
                        partial: bool = False) -> Generation:
    """The `Generation` of a finished controller (GenerationError when its output is not in the language, unless
    it is `partial`: a certified draft, or free text cut at a stop string, may end anywhere).

    `data` and `text` default to the controller's decided bytes and their UTF-8 text (a surface that
    shows only part of them, such as the answer after a thinking block, passes its own).
    """
    data = control.decided if data is None else data
    return output_generation(data, control.tokens, control.forced_count, control.accepting, stats, reason, parser,
                             text=text, reasoning=reasoning, partial=partial)


def output_generation(data: bytes, tokens: list[int], forced: int, accepting: bool, stats: Stats, reason: str,
                      parser: Callable[[str], Any] | None, *, text: str | None = None, reasoning: str | None = None,
                      partial: bool = False) -> Generation:
    """The `Generation` of an output given by its log (bytes, tokens, how many were forced) and whether it is in
    the language: what a surface that keeps a `Controller` configuration instead of a row state ends with."""
    if not accepting and not partial:
        raise GenerationError("decoding ended outside an accepting state")
    stats.forced_tokens = forced
    stats.emitted_tokens = len(tokens)
    return Generation(text=data.decode("utf-8", errors="replace") if text is None else text,
                      tokens=list(tokens), stats=stats, accepted=accepting, finish_reason=reason,
                      data=data, parser=parser, reasoning=reasoning)
