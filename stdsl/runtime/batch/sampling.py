"""Token sampling under a constraint mask: greedy, or temperature + top-p + top-k with a seed.

The rule is mlx_lm's `make_sampler` (log-probabilities, then top-p, then top-k, then a
categorical draw at temperature), applied after the constraint mask sets disallowed tokens to -inf.
`RowSampler` keeps one random key per row, so a row's draws depend only on its seed and its own
logits, never on the other rows of a batch; `sample_rows` draws for a whole batch. A batch's masks travel as
one packed bitmask (int32 words, 32 tokens a word, as XGrammar's and llguidance's): uploaded once, unpacked
on the device where the logits are masked (`sample_packed`).
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Sequence
from functools import cache

import mlx.core as mx
import numpy as np

from stdsl.errors import GenerationError
from stdsl.kernels.token_mask import WORD_BITS, pack_words
from stdsl.runtime.options import SamplingParams


def apply_top_p(logprobs: mx.array, top_p: float) -> mx.array:
    """Nucleus filter: keep the smallest set of most likely tokens holding `top_p` of the mass (mlx_lm's rule).

    The most likely token is always kept, also when `top_p` rounds to 0 in float32.
    """
    sorted_logprobs = mx.sort(logprobs, axis=-1)
    sorted_probs = mx.exp(sorted_logprobs.astype(mx.float32))
    mass_above = mx.cumsum(sorted_probs, axis=-1, reverse=True, inclusive=False)
    total_mass = mass_above[..., :1] + sorted_probs[..., :1]
    num_dropped = (mass_above >= top_p * total_mass).sum(axis=-1, keepdims=True)
    num_dropped = mx.minimum(num_dropped, logprobs.shape[-1] - 1)
    threshold = mx.take_along_axis(sorted_logprobs, num_dropped, axis=-1)
    return mx.where(logprobs < threshold, -float("inf"), logprobs)


def apply_top_k(logprobs: mx.array, top_k: int) -> mx.array:
    """Keep the `top_k` most likely tokens (mlx_lm's rule); a k at least the vocabulary size keeps all."""
    vocab_size = logprobs.shape[-1]
    if top_k >= vocab_size:
        return logprobs
    drop = mx.argpartition(-logprobs, kth=top_k - 1, axis=-1)[..., top_k:]
    return mx.put_along_axis(logprobs, drop, mx.array(-float("inf"), logprobs.dtype), axis=-1)


def _fit_mask(allowed: np.ndarray, width: int) -> np.ndarray:
    """`allowed` (..., V) cut or padded to the model's `width` logits; padding ids are never allowed."""
    have = allowed.shape[-1]
    if have < width:
        padding = np.zeros(allowed.shape[:-1] + (width - have,), dtype=bool)
        allowed = np.concatenate([allowed, padding], axis=-1)
    elif have > width:
        if allowed[..., width:].any():
            raise GenerationError(f"the constraint allows token ids beyond the model's {width} logits")
        allowed = allowed[..., :width]
    if not allowed.any(axis=-1).all():
        raise GenerationError("no token is admissible at this step (the constraint and budget leave nothing)")
    return allowed


def mask_logits(logits: mx.array, allowed: np.ndarray) -> mx.array:
    """Logits with every token outside `allowed` set to -inf; ids beyond `allowed` (padding) are disallowed.

    Works on one position (V,) with a (V,) mask, or on rows (B, V) with a (B, V) mask.
    """
    fitted = _fit_mask(allowed, logits.shape[-1])
    return mx.where(mx.array(fitted), logits, mx.array(-float("inf"), logits.dtype))


def _tempered_draw(masked: mx.array, params: SamplingParams, key: mx.array | None) -> mx.array:
    """A categorical draw from masked logits (1, V) under top-p, top-k and temperature (lazy, shape (1,)).

    Tokens filtered to -inf stay -inf after scaling, even when 1/T rounds to 0 in float32 (huge T:
    the draw is then uniform over the kept tokens, the limit of softmax(logits/T)).
    """
    logprobs = masked - mx.logsumexp(masked, axis=-1, keepdims=True)
    if params.top_p < 1.0:
        logprobs = apply_top_p(logprobs, params.top_p)
    if params.top_k > 0:
        logprobs = apply_top_k(logprobs, params.top_k)
    scaled = mx.where(logprobs == -float("inf"), logprobs, logprobs * (1.0 / params.temperature))
    return mx.random.categorical(scaled, key=key)


def _checked(token: int, allowed: np.ndarray, where: str) -> int:
    """`token`, after asserting it lies inside the mask (a draw outside it is a bug, never returned)."""
    if not (0 <= token < allowed.shape[-1] and allowed[token]):
        raise GenerationError(f"sampler drew token {token} outside the mask{where}")
    return token


def sample(logits: mx.array, allowed: np.ndarray, params: SamplingParams) -> int:
    """One token id drawn from `logits` (1-D, one position) restricted to `allowed`, with MLX's global generator.

    Draws use shape (1, V), as mlx_lm's generate loop does, so a seed gives mlx_lm's token.
    """
    masked = mask_logits(logits.astype(mx.float32), allowed)[None]
    if params.greedy:
        token = int(np.asarray(mx.argmax(masked, axis=-1))[0])
    else:
        token = int(np.asarray(_tempered_draw(masked, params, None))[0])
    return _checked(token, allowed, "")


class RowSampler:
    """One row's sampling rule with its own random key: its draws depend only on its seed and its logits.

    A seed gives the same draws every run; no seed takes a fresh key from the OS. Each draw splits the key.
    """

    def __init__(self, params: SamplingParams) -> None:
        self.params = params
        self._seed = params.seed if params.seed is not None else secrets.randbits(64)
        self._key: mx.array | None = None

    @property
    def greedy(self) -> bool:
        """True when this row takes the masked argmax (no key is consumed)."""
        return self.params.greedy

    @property
    def key(self) -> mx.array:
        """The row's current random key, made on first use (on the thread that draws: building a sampler on a
        caller's thread does no MLX work there, so no thread but the engine's holds MLX state)."""
        if self._key is None:
            self._key = mx.random.key(self._seed)
        return self._key

    def take_key(self) -> mx.array:
        """The key for the next draw; the row's own key moves on."""
        keys = mx.random.split(self.key)
        self._key = keys[0]
        return keys[1]

    def draw(self, logits: mx.array, allowed: np.ndarray) -> int:
        """One token from `logits` (V,) restricted to `allowed` (V,) bool."""
        return sample_rows(logits[None], allowed[None], [self])[0]


def sample_rows(logits: mx.array, allowed: np.ndarray, samplers: Sequence[RowSampler]) -> list[int]:
    """One token per row of `logits` (B, V) under `allowed` (B, V) bool, row i drawn by `samplers[i]` (the masks are
    packed and drawn as `sample_packed`)."""
    if allowed.ndim != 2:
        raise GenerationError(f"the masks must be (rows, vocabulary) bool, got shape {allowed.shape}")
    return sample_packed(logits, np.stack([pack_words(row) for row in allowed]) if len(allowed) else
                         np.zeros((0, 1), dtype=np.int32), samplers)


def check_bitmask(words: np.ndarray, width: int) -> None:
    """Refuse packed masks (B, W) int32 that leave a row no token, or admit an id at or past the model's `width`
    logits (GenerationError)."""
    if not words.any(axis=-1).all():
        raise GenerationError("no token is admissible at this step (the constraint and budget leave nothing)")
    full, bits = divmod(width, WORD_BITS)
    beyond = words[:, full + 1 :] if bits else words[:, full:]
    past = bits and words.shape[1] > full and (words[:, full] >> bits).any()
    if beyond.any() or past:
        raise GenerationError(f"the constraint allows token ids beyond the model's {width} logits")


def unpack_bitmask(words: mx.array, width: int) -> mx.array:
    """bool (B, width) on the device from packed masks (B, W) int32: token t is bit t % 32 of word t // 32; ids past
    the words are refused."""
    bits = mx.right_shift(words[:, :, None], mx.arange(WORD_BITS, dtype=mx.int32)) & 1
    allowed = bits.reshape(words.shape[0], -1).astype(mx.bool_)
    have = allowed.shape[1]
    if have < width:
        return mx.concatenate([allowed, mx.zeros((allowed.shape[0], width - have), dtype=mx.bool_)], axis=1)
    return allowed[:, :width]


def _masked_with_words(words: mx.array, logits: mx.array) -> mx.array:
    """float32 `logits` (B, V) with every token the packed masks `words` (B, W) refuse set to -inf."""
    allowed = unpack_bitmask(words, logits.shape[-1])
    return mx.where(allowed, logits.astype(mx.float32), mx.array(-float("inf"), mx.float32))


@cache
def _compiled_masking() -> Callable[[mx.array, mx.array], mx.array]:
    """`_masked_with_words` compiled (made on first use, on the thread that draws): the unpack fuses into the
    `where`, so no (B, V) intermediate is written on the way."""
    return mx.compile(_masked_with_words)  # type: ignore[no-any-return]


def _admits(words: np.ndarray, token: int) -> bool:
    """Whether one row of packed words admits `token`."""
    word = token // WORD_BITS
    return 0 <= token and word < words.shape[0] and bool((int(words[word]) >> (token % WORD_BITS)) & 1)


def sample_packed(logits: mx.array, words: np.ndarray, samplers: Sequence[RowSampler]) -> list[int]:
    """One token per row of `logits` (B, V) under packed masks `words` (B, W) int32 (token t at bit t % 32 of word
    t // 32), row i drawn by `samplers[i]` (`draw_packed`), evaluated in one sync."""
    tokens, keys = draw_packed(logits, words, samplers)
    mx.eval(tokens, *keys)
    return read_draws(tokens, words)


def draw_packed(logits: mx.array, words: np.ndarray, samplers: Sequence[RowSampler]) -> tuple[mx.array, list[mx.array]]:
    """The draws of `sample_packed`, lazy: token ids (B,) on the device and the rows' next random keys, to evaluate
    together (then `read_draws`); a caller may queue work on the ids before they are computed.

    The words are uploaded in one copy and unpacked beside the logits. Greedy rows take the masked argmax; each
    sampled row is drawn on its own (1, V) slice with its own key, so a row gives the same draws alone or inside any
    batch.
    """
    rows, width = logits.shape[0], logits.shape[-1]
    if len(samplers) != rows or words.shape[0] != rows:
        raise GenerationError(f"{rows} logit rows, {words.shape[0]} mask rows and {len(samplers)} samplers differ")
    check_bitmask(words, width)
    masked = _compiled_masking()(mx.array(words), logits)
    tokens = mx.argmax(masked, axis=-1)
    drawn = [i for i, sampler in enumerate(samplers) if not sampler.greedy]
    if drawn:
        tokens = mx.concatenate([tokens[i : i + 1] if sampler.greedy else
                                 _tempered_draw(masked[i : i + 1], sampler.params, sampler.take_key())
                                 for i, sampler in enumerate(samplers)])
    return tokens, [samplers[i].key for i in drawn]


def read_draws(tokens: mx.array, words: np.ndarray) -> list[int]:
    """The token ids of evaluated draws (`draw_packed`), each checked to lie inside its row's packed mask."""
    values = [int(token) for token in np.asarray(tokens).tolist()]
    for i, token in enumerate(values):
        if not _admits(words[i], token):
            raise GenerationError(f"sampler drew token {token} outside the mask (row {i})")
    return values
