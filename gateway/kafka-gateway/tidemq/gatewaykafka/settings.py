"""gateway-kafka settings (every one also a flag `--name-with-dashes` and env `TIDEMQ_<NAME>`)."""

from __future__ import annotations

from dataclasses import dataclass

from tidemq.common.settings import ServiceSettings, setting

MAX_REQUEST_SIZE = 100 * 1024 * 1024   # Kafka's socket.request.max.bytes (ref)
MAX_BATCH_BYTES = 16 * 1024 * 1024     # a produced batch's decompressed records


@dataclass
class KafkaGatewaySettings(ServiceSettings):
    """TideMQ gateway-kafka: the Kafka wire protocol over TideMQ's topics."""

    port: int = setting(9092, "Kafka listener port (0 = pick a free port)")
    advertised_port: int = setting(
        0, "port Kafka clients are told to connect to (0 = the listener's own port)")
    namesrv_addrs: str = setting("127.0.0.1:9876", "name servers, 'host:port;host:port'")
    config_center: str = setting(
        "127.0.0.1:7070", "config center(s): topics are defined and producer ids taken there")
    cluster_id: str = setting("tidemq", "the cluster id Metadata answers")
    max_request_size: int = setting(
        MAX_REQUEST_SIZE, "largest request frame accepted; a larger one closes the connection "
                          "(bytes)")
    max_batch_bytes: int = setting(
        MAX_BATCH_BYTES, "largest decompressed record batch a Produce may carry (bytes)")
    auto_create_topics: bool = setting(
        False, "create a topic a Metadata request names and lets be created (Kafka's "
               "auto.create.topics.enable; off: UNKNOWN_TOPIC_OR_PARTITION)")
    default_partitions: int = setting(
        1, "partitions of an auto-created topic (Kafka's num.partitions)")
    send_timeout_s: float = setting(3.0, "overall deadline of one send, retries included (s)")
    rpc_timeout_s: float = setting(3.0, "deadline of other calls to name servers and brokers (s)")
    max_workers: int = setting(
        256, "threads for calls to TideMQ: each JoinGroup parked in a rebalance holds one")
    sasl_mechanisms: str = setting(
        "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "SASL mechanisms offered when auth_enabled (comma-separated; docs/kafka.md#security)")
    node_id: int = setting(
        -1, "this instance's Kafka node id (-1 = derived from the advertised host and port)")
    registration_ttl_s: int = setting(
        5, "lease of this instance's registration in the config center: a killed instance "
           "leaves Metadata within it (s; 0 = do not register: a single instance)")
