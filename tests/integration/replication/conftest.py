"""The `cluster` every replica-group test starts from: Redis, the config center and two name
servers running the controller, no broker yet (replica_group.start_group adds the group)."""

from __future__ import annotations

import pytest

from tests.support.cluster import running_cluster


@pytest.fixture
def cluster(tmp_path):
    with running_cluster(tmp_path, broker_names=(), controller=True) as cluster:
        yield cluster
