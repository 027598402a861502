"""HAConfig: the replication settings of one broker replica (defaults are the references of
docs/replication.md). The role layer builds it from the broker's settings."""

from __future__ import annotations

from dataclasses import dataclass

from tidemq.common.tls import StreamContext


@dataclass(frozen=True)
class HATls:
    """TLS of the HA stream, both ends authenticated with the brokers' own certificates."""

    server: StreamContext   # the master's end: asks every slave for its certificate
    client: StreamContext   # a slave's end: checks the master's
    server_name: str = ""   # the name checked in the master's certificate ('' = host dialled)

    @classmethod
    def of(cls, cert_file: str, key_file: str, ca_file: str, server_name: str = "") -> HATls:
        return cls(StreamContext(True, cert_file, key_file, ca_file),
                   StreamContext(False, cert_file, key_file, ca_file), server_name)


@dataclass(frozen=True)
class HAConfig:
    sync: bool = True                        # SYNC_MASTER: acknowledge after the in-sync set has the bytes
    min_in_sync_replicas: int = 1            # fewer in-sync replicas (master included): NOT_ENOUGH_REPLICAS
    sync_replication_timeout_ms: int = 5000  # SYNC: wait this long for the in-sync set, then FLUSH_SLAVE_TIMEOUT
    replica_lag_max_ms: int = 10_000         # a member not caught up for this long leaves the in-sync set
    transfer_batch_bytes: int = 256 * 1024   # most bytes per stream frame (never across a segment end)
    heartbeat_interval_ms: int = 1000        # master -> slave: an empty frame when idle this long
    report_interval_ms: int = 5000           # slave -> master: its log end at least this often
    housekeeping_timeout_ms: int = 20_000    # drop a connection silent for this long
    reconnect_interval_ms: int = 1000        # slave: wait this long before reconnecting
    tls: HATls | None = None                 # None: plaintext (a broker without tls_cert_file)

    def __post_init__(self) -> None:
        if self.min_in_sync_replicas < 1:
            raise ValueError("min_in_sync_replicas must be at least 1 (the master)")
        if self.transfer_batch_bytes < 1024:
            raise ValueError("transfer_batch_bytes must be at least 1024")
