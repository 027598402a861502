"""Idempotent sends: a per-producer table of stored unique ids that drops replayed records
(docs/idempotence.md)."""

from tidemq.broker.idempotence.service import IdempotentSends, IdempotentSettings
from tidemq.broker.idempotence.table import ProducerTable, StoredAt

__all__ = ["IdempotentSends", "IdempotentSettings", "ProducerTable",
           "StoredAt"]
