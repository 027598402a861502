"""Run the Flask app under gunicorn, started programmatically (gunicorn.app.base).

Why this shape: the arbiter binds the port (0 = ephemeral) and writes the ready file once
listening; each worker, after fork, sets up its own logging, tracing (gRPC channels and
exporter threads must not cross a fork) and Flask instrumentation, then builds its app.
SIGTERM makes gunicorn drain in-flight requests before exiting.
"""

from __future__ import annotations

import json
import os
import shutil
import ssl
import tempfile
from pathlib import Path
from typing import Any

from gunicorn.app.base import BaseApplication
from tidemq.common.logs import configure_logging, get_logger
from tidemq.common.tracing import init_tracing, shutdown_tracing
from tidemq.gateway.settings import GatewaySettings

SERVICE_NAME = "gateway-http"
log = get_logger(__name__)


def prepare_metrics_dir() -> str:
    """PROMETHEUS_MULTIPROC_DIR must be set before prometheus_client is first imported (it
    picks its value class at import) and must start empty; called by __main__ first thing."""
    directory = tempfile.mkdtemp(prefix="tidemq-gateway-metrics-")
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = directory
    return directory


def write_json_atomically(path: str, payload: dict[str, Any]) -> None:
    # Not tidemq.common.server's: importing that pulls in prometheus_client in the arbiter.
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(target.name + ".tmp")
    tmp.write_text(json.dumps(payload))
    os.replace(tmp, target)


class GatewayApplication(BaseApplication):
    def __init__(self, settings: GatewaySettings) -> None:
        self.settings = settings
        super().__init__()

    def load_config(self) -> None:
        s = self.settings
        options: dict[str, Any] = {
            "bind": f"{s.host}:{s.port}",
            "workers": s.workers,
            "worker_class": "gthread",
            "threads": s.threads,
            "timeout": s.worker_timeout_s,
            "graceful_timeout": max(1, round(s.shutdown_grace_s)),
            "keepalive": 5,
            "limit_request_line": 8190,  # gunicorn's largest: room for a long SQL92 filter
            "loglevel": s.log_level,
            "accesslog": None,
            "proc_name": "tidemq-gateway-http",
            "control_socket_disable": True,  # one fixed path would clash between instances
            "when_ready": self._when_ready,
            "post_fork": self._post_fork,
            "worker_exit": self._worker_exit,
            "child_exit": self._child_exit,
            "on_exit": self._on_exit,
        }
        if s.tls_cert_file:  # HTTPS; new certificates apply when workers restart (HUP)
            options.update(certfile=s.tls_cert_file, keyfile=s.tls_key_file)
        if s.tls_client_ca_file:  # mutual TLS: a client certificate signed by this CA
            options.update(cert_reqs=ssl.CERT_REQUIRED, ca_certs=s.tls_client_ca_file)
        for key, value in options.items():
            self.cfg.set(key, value)

    def load(self):
        """Runs in each worker (preload off): build the backend and the app there."""
        from opentelemetry.instrumentation.flask import FlaskInstrumentor
        from tidemq.gateway.app import create_app, untraced_when_quiet
        from tidemq.gateway.backend import GatewayBackend

        backend = GatewayBackend(self.settings)
        app = create_app(backend, self.settings)
        if not self.settings.otlp_endpoint:  # a span per request that nobody exports costs CPU
            return app
        FlaskInstrumentor().instrument_app(app, excluded_urls="healthz,metrics")
        return untraced_when_quiet(app, create_app(backend, self.settings))

    def _when_ready(self, arbiter) -> None:
        port = arbiter.LISTENERS[0].sock.getsockname()[1]
        metrics_port = self._start_metrics_listener()
        log.info("serving", service=SERVICE_NAME, addr=f"{self.settings.host}:{port}",
                 workers=self.settings.workers, metrics_port=metrics_port)
        if self.settings.ready_file:
            write_json_atomically(self.settings.ready_file, {
                "port": port, "metrics_port": metrics_port, "pid": os.getpid(),
                "http_port": port,
            })

    def _start_metrics_listener(self) -> int:
        """/metrics is on the HTTP port; --metrics-port (>= 0) adds the same text on its own
        listener in the arbiter, like every other service, so scrapes never queue behind
        requests. -1 = only the HTTP port."""
        if self.settings.metrics_port < 0:
            return 0
        import prometheus_client
        from prometheus_client import CollectorRegistry, multiprocess

        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
        server, _ = prometheus_client.start_http_server(
            self.settings.metrics_port, addr=self.settings.host, registry=registry)
        return server.server_port

    def _post_fork(self, arbiter, worker) -> None:
        from tidemq.common.auth.signature import Credentials

        configure_logging(SERVICE_NAME, self.settings.log_level, self.settings.log_format)
        init_tracing(SERVICE_NAME, self.settings.otlp_endpoint,
                     quiet_operations=self.settings.trace_quiet_operations,
                     tls_ca_file=self.settings.tls_ca_file,
                     tls_cert=(self.settings.tls_cert_file, self.settings.tls_key_file),
                     credentials=Credentials(self.settings.access_key, self.settings.secret_key),
                     record_unexported=False)  # '' = no tracing: no span is even recorded

    def _worker_exit(self, arbiter, worker) -> None:
        shutdown_tracing()  # flush this worker's pending spans

    def _child_exit(self, arbiter, worker) -> None:
        from tidemq.gateway.metrics import worker_exited

        worker_exited(worker.pid)


    def _on_exit(self, arbiter) -> None:
        directory = os.environ.get("PROMETHEUS_MULTIPROC_DIR", "")
        if directory.startswith(tempfile.gettempdir()):
            shutil.rmtree(directory, ignore_errors=True)
        log.info("stopped", service=SERVICE_NAME)


def run(settings: GatewaySettings) -> None:
    configure_logging(SERVICE_NAME, settings.log_level, settings.log_format)
    GatewayApplication(settings).run()
