"""The reply DFA of a tool list, assembled from each tool's call DFA: a tool is compiled once, and a list costs the
tools it has not met before.

Each call (`ToolFormat.tool_call_ir`) is compiled on its own to a DFA and kept in the cache registry (kind "tool
calls"), keyed by the format and the tool's canonical schema; a call that is a head, the arguments' DFA and a tail
is laid out from them (`ops.concatenation`) with no subset construction, and so is a call of parameters written
apart, some optional (`call_layout`: per-parameter pieces behind tries of their tags).  The calls a list has not met
before are built together: those of a literal head, guarded JSON arguments and a literal tail in one guard product
and one trim (`guarded_calls`), those of parameters written apart side by side in one table (`call_layouts`), so a
cold list pays numpy's per-operation cost once, not once per tool. The reply's skeleton
(`reply_around` with a placeholder symbol as its call) is compiled small, and `pushdown.piece_assembly.assemble`
puts the calls in its placeholder edges: the subset construction runs only over the head the calls share and the
trie of their names, never over the product of all the tools' states. The DFA accepts exactly what the
single-expression build (`reply_ir` lowered whole) accepts, so masks, forced text, budgets and certified fields are
as before.
"""

from __future__ import annotations

import json
from collections.abc import Hashable, Sequence

from stdsl import caches
from stdsl.compiler import ir
from stdsl.compiler.automata.automaton import Automaton
from stdsl.compiler.automata.build import build_automaton
from stdsl.compiler.automata.determinize import DEFAULT_MAX_STATES
from stdsl.compiler.not_containing import not_containing
from stdsl.compiler.pushdown.embedding import holds_grammar
from stdsl.compiler.pushdown.piece_assembly import (
    PLACEHOLDER_NODE,
    assemble,
    literals_and_leaves,
    over_bytes,
    piece_from_parts,
)
from stdsl.compiler.tools.call_layout import call_layout, call_layouts
from stdsl.compiler.tools.formats import ArgumentsIR, ToolFormat, ToolSpec
from stdsl.compiler.tools.guarded_calls import CallParts, guarded_calls
from stdsl.compiler.tools.reply_grammar import called_tools, reply_around

_CALLS = caches.kind("tool calls")
"""One call's DFA per (format, tool name, canonical parameter schema, arguments lowering)."""


def format_shape(tool_format: ToolFormat) -> tuple[str, str, str]:
    """What names a format in the keys of cached calls: its class and its settings (the marker tokens it writes)."""
    return type(tool_format).__module__, type(tool_format).__qualname__, repr(sorted(vars(tool_format).items()))


def _call_key(tool: ToolSpec, shape: tuple[str, str, str], lowering: Hashable) -> tuple[Hashable, ...] | None:
    """What a call's DFA is cached under (None for a custom tool, whose input language is compiled per request)."""
    if tool.custom_input is not None:
        return None
    schema = json.dumps(tool.parameters, separators=(",", ":"), ensure_ascii=False, sort_keys=False)
    return (*shape, tool.name, schema, lowering)


def call_automaton(tool: ToolSpec, tool_format: ToolFormat, arguments_ir: ArgumentsIR,
                   lowering: Hashable, shape: tuple[str, str, str] | None = None) -> Automaton | None:
    """The DFA of one call of `tool` (None when it embeds a recursive grammar, which needs the pushdown), kept
    per format (`shape`, `format_shape`'s when not given), tool name and canonical schema when `lowering` names how
    `arguments_ir` lowers a schema."""

    def build() -> Automaton | None:
        return piece_automaton(tool_format.tool_call_ir(tool, arguments_ir))

    key = _call_key(tool, shape or format_shape(tool_format), lowering)
    return build() if key is None else _CALLS.get((), build, key)


def piece_automaton(node: ir.Node) -> Automaton | None:
    """The DFA of a piece's expression (a call, a structural tag; see `_laid_out`), None where it embeds a
    recursive grammar."""
    return None if holds_grammar(node) else _laid_out(node, None)


def _laid_out(node: ir.Node, laid_out: Automaton | None) -> Automaton:
    """The DFA of a call's expression that embeds no grammar (`laid_out` where `call_layouts` gave it): laid out
    from its parts where it is literal text and leaves in a row or units of parameters (`call_layout`), else
    determinized whole."""
    if laid_out is None:
        parts = literals_and_leaves(node)
        if parts is not None:
            return piece_from_parts(parts)
        laid_out = call_layout(node)
    return laid_out if laid_out is not None else build_automaton(node)


