"""Which rows let a step queue the next pass before their draws reach the host, as mlx-lm's generate loop does.

A pipelined step draws every row's token on the device, queues the next pass feeding those draws, and only then
reads them and advances the constraints, so the pass's graph is built while the previous one runs and the host's
control work runs while the new one does (the draws are evaluated apart from the pass, so reading them does not wait
for it: `BatchCore._sample_ahead`). That pass is the one the step would have queued after reading the draws
exactly when each row's feed starts with its sampled token: the rest of the feed (tokens forced after it) then
drips into the next pass, and a row that ends in the step leaves the batch before its next logits are read. A
token's feed starts with the token unless the canonical split re-spells it with forced bytes after it
(`ForcedPlanner.plan`), so a row qualifies when its automaton forces no byte anywhere (free text does not), whatever
its mask. A row certain to end with this draw (its token budget has one token left, a draft its last draw) is
fed nothing, so its cache and what the prompt cache keeps of it stay as without pipelining; a row that ends
otherwise (eos, a stop string) was fed its last token, which its cache then holds, and the prompt cache stores its
sequence with that token. A step where some row's draw may finish its output by its automaton (a live token at its
state leads where no byte is live: the end of a program's literal, an enum's last value) is not pipelined: its pass
would be one that row never uses, and at one row a pass the step need not run at all.
"""

from __future__ import annotations

from typing import Any

from stdsl.compiler.automata.automaton import Automaton
from stdsl.control.controller import Controller

PIPELINED = True
"""Whether a step whose rows all qualify is pipelined (off: every step reads its draws before queueing the next pass,
the loop the pipelined one is checked against)."""


def feeds_draw_first(controller: Controller) -> bool:
    """Whether every token a row under `controller` samples is the first token it then feeds (its automaton, a DFA,
    forces no byte: no forced span is ever re-split with it)."""
    machine = controller.machine
    return isinstance(machine, Automaton) and machine.forces_nothing


def ends_with_draw(row: Any) -> bool:
    """Whether `row` ends whatever token it draws next: one token of its budget left, or its last allowed draw."""
    return row.log.configuration.remaining == 1 or (row.max_samples is not None
                                          and row.stats.sampled_tokens + 1 >= row.max_samples)


def may_end_by_automaton(row: Any) -> bool:
    """Whether `row`'s next draw may finish its output by its automaton alone (`Controller.may_end_after` at its
    state: memoized per state, so asking each step costs a lookup)."""
    return bool(row.controller.may_end_after(row.log.configuration.state))
