"""Authentication (RocketMQ 5's HMAC signature) and ACLs, free of any transport.

Kept import-light (no prometheus_client): the HTTP gateway imports parts of this package before
it may import prometheus_client (multiprocess mode is chosen at that first import). The guard
is `tidemq.common.auth.guard.AuthGuard`.
"""

from tidemq.common.auth.acl import AclTable, Action, Decision, Permission, Rule, User
from tidemq.common.auth.signature import Credentials, signed_metadata

__all__ = ["AclTable", "Action", "Credentials", "Decision", "Permission", "Rule", "User",
           "signed_metadata"]
