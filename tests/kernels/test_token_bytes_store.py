"""Recovered token bytes kept on disk: a file gives back exactly the list stored, a damaged one is never read, and a
tokenizer's bytes read from the cache folder equal those recovered afresh."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stdsl.kernels import token_bytes_store, vocab_sources
from stdsl.kernels.token_bytes_store import decode, encode, store_path
from stdsl.kernels.vocab_sources import hf_token_bytes

RECOVER = vocab_sources._recover
LISTS = st.lists(st.one_of(st.none(), st.binary(min_size=1, max_size=12)), max_size=60)


@settings(max_examples=200, deadline=None)
@given(token_bytes=LISTS)
def test_a_stored_list_reads_back_exactly(token_bytes) -> None:
    assert decode(encode(token_bytes)) == token_bytes


@settings(max_examples=200, deadline=None)
@given(token_bytes=LISTS, data=st.data())
def test_a_file_cut_short_or_altered_in_any_byte_is_not_read(token_bytes, data) -> None:
    blob = encode(token_bytes)
    cut = data.draw(st.integers(0, len(blob) - 1))
    assert decode(blob[:cut]) is None
    where = data.draw(st.integers(0, len(blob) - 1))
    flip = data.draw(st.integers(1, 255))
    assert decode(blob[:where] + bytes([blob[where] ^ flip]) + blob[where + 1:]) is None


@pytest.fixture
def cache_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("STDSL_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(vocab_sources, "_RECOVERED", {})
    return tmp_path


def _fresh(tokenizer) -> list[bytes | None]:
    backend = vocab_sources._backend(tokenizer)
    return RECOVER(backend, backend.to_str().encode("utf-8"))


def _path(tokenizer):
    return store_path(vocab_sources._backend(tokenizer).to_str().encode("utf-8"))


def test_a_new_process_reads_the_bytes_an_earlier_one_recovered(smollm2_tokenizer, cache_folder,
                                                                 monkeypatch) -> None:
    first = hf_token_bytes(smollm2_tokenizer.hf)
    path = _path(smollm2_tokenizer.hf)
    assert path.parent.parent == cache_folder and path.exists()
    monkeypatch.setattr(vocab_sources, "_RECOVERED", {})  # what a new process holds
    monkeypatch.setattr(vocab_sources, "_recover", lambda *_: pytest.fail("recovered again instead of read"))
    again = hf_token_bytes(smollm2_tokenizer.hf)
    assert again == first == _fresh(smollm2_tokenizer.hf)
    assert list(cache_folder.rglob("*.tmp")) == []


def test_a_damaged_file_is_rebuilt_and_replaced(smollm2_tokenizer, cache_folder, monkeypatch) -> None:
    hf_token_bytes(smollm2_tokenizer.hf)
    path = _path(smollm2_tokenizer.hf)
    path.write_bytes(path.read_bytes()[:1000])
    monkeypatch.setattr(vocab_sources, "_RECOVERED", {})
    assert hf_token_bytes(smollm2_tokenizer.hf) == _fresh(smollm2_tokenizer.hf)
    assert token_bytes_store.read(path) == _fresh(smollm2_tokenizer.hf)


def test_nothing_is_written_when_the_cache_is_off_or_cannot_be_written(smollm2_tokenizer, tmp_path,
                                                                        monkeypatch) -> None:
    monkeypatch.setattr(vocab_sources, "_RECOVERED", {})
    monkeypatch.setenv("STDSL_CACHE_DIR", "off")
    assert hf_token_bytes(smollm2_tokenizer.hf) == _fresh(smollm2_tokenizer.hf)
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    monkeypatch.setattr(vocab_sources, "_RECOVERED", {})
    monkeypatch.setenv("STDSL_CACHE_DIR", str(blocker))
    assert hf_token_bytes(smollm2_tokenizer.hf) == _fresh(smollm2_tokenizer.hf)
    assert list(tmp_path.iterdir()) == [blocker]
