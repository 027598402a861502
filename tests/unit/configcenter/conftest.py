"""One real etcd member per test module; each test gets its own key namespace in it."""

from __future__ import annotations

import itertools

import pytest
from tidemq.configcenter.etcd import EtcdTarget
from tidemq.configcenter.store import ConfigStore

from tests.support.etcd import start_etcd

_namespaces = itertools.count()


@pytest.fixture(scope="module")
def shared_etcd(tmp_path_factory):
    cluster = start_etcd(tmp_path_factory.mktemp("etcd"))
    yield cluster
    cluster.kill()


@pytest.fixture
def make_store(shared_etcd):
    stores: list[ConfigStore] = []

    def make(**kwargs) -> ConfigStore:
        kwargs.setdefault("namespace", f"/test{next(_namespaces)}")
        store = ConfigStore(EtcdTarget.parse(shared_etcd.endpoints), **kwargs)
        stores.append(store)
        return store

    yield make
    for store in stores:
        store.close()


@pytest.fixture
def store(make_store) -> ConfigStore:
    return make_store()
