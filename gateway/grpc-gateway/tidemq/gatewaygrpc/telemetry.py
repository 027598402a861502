"""The Telemetry stream's protobuf side: the settings the gateway answers a client's Settings
with, and a check-back as a RecoverOrphanedTransactionCommand.

The answer is what the RocketMQ proxy sends: the client's own settings back, plus the
server-side choices: a producer's send backoff and body limit, a consumer's FIFO flag, batch
size, long-polling timeout and (push consumers) the redelivery backoff whose length is the
group's retry_max_times + 1 attempts.
"""

from __future__ import annotations

from dataclasses import dataclass

from rocketmq.grpc_protocol import definition_pb2 as pb
from rocketmq.grpc_protocol import service_pb2
from tidemq.gatewaygrpc.messages import to_pb
from tidemq.gatewaygrpc.sessions import OrphanedTransaction
from tidemq.gatewaygrpc.statuses import ok

# RocketMQ's delay levels 3..18 after 1 s and 5 s: the push consumer's redelivery backoff
REDELIVERY_BACKOFF_S = (1, 5, 10, 30, 60, 120, 180, 240, 300, 360, 420, 480, 540, 600,
                        1200, 1800, 3600, 7200)
SEND_ATTEMPTS = 3


@dataclass(frozen=True, slots=True)
class ServerSettings:
    max_body_size: int
    long_polling_timeout_s: int
    receive_batch_size: int
    default_invisible_ms: int = 60_000   # a receive that names none (push consumers)


def settings_reply(client: pb.Settings, server: ServerSettings, *, fifo: bool = False,
                   max_attempts: int = 17) -> service_pb2.TelemetryCommand:
    """The answer to a client's Settings command."""
    settings = pb.Settings()
    settings.CopyFrom(client)
    if client.HasField("publishing"):
        settings.publishing.max_body_size = server.max_body_size
        settings.publishing.validate_message_type = True  # LITE / PRIORITY refused early
        backoff = settings.backoff_policy
        backoff.max_attempts = SEND_ATTEMPTS
        backoff.exponential_backoff.initial.nanos = 10_000_000
        backoff.exponential_backoff.max.seconds = 1
        backoff.exponential_backoff.multiplier = 2.0
    if client.HasField("subscription"):
        subscription = settings.subscription
        subscription.fifo = fifo
        subscription.receive_batch_size = server.receive_batch_size
        subscription.long_polling_timeout.seconds = server.long_polling_timeout_s
        backoff = settings.backoff_policy
        backoff.max_attempts = max_attempts
        backoff.customized_backoff.Clear()
        for seconds in REDELIVERY_BACKOFF_S:
            backoff.customized_backoff.next.add(seconds=seconds)
    settings.metric.on = False
    return service_pb2.TelemetryCommand(status=ok(), settings=settings)


def orphaned_command(orphan: OrphanedTransaction) -> service_pb2.TelemetryCommand:
    command = service_pb2.TelemetryCommand(status=ok())
    recover = command.recover_orphaned_transaction_command
    recover.transaction_id = orphan.transaction_id
    recover.message.CopyFrom(to_pb(orphan.message, topic=orphan.topic))
    return command
