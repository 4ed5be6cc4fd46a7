"""Tool-call formats of the common model families, as data: each gives the reply grammar of a tool list, the
literals free text must not contain, the text of a call and the reader that splits a reply into text and calls.

A format is chosen by name (`tool_format=` on a request, `stcon serve --tool-format`) or recognised from
the model's chat template by its distinctive strings; a template nothing recognises gets Hermes-style
`<tool_call>` JSON calls.
"""

from __future__ import annotations

from stdsl.compiler.tools.formats.atem_calls import MuseSparkFormat
from stdsl.compiler.tools.formats.base import ArgumentsIR, ParsedCall, ToolFormat, Tools, ToolSpec
from stdsl.compiler.tools.formats.gemma import FunctionGemmaFormat, Gemma4Format
from stdsl.compiler.tools.formats.harmony import HarmonyFormat
from stdsl.compiler.tools.formats.invoke_calls import MiniCpm5Format, MiniMaxM2Format
from stdsl.compiler.tools.formats.json_calls import (
    DeepSeekV3Format,
    HermesFormat,
    KimiK2Format,
    KimiK3Format,
    Llama3JsonFormat,
    MistralFormat,
    MistralV11Format,
    PlainJsonFormat,
)
from stdsl.compiler.tools.formats.pythonic import PythonicFormat
from stdsl.compiler.tools.formats.xml_calls import Glm47Format, GlmFormat, LongcatFormat, QwenXmlFormat

DEFAULT_FORMAT = "hermes"

_RECOGNITION_ORDER: tuple[ToolFormat, ...] = (
    HarmonyFormat(), MuseSparkFormat(), MiniMaxM2Format(), MiniCpm5Format(), LongcatFormat(), KimiK3Format(),
    KimiK2Format(), DeepSeekV3Format(), Gemma4Format(), FunctionGemmaFormat(), GlmFormat(), Glm47Format(),
    PythonicFormat(), QwenXmlFormat(), MistralV11Format(), MistralFormat(), Llama3JsonFormat(), HermesFormat(),
)
FORMATS: dict[str, ToolFormat] = {f.name: f for f in (*_RECOGNITION_ORDER, PlainJsonFormat())}


def format_named(name: str) -> ToolFormat:
    """The format called `name` (KeyError naming the known ones)."""
    try:
        return FORMATS[name]
    except KeyError:
        raise KeyError(f"unknown tool format {name!r}; known: {', '.join(sorted(FORMATS))}") from None


def format_of_template(template: str | None) -> ToolFormat:
    """The family whose distinctive strings the chat template writes; Hermes-style calls when none is recognised."""
    if template:
        for candidate in _RECOGNITION_ORDER:
            if candidate.recognises(template):
                return candidate
    return FORMATS[DEFAULT_FORMAT]


__all__ = ["ArgumentsIR", "DEFAULT_FORMAT", "FORMATS", "ParsedCall", "ToolFormat", "ToolSpec", "Tools",
           "format_named", "format_of_template"]
