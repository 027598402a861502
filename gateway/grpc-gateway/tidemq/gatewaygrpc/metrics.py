"""Prometheus metrics of gateway-grpc (served on --metrics-port like every gRPC service)."""

from __future__ import annotations

from prometheus_client import Counter, Gauge

REQUESTS = Counter("tidemq_gateway_grpc_requests_total",
                   "MessagingService calls answered, by method and RocketMQ status code",
                   ["method", "code"])
MESSAGES_SENT = Counter("tidemq_gateway_grpc_messages_sent_total",
                        "messages stored through gateway-grpc", ["type"])
MESSAGES_RECEIVED = Counter("tidemq_gateway_grpc_messages_received_total",
                            "messages handed to RocketMQ consumers")
CHECKS_FORWARDED = Counter("tidemq_gateway_grpc_transaction_checks_total",
                           "broker check-backs, by whether a connected producer got them",
                           ["forwarded"])
AUTO_RENEWALS = Counter("tidemq_gateway_grpc_auto_renewals_total",
                        "invisible-time extensions of auto_renew receives")
SESSIONS = Gauge("tidemq_gateway_grpc_sessions", "open Telemetry streams (connected clients)")
THROTTLE_WAITS = Counter("tidemq_gateway_grpc_throttle_wait_seconds_total",
                         "time a RocketMQ client's calls waited out its own throttle time "
                         "before going to the brokers (client quotas, docs/quotas.md)")
