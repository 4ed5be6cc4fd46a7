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


def _tiny_afm7(tokenizer: Any) -> Model:
    """A random AFM-7 model: its key-reuse layers take their rotary position from the whole batch's key length, so
    a shorter row's logits differ on the engine's row caches (uniform feeds cannot help: rows still differ)."""
    from tests.runtime.row_caches.architectures import tiny_net
    from tests.runtime.row_caches.mlx_lm_test_configs import MLX_LM_TEST_CONFIGS

    config = next(c for c in MLX_LM_TEST_CONFIGS if c["model_type"] == "afm7")
    return Model(net=tiny_net("afm7", tokenizer.vocab_size, config), tokenizer=tokenizer, name="tiny-afm7")


def test_a_model_the_engine_cannot_batch_exactly_is_refused_by_name(smollm2_tokenizer) -> None:
    """The engine measures a model's logits on its row caches before serving it, and names the model it refuses."""
    model = _tiny_afm7(smollm2_tokenizer)
    with pytest.raises(UnsupportedModelError) as caught:
        Engine(model)
    assert "differ" in str(caught.value) and "tiny-afm7" in str(caught.value)
    with pytest.raises(UnsupportedModelError):
        stdsl.generate(model, "Hi.", {"type": "integer"}, max_tokens=4)


def test_load_refuses_such_a_model(smollm2_tokenizer, monkeypatch) -> None:
    from stdsl.runtime.model import loading

    monkeypatch.setattr(loading, "load_mlx_lm", lambda name, quantized=None: _tiny_afm7(smollm2_tokenizer))
    with pytest.raises(UnsupportedModelError, match="differ"):
        stdsl.load("some/afm-7-folder")
