"""Small chat templates of thinking models for the tests (SmolLM2 does not think), and readers of their outputs.

OPENING writes `<think>\\n` after the assistant header, as DeepSeek-R1 and Qwen3.5 do (the output
starts inside the block); CHOOSING leaves it to the model, as Qwen3 does.  Both close an empty block
in the prompt when `enable_thinking` is false.
"""
from __future__ import annotations

import dataclasses
from typing import Any

_TURNS = ("{%- for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + "
          "'<|im_end|>\\n' }}{%- endfor %}")
_OFF = "{%- if enable_thinking is defined and enable_thinking is false %}{{ '<think>\\n\\n</think>\\n\\n' }}"
OPENING = (_TURNS + "{%- if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}" + _OFF
           + "{%- else %}{{ '<think>\\n' }}{%- endif %}{%- endif %}")
CHOOSING = (_TURNS + "{%- if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}" + _OFF
            + "{%- endif %}{%- endif %}")
CLOSE = "</think>"


def with_template(model: Any, template: str, name: str) -> Any:
    """`model` (same weights) whose tokenizer has `template` as its chat template."""
    from stdsl.runtime.model.loading import Model

    tokenizer = dataclasses.replace(model.tokenizer, chat_template=template)
    return Model(net=model.net, tokenizer=tokenizer, name=name)


def tokens_before(tokenizer: Any, tokens: list[int], offset: int) -> int:
    """How many of `tokens` end at or before byte `offset` of their text."""
    end = 0
    for count, token in enumerate(tokens):
        end += len(tokenizer.token_bytes[token])
        if end > offset:
            return count
    return len(tokens)


HARMONY_TEMPLATE = (
    "{%- for message in messages %}{{ '<|start|>' + message['role'] + '<|message|>' + message['content'] + '<|end|>' }}"
    "{%- endfor %}{%- if add_generation_prompt %}{{ '<|start|>assistant' }}"
    "{%- if analysis_opened %}{{ '<|channel|>analysis<|message|>' }}{%- endif %}"
    "{%- if final_opened %}{{ '<|channel|>final<|message|>' }}{%- endif %}{%- endif %}"
    "{#- tool calls: <|channel|>commentary to=functions.NAME <|constrain|>json<|message|>ARGS<|call|> #}"
)
"""A small gpt-oss (Harmony) template: messages as `<|start|>ROLE<|message|>TEXT<|end|>`, the generation prompt
`<|start|>assistant`, and switches that open the analysis or the final channel in the prompt."""
