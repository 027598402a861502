"""Spark reads as spans: one CONSUMER span per queue range read, carrying the range, the
rows read and Spark's partition (and, in a stream, micro-batch) — sent to the trace collector
when the read's `otlpEndpoint` option names one, so a job's reads show on the dashboard beside
the services'. Nothing is imported or recorded without that option."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

SERVICE_NAME = "spark"


def _task_attributes() -> dict:
    from pyspark import TaskContext

    context = TaskContext.get()
    if context is None:  # read outside a Spark task (tests, the driver)
        return {}
    attributes = {"spark.partition_id": context.partitionId(),
                  "spark.stage_id": context.stageId()}
    batch = context.getLocalProperty("streaming.sql.batchId")
    if batch is not None:
        attributes["spark.streaming.batch_id"] = int(batch)
        attributes["spark.streaming.query_id"] = context.getLocalProperty(
            "sql.streaming.queryId") or ""
    return attributes


@contextmanager
def partition_read_span(otlp_endpoint: str, partition) -> Iterator[dict]:
    """Around one partition's read; the caller adds to `counts["rows"]` as it yields rows."""
    counts = {"rows": 0}
    if not otlp_endpoint:
        yield counts
        return
    from opentelemetry import trace
    from tidemq.common.tracing import init_tracing

    init_tracing(SERVICE_NAME, otlp_endpoint, instrument_grpc=False)  # once per worker
    attributes = {
        "messaging.system": "tidemq", "messaging.operation.type": "receive",
        "messaging.destination.name": partition.topic, "tidemq.broker_name": partition.broker,
        "messaging.destination.partition.id": str(partition.queue_id),
        "tidemq.start_offset": partition.start, "tidemq.end_offset": partition.end,
        **_task_attributes(),
    }
    tracer = trace.get_tracer("tidemq.analytics")
    with tracer.start_as_current_span(f"{partition.topic} read", kind=trace.SpanKind.CONSUMER,
                                      attributes=attributes) as span:
        try:
            yield counts
        finally:
            span.set_attribute("messaging.batch.message_count", counts["rows"])
    # Python workers may exit after the task: export now rather than on a timer.
    trace.get_tracer_provider().force_flush(5000)
