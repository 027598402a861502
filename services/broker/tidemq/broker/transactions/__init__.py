"""Transactional messages: half/op system topics, EndTransaction and check-backs."""

from tidemq.broker.transactions.book import TransactionBook, TxnState
from tidemq.broker.transactions.service import (
    HALF_TOPIC,
    OP_TOPIC,
    CheckSettings,
    TransactionService,
)

__all__ = ["HALF_TOPIC", "OP_TOPIC", "CheckSettings", "TransactionBook", "TransactionService",
           "TxnState"]
