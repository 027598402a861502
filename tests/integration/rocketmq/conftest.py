"""A TideMQ cluster with gateway-grpc, for the official RocketMQ 5 Python and Node.js clients.

Every service traces to a trace collector. Brokers check back unresolved transactions after
1 s (TIDEMQ_TRANSACTION_* in every process's environment; only the brokers read them), so the
check-back test is quick.
"""

from __future__ import annotations

import pytest

from tests.support.cluster import Cluster, traced_cluster, wait_for_route

TOPICS = {"RmqNormal": False, "RmqFifo": True, "RmqFifoPush": True, "RmqFifoDlq": True,
          "RmqDelay": False, "RmqTxn": False, "RmqSimple": False, "RmqPush": False,
          "RmqSql": False, "RmqSlow": False, "RmqBatchAck": False, "RmqRecall": False,
          "RmqBatch": False, "RmqPull": False, "RmqAckGroups": False,
          "RmqTraced": False,  # test_tracing.py: its own, so no other test reads its messages
          # the Node.js client's (test_node_client.py)
          "NodeNormal": False, "NodeFifo": True, "NodeDelay": False, "NodeTxn": False,
          "NodeSimple": False, "NodeSql": False, "NodePush": False, "NodeFifoPush": True,
          "NodeFifoDlq": True}   # name -> ordered
FIFO_PUSH_GROUP = "rmq-push-fifo"   # defined orderly: gateway-grpc tells its clients fifo
FIFO_DLQ_GROUP = "rmq-fifo-dlq"     # ... with retry_max_times 1: two attempts, then the DLQ
NODE_FIFO_PUSH_GROUP = "node-push-fifo"   # the same two for the Node.js client
NODE_FIFO_DLQ_GROUP = "node-fifo-dlq"
FAST_CHECKS = {"TIDEMQ_TRANSACTION_TIMEOUT_MS": "1000",
               "TIDEMQ_TRANSACTION_CHECK_INTERVAL_MS": "1000",
               "TIDEMQ_TRANSACTION_CHECK_MAX": "100"}


@pytest.fixture(scope="package")
def rmq_cluster(tmp_path_factory):
    with traced_cluster(tmp_path_factory.mktemp("rmq"), extra_env=FAST_CHECKS) as cluster:
        yield _with_gateway(cluster)


def _with_gateway(cluster: Cluster) -> Cluster:
    """The topics and groups the tests use, then gateway-grpc (traced)."""
    from tidemq.configclient.client import ConfigClient
    from tidemq.configclient.groups import SubscriptionGroups
    from tidemq.configclient.topics import TopicDefinitions

    with ConfigClient(cluster.config_center.addr) as config:
        for topic, orderly in TOPICS.items():
            TopicDefinitions(config).create(topic, 2, order=orderly)
        for group in (FIFO_PUSH_GROUP, NODE_FIFO_PUSH_GROUP):
            SubscriptionGroups(config).create(group, consume_message_orderly=True)
        for group in (FIFO_DLQ_GROUP, NODE_FIFO_DLQ_GROUP):
            SubscriptionGroups(config).create(group, consume_message_orderly=True,
                                              retry_max_times=1)
    for topic in TOPICS:
        wait_for_route(cluster, topic, 2)
    cluster.extra["gateway_grpc"] = cluster.start("tidemq.gatewaygrpc", [
        "--namesrv-addrs", cluster.namesrv_addrs, "--long-polling-timeout-s", "5",
        # push consumers' messages: renewed every ~1 s
        "--default-invisible-s", "3", *cluster.tracing_flags()])
    return cluster


@pytest.fixture(scope="package")
def endpoint(rmq_cluster) -> str:
    return rmq_cluster.extra["gateway_grpc"].addr


@pytest.fixture
def config(endpoint):
    from rocketmq import ClientConfiguration, Credentials

    return ClientConfiguration(endpoint, Credentials(), request_timeout=10)

