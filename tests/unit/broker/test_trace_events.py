"""Broker trace events with the real OpenTelemetry SDK (in a child interpreter: the global
tracer provider can be set once per process): a retry, a DLQ move, a re-drive, a delayed
delivery, a transaction's end and a pop consumer's ack or nack each become a short span in the message's own trace, a
child of its publish span naming the message; nothing is recorded when the process does not
export spans, or for a message sent without a trace context."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

from tidemq.common import record

SCRIPT = textwrap.dedent('''
    import json, sys
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from tidemq.broker import trace_events
    from tidemq.common import record, tracing
    from tidemq.common.sampling import QuietOperationsSampler

    exporter = InMemorySpanExporter()
    provider = TracerProvider(sampler=QuietOperationsSampler())
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    tracing._exporting = sys.argv[1] == "exporting"

    def message(traceparent):
        properties = {record.PROP_UNIQ_KEY: "U1", record.PROP_REAL_TOPIC: "orders",
                      record.PROP_PRODUCER_GROUP: "shop"}
        if traceparent:
            properties[record.PROP_TRACE_CONTEXT] = traceparent
        raw = record.encode("orders", b"body",
                            properties=record.encode_properties(properties))
        return raw, record.decode(raw)

    with trace.get_tracer("test").start_as_current_span("orders publish") as publish:
        traceparent = tracing.inject_context()["traceparent"]
    exporter.clear()
    for context in (traceparent, ""):
        raw, stored = message(context)
        trace_events.message_moved("billing", stored, "%RETRY%billing", 1, False)
        trace_events.message_moved("billing", stored, "%DLQ%billing", 17, True,
                                   store_host=record.pack_host("127.0.0.1", 10911),
                                   physical_offset=4096)
        trace_events.message_redriven("billing", stored, "orders")
        trace_events.delayed_delivered("orders", 3, [raw])
        trace_events.transaction_ended(stored, True, began_ns=1_000)
        trace_events.transaction_ended(stored, committed=False)
        trace_events.message_settled("billing", stored, True, stored.store_timestamp + 250)
        trace_events.message_settled("billing", stored, False, stored.store_timestamp + 40,
                                     invisible_ms=5000)
    context = publish.get_span_context()
    print(json.dumps({
        "publish": [context.trace_id, context.span_id],
        "spans": [{"name": s.name, "trace": s.context.trace_id,
                   "parent": s.parent.span_id if s.parent else None, "start": s.start_time,
                   "attributes": dict(s.attributes)} for s in exporter.get_finished_spans()]}))
''')


def _run(mode: str) -> dict:
    done = subprocess.run([sys.executable, "-c", SCRIPT, mode], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_each_event_is_a_span_in_the_message_trace_only_when_exporting():
    result = _run("exporting")
    trace_id, publish_id = result["publish"]
    spans = result["spans"]  # the message without a trace context recorded nothing
    assert [(s["name"], s["attributes"]["tidemq.event"]) for s in spans] == [
        ("%RETRY%billing retry", "retry"), ("%DLQ%billing dead_letter", "dead_letter"),
        ("orders redrive", "redrive"), ("orders delayed_delivery", "delayed_delivery"),
        ("orders transaction_commit", "transaction_commit"),
        ("orders transaction_rollback", "transaction_rollback"),
        ("orders ack", "ack"), ("orders nack", "nack")]
    for span in spans:
        assert (span["trace"], span["parent"]) == (trace_id, publish_id)
        assert span["attributes"]["messaging.message.id"] == "U1"
    retry, dead = spans[0]["attributes"], spans[1]["attributes"]
    assert retry["messaging.consumer.group.name"] == "billing"
    assert (retry["tidemq.reconsume_times"], dead["tidemq.reconsume_times"]) == (1, 17)
    assert retry["tidemq.source_topic"] == "orders"
    assert "tidemq.stored_msg_id" not in retry  # deferred through the timer: not stored yet
    assert dead["tidemq.stored_msg_id"] == record.offset_msg_id(
        record.pack_host("127.0.0.1", 10911), 4096)
    assert spans[3]["attributes"]["messaging.destination.partition.id"] == "3"
    assert spans[4]["attributes"]["tidemq.producer_group"] == "shop"
    assert spans[4]["start"] == 1_000  # when the commit began, before the message was visible

    ack, nack = spans[6]["attributes"], spans[7]["attributes"]
    assert (ack["messaging.consumer.group.name"], ack["tidemq.store_to_settle_ms"]) == \
        ("billing", 250)
    assert "tidemq.invisible_ms" not in ack
    assert (nack["tidemq.invisible_ms"], nack["tidemq.store_to_settle_ms"]) == (5000, 40)

    assert _run("not-exporting")["spans"] == []
