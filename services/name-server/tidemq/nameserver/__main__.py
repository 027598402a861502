"""`python -m tidemq.nameserver`: run one name server until SIGTERM."""

from __future__ import annotations

import sys

from tidemq.common.logs import get_logger
from tidemq.common.server import ServiceRuntime
from tidemq.common.setting_rules import TRACE_QUIET_OPERATIONS, parse_quiet_operations
from tidemq.common.settings import load_settings
from tidemq.common.tracing import set_quiet_operations
from tidemq.configclient.acl import follow_acl
from tidemq.configclient.client import ConfigClient
from tidemq.nameserver.controller.service import Controller
from tidemq.nameserver.dynamic import RULES, NameServerDynamicSettings
from tidemq.nameserver.registry import RouteRegistry
from tidemq.nameserver.scanner import ExpiryScanner
from tidemq.nameserver.servicer import NameServerServicer
from tidemq.nameserver.settings import NameServerSettings
from tidemq.v1 import nameserver_pb2_grpc


def main(argv: list[str] | None = None) -> None:
    settings = load_settings(NameServerSettings, argv, prog="python -m tidemq.nameserver")
    runtime = ServiceRuntime("name-server", settings,
                             follow_acl=follow_acl(settings, lambda: settings.config_center))
    registry = RouteRegistry()
    controller = client = None
    if settings.config_center and settings.controller_enabled:
        client = ConfigClient(settings.config_center)
        controller = Controller(client, lease_ttl_s=settings.controller_lease_ttl_s,
                                unclean_election=settings.unclean_election,
                                detection=settings.detection())
    elif settings.controller_enabled:
        get_logger(__name__).info("replication controller off: no --config-center")
    servicer = NameServerServicer(registry, controller)
    runtime.add(nameserver_pb2_grpc.add_NameServerServiceServicer_to_server,
                servicer, "tidemq.v1.NameServerService")
    scanner = ExpiryScanner(registry, settings.scan_interval_s, settings.broker_expiry_s)
    runtime.start()
    scanner.start()
    runtime.on_stop(scanner.stop)
    if controller is not None and client is not None:
        controller.start(settings.advertised_addr)  # the port is known once serving
        runtime.on_stop(client.close)
        runtime.on_stop(controller.stop)  # on_stop runs in reverse: the controller first

    def apply(name: str, value: object) -> None:
        if name == TRACE_QUIET_OPERATIONS:
            set_quiet_operations(value)  # type: ignore[arg-type]
        elif name == "unclean_election":
            if controller is not None:
                controller.set_unclean_default(bool(value))
        else:
            scanner.retune(name, value)

    if settings.config_center:
        dynamic = NameServerDynamicSettings(
            settings.config_center, {name: parse_quiet_operations(settings.trace_quiet_operations)
                                     if name == TRACE_QUIET_OPERATIONS else getattr(settings, name)
                                     for name in RULES},
            apply, cluster=settings.cluster_name, group=settings.config_group).start()
        runtime.on_stop(dynamic.stop)
    runtime.run_until_signal()


if __name__ == "__main__":
    main(sys.argv[1:])
