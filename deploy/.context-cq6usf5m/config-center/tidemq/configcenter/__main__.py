"""`python -m tidemq.configcenter --redis-url redis://... --port 7070`"""

from __future__ import annotations

import sys

from tidemq.common.errors import TideMQError
from tidemq.common.logs import get_logger
from tidemq.common.redisconn import RedisUrlError
from tidemq.common.server import ServiceRuntime
from tidemq.common.settings import load_settings
from tidemq.configcenter.reaper import LeaseReaper
from tidemq.configcenter.scripts import LEASE_OUTAGE_MS
from tidemq.configcenter.servicer import ConfigServicer
from tidemq.configcenter.settings import ConfigCenterSettings
from tidemq.configcenter.store import ConfigStore
from tidemq.configcenter.tail import EventTail
from tidemq.configcenter.topology import TopologyReader
from tidemq.v1 import config_pb2_grpc

log = get_logger(__name__)

UNARY_THREADS = 64  # server threads no watch can take


def main(argv: list[str] | None = None) -> None:
    settings = load_settings(ConfigCenterSettings, argv, prog="python -m tidemq.configcenter")
    if settings.max_watches < 1:
        raise SystemExit(f"--max-watches must be >= 1, got {settings.max_watches}")
    if not 0 < settings.lease_reap_interval_s <= LEASE_OUTAGE_MS / 2000:
        raise SystemExit(f"--lease-reap-interval-s must be above 0 and at most "
                         f"{LEASE_OUTAGE_MS / 2000:g} (half the gap that counts as an outage "
                         f"of every config center), got {settings.lease_reap_interval_s:g}")
    try:
        store = _open_store(settings)
    except (RedisUrlError, TideMQError) as exc:
        raise SystemExit(f"config center: {exc}") from None
    reaper = LeaseReaper(store, settings.lease_reap_interval_s)
    tail = EventTail(store, settings.watch_window) if settings.watch_window > 0 else None
    # Each open Watch holds a worker thread for its lifetime: the servicer refuses watches past
    # max_watches, and UNARY_THREADS more threads stay free for every other call.
    # Trace only when spans are exported: server instrumentation costs time on every call.
    runtime = ServiceRuntime("config-center", settings,
                             max_workers=settings.max_watches + UNARY_THREADS,
                             tracing=bool(settings.otlp_endpoint),
                             follow_acl=_acl_follower(settings))
    runtime.add(config_pb2_grpc.add_ConfigServiceServicer_to_server,
                ConfigServicer(store, tail, max_watches=settings.max_watches,
                               topology=TopologyReader(store.target),
                               advertised_addr=lambda: settings.advertised_addr),
                "tidemq.v1.ConfigService")
    runtime.on_stop(store.close)
    runtime.on_stop(reaper.stop)
    reaper.start()
    if tail is not None:
        runtime.on_stop(tail.stop)
        tail.start()
    runtime.start()
    log.info("config store", redis=store.target.describe(), namespace=settings.namespace,
             write_replicas=store.write_replicas)
    _check_persistence(store)
    runtime.run_until_signal()


def _acl_follower(settings: ConfigCenterSettings):
    """With auth on, the config center follows the ACL kept in itself, at its advertised
    address (known once it serves); the config client is loaded only then."""
    if not settings.auth_enabled:
        return None
    from tidemq.configclient.acl import follow_acl

    return follow_acl(settings, lambda: settings.advertised_addr)


def _open_store(settings: ConfigCenterSettings) -> ConfigStore:
    return ConfigStore(settings.redis_url, namespace=settings.namespace,
                       retention=settings.event_retention, history_limit=settings.history_limit,
                       redis_timeout=settings.redis_timeout_s,
                       watch_block_ms=settings.watch_block_ms,
                       write_replicas=None if settings.redis_write_replicas < 0
                       else settings.redis_write_replicas,
                       write_timeout_ms=settings.redis_write_timeout_ms)


def _check_persistence(store: ConfigStore) -> None:
    """Warn (never fail: Redis may be starting) when revisions would not survive a restart."""
    try:
        persistence = store.persistence()
    except TideMQError as exc:
        log.warning("redis not reachable yet; calls answer UNAVAILABLE until it is",
                    error=str(exc))
        return
    if store.write_replicas and persistence.get("min-replicas-to-write") in ("0", None):
        log.warning("the Redis master takes writes with no replica connected "
                    "(min-replicas-to-write 0): set it to 1 so a master cut off from its "
                    "replicas refuses writes instead of losing them at the next failover")
    if persistence and persistence.get("appendonly") != "yes":
        log.warning("redis runs without append-only persistence: keys and revisions will not "
                    "survive a Redis restart (start it with --appendonly yes)")
    elif persistence.get("appendfsync") not in (None, "always"):
        log.info("redis fsyncs the append-only file every second: a Redis crash can lose "
                 "the last second of writes", appendfsync=persistence.get("appendfsync"))


if __name__ == "__main__":
    main(sys.argv[1:])
