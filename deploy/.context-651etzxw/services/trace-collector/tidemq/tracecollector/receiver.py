"""OTLP/gRPC TraceService adapter: decode, hand to the writer, answer. No storage logic here."""

from __future__ import annotations

from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from tidemq.common.errors import ServiceUnavailable
from tidemq.tracecollector import metrics
from tidemq.tracecollector.otlp import decode_request
from tidemq.tracecollector.writer import SpanWriter

SERVICE_NAME = "opentelemetry.proto.collector.trace.v1.TraceService"


class TraceReceiver(trace_service_pb2_grpc.TraceServiceServicer):
    def __init__(self, writer: SpanWriter) -> None:
        self._writer = writer

    def Export(self, request, context):  # noqa: N802 - name fixed by the OTLP service
        batch = decode_request(request.resource_spans)
        if batch.rejected:
            metrics.SPANS_REJECTED.inc(batch.rejected)
        if not self._writer.submit(batch.spans):
            metrics.SPANS_DROPPED.inc(len(batch.spans))
            # UNAVAILABLE is retryable for OTLP exporters: they back off and resend.
            raise ServiceUnavailable(
                f"trace collector write queue is full; {len(batch.spans)} spans not accepted"
            )
        metrics.SPANS_RECEIVED.inc(len(batch.spans))
        response = trace_service_pb2.ExportTraceServiceResponse()
        if batch.rejected:
            response.partial_success.rejected_spans = batch.rejected
            response.partial_success.error_message = batch.first_error
        return response


def add_to_server(receiver: TraceReceiver, server) -> None:
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(receiver, server)
