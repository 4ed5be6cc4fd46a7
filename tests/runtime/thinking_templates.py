"""Small chat templates of a thinking model for the tests (SmolLM2 does not think), and readers of its outputs.

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
