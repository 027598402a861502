"""Broker lifecycle against real name servers: clean stop, crash, restart, topic changes."""

from __future__ import annotations

import pytest
from tidemq.common import record
from tidemq.common.errors import ServiceUnavailable
from tidemq.v1 import broker_pb2

from tests.integration.broker.conftest import broker_client, route_brokers, wait_route
from tests.integration.broker.test_send_pull import encode_batch, pull, send
from tests.support.processes import wait_until


@pytest.mark.parametrize("cluster", [{"expiry_s": 120}], indirect=True)
def test_sigterm_unregisters_from_every_name_server(cluster):
    cluster.put_topic("orders")
    cluster.start_broker("broker-a")
    broker_b = cluster.start_broker("broker-b")
    wait_route(cluster, "orders", {"broker-a", "broker-b"})
    assert broker_b.stop() == 0
    # Expiry is 120 s here: the route changed because the broker said goodbye, not by expiry.
    for ns in cluster.name_servers:
        assert set(route_brokers(ns, "orders")) == {"broker-a"}


@pytest.mark.slow
def test_sigkill_expires_after_silence(cluster):
    cluster.put_topic("orders")
    cluster.start_broker("broker-a")
    broker_b = cluster.start_broker("broker-b")
    wait_route(cluster, "orders", {"broker-a", "broker-b"})
    broker_b.kill()
    wait_route(cluster, "orders", {"broker-a"}, timeout=20)
    # The survivor keeps heartbeating, so it is never expired.
    assert all(set(route_brokers(ns, "orders")) == {"broker-a"} for ns in cluster.name_servers)



@pytest.mark.slow
def test_restart_keeps_messages_offsets_and_topics_without_config_center(cluster):
    cluster.put_topic("orders", queues=2)
    broker = cluster.start_broker("broker-a", "--topic-sync-wait-s", "1")
    wait_route(cluster, "orders", {"broker-a"})
    client = broker_client(broker)
    batch = encode_batch("orders", 10)
    send(client, "orders", 1, batch)
    commit = broker_pb2.CommitOffsetsRequest(consumer_group="g1", generation_id=-1, offsets=[
        broker_pb2.QueueOffset(topic="orders", queue_id=1, offset=6)])
    client.call("CommitOffsets", commit)
    wait_until(lambda: pull(client, "orders", 1, 9).status == broker_pb2.FOUND, 10,
               message="dispatch")
    assert broker.stop() == 0

    cluster.config_center.kill()  # topics must come from the broker's own persisted table
    broker.restart()
    client = broker_client(broker)
    answer = pull(client, "orders", 1, 0)
    assert answer.status == broker_pb2.FOUND and answer.record_count == 10
    assert [bytes(r.body) for r in record.iter_records(answer.records)] == [f"body-{i}".encode() * 3 for i in range(10)]
    offsets = client.call("QueryOffsets", broker_pb2.QueryOffsetsRequest(consumer_group="g1"))
    assert [(o.topic, o.queue_id, o.offset) for o in offsets.offsets] == [("orders", 1, 6)]
    assert send(client, "orders", 1, encode_batch("orders", 1)).first_queue_offset == 10
    wait_route(cluster, "orders", {"broker-a"})

    # Config-center comes back: the broker resyncs and follows new definitions again.
    cluster.config_center.restart()
    cluster.put_topic("later", queues=1)
    wait_route(cluster, "later", {"broker-a"}, timeout=30)



@pytest.mark.slow
def test_name_server_down_does_not_block_registration(cluster):
    cluster.name_servers[1].kill()
    cluster.put_topic("orders")
    broker = cluster.start_broker()
    wait_until(lambda: route_brokers(cluster.name_servers[0], "orders"), 20,
               message="route on the live name server")
    with pytest.raises(ServiceUnavailable):
        route_brokers(cluster.name_servers[1], "orders")
    cluster.name_servers[1].restart()
    wait_route(cluster, "orders", {"broker-a"})  # heartbeats reach it once it is back
    assert broker.proc.poll() is None
