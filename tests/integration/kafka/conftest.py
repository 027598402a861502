"""A TideMQ cluster (two broker groups) with gateway-kafka, for unmodified Kafka clients."""

from __future__ import annotations

import pytest

from tests.support.cluster import (
    Cluster,
    create_topic_in_config_center,
    running_cluster,
    wait_for_route,
)

# topic -> queues per broker group (two groups: twice as many partitions)
TOPICS = {"k-roundtrip": 1, "k-group": 2, "k-offsets": 1, "k-interop": 1, "k-native": 1,
          "k-confluent": 1, "k-idempotent": 1, "k-fence": 1, "k-aiokafka": 1, "k-aio-group": 2,
          "k-kafkajs": 1, "k-kafkajs-group": 2, "k-mixed": 4,
          "k-group-admin": 1, "k-longpoll": 1, "k-old-confluent": 1, "k-old-kafka-python": 1,
          "k-old-aiokafka": 1, "k-time": 1, "k-meta": 1,
          "k-long-key": 1, "k-headers": 1}


@pytest.fixture(scope="package")
def kafka_cluster(tmp_path_factory):
    with running_cluster(tmp_path_factory.mktemp("kafka")) as cluster:
        for topic, queues in TOPICS.items():
            create_topic_in_config_center(cluster, topic, queues)
        for topic in TOPICS:
            wait_for_route(cluster, topic, 2)
        cluster.extra["gateway_kafka"] = start_kafka_gateway(cluster)
        yield cluster


def start_kafka_gateway(cluster: Cluster, extra: list[str] | None = None):
    return cluster.start("tidemq.gatewaykafka", [
        "--namesrv-addrs", cluster.namesrv_addrs, "--config-center", cluster.config_center.addr,
        "--advertised-host", "127.0.0.1", *(extra or [])])


@pytest.fixture(scope="package")
def bootstrap(kafka_cluster) -> str:
    return kafka_cluster.extra["gateway_kafka"].addr
