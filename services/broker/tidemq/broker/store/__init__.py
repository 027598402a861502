"""The broker's message store (docs/storage.md): CommitLog, consume queues, index, flush, recovery.

Domain code only (no gRPC, no Flask); the broker service adapts it to the wire.
"""

from .config import (
    AppendResult,
    AppendStatus,
    FlushFailed,
    FlushMode,
    GetResult,
    GetStatus,
    InvalidBatch,
    MessageNotFound,
    MessageTooLarge,
    NotEnoughReplicas,
    NotMaster,
    ReplicationGap,
    StorageFull,
    StoreClosed,
    StoreConfig,
    StoreError,
)
from .disk import DiskGuard, DiskState, DiskUsage
from .metadata import MetadataFile
from .store import MessageStore, StartupReport

__all__ = [
    "AppendResult", "AppendStatus", "DiskGuard", "DiskState", "DiskUsage", "FlushFailed", "FlushMode", "GetResult", "GetStatus", "InvalidBatch",
    "MessageNotFound", "MessageStore", "MessageTooLarge", "MetadataFile", "NotEnoughReplicas",
    "NotMaster", "ReplicationGap", "StartupReport",
    "StoreClosed", "StoreConfig", "StoreError", "StorageFull",
]
