"""A replica group of brokers with the secure settings: the HA stream runs over TLS with both
ends' certificates checked (tls_cert_file / tls_ca_file), so the slave joins the in-sync set
and holds what the SYNC master acknowledged, byte for byte — and the master's HA port answers
nobody without a certificate of the cluster's CA (before, anyone reaching it could read the
whole CommitLog in plaintext)."""

from __future__ import annotations

import json
import socket
import ssl

import pytest
from tidemq.broker.store.ha.protocol import encode_handshake
from tidemq.client import Message, Producer
from tidemq.configclient.client import ConfigClient
from tidemq.configclient.replication import live_key

from tests.integration.replication.replica_group import group_state
from tests.integration.security.conftest import secure_env
from tests.support.cluster import create_topic_in_config_center, start_replica_group, wait_for_route
from tests.support.processes import wait_until

pytestmark = pytest.mark.slow


def test_a_replica_group_replicates_over_mutual_tls(secure_cluster, cert_dir):
    env = secure_env(cert_dir)
    group = start_replica_group(lambda module, args: secure_cluster.start(module, args, env=env),
                                secure_cluster, "broker-r", replicas=2, min_in_sync=2)
    master = group.wait_master()
    wait_until(lambda: (state := group_state(secure_cluster)) is not None
               and set(state["in_sync"]) == {0, 1}, 30, interval=0.2,
               message="the slave to join the in-sync set over TLS")
    create_topic_in_config_center(secure_cluster, "sec-replicated", 1)
    wait_for_route(secure_cluster, "sec-replicated", 2)
    with Producer(secure_cluster.namesrv_addrs) as producer:
        sent = [producer.send(Message("sec-replicated", b"over tls %d" % i)) for i in range(20)]
    stored = [r for r in sent if r.broker_name == "broker-r"]
    assert stored, "no send reached the replica group"
    slave = 1 - master
    end = group.broker_info(master).commitlog_max_offset
    assert group.broker_info(slave).commitlog_max_offset >= end  # a SYNC ack: already there
    first = sorted(group.commitlog_dir(master).iterdir())[0].name
    copies = [(group.commitlog_dir(r) / first).read_bytes()[:end] for r in (master, slave)]
    assert len(copies[0]) == end and copies[0] == copies[1]

    ha_host, ha_port = master_ha_addr(secure_cluster, master)
    hello = encode_handshake({"replica_id": 7, "last_epoch": 0, "max_offset": 0, "epochs": []})
    ca = str(cert_dir / "ca.pem")
    assert ha_exchange(ha_host, ha_port, hello, ca, cert_dir)  # a broker of the cluster: answered
    assert ha_exchange(ha_host, ha_port, hello, ca, None) == b""  # no certificate: nothing


def ha_exchange(host: str, port: int, hello: bytes, ca_file: str, cert_dir) -> bytes:
    """What the HA port answers a handshake over TLS, presenting the cluster's certificate
    (`cert_dir`) or none; b"" when it closes or refuses the connection."""
    context = ssl.create_default_context(cafile=ca_file)
    if cert_dir is not None:
        context.load_cert_chain(cert_dir / "tidemq.pem", cert_dir / "tidemq-key.pem")
    try:
        with socket.create_connection((host, port), timeout=5) as raw, \
                context.wrap_socket(raw, server_hostname=host) as tls:
            tls.sendall(hello)
            return tls.recv(4096)
    except (ssl.SSLError, ConnectionError):
        return b""


def master_ha_addr(cluster, replica: int) -> tuple[str, int]:
    with ConfigClient(cluster.config_center.addr) as client:
        host, _, port = json.loads(client.get(live_key("broker-r", replica)).value)[
            "ha_addr"].rpartition(":")
    return host, int(port)
