"""Gateway settings (every one also a flag `--name-with-dashes` and env `TIDEMQ_<NAME>`)."""

from __future__ import annotations

from dataclasses import dataclass

from tidemq.common.settings import ServiceSettings, setting

MAX_MESSAGE_SIZE = 4 * 1024 * 1024  # docs/client.md, Messages


@dataclass
class GatewaySettings(ServiceSettings):
    """TideMQ HTTP gateway: REST/JSON over the client library, served by gunicorn."""

    port: int = setting(8080, "HTTP port (0 = pick a free port)")
    namesrv_addrs: str = setting("127.0.0.1:9876", "name servers, 'host:port;host:port'")
    config_center: str = setting("127.0.0.1:7070", "config-center address(es), 'h:p,h:p'")
    redis_url: str = setting("", "Redis for circuit-breaker state and client-quota counters shared "
                             "by workers ('' = per worker); "
                             "rediss://host:port/db for TLS")
    redis_password_file: str = setting("", "file holding the Redis password (its requirepass); "
                                       "keeps it off the command line and out of the URL")
    redis_ca_file: str = setting("", "CA that signs the Redis server's certificate (a rediss:// URL)")
    workers: int = setting(2, "gunicorn worker processes")
    threads: int = setting(
        64, "threads per worker (gthread): concurrent requests per worker; all but 4 may be "
            "parked in a long-polled pop or fetch (long_polls.py)")
    send_timeout_s: float = setting(3.0, "overall deadline of one send, retries included")
    rpc_timeout_s: float = setting(3.0, "deadline of other calls to name servers and brokers")
    send_retries: int = setting(2, "send retries on another broker group after a failure")
    topic_visible_timeout_s: float = setting(
        10.0, "how long POST /v1/topics waits for the route to appear (then 202)")
    max_message_size: int = setting(MAX_MESSAGE_SIZE, "largest message body accepted (bytes)")
    max_pull_messages: int = setting(1000, "largest `max` accepted by the fetch endpoint")
    max_pull_wait_ms: int = setting(10_000, "longest long-poll `wait_ms` accepted by fetch")
    breaker_fail_max: int = setting(5, "consecutive transport failures that open a breaker")
    breaker_reset_s: float = setting(10.0, "seconds a breaker stays open before a trial call")
    cluster_name: str = setting("DefaultCluster",
                                "config-center cluster scope of the gateway's dynamic settings")
    config_group: str = setting(
        "gateway", "config-center group scope (overrides the cluster's) of dynamic settings")
    dynamic_settings: bool = setting(
        True, "follow breaker_fail_max / breaker_reset_s in the config center, live")
    worker_timeout_s: int = setting(30, "gunicorn kills a worker silent for this long")
    transaction_ttl_s: int = setting(
        60, "an HTTP transaction neither committed nor rolled back this long after it was "
            "opened expires: its messages are rolled back at their check-back (s)")

    trace_ui_url: str = setting(
        "http://127.0.0.1:16686", "the tracing dashboard the web console links messages to "
                                  "('' = no trace links); only linked, never called")

    @property
    def max_request_bytes(self) -> int:
        """Largest accepted request: one max-size body as base64, plus JSON framing."""
        return self.max_message_size * 4 // 3 + 64 * 1024