def _calls(called: Sequence[ToolSpec], tool_format: ToolFormat, arguments_ir: ArgumentsIR,
           lowering: Hashable) -> list[Automaton | None]:
    """Each called tool's call DFA: those cached found, the new ones of a format whose calls are a literal head,
    guarded arguments and a literal tail built together (`guarded_calls`), those of parameters written apart laid
    out together (`call_layouts`), the rest one by one (`piece_automaton`)."""
    shape = format_shape(tool_format)
    keys = [_call_key(tool, shape, lowering) for tool in called]
    known: dict[int, Automaton] = {}
    for index, key in enumerate(keys):
        hit = _CALLS.find((), key) if key is not None else None
        if hit is not None and hit[0] is not None:
            known[index] = hit[0]
    new = [index for index, key in enumerate(keys) if key is not None and index not in known]
    if new and tool_format.body_excludes:
        batch: list[tuple[int, CallParts]] = []
        for index in new:
            parts = tool_format.call_parts(called[index], arguments_ir)
            if parts is not None and isinstance(parts[1], ir.Embedded) and over_bytes(parts[1]):
                batch.append((index, (parts[0], build_automaton(parts[1]), parts[2])))
        if batch:
            guard = build_automaton(not_containing(list(tool_format.body_excludes)))
            for (index, _), automaton in zip(batch, guarded_calls([parts for _, parts in batch], guard)):
                key = keys[index]
                if automaton is not None and key is not None:
                    _CALLS.put((), automaton, key)
                    known[index] = automaton
    remaining = [index for index in new if index not in known]
    nodes = [tool_format.tool_call_ir(called[index], arguments_ir) for index in remaining]
    grammars = [holds_grammar(node) for node in nodes]
    layouts = iter(call_layouts([node for node, grammar in zip(nodes, grammars) if not grammar]))
    for index, node, grammar in zip(remaining, nodes, grammars):
        automaton = None if grammar else _laid_out(node, next(layouts))
        key = keys[index]
        if automaton is not None and key is not None:
            _CALLS.put((), automaton, key)
            known[index] = automaton
    return [known[index] if index in known else call_automaton(tool, tool_format, arguments_ir, lowering, shape)
            for index, tool in enumerate(called)]


CallKey = tuple[Hashable, ...]
"""What a call's DFA is cached under (`_call_key`)."""


def call_share(tools: Sequence[ToolSpec], tool_format: ToolFormat, arguments_ir: ArgumentsIR, lowering: Hashable,
               share: Sequence[int]) -> list[tuple[CallKey, Automaton]]:
    """The call DFAs of the tools at `share` of a list, built as `reply_automaton` builds a list's new calls, with
    their cache keys: what a compile worker hands the one that assembles the list (`keep_calls`)."""
    chosen = [tools[index] for index in share]
    shape = format_shape(tool_format)
    pairs = []
    for tool, call in zip(chosen, _calls(chosen, tool_format, arguments_ir, lowering)):
        key = _call_key(tool, shape, lowering)
        if call is not None and key is not None:
            pairs.append((key, call))
    return pairs


def keep_calls(pairs: Sequence[tuple[CallKey, Automaton]]) -> None:
    """Keep call DFAs built elsewhere (`call_share`) where `reply_automaton` looks its calls up."""
    for key, call in pairs:
        _CALLS.put((), call, key)


def reply_automaton(tools: Sequence[ToolSpec], tool_format: ToolFormat, arguments_ir: ArgumentsIR,
                    lowering: Hashable, *, choice: str = "auto", parallel: bool = True,
                    content: ir.Node | None = None, max_states: int = DEFAULT_MAX_STATES) -> Automaton | None:
    """The DFA of `reply_ir(tools, ...)` assembled from the calls' cached DFAs, or None where it needs the
    single-expression build: no call at all, or a recursive grammar in a call or the content (a pushdown)."""
    called = called_tools(tools, choice)
    if not called:
        return None
    calls = _calls(called, tool_format, arguments_ir, lowering)
    if any(call is None for call in calls):
        return None
    skeleton = reply_around(PLACEHOLDER_NODE, tool_format, choice=choice, parallel=parallel, content=content)
    return assemble([call for call in calls if call is not None], skeleton, max_states)
