"""gateway-kafka settings (every one also a flag `--name-with-dashes` and env `TIDEMQ_<NAME>`)."""

from __future__ import annotations

from dataclasses import dataclass

from tidemq.common.settings import ServiceSettings, SettingsError, setting

MAX_REQUEST_SIZE = 100 * 1024 * 1024   # Kafka's socket.request.max.bytes (ref)
MAX_BATCH_BYTES = 16 * 1024 * 1024     # a produced batch's decompressed records
PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")   # Kafka's security.protocol


@dataclass
class KafkaGatewaySettings(ServiceSettings):
    """TideMQ gateway-kafka: the Kafka wire protocol over TideMQ's topics."""

    port: int = setting(9092, "Kafka listener port (0 = pick a free port)")
    advertised_port: int = setting(
        0, "port Kafka clients are told to connect to (0 = the listener's own port)")
    external_port: int = setting(
        -1, "a second, external Kafka listener's port, for clients that cannot reach "
            "advertised_host (e.g. the host of a compose network; -1 = none, 0 = pick a free "
            "port; docs/kafka.md#listeners)")
    external_advertised_addr: str = setting(
        "", "host:port clients of the external listener are told to connect to ('' = "
            "advertised_host and the external listener's own port)")
    security_protocol: str = setting(
        "", "the internal listener's security protocol: PLAINTEXT, SSL, SASL_PLAINTEXT or "
            "SASL_SSL ('' = SASL_ with auth_enabled, SSL with tls_cert_file; "
            "docs/kafka.md#listeners)")
    external_security_protocol: str = setting(
        "", "the external listener's security protocol (Kafka's listener.security.protocol.map; "
            "'' = the internal listener's)")
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

    def __post_init__(self) -> None:
        if not 0 <= self.port <= 65535:
            raise SettingsError(f"port must be 0..65535, got {self.port}")
        if not 0 <= self.advertised_port <= 65535:
            raise SettingsError(f"advertised_port must be 0..65535 (0 = the listener's own "
                                f"port), got {self.advertised_port}")
        if not -1 <= self.external_port <= 65535:
            raise SettingsError(f"external_port must be -1 (no external listener), 0 (a free "
                                f"port) or a port up to 65535, got {self.external_port}")
        if self.external_port > 0 and self.external_port == self.port:
            raise SettingsError(f"external_port {self.external_port} is the internal "
                                "listener's port: give the external listener a port of its own")
        if self.external_advertised_addr and self.external_port < 0:
            raise SettingsError("external_advertised_addr is set but there is no external "
                                "listener: set external_port too")
        if self.external_advertised_addr:
            self.external_endpoint()   # raises on a malformed address
        if self.external_security_protocol and self.external_port < 0:
            raise SettingsError("external_security_protocol is set but there is no external "
                                "listener: set external_port too")
        for name in ("security_protocol", "external_security_protocol"):
            self._check_protocol(name, getattr(self, name).strip().upper())

    def _check_protocol(self, name: str, protocol: str) -> None:
        if not protocol:
            return
        if protocol not in PROTOCOLS:
            raise SettingsError(f"{name} must be one of {', '.join(PROTOCOLS)}, got "
                                f"{getattr(self, name)!r}")
        if protocol.endswith("SSL") and not (self.tls_cert_file and self.tls_key_file):
            raise SettingsError(f"{name} {protocol} needs a certificate: set tls_cert_file and "
                                "tls_key_file")
        if protocol.startswith("SASL_") and not self.auth_enabled:
            raise SettingsError(f"{name} {protocol} needs auth_enabled: SASL authenticates "
                                "TideMQ's ACL users")

    def listener_protocols(self) -> tuple[str, str]:
        """(internal, external) security protocols, the defaults resolved."""
        internal = (self.security_protocol.strip().upper()
                    or ("SASL_" if self.auth_enabled else "")
                    + ("SSL" if self.tls_cert_file else "PLAINTEXT"))
        return internal, self.external_security_protocol.strip().upper() or internal

    def external_endpoint(self) -> tuple[str, int] | None:
        """external_advertised_addr as (host, port), None when not set."""
        addr = self.external_advertised_addr.strip()
        if not addr:
            return None
        host, sep, port = addr.rpartition(":")
        host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
        if not sep or not host or not port.isdigit() or not 1 <= int(port) <= 65535:
            raise SettingsError(f"external_advertised_addr must be host:port with a port "
                                f"1..65535, got {self.external_advertised_addr!r}")
        return host, int(port)
