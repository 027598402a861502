"""gateway-grpc settings (every one also a flag `--name-with-dashes` and env `TIDEMQ_<NAME>`)."""

from __future__ import annotations

from dataclasses import dataclass

from tidemq.common.settings import ServiceSettings, setting

MAX_BODY_SIZE = 4 * 1024 * 1024  # docs/client.md, Messages


@dataclass
class GrpcGatewaySettings(ServiceSettings):
    """TideMQ gateway-grpc: RocketMQ 5's MessagingService for the official RocketMQ clients."""

    port: int = setting(8081, "gRPC port of the MessagingService (0 = pick a free port)")
    namesrv_addrs: str = setting("127.0.0.1:9876", "name servers, 'host:port;host:port'")
    producer_group: str = setting(
        "tidemq-gateway-grpc", "producer group of the gateway's sends; brokers check back "
                               "its transactions, which the gateway forwards to clients")
    send_timeout_s: float = setting(3.0, "overall deadline of one send, retries included (s)")
    rpc_timeout_s: float = setting(3.0, "deadline of other calls to name servers and brokers (s)")
    long_polling_timeout_s: int = setting(
        20, "longest hold of a ReceiveMessage with nothing to receive; told to consumers (s)")
    receive_batch_size: int = setting(32, "messages per ReceiveMessage told to consumers (1..32)")
    default_invisible_s: float = setting(
        60.0, "invisible time of a ReceiveMessage that names none (push consumers, which "
              "ask for auto_renew: renewed before it runs out) (s)")
    auto_renew_max_s: float = setting(
        3600.0, "longest an auto-renewed message is kept invisible unacked; then it is "
                "delivered again (s)")
    max_body_size: int = setting(MAX_BODY_SIZE, "largest message body accepted (bytes)")
    max_workers: int = setting(
        256, "server threads: each open Telemetry stream and each long-polled "
             "ReceiveMessage holds one")
