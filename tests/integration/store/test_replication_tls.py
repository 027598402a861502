"""The HA stream over TLS, both ends authenticated (what `tls_cert_file` turns on for
replicating brokers): a slave holding a certificate of the cluster's CA replicates
byte-identically; a slave with a certificate of another CA, or without TLS, receives nothing
and the master's SYNC gate never acknowledges on its behalf."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest
from tidemq.broker.store import AppendStatus
from tidemq.broker.store.ha import HAConfig
from tidemq.broker.store.ha.config import HATls

from deploy import certs
from tests.integration.store.test_replication import FAST, append, replicating
from tests.support.processes import wait_until_async
from tests.unit.store.test_replicated_append import assert_same


def tls_config(folder, name: str = "tidemq") -> HAConfig:
    folder.mkdir(parents=True, exist_ok=True)
    certs.issue(folder, name, certs.create_ca(folder))
    tls = HATls.of(str(folder / f"{name}.pem"), str(folder / f"{name}-key.pem"),
                   str(folder / "ca.pem"))
    return dataclasses.replace(FAST, tls=tls)


def test_a_slave_with_the_clusters_certificate_replicates(stores, tmp_path):
    master, slave = stores
    config = tls_config(tmp_path / "certs")

    async def scenario():
        async with replicating(master, slave, config):
            for n in range(20):
                result = await append(master, n)
                assert result.status is AppendStatus.PUT_OK
                assert slave.commitlog_max_offset() >= result.end_offset

    asyncio.run(scenario())
    assert_same(master, slave)


@pytest.mark.parametrize("intruder", ["another CA", "plaintext"])
def test_a_slave_the_cluster_did_not_certify_gets_nothing(stores, tmp_path, intruder):
    master, slave = stores
    # the in-sync set keeps the slave (lag limit 60 s): the gate waits for it, then times out
    config = dataclasses.replace(tls_config(tmp_path / "certs"), sync_replication_timeout_ms=300,
                                 replica_lag_max_ms=60_000)
    theirs = (dataclasses.replace(config, tls=tls_config(tmp_path / "other").tls)
              if intruder == "another CA" else dataclasses.replace(config, tls=None))

    async def scenario():
        async with replicating(master, slave, config, slave_config=theirs) as client:
            await wait_until_async(lambda: client.last_error is not None, 10,
                                   message="the intruder's connection to fail")
            result = await append(master, 0)
            assert result.status is AppendStatus.FLUSH_SLAVE_TIMEOUT  # never acked for it
            assert slave.commitlog_max_offset() == 0 and not client.connected

    asyncio.run(scenario())
