"""What the HA stream tests share: a master and a slave store in temporary directories."""

from __future__ import annotations

import pytest

from tests.integration.store.test_replication import open_store


@pytest.fixture
def stores(tmp_path):
    master, slave = open_store(tmp_path / "master"), open_store(tmp_path / "slave")
    yield master, slave
    master.shutdown()
    slave.shutdown()
