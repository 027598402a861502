"""A message's spans as TideMQ's services record them: HTTP request → publish → broker Send
(store), a consumer's receive span linking to the publish span, a process span under it."""

from __future__ import annotations

from dataclasses import dataclass, replace

from tidemq.tracecollector.model import SpanRecord

from tests.unit.tracecollector.spans import make_span, new_span_id, new_trace_id


@dataclass
class MessageSpans:
    http: SpanRecord
    publish: SpanRecord
    store: SpanRecord
    receive: SpanRecord
    process: SpanRecord

    def all(self) -> list[SpanRecord]:
        return [self.http, self.publish, self.store, self.receive, self.process]


def message_spans(unique_id: str, msg_id: str, key: str, *, start: int = 0,
                  failed: bool = False, topic: str = "orders",
                  group: str = "billing") -> MessageSpans:
    trace_id = new_trace_id()
    http = make_span(trace_id, name="POST /v1/topics/{topic}/messages", service="gateway-http",
                     start=start, duration=9_000_000)
    publish = replace(make_span(
        trace_id, parent=http.span_id, name=f"{topic} publish", service="gateway-http",
        start=start + 1_000_000, duration=5_000_000, **{
            "messaging.operation": "publish", "messaging.destination.name": topic,
            "messaging.message.id": unique_id, "tidemq.message.keys": [key]}), kind="PRODUCER")
    store = make_span(trace_id, parent=publish.span_id, name="/tidemq.v1.BrokerService/Send",
                      service="broker", start=start + 2_000_000, duration=1_000_000, **{
                          "messaging.destination.name": topic,
                          "messaging.destination.partition.id": "2", "tidemq.queue_offset": 7,
                          "messaging.message.id": msg_id, "tidemq.unique_id": unique_id})
    link = {"trace_id": trace_id, "span_id": publish.span_id,
            "attributes": {"messaging.message.id": unique_id}}
    receive = replace(make_span(
        new_trace_id(), name=f"{topic} receive", service="consumer", start=start + 4_000_000,
        **{"messaging.operation": "receive", "messaging.destination.name": topic,
           "messaging.consumer.group.name": group}), kind="CONSUMER", links=[link])
    process = replace(make_span(
        trace_id, parent=publish.span_id, name=f"{topic} process", service="consumer",
        start=start + 5_000_000, status="ERROR" if failed else "UNSET", **{
            "messaging.operation": "process", "messaging.destination.name": topic,
            "messaging.consumer.group.name": group, "messaging.message.id": unique_id,
            "messaging.client.id": "host@42",
            "tidemq.consume.status": "RECONSUME_LATER" if failed else "CONSUME_SUCCESS"}),
        kind="CONSUMER", span_id=new_span_id())
    return MessageSpans(http, publish, store, receive, process)
