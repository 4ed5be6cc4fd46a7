"""Turn a caller's request into what a row needs: prompt token ids, its controller and its started log.

DFA and pushdown constraints both get their controller from the one factory (`control.tables.controller_of`),
and a row is that controller plus the log its moves make. Free text (no constraint) is the language of all
UTF-8 text, so it gets the same budget and eos rules.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from functools import cache
from inspect import getattr_static
from typing import Any

from stdsl.compiler.reasoning import ReasoningConstraint
from stdsl.control.controller import Controller
from stdsl.control.log import Log
from stdsl.control.special_vocabulary import for_tokenizer
from stdsl.control.tables import controller_of
from stdsl.errors import OptionError
from stdsl.model_files.prompt import Prompt, prompt_ids
from stdsl.runtime.batch.thinking import reasoning_constraint, reasoning_policy, template_variables
from stdsl.runtime.context_window import context_length, output_room
from stdsl.runtime.options import DecodeOptions


@dataclass
class RowRequest:
    """A request ready for the engine: prompt ids, the row's controller and started log, the log's tokens still to
    feed (`prefix`), options.

    A draft (certified decoding) also has `until`, which ends the row early once its log says the block is done,
    and `max_samples`, a cap on draws; such a row may end outside acceptance. `remember=False` keeps the row's
    prefilled prompt out of the prompt cache (drafts share theirs otherwise). `fresh`: the constraint's rows
    were all still to compute when its controller was made (a new grammar: the core warms them ahead).
    """

    prompt_ids: list[int]
    controller: Controller
    log: Log
    prefix: list[int]
    options: DecodeOptions
    parser: Callable[[str], Any] | None
    until: Callable[[Log], bool] | None = None
    max_samples: int | None = None
    remember: bool = True
    fresh: bool = False


def prompt_tokens(model: Any, prompt: Prompt, chat: bool = True, variables: Mapping[str, Any] | None = None
                  ) -> list[int]:
    """Token ids of the prompt for this model (`stdsl.model_files.prompt.prompt_ids`: the renderer every surface
    shares), given ids checked against the model's vocabulary size."""
    return prompt_ids(model.tokenizer, prompt, chat=chat, variables=variables, vocab_size=model.vocab_size)


FREE_TEXT = r"[\s\S]*"


@cache
def _free_text() -> Any:
    """The automaton of all UTF-8 text (what an unconstrained request may emit)."""
    from stdsl.compiler.constraint import Regex
    from stdsl.compiler.constraint import compile as compile_constraint

    return compile_constraint(Regex(FREE_TEXT))


def _is_free_text(constraint: Any) -> bool:
    """Whether `constraint` leaves the answer free: None, or all text (after a thinking block, for a reasoning one)."""
    from stdsl.compiler.constraint import Regex

    answer = constraint.answer if isinstance(constraint, ReasoningConstraint) else constraint
    return answer is None or answer == Regex(FREE_TEXT) or getattr(answer, "source", None) == Regex(FREE_TEXT)


def check_stop(constraint: Any, options: DecodeOptions) -> None:
    """Refuse `stop` with a constraint: cutting a constrained output at a stop string would return text the
    constraint does not accept, so a stop belongs in the constraint itself."""
    if options.stop and not _is_free_text(constraint):
        raise OptionError("stop", "stop applies to free text only (constraint=None); with a constraint a stop string "
                                  "would cut the output short of a valid one: write the end into the constraint")


def _is_byte_machine(constraint: Any) -> bool:
    """Whether `constraint` is a byte machine already (an automaton or a pushdown machine), found without reading
    its attributes: an automaton's `transitions` property expands its dense (states x 256) table on every read."""
    return all(getattr_static(constraint, name, None) is not None for name in ("transitions", "accepting"))


def compiled_constraint(constraint: Any, tokenizer: Any = None, strict: bool | None = None) -> Any:
    """`constraint` compiled (anything `stdsl.compile` takes; None is free text; compiled ones pass through), a
    grammar for `tokenizer`'s special tokens when given, a schema `strict` unless that is False (`DecodeOptions`);
    a compiled schema constraint whose `strict` is not the one asked for is refused."""
    if constraint is None:
        return _free_text()
    if isinstance(constraint, ReasoningConstraint) or _is_byte_machine(constraint):
        return constraint
    from stdsl.compiler.constraint import compile as compile_constraint

    compiled = compile_constraint(constraint if tokenizer is None else for_tokenizer(constraint, tokenizer),
                                  strict=strict is not False)
    own = getattr(compiled, "strict", None)
    if strict is not None and own is not None and own != strict:
        raise OptionError("strict", f"strict={strict} asks for {'closed' if strict else 'open'} objects, but this "
                                    f"constraint was compiled with strict={own}: pass the schema itself, or compile "
                                    f"it with stdsl.compile(schema, strict={strict})")
    return compiled


def within_context(model: Any, prompt_length: int, options: DecodeOptions) -> DecodeOptions:
    """`options` for a prompt of `prompt_length` tokens within the model's context (as the server checks it): no
    `max_tokens` limit becomes the room left; ContextLengthError when the prompt, or it and `max_tokens`, pass it."""
    context = context_length(model)
    if context is None:
        return options
    room = output_room(prompt_length, options.max_tokens, context)
    return options if room == options.max_tokens else replace(options, max_tokens=room)


def prepare_request(model: Any, prompt: Prompt, constraint: Any, options: DecodeOptions) -> RowRequest:
    """Render the prompt, compile the constraint (after a thinking block where the prompt leaves the model to
    think) and start its row's log (BudgetError here when nothing fits)."""
    check_stop(constraint, options)
    prompt_ids = prompt_tokens(model, prompt, options.chat, template_variables(options))
    options = within_context(model, len(prompt_ids), options)
    compiled = compiled_constraint(constraint, model.tokenizer, options.strict)
    reasoning = reasoning_constraint(model, compiled, prompt_ids, options)
    controller = controller_of(compiled if reasoning is None else reasoning.constraint, model.tokenizer,
                               max_tokens=options.max_tokens, healing=options.healing)
    fresh = len(controller.rows) == 0
    if reasoning is not None:
        controller = controller.with_reasoning(reasoning_policy(reasoning, options))
        compiled = reasoning.answer
    log = controller.started()
    parser = (lambda text: text) if constraint is None else getattr(compiled, "parse", None)
    return RowRequest(prompt_ids, controller, log, list(log.tokens), options, parser, fresh=fresh)
