"""Replication of the store : roles, the replication
gate, leader epochs, the HA byte stream between master and slaves, the in-sync set.

Domain and asyncio only (no gRPC): the broker's role layer (`tidemq.broker.replication`) starts an `HAServer` on a
master's event loop and an `HAClient` on a slave's, and sets a `ReplicationGate` on the store.
"""

from .client import HAClient, HandshakeRefused
from .config import HAConfig
from .epoch import EpochEntry, EpochFile
from .gate import ReplicationGate
from .in_sync import InSyncTracker
from .server import HAServer

__all__ = ["EpochEntry", "EpochFile", "HAClient", "HAConfig", "HAServer", "HandshakeRefused",
           "InSyncTracker", "ReplicationGate"]
