"""A model pass that raises fails exactly the rows it carried, never waits forever, and never stops the engine:
a failed prefill fails the rows being admitted (they hung forever before, and the running rows failed in their
place); a failed decode pass fails the running rows. A model the engine cannot batch exactly is refused when the
engine is made, with UnsupportedModelError naming why, instead of hanging `generate`."""

from __future__ import annotations

from typing import Any

import mlx.core as mx
import pytest

import stdsl
from stdsl.compiler.constraint import Regex
from stdsl.errors import StdslError, UnsupportedModelError
from stdsl.runtime.engine import Engine
from stdsl.runtime.model.loading import Model

DIGITS = Regex(r"[0-9]{40}")
FAILURE = "forward failed on purpose"


class _FailingNet:
    """The tiny llama, raising on a pass that feeds `marker`, or on the next pass once `armed`."""

    def __init__(self, net: Any, marker: int) -> None:
        self.net, self.marker, self.armed = net, marker, False
        self.layers, self.args = net.layers, net.args

    def __call__(self, inputs: mx.array, cache: Any = None) -> mx.array:
        if self.armed or self.marker in sum(inputs.tolist(), []):
            self.armed = False
            raise RuntimeError(FAILURE)
        return self.net(inputs, cache=cache)


@pytest.fixture
def failing(tiny_model) -> tuple[Model, _FailingNet, int]:
    marker = tiny_model.tokenizer.encode("Hello")[0]
    net = _FailingNet(tiny_model.net, marker)
    return Model(net=net, tokenizer=tiny_model.tokenizer, name="failing-tiny"), net, marker


def _failed_on_purpose(handle: Any) -> None:
    with pytest.raises(StdslError) as caught:
        handle.result(timeout=60)
    assert FAILURE in str(caught.value), caught.value


def test_a_failed_prefill_fails_its_rows_and_the_running_rows_finish(failing) -> None:
    model, _, marker = failing
    engine = Engine(model, max_rows=8)
    running = [engine.submit(f"Digits {i}.", DIGITS, max_tokens=60) for i in range(2)]
    for handle in running:
        next(iter(handle))
    doomed = engine.submit([1, 2, marker], None, max_tokens=4)
    _failed_on_purpose(doomed)
    for handle in running:
        result = handle.result(timeout=60)
        assert len(result.text) == 40 and result.text.isdigit()
    after = engine.submit("Digits again.", DIGITS, max_tokens=60).result(timeout=60)
    assert after.text.isdigit()
    assert engine.metrics()["rows_active"] == 0
    engine.close()


def test_a_failed_prefill_alone_fails_instead_of_waiting_forever(failing) -> None:
    model, _, marker = failing
    engine = Engine(model, max_rows=2)
    _failed_on_purpose(engine.submit([marker], None, max_tokens=4))
    assert engine.submit("Digits.", DIGITS, max_tokens=60).result(timeout=60).text.isdigit()
    engine.close()


def test_a_failed_decode_pass_fails_the_running_rows_and_the_engine_goes_on(failing) -> None:
    model, net, _ = failing
    engine = Engine(model, max_rows=4)
    running = [engine.submit(f"Digits {i}.", DIGITS, max_tokens=60) for i in range(2)]
    for handle in running:
        next(iter(handle))
    net.armed = True
    for handle in running:
        _failed_on_purpose(handle)
    assert engine.submit("Digits.", DIGITS, max_tokens=60).result(timeout=60).text.isdigit()
    engine.close()


def _tiny_mamba(tokenizer: Any) -> Model:
    """A random 2-layer Mamba model: its recurrent layers scan every position, padding included."""
    from mlx_lm.models.mamba import Model as Mamba
    from mlx_lm.models.mamba import ModelArgs

    args = ModelArgs(model_type="mamba", vocab_size=tokenizer.vocab_size, hidden_size=64, intermediate_size=128,
                     state_size=8, num_hidden_layers=2, conv_kernel=4, use_bias=False, use_conv_bias=True,
                     time_step_rank=8)
    return Model(net=Mamba(args), tokenizer=tokenizer, name="tiny-mamba")


def test_a_model_whose_states_take_in_padding_is_refused_by_name(smollm2_tokenizer) -> None:
    """Mamba (v1) lets right padding into its state, which the engine measures before serving it."""
    model = _tiny_mamba(smollm2_tokenizer)
    with pytest.raises(UnsupportedModelError) as caught:
        Engine(model)
    assert "padding" in str(caught.value) and "tiny" in str(caught.value)
    with pytest.raises(UnsupportedModelError):
        stdsl.generate(model, "Hi.", {"type": "integer"}, max_tokens=4)


def test_load_refuses_such_a_model(smollm2_tokenizer, monkeypatch) -> None:
    from stdsl.runtime.model import loading

    monkeypatch.setattr(loading, "load_mlx_lm", lambda name, quantized=None: _tiny_mamba(smollm2_tokenizer))
    with pytest.raises(UnsupportedModelError, match="padding"):
        stdsl.load("some/gemma-3-folder")
