"""Consumer spans with the real OpenTelemetry SDK (in a child interpreter: the global tracer
provider can be set once per process): a read that returned messages records a `receive` span
linked to each message's publish span; a listener's batch of one is processed in the
message's own trace; an empty read records nothing; a failed batch is an error span."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent('''
    import json
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from tidemq.client import Message
    from tidemq.client.consume_spans import outcome, processing, record_receive
    from tidemq.client.encoding import BatchEncoder
    from tidemq.client.message import decode_records
    from tidemq.common import record
    from tidemq.common.sampling import QuietOperationsSampler
    from tidemq.common.tracing import inject_context

    exporter = InMemorySpanExporter()
    provider = TracerProvider(sampler=QuietOperationsSampler())
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    tracer = trace.get_tracer("test")
    encoder = BatchEncoder(max_message_size=1 << 20, compression="none",
                           compress_threshold=1 << 20, born_host=record.pack_host("127.0.0.1", 0))
    published = []
    for n in range(2):
        with tracer.start_as_current_span("orders publish") as span:
            records, _ = encoder.encode([Message("orders", b"body-%d" % n, keys=["order-%d" % n])],
                                        inject_context()["traceparent"])
            published.append(span.get_span_context())
            [message] = decode_records(records, "broker-a")
            if n == 0:
                first = message
            else:
                second = message
    exporter.clear()
    record_receive("orders", "billing", [])
    record_receive("orders", "billing", [first, second])
    with processing("orders", "billing", [first], "host@1") as span:
        outcome(span, "CONSUME_SUCCESS", False)
    with processing("orders", "billing", [second]) as span:
        outcome(span, "RECONSUME_LATER", True)
    print(json.dumps({
        "published": [[c.trace_id, c.span_id] for c in published],
        "spans": [{"name": s.name, "trace": s.context.trace_id,
                   "parent": s.parent.span_id if s.parent else None,
                   "links": [[l.context.trace_id, l.context.span_id] for l in s.links],
                   "status": s.status.status_code.name,
                   "attributes": dict(s.attributes)} for s in exporter.get_finished_spans()]}))
''')


def test_receive_and_process_spans_follow_the_message():
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    published = result["published"]
    receive, processed, failed = result["spans"]   # nothing for the empty read
    assert receive["name"] == "orders receive" and receive["links"] == published
    assert receive["attributes"]["messaging.batch.message_count"] == 2
    assert receive["attributes"]["messaging.consumer.group.name"] == "billing"
    for span, (trace_id, span_id) in ((processed, published[0]), (failed, published[1])):
        assert span["name"] == "orders process"
        assert (span["trace"], span["parent"]) == (trace_id, span_id)
    assert processed["status"] == "UNSET" and failed["status"] == "ERROR"
    assert failed["attributes"]["tidemq.consume.status"] == "RECONSUME_LATER"
    # what the dashboard's search and message view read: the keys and the group's member
    assert processed["attributes"]["tidemq.message.keys"] == ["order-0"]
    assert processed["attributes"]["messaging.client.id"] == "host@1"
    assert "messaging.client.id" not in failed["attributes"]
