"""OpenTelemetry bootstrap: one call per process names the service and wires OTLP export.

gRPC client and server calls are instrumented globally, so every hop becomes a span and the
trace context crosses services in gRPC metadata. With no endpoint configured, spans are still
created (cheap no-op exporters are not installed) so code paths stay identical.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable

from opentelemetry import propagate, trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from tidemq.common.sampling import (
    QUIET_BY_DEFAULT,
    QuietOperationsSampler,
    is_quiet,
    parse_operations,
)

_lock = threading.Lock()
_initialised = False
_exporting = False
_sampler: QuietOperationsSampler | None = None
_span_exporter = None  # the OTLP exporter, once exporting (flush_tracing may stop it)

MESSAGING_SYSTEM = "tidemq"


def _exporter(exporter_class: type, endpoint: str, ca_file: str, signer: object,
              cert: tuple[str, str] = ("", "")) -> object:
    """Plaintext, or TLS with `ca_file`; with TLS, each export is signed like every other call
    (`signer`: a tidemq.common.auth.signature.Credentials), so a collector with auth on accepts
    it. gRPC sends call credentials only over TLS: a plaintext exporter stays unsigned."""
    if not ca_file:
        return exporter_class(endpoint=endpoint, insecure=True)
    import grpc
    from tidemq.common.tls import channel_credentials

    credentials = channel_credentials(ca_file, *cert)  # cert: for a collector with mutual TLS
    if signer:
        from tidemq.common.auth.signature import signed_metadata

        def sign(_context, callback) -> None:
            callback(signed_metadata(signer), None)

        credentials = grpc.composite_channel_credentials(
            credentials, grpc.metadata_call_credentials(sign, name="tidemq-hmac"))
    return exporter_class(endpoint=endpoint, credentials=credentials)


def init_tracing(service_name: str, otlp_endpoint: str = "", *, instrument_grpc: bool = True,
                 instrument_grpc_servers: bool = True,
                 quiet_operations: str | None = None, tls_ca_file: str = "",
                 credentials: object = None, tls_cert: tuple[str, str] = ("", ""),
                 record_unexported: bool = True) -> None:
    """Install the global tracer provider (idempotent per process). `quiet_operations`: the
    `trace_quiet_operations` setting (None: sampling.QUIET_BY_DEFAULT).
    `record_unexported=False`: without `otlp_endpoint` install no provider at all, so every
    span is OpenTelemetry's no-op (the HTTP gateway: recording spans that nobody exports cost
    it about 40 µs of CPU per pop, docs/http-api.md); the process still counts as initialised,
    so no client inside it installs an exporter of its own.

    gRPC calls are instrumented only when the spans go somewhere (`otlp_endpoint`): a span
    per call that nobody exports cost a broker about 200 µs of CPU on each Ack
    (docs/consumption.md, "Where a call spends its time"). `instrument_grpc_servers=False`
    instruments only the calls this process makes (a client inside someone's application
    leaves that application's own gRPC servers alone)."""
    global _initialised, _exporting, _sampler, _span_exporter
    with _lock:
        if _initialised:
            return
        quiet = QUIET_BY_DEFAULT if quiet_operations is None else parse_operations(
            quiet_operations)
        _sampler = QuietOperationsSampler(quiet)
        provider = TracerProvider(resource=Resource.create({"service.name": service_name}),
                                  sampler=_sampler)
        if otlp_endpoint:
            _exporting = True
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

            _span_exporter = _exporter(OTLPSpanExporter, otlp_endpoint, tls_ca_file,
                                       credentials, tls_cert)
            provider.add_span_processor(BatchSpanProcessor(_span_exporter))
        if otlp_endpoint or record_unexported:
            trace.set_tracer_provider(provider)
        if instrument_grpc and otlp_endpoint:
            from opentelemetry.instrumentation.grpc import (
                GrpcAioInstrumentorServer,
                GrpcInstrumentorClient,
                GrpcInstrumentorServer,
            )

            if instrument_grpc_servers:
                GrpcInstrumentorServer().instrument()
                GrpcAioInstrumentorServer().instrument()
            GrpcInstrumentorClient().instrument()
        _initialised = True


def set_quiet_operations(quiet: Iterable[str]) -> bool:
    """Replace the quiet list of this process's sampler (the live `trace_quiet_operations`
    setting); the next span started obeys it. False before init_tracing."""
    if _sampler is None:
        return False
    _sampler.quiet = frozenset(quiet)
    return True


def quiet_root(span_name: str) -> bool:
    """Whether this process's sampler drops a root span named `span_name` (a quiet operation,
    the live `trace_quiet_operations`); False before init_tracing."""
    sampler = _sampler
    return sampler is not None and is_quiet(span_name, sampler.quiet)


def exporting() -> bool:
    """Whether this process sends its spans anywhere: work done only to describe something
    on a span (reading a record's properties for a trace event) is skipped when not."""
    return _exporting


def initialised() -> bool:
    """Whether init_tracing ran in this process (a service's, or a client's on its behalf)."""
    return _initialised


def flush_tracing(timeout_s: float) -> bool:
    """Export the spans still queued, waiting at most `timeout_s` (for a short-lived process
    such as the `tidemq` command, before it exits). The SDK's force_flush takes no deadline
    (it ignores its timeout argument), so it runs in a thread of its own; when that thread is
    still busy at the deadline, the exporter is shut down, which cancels the export in flight
    and its retries: the spans are dropped and the process exits on time. False then."""
    provider = trace.get_tracer_provider()
    if _span_exporter is None or not hasattr(provider, "force_flush"):
        return True
    flushing = threading.Thread(target=provider.force_flush, name="tidemq-span-flush",
                                daemon=True)
    flushing.start()
    flushing.join(timeout_s)
    if flushing.is_alive():
        _span_exporter.shutdown()
        return False
    return True


def shutdown_tracing() -> None:
    """Flush pending spans (called on graceful shutdown)."""
    provider = trace.get_tracer_provider()
    if hasattr(provider, "shutdown"):
        provider.shutdown()


def get_tracer(name: str) -> trace.Tracer:
    return trace.get_tracer(name)


def inject_context() -> dict[str, str]:
    """The current trace context as a carrier dict (to ride in message properties)."""
    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    return carrier


def extract_context(carrier: dict[str, str]):
    return propagate.extract(carrier)
