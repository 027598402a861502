"""Authentication (RocketMQ 5's HMAC signature) and ACLs, free of any transport."""

from tidemq.common.auth.acl import AclTable, Action, Decision, Permission, Rule, User
from tidemq.common.auth.guard import AuthGuard, StaticAcl
from tidemq.common.auth.signature import Credentials, signed_metadata

__all__ = ["AclTable", "Action", "AuthGuard", "Credentials", "Decision", "Permission", "Rule",
           "StaticAcl", "User", "signed_metadata"]
