"""Consumer-group coordination (Kafka's GroupCoordinator) and queue assignment strategies.

Transport-free domain logic; the broker's gRPC servicer is a thin adapter over
`GroupCoordinator`. See docs/consumer-groups.md for the protocol and the API.
"""

from tidemq.common.assignors import (
    ASSIGNORS,
    DEFAULT_ASSIGNOR,
    QueueRef,
    averagely,
    averagely_by_circle,
    consistent_hash,
    get_assignor,
    sticky,
)
from tidemq.common.placement import coordinator_for
from tidemq.common.protocol import (
    assign_subscriptions,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)

from .config import CoordinatorConfig
from .coordinator import GroupCoordinator, monotonic_ms
from .errors import ERROR_CODES, CoordinatorError
from .group import REBALANCE_REASONS, DelayedJoin, GroupMetadata
from .member import UNKNOWN_MEMBER_ID, JoinedMember, JoinResult, MemberMetadata, SyncResult
from .state import GroupState, is_allowed_transition
from .ticker import CoordinatorTicker
from .views import GroupDescription, GroupOverview, MemberDescription

__all__ = [
    "ASSIGNORS",
    "DEFAULT_ASSIGNOR",
    "ERROR_CODES",
    "REBALANCE_REASONS",
    "UNKNOWN_MEMBER_ID",
    "CoordinatorConfig",
    "CoordinatorError",
    "CoordinatorTicker",
    "DelayedJoin",
    "GroupCoordinator",
    "GroupDescription",
    "GroupMetadata",
    "GroupOverview",
    "GroupState",
    "JoinResult",
    "JoinedMember",
    "MemberDescription",
    "MemberMetadata",
    "QueueRef",
    "SyncResult",
    "assign_subscriptions",
    "averagely",
    "averagely_by_circle",
    "consistent_hash",
    "coordinator_for",
    "decode_assignment",
    "decode_subscription",
    "encode_assignment",
    "encode_subscription",
    "get_assignor",
    "is_allowed_transition",
    "monotonic_ms",
    "sticky",
]
