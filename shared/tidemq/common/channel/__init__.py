"""The broker channel: the one way any process calls a broker (issue #37).

`BrokerChannel(addr).call("Pop", request)` — the caller names a BrokerService method and hands
its protobuf request; the channel alone decides how it travels and does the rest: the wire
protocol for the hot calls when it can, gRPC otherwise (docs/wire-protocol.md), with a deadline
on every call, the endpoint's circuit breaker, retries of idempotent calls and of calls never
written, the broker's wire port learnt from routes, a send's records framed without a copy,
and the `tidemq_rpc_calls_total{method,transport}` count. Callers (the SDK, the gateways, the
Spark source and sink) import neither `tidemq.common.wire` nor the BrokerService stubs
(tests/unit/test_import_graph.py).

- `broker`: BrokerChannel and BrokerChannels (a process's channels by address).
- `table`: every BrokerService RPC and how it travels (hot → wire, bulk field).
- `link`: the wire side of one broker (its connection, when a call may take it).
- `ports`: which wire port each broker offers (routes, else GetBrokerInfo).
- `payload`: a request whose bulk bytes are written as they are.
- `metrics`: calls by transport.
"""

from tidemq.common.channel.broker import BrokerChannel, BrokerChannels
from tidemq.common.channel.ports import learn_route

__all__ = ["BrokerChannel", "BrokerChannels", "learn_route"]
