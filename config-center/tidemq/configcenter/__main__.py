"""`python -m tidemq.configcenter --etcd-endpoints host:2379,host:2381,... --port 7070`"""

from __future__ import annotations

import sys

from tidemq.common.errors import TideMQError
from tidemq.common.logs import get_logger
from tidemq.common.server import ServiceRuntime
from tidemq.common.settings import load_settings
from tidemq.configcenter.encryption import ValueCipher
from tidemq.configcenter.etcd import EtcdTarget
from tidemq.configcenter.servicer import ConfigServicer
from tidemq.configcenter.settings import ConfigCenterSettings
from tidemq.configcenter.store import ConfigStore
from tidemq.configcenter.topology import TopologyReader
from tidemq.v1 import config_pb2_grpc

log = get_logger(__name__)

UNARY_THREADS = 64  # server threads no watch can take


def main(argv: list[str] | None = None) -> None:
    settings = load_settings(ConfigCenterSettings, argv, prog="python -m tidemq.configcenter")
    if settings.max_watches < 1:
        raise SystemExit(f"--max-watches must be >= 1, got {settings.max_watches}")
    if not 0 < settings.watch_progress_s <= 60:
        raise SystemExit(f"--watch-progress-s must be above 0 and at most 60, got "
                         f"{settings.watch_progress_s:g}")
    if settings.etcd_timeout_s <= 0:
        raise SystemExit(f"--etcd-timeout-s must be above 0, got {settings.etcd_timeout_s:g}")
    try:
        store = _open_store(settings)
    except (OSError, TideMQError) as exc:
        raise SystemExit(f"config center: {exc}") from None
    # Each open Watch holds a worker thread for its lifetime: the servicer refuses watches past
    # max_watches, and UNARY_THREADS more threads stay free for every other call.
    # Trace only when spans are exported: server instrumentation costs time on every call.
    runtime = ServiceRuntime("config-center", settings,
                             max_workers=settings.max_watches + UNARY_THREADS,
                             tracing=bool(settings.otlp_endpoint),
                             follow_acl=_acl_follower(settings))
    runtime.add(config_pb2_grpc.add_ConfigServiceServicer_to_server,
                ConfigServicer(store, max_watches=settings.max_watches,
                               topology=TopologyReader(store.etcd),
                               advertised_addr=lambda: settings.advertised_addr),
                "tidemq.v1.ConfigService")
    runtime.on_stop(store.close)
    runtime.start()
    log.info("config store", etcd=store.target.describe(), namespace=settings.namespace,
             secrets_at_rest=store.cipher.describe())
    runtime.run_until_signal()


def _acl_follower(settings: ConfigCenterSettings):
    """With auth on, the config center follows the ACL kept in itself, at its advertised
    address (known once it serves); the config client is loaded only then."""
    if not settings.auth_enabled:
        return None
    from tidemq.configclient.acl import follow_acl

    return follow_acl(settings, lambda: settings.advertised_addr)


def _open_store(settings: ConfigCenterSettings) -> ConfigStore:
    target = EtcdTarget.parse(settings.etcd_endpoints, ca_file=settings.etcd_ca_file,
                              cert_file=settings.etcd_cert_file, key_file=settings.etcd_key_file,
                              user=settings.etcd_user, password_file=settings.etcd_password_file)
    cipher = ValueCipher(settings.store_encryption_key_file, settings.store_encryption_keys)
    return ConfigStore(target, namespace=settings.namespace, timeout=settings.etcd_timeout_s,
                       progress_interval_s=settings.watch_progress_s, cipher=cipher)


if __name__ == "__main__":
    main(sys.argv[1:])
