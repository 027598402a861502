"""Span export for the SDK's clients and the `tidemq` command.

A client records its spans (a send's `publish`, a consumer's `receive` and `process`) whatever
happens; they reach the trace collector only through an exporter. The first client made in a
process (`Producer`, `PullConsumer`, `PushConsumer`, `SimpleConsumer`, `Admin`) installs one,
through `tidemq.common.tracing.init_tracing` as the services do, when an OTLP endpoint is
known and the application has not installed a tracer provider of its own (then that provider
gets the spans, and the application decides where they go):

1. `TIDEMQ_OTLP_ENDPOINT` (host:port; set and empty: export nothing), else the standard
   `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` / `OTEL_EXPORTER_OTLP_ENDPOINT`
   (`http://host:4317` or host:port); `OTEL_SDK_DISABLED=true` turns export off;
2. for the `tidemq` command only: the file `.data/run/otlp-endpoint` that `make up` writes
   (looked for in the current directory and its parents, like git finds `.git`), so a
   command run in the checkout of a running `make up` is on the dashboard with no setting.

The service name is `OTEL_SERVICE_NAME`, else `tidemq-client` (`tidemq-cli` for the
command). TLS and signing come from the same settings as the client's own channels
(`TIDEMQ_TLS_CA_FILE`, `TIDEMQ_ACCESS_KEY` / `TIDEMQ_SECRET_KEY`). Sampling is the services'
(`trace_quiet_operations`: `TIDEMQ_TRACE_QUIET_OPERATIONS`, default the quiet list), so a
client's route refreshes, heartbeats, empty long polls and offset look-ups stay off the
dashboard while each send is on it.

Nothing here is imported by `import tidemq.client` or by the command line's start-up: this
module's top level is the standard library alone, and OpenTelemetry's exporter is imported
only when an endpoint is known (tests/unit/client/test_lazy_imports.py).
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

ENDPOINT_VARIABLES = ("TIDEMQ_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
                      "OTEL_EXPORTER_OTLP_ENDPOINT")
ENDPOINT_FILE = Path(".data") / "run" / "otlp-endpoint"  # written by `make up` (deploy/local.py)
CLIENT_SERVICE = "tidemq-client"
CLI_SERVICE = "tidemq-cli"
# The command's last spans are sent before it exits, waiting at most this long for the
# collector (an unreachable one costs a command this much, never more).
CLI_FLUSH_TIMEOUT_S = 2.0

_lock = threading.Lock()
_settings = {"service": CLIENT_SERVICE, "endpoint_file": False}
_started = False


def for_command() -> None:
    """The `tidemq` command's settings: its service name, and `make up`'s endpoint file."""
    _settings.update(service=CLI_SERVICE, endpoint_file=True)


def endpoint(environ: dict[str, str] | None = None, cwd: Path | None = None) -> str:
    """The OTLP endpoint spans go to ('': none known), by the order in the module doc."""
    environ = os.environ if environ is None else environ
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return ""
    for name in ENDPOINT_VARIABLES:
        if name in environ:
            return _host_port(environ[name])
    if _settings["endpoint_file"]:
        return endpoint_in_file(cwd or Path.cwd())
    return ""


def endpoint_in_file(start: Path) -> str:
    """The endpoint in the nearest `.data/run/otlp-endpoint` at or above `start`."""
    for directory in (start, *start.parents):
        try:
            return _host_port((directory / ENDPOINT_FILE).read_text())
        except (FileNotFoundError, NotADirectoryError, PermissionError):
            continue
    return ""


def _host_port(value: str) -> str:
    """`http://host:4317/` → `host:4317` (the OTLP/gRPC exporter takes host:port; plaintext
    unless TIDEMQ_TLS_CA_FILE says otherwise)."""
    value = value.strip()
    for scheme in ("http://", "https://"):
        if value.startswith(scheme):
            value = value[len(scheme):]
    return value.rstrip("/")


def start_export() -> bool:
    """Install the exporter if an endpoint is known and nobody installed a tracer provider
    (idempotent; called by every client's constructor). True when this process exports."""
    global _started
    if _started:
        return True
    address = endpoint()
    if not address:
        return False
    from opentelemetry import trace
    from tidemq.common import tracing

    with _lock:
        if _started:
            return True
        if tracing.initialised() or not isinstance(trace.get_tracer_provider(),
                                                   trace.ProxyTracerProvider):
            return False  # a service, or an application with its own provider: theirs
        from tidemq.common.rpc import client_security

        security = client_security()
        tracing.init_tracing(
            os.environ.get("OTEL_SERVICE_NAME") or _settings["service"], address,
            quiet_operations=os.environ.get("TIDEMQ_TRACE_QUIET_OPERATIONS"),
            instrument_grpc_servers=False, tls_ca_file=security.ca_file,
            credentials=security.credentials,
            tls_cert=(security.cert_file, security.key_file))
        _started = True
    return True


def flush(timeout_s: float = CLI_FLUSH_TIMEOUT_S) -> bool:
    """Send the spans still queued, waiting at most `timeout_s`; nothing to do (and nothing
    imported) when this process never started exporting. False: the collector did not take
    them in time (they are dropped: a command does not wait for a trace)."""
    if not _started:
        return True
    from tidemq.common import tracing

    return tracing.flush_tracing(timeout_s)
