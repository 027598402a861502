"""Idempotent sends: a per-producer table of stored unique ids that drops replayed records
(docs/idempotence.md)."""

from tidemq.broker.idempotence.service import IdempotentSends, IdempotentSettings
from tidemq.broker.idempotence.table import PROP_PRODUCER_ID, ProducerTable, StoredAt

__all__ = ["PROP_PRODUCER_ID", "IdempotentSends", "IdempotentSettings", "ProducerTable",
           "StoredAt"]
