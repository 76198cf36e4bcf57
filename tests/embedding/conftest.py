from __future__ import annotations

import pytest

from .provider_stub import TEST_KEYS, ProviderStub


@pytest.fixture
def api_stub():
    with ProviderStub({"stub-a": 48, "stub-b": 40}) as s:
        yield s


@pytest.fixture
def api_keys(monkeypatch):
    for k, v in TEST_KEYS.items():
        monkeypatch.setenv(k, v)
    return TEST_KEYS
