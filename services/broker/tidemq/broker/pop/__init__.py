"""Pop consumption: receipt handles, invisible time and revive, kept in the revive log."""

from tidemq.broker.pop.book import PopBook
from tidemq.broker.pop.service import AckOutcome, Popped, PopService, revive_topic

__all__ = ["AckOutcome", "PopBook", "PopService", "Popped", "revive_topic"]
