"""A secured one-group cluster for the Kafka security tests (SASL/TLS, per-listener
protocols): certificates issued for it, the process's client security set to its admin and CA
while it runs (and set back from the environment after), its topics created and routed."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from pathlib import Path

from tidemq.configclient.acl import AclAdmin
from tidemq.configclient.client import ConfigClient

from deploy import certs
from tests.integration.security.conftest import ADMIN, secure_env
from tests.support.cluster import create_topic_in_config_center, running_cluster, wait_for_route


@contextlib.contextmanager
def secured_cluster(tmp_path_factory, name: str, topics: Sequence[str]
                    ) -> Iterator[tuple[object, Path, AclAdmin]]:
    """(the cluster, its certificates' directory, an ACL admin on its config center)."""
    from tidemq.common import rpc

    cert_dir = tmp_path_factory.mktemp(f"{name}-certs")
    certs.issue(cert_dir, "tidemq", certs.create_ca(cert_dir))
    with running_cluster(tmp_path_factory.mktemp(name), env=secure_env(cert_dir),
                         controller=True, broker_names=("broker-a",)) as cluster:
        rpc.configure_client_security(rpc.ClientSecurity(ADMIN, str(cert_dir / "ca.pem")))
        try:
            for topic in topics:
                create_topic_in_config_center(cluster, topic, 1)
                wait_for_route(cluster, topic, 1)
            yield cluster, cert_dir, AclAdmin(ConfigClient(cluster.config_center.addr))
        finally:
            rpc.configure_client_security(rpc.ClientSecurity.from_env())


def produce(config: dict, topic: str, values: list[bytes]) -> list:
    """Each value's delivery error through a confluent-kafka producer (None = stored)."""
    from confluent_kafka import Producer

    outcomes: list = []
    producer = Producer({"message.timeout.ms": 30000, **config})
    for value in values:
        producer.produce(topic, value, on_delivery=lambda err, msg: outcomes.append(err))
    assert producer.flush(60) == 0
    return outcomes


def consume(config: dict, topic: str, wanted: list[bytes]) -> list[bytes]:
    """What a confluent-kafka consumer (`config` names its group) reads of `topic` from the
    earliest offset until it has every `wanted` value, or 60 s; an error record raises."""
    import time

    from confluent_kafka import Consumer, KafkaException

    consumer = Consumer({"auto.offset.reset": "earliest", **config})
    got: list[bytes] = []
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 60
        while not set(wanted) <= set(got) and time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is None:
                continue
            if msg.error():
                raise KafkaException(msg.error())
            got.append(msg.value())
    finally:
        consumer.close()
    return got
