"""`python -m tidemq.gatewaygrpc`: serve RocketMQ 5's MessagingService until SIGTERM."""

from __future__ import annotations

import sys

from rocketmq.grpc_protocol import service_pb2_grpc
from tidemq.common.server import ServiceRuntime
from tidemq.common.settings import load_settings
from tidemq.gatewaygrpc import metrics
from tidemq.gatewaygrpc.proxy import MessagingProxy
from tidemq.gatewaygrpc.servicer import MessagingServicer
from tidemq.gatewaygrpc.sessions import ClientSessions
from tidemq.gatewaygrpc.settings import GrpcGatewaySettings
from tidemq.gatewaygrpc.telemetry import ServerSettings

SERVICE_NAME = "apache.rocketmq.v2.MessagingService"


def main(argv: list[str] | None = None) -> None:
    settings = load_settings(GrpcGatewaySettings, argv, prog="python -m tidemq.gatewaygrpc")
    # with no otlp_endpoint, record no span: recording the spans of a send nobody exports
    # cost each SendMessage about 0.3 ms (docs/rocketmq-compat.md, "Measuring the gateway's
    # cost"), as it cost the HTTP gateway's pops
    runtime = ServiceRuntime("gateway-grpc", settings, max_workers=settings.max_workers,
                             follow_acl=_acl_follower(settings), record_unexported=False)
    sessions = ClientSessions()

    def forward(topic, message, transaction_id) -> None:
        forwarded = sessions.forward_check(topic, message, transaction_id)
        metrics.CHECKS_FORWARDED.labels(str(forwarded).lower()).inc()

    proxy = MessagingProxy(settings.namesrv_addrs, producer_group=settings.producer_group,
                           send_timeout_s=settings.send_timeout_s,
                           rpc_timeout_s=settings.rpc_timeout_s, on_check=forward,
                           auto_renew_max_ms=int(settings.auto_renew_max_s * 1000))
    server = ServerSettings(settings.max_body_size, settings.long_polling_timeout_s,
                            min(max(settings.receive_batch_size, 1), 32),
                            int(settings.default_invisible_s * 1000))
    runtime.add(service_pb2_grpc.add_MessagingServiceServicer_to_server,
                MessagingServicer(proxy, sessions, server,
                                  lambda: (settings.advertised_host, settings.port)),
                SERVICE_NAME)
    runtime.on_stop(proxy.close)
    runtime.start()
    proxy.start()
    runtime.run_until_signal()


def _acl_follower(settings: GrpcGatewaySettings):
    """With auth on, the ACL followed from `auth_config_center` (this gateway has no other
    config center); the config client is loaded only then."""
    if not settings.auth_enabled:
        return None
    from tidemq.configclient.acl import follow_acl

    return follow_acl(settings)


if __name__ == "__main__":
    main(sys.argv[1:])
