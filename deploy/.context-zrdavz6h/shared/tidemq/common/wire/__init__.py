"""TideMQ's wire protocol: the broker's hot calls (send, pull, pop, ack, change invisible
duration) as length-prefixed frames over one TCP connection per broker, beside gRPC.

Why: a unary gRPC call costs a Python broker about 430 µs of CPU before any work is done, a
framed request on the same event loop about 20 µs (docs/consumption.md, "Speed"). Kafka and
RocketMQ 4 speak framed binary protocols of their own for the same reason. The frames carry
the very protobuf messages of BrokerService, so each call means exactly what it means over gRPC:
the broker runs the same servicer method, with the same ACL check and the same errors.

- `frames`: the byte layout (pure functions, property-tested).
- `methods`: which BrokerService methods travel this way, with their message classes.
- `server`: the asyncio protocol the broker serves on its event loop.
- `client`: one multiplexed connection per broker, and when to use it instead of gRPC.
"""
