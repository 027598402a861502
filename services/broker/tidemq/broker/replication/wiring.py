"""Assemble the role layer of one broker from its settings (used by BrokerApp when
`replication_enabled`): HA server, role host, replica manager and the offset copier."""

from __future__ import annotations

import socket
from dataclasses import dataclass

from tidemq.broker.offsets import ConsumerOffsetManager
from tidemq.broker.registration import SLAVE, BrokerIdentity, BrokerRegistrar, registered_id
from tidemq.broker.replication import metrics
from tidemq.broker.replication.controller_client import ControllerClient
from tidemq.broker.replication.host import BrokerRoleHost, RunOnLoop
from tidemq.broker.replication.manager import ReplicaManager
from tidemq.broker.replication.offset_copy import OffsetCopier
from tidemq.broker.replication.read_advice import ReadAdvisor
from tidemq.broker.settings import BrokerSettings
from tidemq.broker.store import MessageStore
from tidemq.broker.store.ha.config import HAConfig, HATls


def ha_port(settings: BrokerSettings) -> int:
    """-1 = the gRPC port + 1 (RocketMQ's convention); 0 = a free port chosen now."""
    if settings.ha_port > 0:
        return settings.ha_port
    if settings.ha_port == -1:
        return settings.port + 1
    with socket.socket() as sock:
        sock.bind((settings.host, 0))
        return sock.getsockname()[1]


def ha_config(settings: BrokerSettings) -> HAConfig:
    return HAConfig(sync=settings.broker_role == "SYNC_MASTER",
                    min_in_sync_replicas=settings.min_in_sync_replicas,
                    sync_replication_timeout_ms=settings.sync_replication_timeout_ms,
                    replica_lag_max_ms=settings.replica_lag_max_ms,
                    transfer_batch_bytes=settings.ha_transfer_batch_bytes,
                    housekeeping_timeout_ms=settings.ha_housekeeping_timeout_ms,
                    tls=ha_tls(settings))


def ha_tls(settings: BrokerSettings) -> HATls | None:
    """A broker that serves TLS (tls_cert_file) replicates over TLS too, both ends
    authenticated: the slave checks the master's certificate and the master the slave's, both
    against tls_ca_file — so only the cluster's own brokers can read the CommitLog."""
    if not settings.tls_cert_file:
        return None
    return HATls.of(settings.tls_cert_file, settings.tls_key_file, settings.tls_ca_file,
                    settings.tls_server_name)


@dataclass
class Replication:
    host: BrokerRoleHost
    manager: ReplicaManager
    copier: OffsetCopier
    read_advisor: ReadAdvisor | None   # None: slave reads are not suggested

    def start(self) -> None:
        """After the store started and before serving: a slave until the controller says
        more, so no send is appended before the group's state is known."""
        self.host.store.become_slave()
        self.manager.start()
        self.copier.start()

    def stop(self) -> None:
        """Leave the group first (revoke the lease: the controller elects at once)."""
        self.copier.stop()
        self.manager.stop()
        self.host.close()


def build(settings: BrokerSettings, identity: BrokerIdentity, store: MessageStore,
          registrar: BrokerRegistrar, offsets: ConsumerOffsetManager,
          run_on_loop: RunOnLoop) -> Replication:
    config = ha_config(settings)
    port = ha_port(settings)   # where it listens; slaves dial identity.ha_server_addr
    registrar.role = SLAVE  # until the controller says more: never announce id 0 unasked
    registrar.registered_id = registered_id(identity.broker_id, SLAVE)
    host = BrokerRoleHost(
        store=store, registrar=registrar, controller=ControllerClient(settings.name_servers),
        ha_config=config, broker_name=settings.broker_name, replica_id=settings.broker_id,
        ha_listen=(settings.host, port), run_on_loop=run_on_loop)
    manager = ReplicaManager(settings.config_center, settings.broker_name, settings.broker_id,
                             addr=identity.broker_addr, ha_addr=identity.ha_server_addr,
                             host=host, lease_ttl_s=settings.broker_lease_ttl_s,
                             refresh_s=settings.replica_refresh_interval_s,
                             fence_s=settings.master_fence_s,
                             quorum_acks=config.sync and config.min_in_sync_replicas >= 2)
    host.lease_valid = manager.may_serve
    host.recorded_incarnations = lambda: dict(manager.state.incarnations) \
        if manager.state is not None else {}
    host.recorded_confirmed = lambda: manager.state.confirmed_offset \
        if manager.state is not None else 0
    metrics.watch_replicas(host.progress)
    metrics.watch_rebuild(host.rebuild_progress)
    copier = OffsetCopier(offsets, lambda: manager.master_addr,
                          interval_s=settings.replica_refresh_interval_s)
    advisor = ReadAdvisor(role=lambda: host.role, log_end=host.log_end,
                          in_sync_slave_ids=host.in_sync_slave_ids,
                          behind_bytes=settings.slave_read_behind_bytes) \
        if settings.slave_read_enable else None
    return Replication(host, manager, copier, advisor)
