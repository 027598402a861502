"""Settings of the config-center process (see tidemq.common.settings for how they load)."""

from __future__ import annotations

from dataclasses import dataclass

from tidemq.common.settings import ServiceSettings, setting


@dataclass
class ConfigCenterSettings(ServiceSettings):
    """TideMQ config center: versioned KV, watches and leases on Redis."""

    port: int = setting(7070, "gRPC port (0 = pick a free port)")
    redis_url: str = setting("redis://127.0.0.1:6379/0", "Redis holding the store: "
                             "redis://host:port/db, or a replicated Redis under Sentinel: "
                             "redis+sentinel://host:port,host:port,.../MASTER_NAME/db")
    redis_timeout_s: float = setting(1.0, "socket timeout for Redis calls; bounds outage errors")
    redis_write_replicas: int = setting(-1, "replicas that must hold a call's effects before "
                                        "it is answered (WAIT); -1 = 1 under Sentinel, 0 for "
                                        "a single Redis")
    redis_write_timeout_ms: int = setting(1000, "longest wait for those replicas; then the call "
                                          "answers UNAVAILABLE (NOT_REPLICATED)")
    namespace: str = setting("tidemq:cc", "prefix of every Redis key the store uses")
    event_retention: int = setting(100_000, "events kept for watches; older are compacted")
    history_limit: int = setting(100, "changes kept per key for history and rollback")
    lease_reap_interval_s: float = setting(0.2, "how often expired leases are revoked")
    watch_window: int = setting(10_000, "newest events one shared log reader keeps for watches "
                                "(0 = every watch reads Redis itself)")
    max_watches: int = setting(192, "open Watch streams per instance; more answer "
                               "RESOURCE_EXHAUSTED (each holds a server thread)")
    watch_block_ms: int = setting(1000, "longest a watch waits on Redis before re-checking")
