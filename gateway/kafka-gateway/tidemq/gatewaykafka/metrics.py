"""Prometheus metrics of gateway-kafka (on --metrics-port, `tidemq_gateway_kafka_*`)."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

REQUESTS = Counter("tidemq_gateway_kafka_requests_total",
                   "Kafka requests answered, by API and whether an error code was in the answer",
                   ["api", "outcome"])
LATENCY = Histogram("tidemq_gateway_kafka_request_seconds", "Kafka request handling time, by API",
                    ["api"], buckets=(0.001, 0.005, 0.02, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10, 60))
UNSUPPORTED = Counter("tidemq_gateway_kafka_unsupported_total",
                      "requests of an API or version the gateway does not serve",
                      ["api_key", "api_version"])
BAD_FRAMES = Counter("tidemq_gateway_kafka_bad_frames_total",
                     "connections closed for a frame that could not be served, by reason",
                     ["reason"])
CONNECTIONS = Gauge("tidemq_gateway_kafka_connections", "open Kafka client connections")
RECORDS_PRODUCED = Counter("tidemq_gateway_kafka_records_produced_total",
                           "Kafka records stored through the gateway")
FETCH_LONG_POLLS = Counter("tidemq_gateway_kafka_fetch_long_polls_total",
                           "brokers' long polls a waiting Fetch held, by how they ended (data: a "
                           "message arrived; empty: the hold ran out; failed)", ["outcome"])
FETCH_HOLDS = Gauge("tidemq_gateway_kafka_fetch_long_polls_held",
                    "long polls held on the brokers for waiting Fetches now")
THROTTLED = Counter("tidemq_gateway_kafka_throttled_total",
                    "answers that carried a broker's throttle time to the Kafka client "
                    "(throttle_time_ms > 0), by API", ["api"])
MUTED = Counter("tidemq_gateway_kafka_muted_seconds_total",
                "time connections were not read after a throttled answer (Kafka's channel "
                "muting, KIP-219): the throttle times answered, summed")
HEADER_PROPERTIES_SKIPPED = Counter(
    "tidemq_gateway_kafka_header_properties_skipped_total",
    "produced Kafka headers not also stored as a user property (KAFKA_HEADERS keeps them all), "
    "by reason: reserved_name (a name TideMQ sets or reads, or KAFKA_...), not_utf8 (a binary "
    "value), size (a record whose copies would not fit its properties: counted once per record)",
    ["reason"])
