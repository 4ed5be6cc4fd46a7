"""The split memo's batched splits equal the tokenizer's own split of each text, one call per text.

Oracle: `Tokenizer.encode_ordinary` of the text's longest valid UTF-8 prefix, called per text.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from stdsl.control.split.characters import valid_utf8_prefix
from stdsl.control.split.split_memo import SplitMemo

PIECES = st.sampled_from(["{", "\"", "name", "\": ", " ", "  ", "\n", "<|im_end|>", "é", "日本", "123", "true", ",\"",
                          "}", "!?", "\u00a0"])
TEXTS = st.lists(st.lists(PIECES, max_size=8).map("".join), max_size=12)


@settings(max_examples=60, deadline=None)
@given(texts=TEXTS, cut=st.integers(0, 2))
def test_split_all_equals_each_text_split_alone(smollm2_tokenizer, texts: list[str], cut: int) -> None:
    """Every text (some ending inside a character, some repeated) reads back its own `encode_ordinary` split."""
    data = [text.encode("utf-8")[: len(text.encode("utf-8")) - cut] if "é" in text else text.encode("utf-8")
            for text in texts]
    memo = SplitMemo(smollm2_tokenizer)
    memo.split_all(data + data[:2])
    assert len(memo) == len(set(data))
    for item in data:
        expected = smollm2_tokenizer.encode_ordinary(item[: valid_utf8_prefix(item)].decode("utf-8"))
        assert memo.split(item) == tuple(expected)
    assert len(memo) == len(set(data))
