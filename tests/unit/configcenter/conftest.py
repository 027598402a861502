"""One real Redis per test module; each test gets its own store namespace in it."""

from __future__ import annotations

import itertools

import pytest
from tidemq.configcenter.store import ConfigStore

from tests.support.processes import start_redis

_namespaces = itertools.count()


@pytest.fixture(scope="module")
def shared_redis(tmp_path_factory):
    server = start_redis(tmp_path_factory.mktemp("redis"))
    yield server
    server.kill()


@pytest.fixture
def make_store(shared_redis):
    stores: list[ConfigStore] = []

    def make(**kwargs) -> ConfigStore:
        kwargs.setdefault("namespace", f"test{next(_namespaces)}")
        store = ConfigStore(shared_redis.url, **kwargs)
        stores.append(store)
        return store

    yield make
    for store in stores:
        store.close()


@pytest.fixture
def store(make_store) -> ConfigStore:
    return make_store()
