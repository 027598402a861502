"""`python -m tidemq.gatewaykafka`: serve the Kafka wire protocol until SIGTERM."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from concurrent.futures import ThreadPoolExecutor

import prometheus_client
from tidemq.common import rpc
from tidemq.common.auth.guard import AuthGuard, StaticAcl
from tidemq.common.auth.signature import Credentials
from tidemq.common.logs import configure_logging, get_logger
from tidemq.common.server import write_json_atomically
from tidemq.common.settings import load_settings
from tidemq.common.tls import ReloadingContext
from tidemq.common.tracing import init_tracing, shutdown_tracing
from tidemq.configclient.acl import AclFollower
from tidemq.configclient.client import ConfigClient
from tidemq.gatewaykafka.backend import KafkaBackend
from tidemq.gatewaykafka.coordination import GroupCoordination
from tidemq.gatewaykafka.handlers import KafkaApis
from tidemq.gatewaykafka.nodes import EXTERNAL, GatewayNodes, Node, derived_node_id
from tidemq.gatewaykafka.security import KafkaSecurity
from tidemq.gatewaykafka.server import KafkaServer
from tidemq.gatewaykafka.settings import KafkaGatewaySettings

SERVICE = "gateway-kafka"
log = get_logger(__name__)


def main(argv: list[str] | None = None) -> None:
    settings = load_settings(KafkaGatewaySettings, argv, prog="python -m tidemq.gatewaykafka")
    configure_logging(SERVICE, settings.log_level, settings.log_format)
    if security := rpc.ClientSecurity.of_service(settings):
        rpc.configure_client_security(security)
    # record_unexported=False: without a collector every per-request span is the no-op one,
    # as in the other gateways (a recording span nobody exports costs CPU on each request)
    init_tracing(SERVICE, settings.otlp_endpoint, tls_ca_file=settings.tls_ca_file,
                 quiet_operations=settings.trace_quiet_operations, record_unexported=False)
    try:
        import uvloop

        uvloop.install()
    except ImportError:  # pragma: no cover - uvloop is locked; plain asyncio serves as well
        pass
    asyncio.run(serve(settings))
    shutdown_tracing()


async def serve(settings: KafkaGatewaySettings) -> None:
    backend = KafkaBackend(settings.namesrv_addrs, settings.config_center,
                           send_timeout_s=settings.send_timeout_s,
                           rpc_timeout_s=settings.rpc_timeout_s)
    backend.follow_definitions()   # several instances: partitions added elsewhere show here
    coordination = GroupCoordination(backend.namesrv, settings.rpc_timeout_s)
    pool = ThreadPoolExecutor(settings.max_workers, thread_name_prefix="kafka-call")
    nodes: GatewayNodes | None = None
    apis = KafkaApis(backend, coordination, lambda: nodes, pool=pool,
                     max_record_batch_bytes=settings.max_batch_bytes,
                     cluster_id=settings.cluster_id,
                     auto_create_partitions=(settings.default_partitions
                                             if settings.auto_create_topics else 0))
    # each listener its own security protocol (docs/kafka.md#listeners)
    protocols = settings.listener_protocols()
    if settings.external_port < 0:
        protocols = protocols[:1]
    security, acl_follower = kafka_security(settings)
    tls = (ReloadingContext(True, settings.tls_cert_file, settings.tls_key_file,
                            settings.tls_client_ca_file)
           if any(p.endswith("SSL") for p in protocols) else None)
    server = KafkaServer(apis, max_request_size=settings.max_request_size, security=security,
                         tls=tls)

    def listener_security(protocol: str) -> KafkaSecurity:
        return KafkaSecurity(security.guard, security.mechanisms,
                             sasl=protocol.startswith("SASL_"))

    port = await server.start(settings.host, settings.port, security=listener_security(
        protocols[0]), tls=protocols[0].endswith("SSL"))
    settings.port = port
    advertised_port = settings.advertised_port or port
    external_port, external = 0, (None, None)
    if settings.external_port >= 0:   # docs/kafka.md#listeners
        external_port = await server.start(
            settings.host, settings.external_port, EXTERNAL,
            security=listener_security(protocols[1]), tls=protocols[1].endswith("SSL"))
        external = settings.external_endpoint() or (settings.advertised_host, external_port)
    me = Node(settings.node_id if settings.node_id >= 0 else
              derived_node_id(settings.advertised_host, advertised_port),
              settings.advertised_host, advertised_port, None, *external)
    nodes = (GatewayNodes(me, ConfigClient(settings.config_center),
                          ttl_s=settings.registration_ttl_s).start()
             if settings.registration_ttl_s > 0 else GatewayNodes.single(me))
    metrics_port = 0
    metrics_server = None
    if settings.metrics_port >= 0:
        metrics_server, _ = prometheus_client.start_http_server(settings.metrics_port,
                                                                addr=settings.host)
        metrics_port = metrics_server.server_port
    if settings.ready_file:
        write_json_atomically(settings.ready_file, {"port": port, "metrics_port": metrics_port,
                                                    "external_port": external_port,
                                                    "pid": os.getpid()})
    log.info("serving", service=SERVICE, addr=f"{settings.host}:{port}",
             advertised=f"{me.host}:{me.port}", node_id=me.node_id, metrics_port=metrics_port,
             external=(f"{settings.host}:{external_port} advertised as "
                       f"{me.external_host}:{me.external_port}" if external_port else None),
             listener=protocols[0], external_listener=protocols[1] if external_port else None)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    await stop.wait()
    log.info("stopping", service=SERVICE, grace_s=settings.shutdown_grace_s)
    nodes.close()   # deregistered first: clients move to the other instances at once
    await server.stop(settings.shutdown_grace_s)
    pool.shutdown(wait=False, cancel_futures=True)
    backend.close()
    if acl_follower is not None:
        acl_follower.close()
    if metrics_server is not None:
        metrics_server.shutdown()
    log.info("stopped", service=SERVICE)


def kafka_security(settings: KafkaGatewaySettings) -> tuple[KafkaSecurity, AclFollower | None]:
    """SASL and the ACL when auth_enabled (the users and rules followed live from the config
    center, as every service does); else neither."""
    if not settings.auth_enabled:
        return KafkaSecurity(None), None
    acl = StaticAcl()
    follower = AclFollower(settings.auth_config_center or settings.config_center, acl).start()
    trusted = (Credentials(settings.access_key, settings.secret_key)
               if settings.access_key and settings.secret_key else None)
    guard = AuthGuard(SERVICE, acl, skew_s=settings.auth_skew_s, trusted=trusted)
    mechanisms = tuple(m.strip().upper() for m in settings.sasl_mechanisms.split(",")
                       if m.strip())
    return KafkaSecurity(guard, mechanisms), follower


if __name__ == "__main__":
    main(sys.argv[1:])
