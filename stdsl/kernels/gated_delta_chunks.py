"""The gated delta rule (Gated DeltaNet's recurrence) over many positions in chunks, parallel in time.

mlx-lm's CPU path (`gated_delta_ops`) steps the recurrence one position at a time in Python: a pass that feeds a
prompt or a forced span of T tokens costs T small steps per recurrent layer. Per head the step is
`S_t = g_t S_{t-1} + u_t k_t^T` with `u_t = beta_t (v_t - g_t S_{t-1} k_t)` and output `y_t = S_t q_t`. Within a
chunk of C positions every `u` depends linearly on the earlier ones, so the u's solve one unit lower-triangular
system `(I + A) U = W` (the WY form of the delta rule), and outputs and the chunk's end state follow from a few
matrix products. Decays within a chunk are exponentials of partial sums of log-gates taken directly (never a
difference of two cumulative sums), so a near-zero gate costs no precision. The result equals the sequential
recurrence up to float rounding (tests/kernels/test_gated_delta_chunks.py checks it against mlx-lm's own).
"""

from __future__ import annotations

import mlx.core as mx

CHUNK = 64
"""Positions solved together: the triangular system is C x C per head, and chunks are stepped in turn."""

LOG_GATE_FLOOR = -60.0
"""Log-gates are clipped here (a gate below e^-60 forgets the state as fully as 0 does in float32) so a gate that
underflowed to 0 gives a finite log."""


def _segment_sums(log_gates: mx.array) -> mx.array:
    """(..., C) log-gates -> (..., C, C): entry [t, s] is the sum of log-gates s+1..t for s <= t, -inf above."""
    size = log_gates.shape[-1]
    strictly_lower = mx.tril(mx.ones((size, size), dtype=mx.bool_), k=-1)
    spread = mx.where(strictly_lower, mx.expand_dims(log_gates, -1), 0.0)
    sums = mx.cumsum(spread, axis=-2)
    return mx.where(mx.tril(mx.ones((size, size), dtype=mx.bool_)), sums, -mx.inf)


def _chunk(q: mx.array, k: mx.array, v: mx.array, log_g: mx.array, beta: mx.array,
           state: mx.array) -> tuple[mx.array, mx.array]:
    """One chunk, heads first: q, k (B, H, C, Dk), v (B, H, C, Dv), log_g and beta (B, H, C), state (B, H, Dv, Dk).
    Returns y (B, H, C, Dv) and the state after the chunk."""
    size = q.shape[2]
    decay = mx.exp(_segment_sums(log_g))  # [t, s] = g_{s+1} ... g_t, 0 above the diagonal
    from_start = mx.exp(mx.cumsum(log_g, axis=-1))[..., None]  # g_1 ... g_t
    keys_t = mx.swapaxes(k, -1, -2)
    lower = decay * (k @ keys_t) * beta[..., None]
    lower = mx.where(mx.tril(mx.ones((size, size), dtype=mx.bool_), k=-1), lower, 0.0)
    state_t = mx.swapaxes(state, -1, -2)  # (B, H, Dk, Dv)
    targets = beta[..., None] * (v - from_start * (k @ state_t))
    system = lower + mx.eye(size, dtype=lower.dtype)
    pseudo_values = mx.linalg.tri_inv(system, upper=False, stream=mx.cpu) @ targets
    scores = decay * (q @ keys_t)
    y = from_start * (q @ state_t) + scores @ pseudo_values
    to_end = decay[..., -1, :][..., None]  # g_{s+1} ... g_C
    new_state = from_start[..., -1:, :] * state + mx.swapaxes(to_end * pseudo_values, -1, -2) @ k
    return y, new_state


def gated_delta_chunked(q: mx.array, k: mx.array, v: mx.array, g: mx.array, beta: mx.array, state: mx.array,
                        mask: mx.array | None = None, chunk: int = CHUNK) -> tuple[mx.array, mx.array]:
    """`gated_delta_ops`' contract with scalar gates: q, k (B, T, Hk, Dk), v (B, T, Hv, Dv), g and beta (B, T, Hv),
    state (B, Hv, Dv, Dk), mask (B, T) bool or None (a masked position leaves the state as it was; its output is
    unspecified). Returns y (B, T, Hv, Dv) in q's dtype and the float32 state."""
    hv = v.shape[2]
    if (repeat := hv // k.shape[2]) > 1:
        q = mx.repeat(q, repeat, -2)
        k = mx.repeat(k, repeat, -2)
    log_g = mx.maximum(mx.log(g.astype(mx.float32)), LOG_GATE_FLOOR)
    beta = beta.astype(mx.float32)
    if mask is not None:
        log_g = mx.where(mask[..., None], log_g, 0.0)
        beta = mx.where(mask[..., None], beta, 0.0)
    heads_first = [mx.swapaxes(x.astype(mx.float32), 1, 2) for x in (q, k, v, log_g, beta)]
    state = state.astype(mx.float32)
    outputs = []
    for start in range(0, q.shape[1], chunk):
        q_part, k_part, v_part, log_g_part, beta_part = (x[:, :, start : start + chunk] for x in heads_first)
        y, state = _chunk(q_part, k_part, v_part, log_g_part, beta_part, state)
        outputs.append(y)
    y = outputs[0] if len(outputs) == 1 else mx.concatenate(outputs, axis=2)
    return mx.swapaxes(y, 1, 2).astype(q.dtype), state
