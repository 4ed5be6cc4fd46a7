"""Do two engines allow the same tokens? Per-step set differences, with known causes categorized.

Used by compile_and_mask.py to compare stdsl's masks with each peer's. Known by-design differences
(see ../shared/peers/RESULTS.md): llguidance allows only canonical tokens over forced text and rejects
the `\\/` escape, raw U+007F and most `\\u` escapes; outlines-core has no `\\u` escape, excludes
U+007F-U+009F, and its `format` regexes use Unicode `\\d`.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable

import numpy as np


def _unicode_digit_prefixes() -> frozenset[bytes]:
    """UTF-8 encodings of the non-ASCII decimal digits (category Nd) and all their prefixes."""
    out = set()
    for cp in range(0x80, 0x110000):
        if 0xD800 <= cp <= 0xDFFF or unicodedata.category(chr(cp)) != "Nd":
            continue
        enc = chr(cp).encode()
        out.update(enc[:i] for i in range(1, len(enc) + 1))
    return frozenset(out)


UNICODE_DIGIT_PREFIXES = _unicode_digit_prefixes()


def is_unicode_digit_run(data: bytes) -> bool:
    """Whether a token is decimal digits with at least one non-ASCII one (or a UTF-8 prefix of one)."""
    for cut in range(len(data), max(len(data) - 4, -1), -1):
        try:
            text = data[:cut].decode("utf-8")
        except UnicodeDecodeError:
            continue
        rest = data[cut:]
        if rest and rest not in UNICODE_DIGIT_PREFIXES:
            return False
        if not all(unicodedata.category(c) == "Nd" for c in text):
            return False
        return bool(rest) or any(ord(c) > 127 for c in text)
    return False


def token_category(data: bytes) -> str:
    """Why a token is likely to differ between JSON engines (known, documented differences)."""
    if is_unicode_digit_run(data):
        return "non-ASCII digit (Unicode \\d in a format)"
    if b"\\/" in data:
        return "escape \\/"
    if b"\\u" in data:
        return "escape \\u"
    if b"\x7f" in data or any(data[i] == 0xC2 and 0x80 <= data[i + 1] <= 0x9F for i in range(len(data) - 1)):
        return "raw U+007F-U+009F"
    if data.endswith((b"\\", b"\xc2")):
        return "partial escape / UTF-8 prefix"
    return "other"


def compare_masks(
    ours: list[tuple[int, np.ndarray]],
    theirs: list[np.ndarray],
    token_bytes: list,
    forced: Callable[[int], bytes],
    contexts: list[bytes],
    examples: int = 6,
) -> dict:
    """Per step set difference between our masks and a peer's (packed bits), differing tokens categorized.

    `forced(state)` is the state's forced chain: a token inside it that a peer rejects is a
    non-canonical split of forced text (llguidance allows only the canonical tokens there). A peer's
    non-ASCII digit where we allow only ASCII is outlines-core's Unicode `\\d` in `format` regexes.
    `contexts[step]` is the document text before the step, shown with unexplained differences.
    """
    steps_differ, ours_only_steps, theirs_only_steps, unexplained = 0, 0, 0, []
    categories: dict[str, int] = {}
    explained_examples: list[dict] = []
    unexplained_examples: list[dict] = []
    size = len(token_bytes)
    non_ascii_start = np.fromiter((bool(b) and b[0] >= 0x80 for b in token_bytes), dtype=bool, count=size)
    for step, ((state, packed_a), packed_b) in enumerate(zip(ours, theirs)):
        if np.array_equal(packed_a, packed_b):
            continue
        a = np.unpackbits(packed_a)[:size].astype(bool)
        b = np.unpackbits(packed_b)[:size].astype(bool)
        only_ours = np.flatnonzero(a & ~b)
        only_theirs = np.flatnonzero(b & ~a)
        ours_only_steps += int(only_ours.size > 0)
        theirs_only_steps += int(only_theirs.size > 0)
        steps_differ += 1
        chain = forced(state)
        ascii_only_here = not (a & non_ascii_start).any()
        odd: list[str] = []
        for side, toks in (("ours_only", only_ours), ("theirs_only", only_theirs)):
            for t in toks.tolist():
                data = token_bytes[t] or b"<special>"
                kind = "forced text, other split" if chain and chain.startswith(data) else token_category(data)
                categories[f"{side}: {kind}"] = categories.get(f"{side}: {kind}", 0) + 1
                peer_unicode_digit = side == "theirs_only" and kind.startswith("non-ASCII digit") and ascii_only_here
                if not ((side == "ours_only" and kind != "other") or peer_unicode_digit):
                    odd.append(f"{side}: {data!r}")
        detail = {
            "step": step,
            "state": state,
            "context_tail": repr(contexts[step][-40:]),
            "forced_chain": repr(chain),
            "n_ours_only": int(only_ours.size),
            "ours_only": [repr(token_bytes[t]) for t in only_ours[:8].tolist()],
            "n_theirs_only": int(only_theirs.size),
            "theirs_only": [repr(token_bytes[t]) for t in only_theirs[:8].tolist()],
        }
        if odd:
            unexplained.append(step)
            if len(unexplained_examples) < examples:
                unexplained_examples.append({**detail, "unexplained_tokens": odd[:12]})
        elif len(explained_examples) < 3:
            explained_examples.append(detail)
    return {
        "steps": len(ours),
        "steps_differ": steps_differ,
        "steps_ours_allows_more": ours_only_steps,
        "steps_peer_allows_more": theirs_only_steps,
        "differing_token_categories": categories,
        "unexplained_steps": unexplained,
        "unexplained_examples": unexplained_examples,
        "explained_examples": explained_examples,
    }
