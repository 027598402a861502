"""`python -m tidemq.nameserver`: run one name server until SIGTERM."""

from __future__ import annotations

import sys

from tidemq.common.server import ServiceRuntime
from tidemq.common.settings import load_settings
from tidemq.nameserver.dynamic import RULES, NameServerDynamicSettings
from tidemq.nameserver.registry import RouteRegistry
from tidemq.nameserver.scanner import ExpiryScanner
from tidemq.nameserver.servicer import NameServerServicer
from tidemq.nameserver.settings import NameServerSettings
from tidemq.v1 import nameserver_pb2_grpc


def main(argv: list[str] | None = None) -> None:
    settings = load_settings(NameServerSettings, argv, prog="python -m tidemq.nameserver")
    runtime = ServiceRuntime("name-server", settings)
    registry = RouteRegistry()
    runtime.add(nameserver_pb2_grpc.add_NameServerServiceServicer_to_server,
                NameServerServicer(registry), "tidemq.v1.NameServerService")
    scanner = ExpiryScanner(registry, settings.scan_interval_s, settings.broker_expiry_s)
    runtime.start()
    scanner.start()
    runtime.on_stop(scanner.stop)
    if settings.config_center:
        dynamic = NameServerDynamicSettings(
            settings.config_center, {name: getattr(settings, name) for name in RULES},
            scanner.retune, cluster=settings.cluster_name, group=settings.config_group).start()
        runtime.on_stop(dynamic.stop)
    runtime.run_until_signal()


if __name__ == "__main__":
    main(sys.argv[1:])
