"""gateway-grpc: RocketMQ 5's `apache.rocketmq.v2.MessagingService` over TideMQ's brokers
(docs/rocketmq-compat.md), so the official RocketMQ 5 clients work unmodified.

Like the RocketMQ proxy in cluster mode, it names itself as every queue's broker address:
clients talk only to the gateway, which sends, pops, acks and ends transactions on the
brokers through the TideMQ client library. Layers: `handles` (the ids clients hand back),
`messages` and `statuses` (protobuf <-> domain), `proxy` and `sessions` (domain, no gRPC),
`servicer` (transport).
"""
