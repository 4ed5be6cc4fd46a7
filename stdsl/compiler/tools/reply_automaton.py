"""The reply DFA of a tool list, assembled from each tool's call DFA: a tool is compiled once, and a list costs the
tools it has not met before.

Each call (`ToolFormat.tool_call_ir`) is compiled on its own to a DFA and kept in the cache registry (kind "tool
calls"), keyed by the format and the tool's canonical schema; a call that is a head, the arguments' DFA and a tail
is laid out from them (`ops.concatenation`) with no subset construction, and so is a call of parameters written
apart, some optional (`call_layout`: per-parameter pieces behind tries of their tags).  The calls a list has not met
before are built together: those of a literal head, guarded JSON arguments and a literal tail in one guard product
and one trim (`guarded_calls`), those of parameters written apart side by side in one table (`call_layouts`), so a
cold list pays numpy's per-operation cost once, not once per tool. The reply's skeleton
(`reply_around` with a placeholder symbol as its call) is compiled small, and `automata.substitution.substitute`
puts the calls in its placeholder edges: the subset construction runs only over the head the calls share and the
trie of their names, never over the product of all the tools' states. The DFA accepts exactly what the
single-expression build (`reply_ir` lowered whole) accepts, so masks, forced text, budgets and certified fields are
as before.
"""

from __future__ import annotations

import json
from collections.abc import Hashable, Sequence

import numpy as np

from stdsl import caches
from stdsl.compiler import ir
from stdsl.compiler.automata.automaton import Automaton
from stdsl.compiler.automata.build import build_automaton
from stdsl.compiler.automata.determinize import DEFAULT_MAX_STATES, determinize
from stdsl.compiler.automata.minimize import shrink
from stdsl.compiler.automata.nfa import build_nfa
from stdsl.compiler.automata.ops import concatenation
from stdsl.compiler.automata.substitution import PLACEHOLDER, general_substitute, substitute
from stdsl.compiler.not_containing import not_containing
from stdsl.compiler.pushdown.embedding import holds_grammar
from stdsl.compiler.tools.call_layout import call_layout, call_layouts
from stdsl.compiler.tools.formats import ArgumentsIR, ToolFormat, ToolSpec
from stdsl.compiler.tools.guarded_calls import CallParts, guarded_calls
from stdsl.compiler.tools.reply_grammar import called_tools, reply_around

_CALLS = caches.kind("tool calls")
"""One call's DFA per (format, tool name, canonical parameter schema, arguments lowering)."""
_SKELETONS = caches.kind("reply skeletons")
"""The reply skeleton's table over bytes and placeholders, per skeleton expression (format, choice, content)."""


def _literals_and_leaves(node: ir.Node) -> list[bytes | Automaton] | None:
    """A call that is literal text and embedded automata in a row (a head, the arguments' DFA, a tail) as those
    parts, the automata compiled (once per leaf), or None for any other shape."""
    parts: list[bytes | Automaton] = []
    for item in node.items if isinstance(node, ir.Seq) else (node,):
        text = ir.literal_bytes(item)
        if text is not None:
            if parts and isinstance(parts[-1], bytes):
                parts[-1] += text
            else:
                parts.append(text)
        elif isinstance(item, ir.Embedded) and _over_bytes(item):
            parts.append(build_automaton(item))
        else:
            return None
    return parts


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
        parts = _literals_and_leaves(node)
        if parts is not None:
            return concatenation(parts) or _substituted_sequence(parts)
        laid_out = call_layout(node)
    return laid_out if laid_out is not None else build_automaton(node)


def _substituted_sequence(parts: list[bytes | Automaton]) -> Automaton:
    """Literal text and automata in a row where `concatenation` cannot lay them out (a part accepts the empty text or
    reads on past an end, as tags with a separator do inside a tag): a chain of the text's bytes with a placeholder
    edge per automaton, the automata put in by `general_substitute` (a subset construction only where a part's end
    and what follows are both alive)."""
    automata = [part for part in parts if isinstance(part, Automaton)]
    length = sum(len(part) if isinstance(part, bytes) else 1 for part in parts)
    chain = np.full((length + 1, PLACEHOLDER + len(automata)), -1, dtype=np.int32)
    state, piece = 0, 0
    for part in parts:
        columns = list(part) if isinstance(part, bytes) else [PLACEHOLDER + piece]
        piece += not isinstance(part, bytes)
        for column in columns:
            chain[state, column] = state + 1
            state += 1
    accepting = np.zeros(length + 1, dtype=bool)
    accepting[length] = True
    return general_substitute(chain, accepting, [[automaton] for automaton in automata])


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
            if parts is not None and isinstance(parts[1], ir.Embedded) and _over_bytes(parts[1]):
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


def _over_bytes(leaf: ir.Embedded) -> bool:
    """Whether an embedded automaton reads bytes only (no call symbols of a pushdown's bodies)."""
    return np.shape(leaf.transitions)[1:] == (256,)


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
    if holds_grammar(skeleton):
        return None
    wide, accepting = skeleton_table(skeleton, max_states)
    return substitute(wide, accepting, [[call for call in calls if call is not None]])


PLACEHOLDER_NODE = ir.ByteSet(((PLACEHOLDER, PLACEHOLDER),))
"""The skeleton's stand-in for one piece (`substitute` puts the pieces in its edges)."""


def skeleton_table(skeleton: ir.Node, max_states: int = DEFAULT_MAX_STATES) -> tuple[np.ndarray, np.ndarray]:
    """A skeleton's trim table over bytes and the placeholder (read-only, with its accepting mask), kept per
    skeleton expression: a list with other pieces in the same places reuses it."""

    def compiled() -> tuple[np.ndarray, np.ndarray]:
        dfa = determinize(build_nfa(skeleton), max_states, PLACEHOLDER + 1)
        table, accepting = shrink(dfa.table, dfa.accepting, all_reachable=True)
        wide, final = np.asarray(table, dtype=np.int32)[:, dfa.byte_class], np.asarray(accepting, dtype=bool)
        wide.setflags(write=False)
        final.setflags(write=False)
        return wide, final

    found: tuple[np.ndarray, np.ndarray] = _SKELETONS.get((), compiled, (skeleton, max_states))
    return found
