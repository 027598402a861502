"""Broker settings (the table with defaults and units is in services/broker/README.md)."""

from __future__ import annotations

from dataclasses import dataclass

from tidemq.common import delays, record
from tidemq.common.settings import ServiceSettings, SettingsError, setting

FLUSH_MODES = ("async", "sync")
BROKER_ROLES = ("ASYNC_MASTER", "SYNC_MASTER")


@dataclass
class BrokerSettings(ServiceSettings):
    """TideMQ broker: CommitLog store, send/pull with long polling, consumer offsets."""

    port: int = setting(10911, "gRPC port of BrokerService (0 = pick a free port)")
    data_dir: str = setting("./.data/broker", "store, topic table and consumer offsets live here")
    cluster_name: str = setting("DefaultCluster", "cluster this broker's group belongs to")
    broker_name: str = setting("broker-a", "replica group name (master and slaves share it)")
    broker_id: int = setting(
        0, "without replication: 0 = master, > 0 = slave; with replication: the fixed replica "
           "id 0..N-1 in its group (0 = initial master)")
    namesrv_addrs: str = setting("127.0.0.1:9876", "name servers to register with, ';'-separated")
    config_center: str = setting("127.0.0.1:7070", "config-center host:port (topic definitions)")
    topic_sync_wait_s: float = setting(
        5.0, "at start, wait this long for config-center before serving the persisted topics"
    )
    auto_create_subscription_group: bool = setting(
        True, "a group with no definition in config-center consumes with the defaults; "
        "false = such a group is refused (SUBSCRIPTION_GROUP_NOT_EXIST)"
    )
    register_interval_s: float = setting(30.0, "re-registration period with every name server")
    register_timeout_s: float = setting(3.0, "deadline of one registration call")
    flush_mode: str = setting("async", "async (flush every 500 ms) or sync (group commit)")
    segment_size_mib: float = setting(1024.0, "CommitLog segment file size in MiB (ref 1 GiB)")
    max_message_size: int = setting(record.DEFAULT_MAX_MESSAGE_SIZE, "largest record in bytes")
    long_poll_max_ms: int = setting(15000, "longest a pull with nothing new is held (ref 15 s)")
    quota_burst_s: float = setting(
        1.0, "client quotas (docs/quotas.md): seconds of a quota's rate an entity may spend "
        "at once before it is throttled")
    max_pull_messages: int = setting(32, "records per pull when the request asks for 0")
    max_pull_bytes: int = setting(4 * 1024 * 1024, "bytes per pull when the request asks for 0")
    retention_hours: float = setting(72.0, "delete CommitLog segments older than this (ref 72 h)")
    delete_when_hour: int = setting(4, "local hour of the daily age-based deletion; -1 = any time")
    retention_check_interval_ms: int = setting(
        10_000, "how often retention looks for CommitLog segments to delete (tests lower it)")
    compaction_interval_ms: int = setting(
        10_000, "how often the master compacts cleanup.policy=compact queues (tests lower it)")
    compaction_io_mib_s: float = setting(
        32.0, "records compaction reads per second at most, in MiB (its I/O budget; 0 = none)")
    compaction_relocate_max_live_ratio: float = setting(
        0.5, "copy-forward (docs/storage.md, \"How compaction frees disk\"): a segment held only "
             "by compacted topics' live records is freed by copying them forward when they are "
             "at most this share of it (0..1; 0 = never copy)")
    disk_max_used_ratio: float = setting(
        0.75, "above this used fraction of the data dir's file system, retention deletes the "
              "oldest CommitLog segments at once, expired or not (RocketMQ's "
              "diskMaxUsedSpaceRatio)")
    disk_warn_ratio: float = setting(
        0.75, "from this used fraction of the data dir's file system the broker warns: log, "
              "tidemq_broker_disk_state 1, the console (docs/storage.md, \"A full disk\")")
    disk_full_ratio: float = setting(
        0.85, "from this used fraction the broker refuses sends with STORAGE_FULL and its "
              "routes turn unwritable, until use falls below it again; reads, acks and "
              "replication go on (RocketMQ's diskSpaceCleanForciblyRatio)")
    disk_check_interval_ms: int = setting(
        1000, "how often the file system's use is looked at (one statvfs; ms)")
    consume_queue_units_per_file: int = setting(300_000, "ConsumeQueue units per file")
    index_slots: int = setting(5_000_000, "IndexFile hash slots")
    index_entries: int = setting(20_000_000, "IndexFile entries")
    offset_flush_interval_s: float = setting(5.0, "consumer offsets persisted this often")
    group_min_session_timeout_ms: int = setting(
        6000, "smallest consumer-group session timeout accepted (Kafka ref 6000; tests lower it)"
    )
    group_initial_rebalance_delay_ms: int = setting(
        3000, "first rebalance of an empty group waits this long for more members (ref 3000)"
    )
    message_delay_level: str = setting(
        delays.DEFAULT_DELAY_LEVELS,
        "the 18 delay levels' durations, space-separated with units ms/s/m/h/d (RocketMQ's "
        "messageDelayLevel); retry n of a consumer waits level 3 + n")
    max_delay_ms: int = setting(
        delays.DEFAULT_MAX_DELAY_MS,
        "a delivery time further ahead is refused with DELAY_TOO_LONG (ms; ref 3 days)")
    schedule_tick_ms: int = setting(
        100, "how often the timer moves due scheduled messages to their topic (ms)")
    pop_revive_interval_ms: int = setting(
        200, "how often popped messages past their invisible time are looked for (ms)")
    pop_snapshot_interval_ms: int = setting(
        60_000, "how often the pop state is written to the revive log as one snapshot, where "
                "a restart's replay starts (ms)")
    pop_expired_kept_ms: int = setting(
        600_000, "an expired pop receipt handle is remembered this long (an ack of it answers "
                 "RECEIPT_HANDLE_EXPIRED; later it answers as acked) and the pop state forgets it "
                 "(ms; at most 100 000 are kept)")
    transaction_timeout_ms: int = setting(
        6000, "a half message not committed or rolled back this long after it was stored is "
              "checked back with a producer of its group (ms; RocketMQ's transactionTimeOut)")
    transaction_check_interval_ms: int = setting(
        60000, "an unresolved half message is checked back again this often (ms; RocketMQ's "
               "transactionCheckInterval)")
    transaction_check_max: int = setting(
        15, "check-backs of one half message before it is discarded and logged (RocketMQ's "
            "transactionCheckMax)")
    enable_property_filter: bool = setting(
        True, "accept SQL92 subscriptions (pull, push, pop), evaluated over each candidate "
              "message's properties; false = refused with FILTER_DISABLED (RocketMQ's "
              "enablePropertyFilter; docs/filters.md)")
    malloc_keep_mib: int = setting(
        64, "freed heap memory kept for reuse (pull replies stop page-faulting); 0 = libc default")
    worker_threads: int = setting(
        256, "threads for the plain RPCs (admin, offsets, heartbeats); sends, held pulls and "
             "JoinGroup/SyncGroup wait on the event loop without one")
    idempotence_window_ms: int = setting(
        600_000, "idempotent sends: a unique id stored longer ago than this (ms) is no longer "
                 "recognised as a duplicate (docs/idempotence.md)")
    idempotence_window_messages: int = setting(
        100_000, "idempotent sends: unique ids remembered per producer id (oldest go first)")
    idempotence_max_producers: int = setting(
        1000, "idempotent sends: producer ids remembered (the least recently written go)")
    idempotence_max_sequenced: int = setting(
        100_000, "sequenced idempotent sends (Kafka producers): (producer, queue) states kept; "
                 "when full the least recently written goes, and that producer's next batch "
                 "there is UNKNOWN_PRODUCER_ID (docs/idempotence.md)")
    idempotence_rebuild_mib: float = setting(
        256.0, "idempotent sends: CommitLog tail (MiB) scanned to rebuild the table after a "
               "restart or a promotion")

    # -- replication (docs/replication.md, "Broker roles and failover") ----------------------
    replication_enabled: bool = setting(
        False, "join a replica group: leases in the config center, controller elections, "
               "HA stream; false = a single broker as before")
    broker_role: str = setting(
        "ASYNC_MASTER", "how this group's master acknowledges: ASYNC_MASTER (after the local "
                        "append) or SYNC_MASTER (after the in-sync replicas have the bytes)")
    min_in_sync_replicas: int = setting(
        1, "fewer in-sync replicas (master included) refuse sends with NOT_ENOUGH_REPLICAS; "
           "2 for a group of 3")
    sync_replication_timeout_ms: int = setting(
        5000, "SYNC_MASTER: longest wait for the in-sync replicas, then FLUSH_SLAVE_TIMEOUT")
    replica_lag_max_ms: int = setting(
        10000, "a slave not caught up for this long leaves the in-sync set (ms)")
    wire_enabled: bool = setting(
        True, "serve the wire protocol: send, pull, pop and ack as framed TCP beside gRPC, "
              "several times cheaper per call (TLS, and mutual TLS, with the gRPC settings "
              "when tls_cert_file is set)")
    wire_port: int = setting(
        -1, "wire protocol port: -1 = port + 2 (a free port when port is 0), 0 = pick a free "
            "port")
    ha_port: int = setting(-1, "HA stream port: -1 = port + 1, 0 = pick a free port")
    ha_advertised_addr: str = setting(
        "", "host:port slaves dial for the HA stream when it differs from advertised_host:"
            "ha_port (a proxy or NAT in between); \"\" = advertised_host:ha_port")
    ha_transfer_batch_bytes: int = setting(
        256 * 1024, "most CommitLog bytes per HA stream frame (never across a segment end)")
    ha_housekeeping_timeout_ms: int = setting(
        20000, "an HA connection silent for this long (ms) is dropped")
    broker_lease_ttl_s: int = setting(
        10, "TTL of this replica's live key in the config center (s); a master that cannot "
            "renew it for this long steps down")
    master_fence_s: float = setting(
        3.0, "a master acknowledges nothing once this long (s) has passed since it sent its last "
             "successful live-key renewal; the controller may replace a frozen master this long "
             "(+ a margin) after its last renewal instead of waiting for the lease")
    replica_refresh_interval_s: float = setting(
        1.0, "live key refresh (log end, epoch) and slave copy of the master's consumer "
             "offsets, this often (s)")
    slave_read_enable: bool = setting(
        True, "a master suggests an in-sync slave to consumers reading far behind "
              "(RocketMQ's slaveReadEnable)")
    slave_read_behind_bytes: int = setting(
        0, "how far behind the log end (bytes) a pull must start for that suggestion; "
           "0 = 40 % of physical memory (RocketMQ's accessMessageInMemoryMaxRatio)")

    def __post_init__(self) -> None:
        if self.flush_mode not in FLUSH_MODES:
            raise SettingsError(f"flush_mode must be one of {FLUSH_MODES}, got {self.flush_mode!r}")
        if self.broker_id < 0:
            raise SettingsError(f"broker_id must be >= 0, got {self.broker_id}")
        if self.broker_role not in BROKER_ROLES:
            raise SettingsError(f"broker_role must be one of {BROKER_ROLES}, "
                                f"got {self.broker_role!r}")
        if self.min_in_sync_replicas < 1:
            raise SettingsError("min_in_sync_replicas must be >= 1 (the master counts)")
        if self.broker_lease_ttl_s < 1:
            raise SettingsError("broker_lease_ttl_s must be >= 1")
        if self.master_fence_s < 2 * self.replica_refresh_interval_s:
            raise SettingsError("master_fence_s must be at least twice "
                                "replica_refresh_interval_s (one late renewal must not fence "
                                "a healthy master)")
        if min(self.transaction_timeout_ms, self.transaction_check_interval_ms) <= 0 or \
                self.transaction_check_max < 0:
            raise SettingsError("transaction_timeout_ms and transaction_check_interval_ms must "
                                "be > 0, transaction_check_max >= 0")
        try:
            delays.parse_delay_levels(self.message_delay_level)
        except ValueError as exc:
            raise SettingsError(str(exc)) from None
        if self.max_delay_ms < 0:
            raise SettingsError("max_delay_ms must be >= 0")
        if self.schedule_tick_ms < 1:
            raise SettingsError("schedule_tick_ms must be >= 1")
        if self.compaction_interval_ms < 1 or self.compaction_io_mib_s < 0:
            raise SettingsError(f"compaction_interval_ms must be >= 1 and compaction_io_mib_s "
                                f">= 0 (0 = no limit), got {self.compaction_interval_ms} and "
                                f"{self.compaction_io_mib_s}")
        if not 0 <= self.compaction_relocate_max_live_ratio <= 1:
            raise SettingsError(f"compaction_relocate_max_live_ratio must be within 0..1, got "
                                f"{self.compaction_relocate_max_live_ratio}")
        if self.pop_expired_kept_ms < 0:
            raise SettingsError(f"pop_expired_kept_ms must be >= 0, got "
                                f"{self.pop_expired_kept_ms}")
        if not 0 < self.quota_burst_s <= 3600:
            raise SettingsError(f"quota_burst_s must be > 0 and <= 3600 s, got "
                                f"{self.quota_burst_s}")
        if not -1 <= self.wire_port <= 65535:
            raise SettingsError(f"wire_port must be -1 (port + 2), 0 (a free port) or a port "
                                f"number, got {self.wire_port}")
        if min(self.idempotence_window_ms, self.idempotence_window_messages,
               self.idempotence_max_producers, self.idempotence_max_sequenced) <= 0 \
                or self.idempotence_rebuild_mib < 0:
            raise SettingsError("idempotence_window_ms, idempotence_window_messages, "
                                "idempotence_max_producers and idempotence_max_sequenced "
                                "must be > 0, "
                                "idempotence_rebuild_mib >= 0")
        if not 0 < self.disk_warn_ratio <= self.disk_full_ratio <= 1:
            raise SettingsError(f"disk_warn_ratio and disk_full_ratio must satisfy 0 < "
                                f"disk_warn_ratio <= disk_full_ratio <= 1, got "
                                f"{self.disk_warn_ratio} and {self.disk_full_ratio}")
        if not 0 < self.disk_max_used_ratio <= 1:
            raise SettingsError(f"disk_max_used_ratio must be in (0, 1], got "
                                f"{self.disk_max_used_ratio}")
        if self.disk_check_interval_ms < 1:
            raise SettingsError("disk_check_interval_ms must be >= 1")
        if not self.name_servers:
            raise SettingsError("namesrv_addrs names no name server")

    @property
    def name_servers(self) -> list[str]:
        return [addr.strip() for addr in self.namesrv_addrs.split(";") if addr.strip()]
