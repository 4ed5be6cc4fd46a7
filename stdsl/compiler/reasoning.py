"""The output of a reasoning model: a thinking block of free text, its closing text, then the constrained answer.

    OUTPUT = THINK · CLOSE · HEAD · ANSWER          the prompt opened the block ("opened")
           = OPEN · THINK · CLOSE · HEAD · ANSWER   the block is opened by forced text ("required")
           = (OPEN · THINK · CLOSE)? HEAD · ANSWER  the model chooses whether to think ("optional")
           = HEAD · ANSWER                          thinking is off in a family whose answer has a HEAD ("off")

THINK is every text without the closing tag (Proposition 3, exact), so the tag can always be
written and ends the block at its first occurrence; CLOSE is the closing text as the family writes
it; HEAD is what the family writes before every answer (empty for `<think>` blocks, the final-channel
header for gpt-oss's Harmony); ANSWER is the user's constraint, a DFA or a pushdown.  The whole is one
constraint, so the budget rule of Theorem 21 keeps room for CLOSE, HEAD and the shortest answer under
every `max_tokens`.

Where the model's tokenizer has a tag as one special or added token (Qwen3.5's `</think>`, gpt-oss's
`<|channel|>`, `<|end|>`...), the tag is written as that token (`tokens`; `special_tokens.token_markers`
decides), so the model closes the block with the token it was trained on; THINK still never contains
the closing tag's text, so the first tag in the visible output is the real one.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

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

MODES = ("opened", "required", "optional", "off")


@dataclass(frozen=True)
class ThinkingFormat:
    """How a model family writes its thinking block: the opening tag, the closing tag, the closing text (the tag
    and what the family writes after it), the markers its tokenizer may have as one token, and the head written
    before every answer, after the block or in its place."""

    name: str
    open: str
    close: str
    close_text: str
    markers: tuple[str, ...]
    answer_head: str = ""

    def spelled(self, tokens: tuple[str, ...]) -> tuple[bytes, bytes, bytes, bytes]:
        """The opening tag, the closing tag, the closing text and the answer's head as the output's bytes, the
        markers in `tokens` written as their tokens."""
        return (spelled(self.open, tokens), spelled(self.close, tokens), spelled(self.close_text, tokens),
                spelled(self.answer_head, tokens))


THINK = ThinkingFormat("think", "<think>", "</think>", "</think>\n\n", ("<think>", "</think>"))
"""Qwen3 / Qwen3.5, QwQ and DeepSeek-R1: `<think>` ... `</think>` and a blank line before the answer."""

HARMONY_MARKERS = ("<|channel|>", "<|message|>", "<|end|>", "<|start|>")
HARMONY = ThinkingFormat("harmony", "<|channel|>analysis<|message|>", "<|end|>", "<|end|><|start|>assistant",
                         HARMONY_MARKERS, "<|channel|>final<|message|>")
"""gpt-oss (Harmony, after the prompt's `<|start|>assistant`): the analysis-channel message is the block, the
answer is the final-channel message."""

HARMONY_CALLS = replace(HARMONY, name="harmony_calls", answer_head="")
"""Harmony before a reply that writes its own channel header: a final-channel message or a commentary-channel
tool call (`stdsl.compiler.tools.formats.harmony`)."""

FORMATS = {f.name: f for f in (THINK, HARMONY, HARMONY_CALLS)}


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
    """The IR of what precedes the answer in `mode` (see the module docstring), the markers in `tokens` as tokens."""
    if mode not in MODES:
        raise CompileError(f"thinking mode must be one of {', '.join(MODES)}, got {mode!r}")
    opening, _, close_text, head = fmt.spelled(tokens)
    if mode == "off":
        if not head:
            raise CompileError(f"the {fmt.name} thinking format writes nothing before an answer, so it has no "
                               "'off' mode: leave the answer unwrapped")
        return ir.literal(head)
    block = ir.seq(not_containing([fmt.close]), ir.literal(close_text))
    opened = block if mode == "opened" else ir.seq(ir.literal(opening), block)
    before = ir.optional(opened) if mode == "optional" else opened
    return ir.seq(before, ir.literal(head)) if head else before


def written_markers(fmt: ThinkingFormat, mode: str, tokens: tuple[str, ...]) -> tuple[str, ...]:
    """The markers among `tokens` that the text forced in `mode` contains (the opening tag only where it is
    written: not when the prompt opened the block)."""
    texts = [fmt.answer_head]
    if mode != "off":
        texts.append(fmt.close_text)
    if mode in ("required", "optional"):
        texts.append(fmt.open)
    return tuple(marker for marker in fmt.markers if marker in tokens and any(marker in text for text in texts))


def think_then(answer: Constraint | PushdownConstraint | Automaton, fmt: ThinkingFormat, mode: str,
               tokens: tuple[str, ...] = ()) -> ReasoningConstraint:
    """`answer` preceded by the thinking block of `fmt` in `mode`; the tags in `tokens` (those the model's tokenizer
    has as one token) are written as those tokens, and the answer's own special tokens are kept.

    An optional block before an answer that may itself begin with the opening tag is refused: which
    part of such an output is thinking would be ambiguous.
    """
    unknown = [token for token in tokens if token not in fmt.markers]
    if unknown:
        raise CompileError(f"{unknown[0]!r} is not a marker of the {fmt.name} thinking format")
    used = written_markers(fmt, mode, tokens)
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
        if mode == "optional" and _may_begin_like_block(automaton, fmt, used):
            raise _ambiguous(fmt)
        node = ir.seq(prefix, ir.Embedded(automaton.transitions, automaton.accepting))
        composed = Constraint(build_automaton(node), "reasoning", getattr(answer, "source", None),
                              special_tokens=specials)
    return ReasoningConstraint(composed, answer, fmt, mode, used)


def _may_begin_like_block(automaton: Automaton, fmt: ThinkingFormat, tokens: tuple[str, ...]) -> bool:
    """Whether the head and an answer of `automaton` may together begin with the opening tag."""
    opening, _, _, head = fmt.spelled(tokens)
    if head.startswith(opening):
        return True
    return opening.startswith(head) and automaton.step(automaton.start, opening[len(head):]) >= 0


def _ambiguous(fmt: ThinkingFormat) -> CompileError:
    return CompileError(f"the answer may itself begin like the thinking block ({fmt.open!r}), so a block the model "
                        "may open or not is ambiguous here; ask for thinking on or off explicitly (reasoning=True "
                        "or False, or chat_template_kwargs enable_thinking)")
