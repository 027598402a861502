"""Compose one broker process: store, topic table + config-center sync, long polling,
consumer offsets, name-server registration and the gRPC servicer, with an ordered shutdown.
"""

from __future__ import annotations

import socket
import time
from pathlib import Path

from tidemq.broker import group_rpc, metrics
from tidemq.broker.allocator import keep_freed_memory
from tidemq.broker.commit_fence import CommitFence
from tidemq.broker.coordinator import CoordinatorConfig, GroupCoordinator
from tidemq.broker.dynamic import DynamicSettings
from tidemq.broker.group_manager import SubscriptionGroupManager
from tidemq.broker.group_rpc import GroupRpc
from tidemq.broker.idempotence import IdempotentSends, IdempotentSettings
from tidemq.broker.long_poll import PullRequestHoldService
from tidemq.broker.messaging import Messaging
from tidemq.broker.offsets import ConsumerOffsetManager
from tidemq.broker.pop import PopService, revive_topic
from tidemq.broker.queue_locks import QueueLocks
from tidemq.broker.quotas import QuotaEnforcer
from tidemq.broker.registration import MASTER, BrokerIdentity, BrokerRegistrar
from tidemq.broker.replication import metrics as replication_metrics  # noqa: F401 (families)
from tidemq.broker.retry import RetryService
from tidemq.broker.schedule import Deliverer, ScheduleService, TimingWheel
from tidemq.broker.schedule.recall import RecallLedger, Recalls
from tidemq.broker.servicer import BrokerServicer
from tidemq.broker.settings import BrokerSettings
from tidemq.broker.store import (
    DiskState,
    FlushMode,
    MessageStore,
    MetadataFile,
    StoreConfig,
    StoreError,
)
from tidemq.broker.subscription_groups import SubscriptionGroupTable
from tidemq.broker.system_topics import SystemTopics
from tidemq.broker.topic_manager import TopicManager
from tidemq.broker.topic_retention import compaction_of, policy_of
from tidemq.broker.topic_table import TopicTable
from tidemq.broker.transactions import CheckSettings, TransactionService
from tidemq.common import delays, record
from tidemq.common.logs import get_logger
from tidemq.common.server import ServiceRuntime
from tidemq.common.tls import ReloadingContext
from tidemq.common.wire.methods import BROKER_METHODS
from tidemq.common.wire.server import WireServer
from tidemq.configclient.acl import follow_acl
from tidemq.configclient.client import ConfigClient
from tidemq.configclient.quotas import QuotaFollower
from tidemq.configclient.topics import TopicDefinitions
from tidemq.v1 import broker_pb2_grpc

log = get_logger(__name__)


def _reserve_port(host: str) -> int:
    """Pick a free port up front: the store must know its address before serving starts."""
    with socket.socket() as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def store_config(settings: BrokerSettings) -> StoreConfig:
    return StoreConfig(
        data_dir=Path(settings.data_dir) / "store",
        segment_size=int(settings.segment_size_mib * 1024 * 1024),
        flush_mode=FlushMode.SYNC if settings.flush_mode == "sync" else FlushMode.ASYNC,
        max_message_size=settings.max_message_size,
        retention_hours=settings.retention_hours,
        delete_when_hour=None if settings.delete_when_hour < 0 else settings.delete_when_hour,
        retention_check_interval_ms=settings.retention_check_interval_ms,
        compaction_interval_ms=settings.compaction_interval_ms,
        compaction_io_bytes_s=int(settings.compaction_io_mib_s * 1024 * 1024),
        compaction_relocate_max_live_ratio=settings.compaction_relocate_max_live_ratio,
        disk_max_used_ratio=settings.disk_max_used_ratio,
        disk_warn_ratio=settings.disk_warn_ratio,
        disk_full_ratio=settings.disk_full_ratio,
        disk_check_interval_ms=settings.disk_check_interval_ms,
        consume_queue_units_per_file=settings.consume_queue_units_per_file,
        index_slots=settings.index_slots,
        index_entries=settings.index_entries,
    )


def idempotent_settings(settings: BrokerSettings) -> IdempotentSettings:
    return IdempotentSettings(window_ms=settings.idempotence_window_ms,
                              window_messages=settings.idempotence_window_messages,
                              max_producers=settings.idempotence_max_producers,
                              max_sequenced=settings.idempotence_max_sequenced,
                              rebuild_bytes=int(settings.idempotence_rebuild_mib * (1 << 20)))


