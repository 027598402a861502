"""ACL users and rules in the config center: the live follower services run, and the admin
operations `tidemq acl ...` uses.

Keys (tidemq.common.auth.acl): `/tidemq/acl/users/<access key>` and
`/tidemq/acl/rules/<rule id>`, JSON. The follower re-reads the whole prefix on any change (a
few hundred small keys) and swaps the table in one assignment, so a check always sees one
consistent table and a change applies without a restart.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from tidemq.common import errors
from tidemq.common.auth.acl import (
    ACL_PREFIX,
    RULES_PREFIX,
    USERS_PREFIX,
    AclError,
    AclTable,
    Rule,
    User,
)
from tidemq.common.logs import get_logger
from tidemq.configclient.client import ConfigClient
from tidemq.configclient.follow import TableFollower

if TYPE_CHECKING:  # the admin CLI loads this module too: no server machinery for it
    from tidemq.common.server import AclFollowing
    from tidemq.common.settings import ServiceSettings

log = get_logger(__name__)


class AclHolder:
    """What the follower updates: anything with a settable `table` (an AuthGuard's source)."""

    table: AclTable


def read_table(client: ConfigClient) -> tuple[AclTable, list[str], int]:
    result = client.range(ACL_PREFIX)
    table, problems = AclTable.from_entries({kv.key: kv.value for kv in result.kvs})
    return table, problems, result.revision


class AclFollower(TableFollower[AclTable]):
    """Keeps `holder.table` the config center's ACL table, now and on every change."""

    def __init__(self, config_center: str | ConfigClient, holder: AclHolder) -> None:
        super().__init__(config_center, ACL_PREFIX, read_table=read_table,
                         on_table=lambda table: setattr(holder, "table", table), what="ACL",
                         summary=lambda table: {"users": len(table.users),
                                                "rules": len(table.rules)})


def follow_acl(settings: ServiceSettings,
               config_center: Callable[[], str] = lambda: "") -> AclFollowing:
    """What a service gives its ServiceRuntime as `follow_acl`: follow the ACL in the config
    center named by `auth_config_center`, else by `config_center()` (the service's own
    setting; the config center passes its own address, known once it serves). Until the first
    read, only the process's own credentials are accepted."""

    def follow(service: str, holder: AclHolder) -> Callable[[], None]:
        address = settings.auth_config_center or config_center()
        if not address:
            raise errors.InvalidArgument(
                f"{service}: auth_enabled needs auth_config_center (or config_center) to "
                "read users and ACL rules from")
        return AclFollower(address, holder).start().close

    return follow


class AclAdmin:
    """Manage users and rules (needs an admin credential when auth is on)."""

    def __init__(self, client: ConfigClient) -> None:
        self.client = client

    def add_user(self, user: User) -> None:
        self.client.put(USERS_PREFIX + _segment(user.access_key), user.to_json())

    def remove_user(self, access_key: str) -> bool:
        return self.client.delete(USERS_PREFIX + _segment(access_key)).deleted

    def add_rule(self, rule: Rule) -> None:
        self.client.put(RULES_PREFIX + _segment(rule.id), rule.to_json())

    def remove_rule(self, rule_id: str) -> bool:
        return self.client.delete(RULES_PREFIX + _segment(rule_id)).deleted

    def table(self) -> AclTable:
        table, _, _ = read_table(self.client)
        return table

    def rekey(self) -> tuple[int, int]:
        """Write every user again as it reads, so the config center stores it sealed with its
        current encryption key (docs/security.md#secrets-at-rest): after a key rotation, and
        to encrypt users stored in plaintext before encryption was on. Each write is a
        compare-and-set on the revision read, so a user changed meanwhile is left as that
        change wrote it (under the current key too). Returns (rewritten, changed meanwhile)."""
        rewritten = changed = 0
        for kv in self.client.range(USERS_PREFIX).kvs:
            if self.client.put(kv.key, kv.value, expected_revision=kv.mod_revision).succeeded:
                rewritten += 1
            else:
                changed += 1
        return rewritten, changed


def _segment(name: str) -> str:
    if not name or "/" in name or name != name.strip():
        raise errors.InvalidArgument(f"{name!r} cannot be a key segment: it must be non-empty "
                                     "without '/' or surrounding spaces")
    return name


__all__ = ["AclAdmin", "AclError", "AclFollower", "follow_acl", "read_table"]
