"""Transactional messages: half/op system topics, EndTransaction and check-backs."""

from tidemq.broker.transactions.book import TransactionBook, TxnState
from tidemq.broker.transactions.service import CheckSettings, TransactionService

__all__ = ["CheckSettings", "TransactionBook", "TransactionService", "TxnState"]
