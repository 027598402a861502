"""`python -m tidemq.gatewaykafka`: serve the Kafka wire protocol until SIGTERM."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from concurrent.futures import ThreadPoolExecutor

import prometheus_client
from tidemq.common import rpc
from tidemq.common.logs import configure_logging, get_logger
from tidemq.common.server import write_json_atomically
from tidemq.common.settings import load_settings
from tidemq.common.tracing import init_tracing, shutdown_tracing
from tidemq.gatewaykafka.backend import KafkaBackend
from tidemq.gatewaykafka.coordination import GroupCoordination
from tidemq.gatewaykafka.handlers import Endpoint, KafkaApis
from tidemq.gatewaykafka.server import KafkaServer
from tidemq.gatewaykafka.settings import KafkaGatewaySettings

SERVICE = "gateway-kafka"
log = get_logger(__name__)


def main(argv: list[str] | None = None) -> None:
    settings = load_settings(KafkaGatewaySettings, argv, prog="python -m tidemq.gatewaykafka")
    configure_logging(SERVICE, settings.log_level, settings.log_format)
    if security := rpc.ClientSecurity.of_service(settings):
        rpc.configure_client_security(security)
    init_tracing(SERVICE, settings.otlp_endpoint, tls_ca_file=settings.tls_ca_file,
                 quiet_operations=settings.trace_quiet_operations)
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
    coordination = GroupCoordination(backend.namesrv, settings.rpc_timeout_s)
    pool = ThreadPoolExecutor(settings.max_workers, thread_name_prefix="kafka-call")
    endpoint = Endpoint(settings.advertised_host, settings.advertised_port)
    apis = KafkaApis(backend, coordination, lambda: endpoint, pool=pool,
                     max_record_batch_bytes=settings.max_batch_bytes,
                     cluster_id=settings.cluster_id,
                     auto_create_partitions=(settings.default_partitions
                                             if settings.auto_create_topics else 0))
    server = KafkaServer(apis, max_request_size=settings.max_request_size)
    port = await server.start(settings.host, settings.port)
    settings.port = port
    endpoint = Endpoint(settings.advertised_host, settings.advertised_port or port)
    metrics_port = 0
    metrics_server = None
    if settings.metrics_port >= 0:
        metrics_server, _ = prometheus_client.start_http_server(settings.metrics_port,
                                                                addr=settings.host)
        metrics_port = metrics_server.server_port
    if settings.ready_file:
        write_json_atomically(settings.ready_file, {"port": port, "metrics_port": metrics_port,
                                                    "pid": os.getpid()})
    log.info("serving", service=SERVICE, addr=f"{settings.host}:{port}",
             advertised=f"{endpoint.host}:{endpoint.port}", metrics_port=metrics_port)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    await stop.wait()
    log.info("stopping", service=SERVICE, grace_s=settings.shutdown_grace_s)
    await server.stop(settings.shutdown_grace_s)
    pool.shutdown(wait=False, cancel_futures=True)
    backend.close()
    if metrics_server is not None:
        metrics_server.shutdown()
    log.info("stopped", service=SERVICE)


if __name__ == "__main__":
    main(sys.argv[1:])