class BrokerApp:
    def __init__(self, settings: BrokerSettings) -> None:
        self._free_ports = settings.port == 0  # then the wire port is a free one too
        if settings.port == 0:
            settings.port = _reserve_port(settings.host)
        self.settings = settings
        if keep_freed_memory(settings.malloc_keep_mib << 20):
            log.info("heap keeps freed memory for reuse", keep_mib=settings.malloc_keep_mib)
        self.runtime = ServiceRuntime(
            "broker", settings, max_workers=settings.worker_threads, aio=True,
            follow_acl=follow_acl(settings, lambda: settings.config_center))
        replicated = settings.replication_enabled
        if replicated:  # the role layer loads only where it runs
            from tidemq.broker.replication import wiring as replication_wiring
            settings.ha_port = replication_wiring.ha_port(settings)   # resolved once
        ha_addr = ((settings.ha_advertised_addr
                    or f"{settings.advertised_host}:{settings.ha_port}") if replicated else "")
        self.identity = BrokerIdentity(settings.cluster_name, settings.broker_name,
                                       settings.broker_id, settings.advertised_addr, ha_addr)
        data_dir = Path(settings.data_dir)
        self.store = MessageStore(store_config(settings),
                                  store_host=record.pack_host(settings.advertised_host,
                                                              settings.port))
        self.dynamic = DynamicSettings(settings.config_center, self.store.config,
                                       cluster=settings.cluster_name,
                                       broker_name=settings.broker_name,
                                       broker_id=settings.broker_id,
                                       quiet_operations=settings.trace_quiet_operations)
        self.topics = TopicTable(MetadataFile(data_dir / "topics.json"))
        # retention per topic (topic_retention.py): read at each retention run, so a changed
        # setting applies at the next one
        self.store.retention.topic_policy = policy_of(self.topics.get)
        self.store.compactor.topic_policy = compaction_of(self.topics.get)
        self.subscriptions = SubscriptionGroupTable(
            MetadataFile(data_dir / "subscription_groups.json"),
            auto_create=settings.auto_create_subscription_group)
        self.group_manager = SubscriptionGroupManager(self.subscriptions,
                                                      settings.config_center)
        self.offsets = ConsumerOffsetManager(MetadataFile(data_dir / "consumer_offsets.json"))
        self.holds = PullRequestHoldService()
        self.registrar = BrokerRegistrar(self.identity, settings.name_servers, self.topics,
                                         settings.register_interval_s,
                                         settings.register_timeout_s)
        self.topic_manager = TopicManager(self.topics, settings.config_center,
                                          on_change=self.registrar.trigger,
                                          on_deleted=self._drop_deleted_topic,
                                          broker_name=settings.broker_name)
        self.messaging = Messaging(self.store, self.topics, self.holds,
                                   long_poll_max_ms=settings.long_poll_max_ms,
                                   max_pull_messages=settings.max_pull_messages,
                                   max_pull_bytes=settings.max_pull_bytes,
                                   enable_property_filter=settings.enable_property_filter,
                                   # with replication the store refuses: NOT_MASTER
                                   accepts_writes=replicated or settings.broker_id == 0,
                                   broker_name=settings.broker_name)
        self.replication = (replication_wiring.build(settings, self.identity, self.store,
                                                     self.registrar, self.offsets,
                                                     self.runtime.transport.call)
                            if replicated else None)
        self.groups = GroupRpc(GroupCoordinator(CoordinatorConfig(
            initial_rebalance_delay_ms=settings.group_initial_rebalance_delay_ms,
            min_session_timeout_ms=settings.group_min_session_timeout_ms),
            on_rebalance=group_rpc.rebalance_started),
            admit=self.subscriptions.check_consume)
        self.runtime.on_stop(self.groups.stop)  # after the drain: waiting joins get NOT_COORDINATOR
        if self.replication is not None:   # only a master coordinates; a new one takes over
            coordinator, replication = self.groups.coordinator, self.replication
            coordinator.hand_off()
            replication.host.on_promoted = lambda: coordinator.take_over(
                replication.copier.coordinated_groups)
            replication.host.on_demoted = coordinator.hand_off
        self.topic_writer = ConfigClient(settings.config_center)
        system_topics = SystemTopics(self.messaging, TopicDefinitions(self.topic_writer).create,
                                     wait_s=settings.topic_sync_wait_s)
        wheel = TimingWheel()
        if settings.max_delay_ms > wheel.capacity_ms:
            log.warning("max_delay_ms is beyond the timer's reach; using the reach",
                        max_delay_ms=settings.max_delay_ms, reach_ms=wheel.capacity_ms)
        if settings.max_delay_ms > settings.retention_hours * 3600 * 1000:
            log.warning("max_delay_ms is beyond retention_hours: a message waiting that long "
                        "may be deleted with its segment before it is due",
                        max_delay_ms=settings.max_delay_ms,
                        retention_hours=settings.retention_hours)
        self.schedule = ScheduleService(
            self.messaging, system_topics, wheel,
            level_ms=delays.parse_delay_levels(settings.message_delay_level),
            max_delay_ms=min(settings.max_delay_ms, wheel.capacity_ms))
        self.recalls = Recalls(self.messaging, RecallLedger(), system_topics.ensure)
        self.deliverer = Deliverer(self.messaging, self.offsets, wheel,
                                   tick_ms=settings.schedule_tick_ms, recalls=self.recalls)
        self.retry = RetryService(self.messaging, self.subscriptions, system_topics,
                                  schedule=self.schedule)
        self.pop = PopService(self.messaging, self.retry, system_topics, self.subscriptions,
                              self.offsets, broker_name=settings.broker_name,
                              revive=revive_topic(settings.cluster_name),
                              revive_interval_s=settings.pop_revive_interval_ms / 1000,
                              snapshot_interval_s=settings.pop_snapshot_interval_ms / 1000,
                              expired_kept_ms=settings.pop_expired_kept_ms)
        idempotence = IdempotentSends(self.messaging, idempotent_settings(settings))
        self.retry.idempotence = idempotence  # revived pops move idempotently (retry.move)
        self.transactions = TransactionService(
            self.messaging, system_topics, self.offsets, settings=CheckSettings(
                timeout_ms=settings.transaction_timeout_ms,
                interval_ms=settings.transaction_check_interval_ms,
                max_checks=settings.transaction_check_max), idempotence=idempotence)
        self.quotas = QuotaEnforcer(settings.quota_burst_s)
        self.quota_follower = QuotaFollower(settings.config_center,
                                            lambda table: setattr(self.quotas, "table", table))
        self.servicer = BrokerServicer(self.identity, self.messaging, self.offsets, self.groups,
                                        self.group_manager,
                                        self.replication.host if self.replication else None,
                                        self.retry, self.pop,
                                        QueueLocks(self.topic_writer, settings.broker_name),
                                        self.replication.read_advisor if self.replication
                                        else None, self.transactions, self.schedule,
                                        idempotence, self.recalls,
                                        CommitFence(settings.broker_name,
                                                    self.groups.coordinator,
                                                    settings.name_servers),
                                        quotas=self.quotas)
        self.runtime.add(broker_pb2_grpc.add_BrokerServiceServicer_to_server, self.servicer,
                         "tidemq.v1.BrokerService")
        self.wire: WireServer | None = None
        metrics.HELD_PULLS.set_function(self.holds.held_count)
        metrics.OPEN_TRANSACTIONS.set_function(lambda: len(self.transactions.book.pending))
        # A FULL disk registers the group read-only, so producers send elsewhere; the
        # registrar's thread re-registers (the guard's thread never waits for name servers).
        self.store.disk.add_listener(
            lambda state, _usage: self.registrar.set_writable(state is not DiskState.FULL))
        metrics.watch_flusher(self.store.flusher)
        metrics.watch_compaction(self.store.compactor)
        metrics.watch_schedule(self.deliverer)
        metrics.watch_pop(self.pop.stats)
        metrics.watch_consumers(self.offsets, self.store, self._is_master, data_dir,
                                self.pop.progress)
        replication_gauges = metrics.watch_replication(self.store)  # epoch: every broker
        if self.replication is not None:
            self.messaging.group_waiting = lambda: self.replication.manager.waiting
            self.replication.host.on_server = lambda server: setattr(
                replication_gauges, "server", server)

    def _stop_wire(self) -> None:
        if self.wire is not None:
            self.wire.stop(self.settings.shutdown_grace_s)

    def _is_master(self) -> bool:
        """Whether this broker is its group's master now (it alone reports consumer lag)."""
        if self.replication is None:
            return self.settings.broker_id == 0
        return self.replication.host.role == MASTER

    def _drop_deleted_topic(self, topic: str) -> None:
        """A topic deleted in config-center: the master marks it in the CommitLog, and every
        replica's consume queues drop its messages there (MessageStore.delete_topic). A slave
        gets the marker from its master."""
        if not self._is_master():
            return
        try:
            offset = self.store.delete_topic(topic)
        except StoreError as exc:  # demoted meanwhile: they age out with retention
            log.warning("deleted topic's messages stay readable", topic=topic, error=str(exc))
            return
        log.info("deleted topic's messages put out of reach", topic=topic,
                 commitlog_offset=offset)

    def start(self) -> None:
        self.store.start()
        if self.replication is not None:
            self.replication.start()  # a slave (refusing sends) until the controller decides
        self.store.add_arrival_listener(self.holds.notify_arrival)
        self.store.add_visibility_listener(self.holds.notify_visible)
        self.dynamic.start()
        self.quota_follower.start()  # no quotas until the first read: nobody is throttled
        self.offsets.start(self.settings.offset_flush_interval_s)
        sync_deadline = time.monotonic() + self.settings.topic_sync_wait_s
        self.group_manager.start()
        self.topic_manager.start(self.settings.topic_sync_wait_s)
        self.group_manager.wait_synced(max(0.0, sync_deadline - time.monotonic()))
        self.runtime.ready_extra = {"broker_name": self.settings.broker_name}
        self.groups.start()
        self.pop.start()  # replays the revive log before the first Pop is served
        self.transactions.start(self.runtime.transport.loop)  # replays half + op topics
        self.deliverer.start()  # delivers only while this broker is a master
        self._start_wire()
        self.runtime.start()
        self.registrar.start()
        log.info("broker started", broker=self.identity.broker_name, addr=self.identity.broker_addr,
                 topics=len(self.topics.snapshot()[1]))

    def _start_wire(self) -> None:
        """The wire protocol (tidemq.common.wire) on the gRPC server's loop, before the gRPC
        port opens and before the first registration: a client that learns the port from a
        route or from GetBrokerInfo learns a port that already listens."""
        settings = self.settings
        if not settings.wire_enabled:
            return
        tls = None
        if settings.tls_cert_file:  # TLS on the wire too, with gRPC's certificate and client CA
            tls = ReloadingContext(True, settings.tls_cert_file, settings.tls_key_file,
                                   settings.tls_client_ca_file)
        port = settings.wire_port
        if port == -1:
            port = 0 if self._free_ports else settings.port + 2
        handlers = {method.number: (method, getattr(self.servicer, method.name))
                    for method in BROKER_METHODS.values()}
        self.wire = WireServer(self.runtime.transport.loop, handlers,
                               name=self.identity.broker_addr, pipeline=self.runtime.pipeline)
        try:
            settings.wire_port = self.servicer.wire_port = self.wire.start(settings.host, port,
                                                                           tls)
        except OSError as exc:
            if settings.wire_port != -1:  # a port asked for by name must be had
                raise
            log.warning("wire protocol not served: its default port is taken; clients use "
                        "gRPC (set wire_port to choose another)", port=port, error=str(exc))
            self.wire = None
            return
        self.runtime.ready_extra["wire_port"] = settings.wire_port
        self.runtime.ready_extra["wire_tls"] = tls is not None
        self.servicer.wire_tls = self.registrar.wire_tls = tls is not None
        self.registrar.wire_port = settings.wire_port  # routes carry it to clients
        log.info("serving the wire protocol", port=settings.wire_port, tls=tls is not None,
                 client_certificates=bool(tls is not None and settings.tls_client_ca_file))

    def stop(self) -> None:
        """Graceful stop: leave the replica group and the routes first, answer held pulls,
        drain, then flush."""
        leave_group = self.replication.stop if self.replication is not None else (lambda: None)
        for step in (leave_group, lambda: self.registrar.stop(unregister=True),
                     self.topic_manager.stop,
                     self.group_manager.stop, self.dynamic.stop, self.quota_follower.close,
                     self.holds.shutdown, self.transactions.stop, self._stop_wire,
                     self.runtime.stop,
                     self.pop.stop, self.deliverer.stop, self.topic_writer.close,
                     self.offsets.stop,
                     self.store.shutdown):
            try:
                step()
            except Exception:  # one failing step must not skip the flush that follows
                log.exception("shutdown step failed")
