"""Users and ACL rules, and the decision whether a user may act on a resource.

A rule names a user (or `*` for every user), a resource pattern (`topic:orders`,
`topic:orders-*` for a prefix, `group:*`), actions (PUB, SUB, ADMIN), a decision (allow or
deny) and optionally source IP ranges (CIDR; none = any address). For each permission a
request needs: a matching deny wins, else a matching allow grants it, else it is denied
(default deny, as RocketMQ 5's ACL). Admin users are super users: every permission is theirs.

They live in the config center as JSON: `/tidemq/acl/users/<access key>` and
`/tidemq/acl/rules/<rule id>` (tidemq.configclient.acl follows them live).
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum

ACL_PREFIX = "/tidemq/acl/"
USERS_PREFIX = ACL_PREFIX + "users/"
RULES_PREFIX = ACL_PREFIX + "rules/"
RESOURCE_KINDS = ("topic", "group", "cluster")


class Action(StrEnum):
    PUB = "PUB"
    SUB = "SUB"
    ADMIN = "ADMIN"


class Decision(StrEnum):
    ALLOW = "allow"
    DENY = "deny"


class AclError(ValueError):
    """A user or rule definition that cannot be used (bad JSON, unknown action, bad CIDR)."""


@dataclass(frozen=True)
class Permission:
    """One thing a request needs: `action` on resource `kind:name`."""

    kind: str
    name: str
    action: Action

    def __str__(self) -> str:
        return f"{self.action} on {self.kind} {self.name!r}"


@dataclass(frozen=True)
class User:
    access_key: str
    secret_key: str
    admin: bool = False

    def __repr__(self) -> str:
        return f"User(access_key={self.access_key!r}, admin={self.admin})"

    def to_json(self) -> str:
        return json.dumps({"access_key": self.access_key, "secret_key": self.secret_key,
                           "admin": self.admin})

    @classmethod
    def from_json(cls, raw: bytes | str) -> User:
        try:
            doc = json.loads(raw)
            user = cls(str(doc["access_key"]), str(doc["secret_key"]), bool(doc.get("admin")))
        except (ValueError, KeyError, TypeError) as exc:
            raise AclError(f"user definition is not valid: {exc}") from None
        if not user.access_key or not user.secret_key:
            raise AclError("a user needs a non-empty access key and secret key")
        return user


def parse_resource(resource: str) -> tuple[str, str]:
    kind, sep, name = resource.partition(":")
    if not sep or kind not in RESOURCE_KINDS or not name:
        raise AclError(f"resource {resource!r} is not <{'|'.join(RESOURCE_KINDS)}>:<name>, "
                       "<name> exact, a prefix ending in '*', or '*'")
    return kind, name


@dataclass(frozen=True)
class Rule:
    id: str
    user: str  # an access key, or '*' for every user
    resource: str  # kind:name, kind:prefix*, kind:*
    actions: frozenset[Action]
    decision: Decision = Decision.ALLOW
    source_ips: tuple[str, ...] = ()
    _networks: tuple = field(default=(), repr=False, compare=False)
    _match: tuple = field(default=(), repr=False, compare=False)  # (kind, name, is_prefix)

    def __post_init__(self) -> None:
        kind, pattern = parse_resource(self.resource)
        is_prefix = pattern.endswith("*")
        object.__setattr__(self, "_match", (kind, pattern[:-1] if is_prefix else pattern,
                                            is_prefix))
        if not self.actions:
            raise AclError(f"rule {self.id!r} names no actions")
        try:
            networks = tuple(ipaddress.ip_network(cidr, strict=False) for cidr in self.source_ips)
        except ValueError as exc:
            raise AclError(f"rule {self.id!r}: {exc}") from None
        object.__setattr__(self, "_networks", networks)

    @classmethod
    def create(cls, id: str, user: str, resource: str, actions: Iterable[str],  # noqa: A002
               decision: str = "allow", source_ips: Iterable[str] = ()) -> Rule:
        try:
            parsed = frozenset(Action(a.strip().upper()) for a in actions)
            verdict = Decision(decision.strip().lower())
        except ValueError as exc:
            raise AclError(f"rule {id!r}: {exc}") from None
        return cls(id, user, resource, parsed, verdict, tuple(source_ips))

    def covers(self, access_key: str, permission: Permission, ip: str) -> bool:
        if self.user not in ("*", access_key) or permission.action not in self.actions:
            return False
        kind, name, is_prefix = self._match
        if kind != permission.kind:
            return False
        if not (permission.name.startswith(name) if is_prefix else permission.name == name):
            return False
        return not self._networks or _in_networks(ip, self._networks)

    def to_json(self) -> str:
        return json.dumps({"id": self.id, "user": self.user, "resource": self.resource,
                           "actions": sorted(self.actions), "decision": str(self.decision),
                           "source_ips": list(self.source_ips)})

    @classmethod
    def from_json(cls, raw: bytes | str) -> Rule:
        try:
            doc = json.loads(raw)
            return cls.create(str(doc["id"]), str(doc["user"]), str(doc["resource"]),
                              doc["actions"], doc.get("decision", "allow"),
                              doc.get("source_ips") or ())
        except (ValueError, KeyError, TypeError) as exc:
            raise AclError(f"rule definition is not valid: {exc}") from None


def _in_networks(ip: str, networks: tuple) -> bool:
    try:
        address = ipaddress.ip_address(ip)
    except ValueError:
        return False  # an unknown peer matches no range
    return any(address.version == net.version and address in net for net in networks)


@dataclass(frozen=True)
class Verdict:
    allowed: bool
    permission: Permission | None = None  # the first permission refused
    rule_id: str = ""  # the deny rule that refused it ('' = no rule allowed it)


ALLOWED = Verdict(True)


@dataclass(frozen=True)
class AclTable:
    users: Mapping[str, User] = field(default_factory=dict)
    rules: tuple[Rule, ...] = ()
    # rules that can apply to a user: theirs and the '*' ones (a check scans only those)
    _by_user: Mapping[str, tuple[Rule, ...]] = field(default_factory=dict, repr=False,
                                                     compare=False)

    def __post_init__(self) -> None:
        anyone = tuple(rule for rule in self.rules if rule.user == "*")
        by_user: dict[str, tuple[Rule, ...]] = {"*": anyone}
        for rule in self.rules:
            if rule.user != "*" and rule.user not in by_user:
                by_user[rule.user] = tuple(r for r in self.rules if r.user in ("*", rule.user))
        object.__setattr__(self, "_by_user", by_user)

    def decide(self, access_key: str, ip: str, needs: Iterable[Permission]) -> Verdict:
        user = self.users.get(access_key)
        if user is not None and user.admin:
            return ALLOWED
        candidates = self._by_user.get(access_key, self._by_user["*"])
        for permission in needs:
            matching = [rule for rule in candidates if rule.covers(access_key, permission, ip)]
            denying = next((r for r in matching if r.decision is Decision.DENY), None)
            if denying is not None:
                return Verdict(False, permission, denying.id)
            if not matching:
                return Verdict(False, permission)
        return ALLOWED

    @classmethod
    def from_entries(cls, entries: Mapping[str, bytes]) -> tuple[AclTable, list[str]]:
        """The table from config-center keys under ACL_PREFIX, plus a sentence per entry that
        could not be used (skipped, so one bad rule does not open or close everything)."""
        users: dict[str, User] = {}
        rules: list[Rule] = []
        problems: list[str] = []
        for key, raw in sorted(entries.items()):
            try:
                if key.startswith(USERS_PREFIX):
                    user = User.from_json(raw)
                    users[user.access_key] = user
                elif key.startswith(RULES_PREFIX):
                    rules.append(Rule.from_json(raw))
            except AclError as exc:
                problems.append(f"{key}: {exc}")
        return cls(users, tuple(rules)), problems
