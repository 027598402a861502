"""Which traces are recorded: everything users do, not the system's own routine calls.

Brokers heartbeat and register, replicas renew leases and copy offsets, clients watch the
config center, orchestrators probe health: each is a root span every second or so on every
process, and together they bury the traces of users' sends and reads on the dashboard. A root
span whose operation is on the quiet list is not sampled; any span under a sampled parent
follows its parent (a user's request keeps every hop), and any operation not on the list is
sampled. The decision is taken when a span starts, by name: the gRPC method for gRPC spans
(`/tidemq.v1.BrokerService/Heartbeat` → `Heartbeat`), the last path segment for HTTP ones
(`GET /healthz` → `healthz`), the API for gateway-kafka's (`kafka/Fetch` → `Fetch`); an
entry may also name a whole gRPC service (`ConfigService`: every method of it). Reads (Pull,
Pop, RocketMQ 5's ReceiveMessage, the HTTP gateway's pop, a Kafka Fetch) are on the list
because their transport span starts before anyone knows whether it finds messages: the client records a `receive` span
for each read that did, linked to the messages' publish spans (tidemq.client.consume_spans).
"""

from __future__ import annotations

from collections.abc import Iterable

from opentelemetry import trace
from opentelemetry.sdk.trace.sampling import Decision, Sampler, SamplingResult

# The control plane's own calls, made by every process on a timer: config-center reads, puts
# and leases (a broker's liveness key and replica state, a name server's controller lease: an
# idle cluster made ~10 such traces a second), registrations, in-sync-set and replication
# housekeeping, route refreshes, the RocketMQ 5 clients' heartbeats and assignment queries,
# and the console's chart polls (`GET /console/series`). A user's request that makes one of
# these calls keeps it: only roots are dropped.
CONTROL_PLANE = ("ConfigService", "RegisterBroker", "UnregisterBroker", "AlterInSyncSet",
                 "DescribeReplication", "GetBrokerInfo", "GetRouteInfo", "GetSubscriptionGroups",
                 "GetAllConsumerOffsets", "ProducerHeartbeat", "TransactionChecks", "Heartbeat",
                 "LeaseKeepAlive", "Watch", "QueryRoute", "QueryAssignment", "Telemetry")
# Offset polls: a queue's min/max offsets and a group's committed ones, which the console,
# `tidemq group describe` and every consumer's lag and start-position look-ups ask for over
# and over. A user's request that reads them (GET /v1/topics/{topic}) keeps them: only a
# root call is dropped (one from a client that records nothing was a broker-only trace).
OFFSET_POLLS = ("GetQueueOffsets", "QueryOffsets")
# `pop`: the HTTP gateway's POST .../pop, a (long) poll like the Pop it makes; its gateway
# records a `receive` span of its own for a pop that found messages. Recording and exporting
# its span and the Pop's under it took the traced gateway's profile from 1 772 to 1 418 µs of
# GIL-held time per pop + ack (docs/http-api.md, "What a request costs").
# `Fetch`: gateway-kafka's `kafka/Fetch`, a Kafka consumer's long poll (Kafka's `Heartbeat`
# is the name above); a Fetch that found messages leaves the `<topic> receive` span its read
# records, as a root of its own (gatewaykafka/handlers.py).
QUIET_BY_DEFAULT = (*CONTROL_PLANE, *OFFSET_POLLS, "Check", "Pull", "Pop", "ReceiveMessage",
                    "pop", "Fetch", "healthz", "metrics", "series")


def operation(span_name: str) -> str:
    """`/pkg.Service/Method` → `Method`; `GET /a/b` → `b`; anything else unchanged."""
    return span_name.rsplit("/", 1)[-1]


def operations(span_name: str) -> tuple[str, ...]:
    """The names a quiet entry may give for this span: its operation, and for a gRPC span
    (`/pkg.Service/Method`) its service (`Service`) too."""
    method = operation(span_name)
    if span_name.startswith("/") and span_name.count("/") == 2:
        return method, span_name[1:].split("/", 1)[0].rsplit(".", 1)[-1]
    return (method,)


def is_quiet(span_name: str, quiet: frozenset[str]) -> bool:
    return any(name in quiet for name in operations(span_name))


def parse_operations(text: str) -> frozenset[str]:
    """The `trace_quiet_operations` setting: names separated by commas or spaces."""
    return frozenset(name for name in text.replace(",", " ").split() if name)


class QuietOperationsSampler(Sampler):
    """Drops root spans of the `quiet` operations; follows the parent everywhere else.
    `quiet` may be replaced while the process runs (one attribute swap)."""

    def __init__(self, quiet: Iterable[str] = QUIET_BY_DEFAULT) -> None:
        self.quiet = frozenset(quiet)

    def should_sample(self, parent_context, trace_id, name, kind=None, attributes=None,
                      links=None, trace_state=None) -> SamplingResult:
        parent = trace.get_current_span(parent_context).get_span_context()
        if parent.is_valid:
            sampled = parent.trace_flags.sampled
            trace_state = parent.trace_state
        else:
            sampled = not is_quiet(name, self.quiet)
        return SamplingResult(Decision.RECORD_AND_SAMPLE if sampled else Decision.DROP,
                              attributes if sampled else None, trace_state)

    def get_description(self) -> str:
        return f"QuietOperationsSampler({','.join(sorted(self.quiet))})"
