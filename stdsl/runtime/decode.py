"""The constrained decode loop: mask, sample, then feed the sampled token with its forced span in one pass.

`generate` is the forced-span decoder of Theorem 19 (one model pass per sampled token);
`reference=True` is the reference decoder that feeds every emitted token in its own pass, the
oracle the forced-span decoder is tested against. `stream` yields text as it is decided.
"""

from __future__ import annotations

import codecs
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import mlx.core as mx

from stdsl.errors import GenerationError
from stdsl.runtime.constraint_state import ConstraintState, vocabulary_of
from stdsl.runtime.generation import Generation, Stats
from stdsl.runtime.pushdown_state import PushdownState, machine_of
from stdsl.runtime.sampling import SamplingParams, sample, seed_random

Prompt = str | Sequence[Mapping[str, str]]


@dataclass
class _Event:
    """One step of the loop: newly decided text, and the finished result on the last event."""

    text: str
    result: Generation | None = None


def prompt_tokens(model: Any, prompt: Prompt, chat: bool = True) -> list[int]:
    """Token ids of the prompt: the chat template when the model has one and `chat`, else the raw text.

    A str is one user message; a list of {"role", "content"} dicts is used as is.
    """
    tokenizer = model.tokenizer
    messages = [{"role": "user", "content": prompt}] if isinstance(prompt, str) else [dict(m) for m in prompt]
    if chat and getattr(tokenizer, "chat_template", None):
        rendered = tokenizer.apply_chat_template(messages, add_generation_prompt=True)
        if isinstance(rendered, str):
            return list(tokenizer.encode(rendered))
        return [int(t) for t in rendered]
    text = prompt if isinstance(prompt, str) else "\n".join(str(m["content"]) for m in messages)
    return list(tokenizer.encode(text))


def _automaton_of(constraint: Any) -> Any:
    """The byte automaton of a constraint (an Automaton, or anything with `.automaton`)."""
    automaton = getattr(constraint, "automaton", constraint)
    if not hasattr(automaton, "transitions") or not hasattr(automaton, "accepting"):
        raise TypeError(f"expected an Automaton or a compiled Constraint, got {type(constraint).__name__}")
    return automaton


def _steps(
    model: Any,
    prompt: Prompt,
    constraint: Any,
    *,
    max_tokens: int | None,
    params: SamplingParams,
    chat: bool,
    reference: bool,
    healing: bool,
) -> Iterator[_Event]:
    """The decode loop as a generator of decided text; the last event carries the Generation."""
    began = time.perf_counter()
    tokenizer = model.tokenizer
    vocab = vocabulary_of(tokenizer)
    machine = machine_of(constraint)
    control: ConstraintState
    if machine is not None:
        control = PushdownState(machine, tokenizer, vocab, max_tokens=max_tokens, healing=healing)
    else:
        control = ConstraintState(_automaton_of(constraint), tokenizer, vocab, max_tokens=max_tokens, healing=healing)
    prompt_ids = prompt_tokens(model, prompt, chat)
    stats = Stats(prompt_tokens=len(prompt_ids))
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    shown = 0

    def flush() -> str:
        nonlocal shown
        decided = control.decided
        piece = decoder.decode(decided[shown:])
        shown = len(decided)
        return piece

    forced = control.start()
    seed_random(params)
    finish = "stop"
    if not control.finished:
        cache = model.make_cache()
        logits = model.forward(prompt_ids + forced, cache)[-1]
        stats.passes += 1
        yield _Event(flush())
        while True:
            allowed = control.mask()
            token = sample(logits, allowed, params)
            stats.sampled_tokens += 1
            feed = control.advance(token)
            if not feed:
                finish = "eos"
                break
            if control.finished:
                finish = "stop" if control.planner.live_count[control.state] == 0 else "length"
                break
            if reference:
                for single in feed:
                    logits = model.forward([single], cache)[-1]
                    stats.passes += 1
            else:
                logits = model.forward(feed, cache)[-1]
                stats.passes += 1
            mx.eval(logits)
            yield _Event(flush())
    tail = flush() + decoder.decode(b"", final=True)
    if not control.accepting:
        raise GenerationError("decoding ended outside an accepting state")
    data = control.decided
    stats.forced_tokens = control.forced_count
    stats.emitted_tokens = len(control.tokens)
    stats.seconds = time.perf_counter() - began
    result = Generation(
        text=data.decode("utf-8", errors="replace"),
        tokens=list(control.tokens),
        stats=stats,
        accepted=control.accepting,
        finish_reason=finish,
        data=data,
        parser=getattr(constraint, "parse", None),
    )
    yield _Event(tail, result)


def generate(
    model: Any,
    prompt: Prompt,
    constraint: Any,
    *,
    max_tokens: int | None = 256,
    temperature: float = 0.0,
    top_p: float = 1.0,
    top_k: int = 0,
    seed: int | None = None,
    chat: bool = True,
    reference: bool = False,
    healing: bool = True,
) -> Generation:
    """Decode one output under `constraint` (an Automaton or compiled Constraint) and return it.

    Every emitted token, sampled or forced, counts against `max_tokens`; BudgetError is raised
    before decoding when no valid output fits. `reference=True` feeds one token per pass.
    """
    params = SamplingParams(temperature=temperature, top_p=top_p, top_k=top_k, seed=seed)
    for event in _steps(
        model, prompt, constraint, max_tokens=max_tokens, params=params, chat=chat, reference=reference, healing=healing
    ):
        if event.result is not None:
            return event.result
    raise GenerationError("the decode loop ended without a result")


def stream(
    model: Any,
    prompt: Prompt,
    constraint: Any,
    *,
    max_tokens: int | None = 256,
    temperature: float = 0.0,
    top_p: float = 1.0,
    top_k: int = 0,
    seed: int | None = None,
    chat: bool = True,
    healing: bool = True,
) -> Iterator[str]:
    """Yield the output text piece by piece as the constraint and the model decide it (forced text included)."""
    params = SamplingParams(temperature=temperature, top_p=top_p, top_k=top_k, seed=seed)
    for event in _steps(
        model, prompt, constraint, max_tokens=max_tokens, params=params, chat=chat, reference=False, healing=healing
    ):
        if event.text:
            yield event.text
