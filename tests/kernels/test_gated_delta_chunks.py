"""The chunked gated delta rule against mlx-lm's own step-by-step one (`gated_delta_ops`), over shapes, chunk
sizes, grouped heads, padding masks and gates that underflow; and its routing: only inside `chunked_recurrences`,
only for long feeds."""

from __future__ import annotations

import mlx.core as mx
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from stdsl.kernels.gated_delta_chunks import gated_delta_chunked
from stdsl.runtime.platform.mlx_lm_models import CHUNKED_FROM, chunked_recurrences, import_without_package_init

gated_delta = import_without_package_init("mlx_lm.models.gated_delta")
mlx_lm_ops = gated_delta.gated_delta_ops.stdsl_original


def _inputs(seed: int, batch: int, length: int, key_heads: int, group: int, key_dim: int, value_dim: int,
            gate_scale: float) -> tuple[mx.array, ...]:
    """Inputs as Qwen3.5's layer makes them: normalized q and k, gates from `compute_g`, sigmoid betas."""
    rng = np.random.default_rng(seed)
    value_heads = key_heads * group

    def normal(*shape: int) -> mx.array:
        return mx.array(rng.standard_normal(shape).astype(np.float32))

    q, k = gated_delta.normalize_qk(normal(batch, length, key_heads, key_dim), normal(batch, length, key_heads,
                                                                                      key_dim),
                                    inv_scale=key_dim ** -0.5, eps=1e-6)
    g = gated_delta.compute_g(normal(value_heads) + gate_scale, normal(batch, length, value_heads),
                              normal(value_heads))
    beta = mx.sigmoid(normal(batch, length, value_heads))
    state = normal(batch, value_heads, value_dim, key_dim) * 0.3
    return q, k, normal(batch, length, value_heads, value_dim), g, beta, state


def _relative(got: mx.array, want: mx.array) -> float:
    return float(mx.abs(got - want).max()) / (float(mx.abs(want).max()) + 1e-6)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**31), batch=st.integers(1, 3), length=st.integers(1, 150),
       key_heads=st.integers(1, 2), group=st.sampled_from([1, 2]), key_dim=st.sampled_from([8, 32, 64]),
       value_dim=st.sampled_from([8, 16, 64]), chunk=st.sampled_from([1, 5, 16, 64]),
       gate_scale=st.sampled_from([-3.0, 0.0, 4.0]), padded=st.booleans())
def test_chunks_equal_mlx_lm_step_by_step(seed, batch, length, key_heads, group, key_dim, value_dim, chunk,
                                         gate_scale, padded) -> None:
    q, k, v, g, beta, state = _inputs(seed, batch, length, key_heads, group, key_dim, value_dim, gate_scale)
    mask = None
    if padded:
        real = mx.array(np.random.default_rng(seed + 1).integers(0, length + 1, batch))
        mask = mx.arange(length)[None] < real[:, None]
    want_y, want_state = mlx_lm_ops(q, k, v, g, beta, state, mask)
    got_y, got_state = gated_delta_chunked(q, k, v, g, beta, state, mask, chunk=chunk)
    if mask is not None:  # a padded position's output is unspecified (the engine never reads it)
        want_y, got_y = (mx.where(mask[..., None, None], y, 0.0) for y in (want_y, got_y))
    assert got_y.dtype == want_y.dtype and got_state.dtype == want_state.dtype
    assert _relative(got_y, want_y) < 1e-4
    assert _relative(got_state, want_state) < 1e-4


def test_a_gate_that_underflows_to_zero_forgets_the_state_as_the_steps_do() -> None:
    q, k, v, g, beta, state = _inputs(3, 2, 20, 2, 2, 16, 16, 0.0)
    g = mx.where(mx.arange(20)[None, :, None] == 7, 0.0, g)  # exp of a very negative log-gate rounds to 0
    want_y, want_state = mlx_lm_ops(q, k, v, g, beta, state)
    got_y, got_state = gated_delta_chunked(q, k, v, g, beta, state, chunk=16)
    assert np.isfinite(np.asarray(got_y)).all()
    assert _relative(got_y, want_y) < 1e-4 and _relative(got_state, want_state) < 1e-4


def test_chunks_run_only_inside_the_engines_passes_and_only_for_long_feeds(monkeypatch) -> None:
    calls: list[int] = []
    monkeypatch.setattr("stdsl.runtime.platform.mlx_lm_models.gated_delta_chunked",
                        lambda q, *rest, **_: calls.append(q.shape[1]) or mlx_lm_ops(q, *rest))
    for length in (1, CHUNKED_FROM - 1, CHUNKED_FROM):
        inputs = _inputs(0, 1, length, 1, 1, 8, 8, 0.0)
        gated_delta.gated_delta_ops(*inputs)
        with chunked_recurrences():
            gated_delta.gated_delta_ops(*inputs)
    assert calls == [CHUNKED_FROM]
