"""Wire the collector process: SQLite store, group-commit writer, OTLP receiver, HTTP app.

The collector never traces itself (ServiceRuntime(tracing=False)): exporting its own Export
spans to itself would make every received batch produce another batch, forever.
"""

from __future__ import annotations

import logging
import threading

from tidemq.common.logs import get_logger
from tidemq.common.server import ServiceRuntime
from tidemq.common.tls import ReloadingContext
from tidemq.configclient.acl import follow_acl
from tidemq.tracecollector import metrics
from tidemq.tracecollector.dynamic import follow_retention, policy_value
from tidemq.tracecollector.http_app import create_app
from tidemq.tracecollector.receiver import SERVICE_NAME, TraceReceiver, add_to_server
from tidemq.tracecollector.settings import TraceCollectorSettings
from tidemq.tracecollector.store import RetentionPolicy, SpanStore
from tidemq.tracecollector.writer import SpanWriter
from werkzeug.serving import BaseWSGIServer, make_server

log = get_logger(__name__)


class HttpServer:
    """Threaded werkzeug server for the Flask app, run on a background thread; HTTPS with
    `tls`, whose rotated files load for new connections within a second."""

    def __init__(self, app, host: str, port: int, tls: ReloadingContext | None = None) -> None:
        self._server: BaseWSGIServer = make_server(host, port, app, threaded=True,
                                                   ssl_context=tls.context if tls else None)
        self.scheme = "https" if tls else "http"
        self.port = self._server.server_port
        self._tls = tls
        self._stopped = threading.Event()
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="http", daemon=True
        )
        self._reloader = threading.Thread(target=self._reload, name="http-tls", daemon=True)

    def start(self) -> None:
        # Per-request access lines would drown the service's own log; errors still show.
        logging.getLogger("werkzeug").setLevel(logging.WARNING)
        self._thread.start()
        if self._tls is not None:
            self._reloader.start()

    def _reload(self) -> None:
        while not self._stopped.wait(1.0):
            self._tls.refresh()

    def stop(self) -> None:
        self._stopped.set()
        self._server.shutdown()
        self._thread.join(5.0)


class TraceCollector:
    def __init__(self, settings: TraceCollectorSettings) -> None:
        self.settings = settings
        self.runtime = ServiceRuntime(
            "trace-collector", settings, tracing=False,
            follow_acl=follow_acl(settings, lambda: settings.config_center))
        self.store = SpanStore(
            settings.data_dir,
            RetentionPolicy(
                max_spans=settings.retention_spans, max_age_hours=settings.retention_hours,
                max_bytes=int(policy_value("retention_mb", settings.retention_mb)),
            ),
        )
        self.writer = SpanWriter(
            self.store,
            max_queued_spans=settings.max_queued_spans,
            on_stored=metrics.SPANS_STORED.inc,
        )
        self.runtime.add(add_to_server, TraceReceiver(self.writer), SERVICE_NAME)
        tls = ReloadingContext(True, settings.tls_cert_file, settings.tls_key_file,
                               settings.tls_client_ca_file) if settings.tls_cert_file else None
        self.http = HttpServer(create_app(self.store, self.runtime.auth), settings.host,
                               settings.http_port, tls)
        # Stop callbacks run in reverse: HTTP first, then drain the writer, then close SQLite.
        self.runtime.on_stop(self.store.close)
        self.runtime.on_stop(self.writer.close)
        self.runtime.on_stop(self.http.stop)

    def start(self) -> None:
        self.http.start()
        self.runtime.ready_extra["http_port"] = self.http.port
        self.runtime.start()
        if self.settings.config_center:
            self.runtime.on_stop(follow_retention(self.settings, self.store).stop)
        log.info("dashboard", url=f"{self.http.scheme}://{self.settings.advertised_host}:"
                 f"{self.http.port}/", auth=self.runtime.auth is not None)


def main(argv: list[str] | None = None) -> None:
    from tidemq.common.settings import load_settings

    settings = load_settings(TraceCollectorSettings, argv, prog="python -m tidemq.tracecollector")
    collector = TraceCollector(settings)
    collector.start()
    collector.runtime.run_until_signal()
