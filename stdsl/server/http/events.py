"""Server-sent events: one JSON payload per `data:` line, with nothing inside it that a client reads as a line end.

JSON leaves U+0085, U+2028 and U+2029 unescaped in strings (the server writes UTF-8, not `\\u` escapes), and SSE
ends lines only at CR and LF, yet common line readers also end them at those three (`str.splitlines`, httpx's
`iter_lines`): a model that writes one split its event there, and the client read broken JSON (the soak test's
one failure in 29,748 requests). They are written as `\\u` escapes, which decode to the same text.
"""

from __future__ import annotations

import json
from typing import Any

LINE_ENDS_JSON_KEEPS = {"\x85": "\\u0085", "\u2028": "\\u2028", "\u2029": "\\u2029"}
"""The characters `str.splitlines` ends a line at that `json.dumps` writes as they are (it escapes every control
character below U+0020, CR, LF, and the separators among them, already)."""
_ESCAPES = str.maketrans(LINE_ENDS_JSON_KEEPS)


def sse_event(payload: Any) -> str:
    """`payload` as one server-sent event: `data: JSON` and a blank line (non-JSON values as their `str`)."""
    return f"data: {json.dumps(payload, ensure_ascii=False, default=str).translate(_ESCAPES)}\n\n"
