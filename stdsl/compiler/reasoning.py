"""The output of a reasoning model: a thinking block of free text, its closing text, then the constrained answer.

    OUTPUT = THINK · CLOSE · ANSWER          the prompt opened the block ("opened")
           = OPEN · THINK · CLOSE · ANSWER   the block is opened by forced text ("required")
           = (OPEN · THINK · CLOSE)? ANSWER  the model chooses whether to think ("optional")

THINK is every text without the closing tag (Proposition 3, exact), so the tag can always be
written and ends the block at its first occurrence; CLOSE is the closing text as the family writes
it; ANSWER is the user's constraint, a DFA or a pushdown.  The whole is one constraint, so the
budget rule of Theorem 21 keeps room for CLOSE and the shortest answer under every `max_tokens`.

Where the model's tokenizer has a tag as one special or added token (Qwen3.5's `</think>`), the tag is
written as that token (`tokens`; `special_tokens.token_markers` decides), so the model closes the block
with the token it was trained on; THINK still never contains the tag's text, so the first tag in the
visible output is the real one.
"""

from __future__ import annotations

from dataclasses import dataclass

from stdsl.compiler import ir
from stdsl.compiler.automata.automaton import Automaton
from stdsl.compiler.automata.build import build_automaton
from stdsl.compiler.constraint import Constraint
from stdsl.compiler.not_containing import not_containing
from stdsl.compiler.pushdown.constraint import PushdownConstraint
from stdsl.compiler.pushdown.grammar import GrammarConflictError
from stdsl.compiler.pushdown.prefixed import prefixed_grammar
from stdsl.compiler.special_tokens import spelled
from stdsl.errors import CompileError

MODES = ("opened", "required", "optional")


@dataclass(frozen=True)
class ThinkingFormat:
    """How a model family writes its thinking block: the opening tag, the closing tag, and the closing text
    (the tag and what the family writes after it before the answer)."""

    name: str
    open: str
    close: str
    close_text: str

    @property
    def markers(self) -> tuple[str, str]:
        """The tags a family's tokenizer may have as one special or added token."""
        return (self.open, self.close)

    def spelled(self, tokens: tuple[str, ...]) -> tuple[bytes, bytes, bytes]:
        """The opening tag, the closing tag and the closing text as the output's bytes, the tags in `tokens`
        written as their tokens."""
        return spelled(self.open, tokens), spelled(self.close, tokens), spelled(self.close_text, tokens)


THINK = ThinkingFormat("think", "<think>", "</think>", "</think>\n\n")
"""Qwen3 / Qwen3.5, QwQ and DeepSeek-R1: `<think>` ... `</think>` and a blank line before the answer."""

FORMATS = {THINK.name: THINK}


@dataclass
class ReasoningConstraint:
    """THINK · CLOSE · ANSWER compiled as one constraint (`constraint`), with the answer's own (`answer`); `tokens`
    are the format's tags written as one token of the tokenizer."""

    constraint: Constraint | PushdownConstraint
    answer: Constraint | PushdownConstraint | Automaton
    format: ThinkingFormat
    mode: str
    tokens: tuple[str, ...] = ()

    @property
    def nbytes(self) -> int:
        """Bytes the composed constraint holds (the answer is usually cached on its own too)."""
        return int(self.constraint.nbytes)

    def accepts(self, data: bytes | str) -> bool:
        """Whether `data` (thinking block and answer) is an output of this constraint."""
        return self.constraint.accepts(data)

    def __repr__(self) -> str:
        return f"ReasoningConstraint({self.format.name}, {self.mode}, answer={self.answer!r})"


def thinking_prefix(fmt: ThinkingFormat, mode: str, tokens: tuple[str, ...] = ()) -> ir.Node:
    """The IR of what precedes the answer in `mode` (see the module docstring), the tags in `tokens` as tokens."""
    if mode not in MODES:
        raise CompileError(f"thinking mode must be one of {', '.join(MODES)}, got {mode!r}")
    opening, _, close_text = fmt.spelled(tokens)
    block = ir.seq(not_containing([fmt.close]), ir.literal(close_text))
    if mode == "opened":
        return block
    opened = ir.seq(ir.literal(opening), block)
    return opened if mode == "required" else ir.optional(opened)


def think_then(answer: Constraint | PushdownConstraint | Automaton, fmt: ThinkingFormat, mode: str,
               tokens: tuple[str, ...] = ()) -> ReasoningConstraint:
    """`answer` preceded by the thinking block of `fmt` in `mode`; the tags in `tokens` (those the model's tokenizer
    has as one token) are written as those tokens, and the answer's own special tokens are kept.

    An optional block before an answer that may itself begin with the opening tag is refused: which
    part of such an output is thinking would be ambiguous.
    """
    unknown = [token for token in tokens if token not in fmt.markers]
    if unknown:
        raise CompileError(f"{unknown[0]!r} is not a tag of the {fmt.name} thinking format")
    used = tuple(tag for tag in fmt.markers if tag in tokens and (mode != "opened" or tag == fmt.close))
    prefix = thinking_prefix(fmt, mode, used)
    if not isinstance(answer, (Constraint, PushdownConstraint, Automaton)):
        raise CompileError("a thinking block can precede a compiled constraint or automaton, "
                           f"not {type(answer).__name__}")
    specials = tuple(dict.fromkeys((*getattr(answer, "special_tokens", ()), *used)))
    if isinstance(answer, PushdownConstraint):
        try:
            grammar = prefixed_grammar(prefix, answer.grammar)
        except GrammarConflictError:
            raise _ambiguous(fmt) from None
        composed: Constraint | PushdownConstraint = PushdownConstraint(grammar, "reasoning", answer.source,
                                                                       special_tokens=specials)
    else:
        automaton = answer if isinstance(answer, Automaton) else answer.automaton
        if mode == "optional" and automaton.step(automaton.start, fmt.spelled(used)[0]) >= 0:
            raise _ambiguous(fmt)
        node = ir.seq(prefix, ir.Embedded(automaton.transitions, automaton.accepting))
        composed = Constraint(build_automaton(node), "reasoning", getattr(answer, "source", None),
                              special_tokens=specials)
    return ReasoningConstraint(composed, answer, fmt, mode, used)


def _ambiguous(fmt: ThinkingFormat) -> CompileError:
    return CompileError(f"the answer may itself begin like the thinking block ({fmt.open!r}), so a block the model "
                        "may open or not is ambiguous here; ask for thinking on or off explicitly (reasoning=True "
                        "or False, or chat_template_kwargs enable_thinking)")
