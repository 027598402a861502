"""gateway-kafka: the Kafka wire protocol over TideMQ topics (docs/kafka.md)."""
