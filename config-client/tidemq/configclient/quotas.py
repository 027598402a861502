"""Client quotas in the config center: the live follower brokers and gateways run, and the admin
operations `tidemq quota ...` uses.

Keys (tidemq.common.quotas): `/tidemq/quotas/users/<user>` and `/tidemq/quotas/clients/<client
id>` (`<default>` for the default of each kind), a JSON object of the quotas set. Like the
ACL follower (both a TableFollower), the follower re-reads the whole prefix on any change and
swaps the table in one assignment: a change applies on the next request, without a restart.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from tidemq.common import errors
from tidemq.common.logs import get_logger
from tidemq.common.quotas import (
    QUOTAS_PREFIX,
    QuotaEntry,
    QuotaError,
    QuotaTable,
    check_entity,
    check_value,
)
from tidemq.configclient.client import ConfigClient
from tidemq.configclient.follow import TableFollower

log = get_logger(__name__)
CAS_ATTEMPTS = 10


def read_table(client: ConfigClient) -> tuple[QuotaTable, list[str], int]:
    result = client.range(QUOTAS_PREFIX)
    table, problems = QuotaTable.from_entries({kv.key: kv.value for kv in result.kvs})
    return table, problems, result.revision


class QuotaFollower(TableFollower[QuotaTable]):
    """Calls `on_table(table)` with the config center's quota table, now and on every change."""

    def __init__(self, config_center: str | ConfigClient,
                 on_table: Callable[[QuotaTable], None]) -> None:
        super().__init__(config_center, QUOTAS_PREFIX, read_table=read_table,
                         on_table=on_table, what="quotas",
                         summary=lambda table: {"entities": len(table.entries)})


class QuotaAdmin:
    """Set, list and delete quotas (an admin credential when auth is on). Each change is a
    compare-and-set on the entity's key, so two admins changing different quotas of one
    entity at once both land."""

    def __init__(self, client: ConfigClient) -> None:
        self.client = client

    def set(self, kind: str, name: str, values: Mapping[str, object]) -> QuotaEntry:
        """Set the given quotas of one entity (the others it has stay); InvalidArgument names
        a bad entity, quota name or value."""
        checked = _checked(kind, name, values)
        if not checked:
            raise errors.InvalidArgument("give at least one quota to set (e.g. "
                                         "producer_byte_rate=1048576)")
        return self._change(kind, name, lambda current: {**current, **checked})

    def delete(self, kind: str, name: str, quotas: list[str] | None = None) -> QuotaEntry | None:
        """Delete the named quotas of one entity (all of them when `quotas` is empty); the
        entity as it remains (None: it has none left). NotFound when it had none of them."""
        _checked(kind, name, {})
        for quota in quotas or ():
            try:
                check_value(quota, 1)
            except QuotaError as exc:
                raise errors.InvalidArgument(str(exc)) from None

        def without(current: dict[str, float]) -> dict[str, float]:
            gone = set(quotas or current)
            if not current or not gone & set(current):
                raise errors.NotFound(f"{kind} {name!r} has no quota "
                                      + (", ".join(sorted(gone)) if quotas else "set"),
                                      code="QUOTA_NOT_FOUND")
            return {q: v for q, v in current.items() if q not in gone}
        entry = self._change(kind, name, without)
        return entry if entry.values else None

    def list(self) -> list[QuotaEntry]:
        table, problems, _ = read_table(self.client)
        for problem in problems:
            log.warning("quota entry skipped", problem=problem)
        return sorted(table.entries.values(), key=lambda e: (e.kind, e.name))

    def _change(self, kind: str, name: str,
                change: Callable[[dict[str, float]], dict[str, float]]) -> QuotaEntry:
        key = QuotaEntry(kind, name).key
        for _ in range(CAS_ATTEMPTS):
            found = self.client.get(key)
            current: dict[str, float] = {}
            revision = 0
            if found is not None:
                revision = found.mod_revision
                try:
                    current = dict(QuotaEntry.from_key(key, found.value).values)
                except QuotaError:
                    current = {}   # an unreadable entry is replaced whole
            entry = QuotaEntry(kind, name, change(current))
            if not entry.values:
                if found is None or self.client.delete(key, expected_revision=revision).deleted:
                    return entry
                continue
            if self.client.put(key, entry.to_json(), expected_revision=revision).succeeded:
                return entry
        raise errors.Conflict(f"quota {key} kept changing under {CAS_ATTEMPTS} attempts; retry")


def _checked(kind: str, name: str, values: Mapping[str, object]) -> dict[str, float]:
    try:
        check_entity(kind, name)
        return {quota: check_value(quota, value) for quota, value in values.items()}
    except QuotaError as exc:
        raise errors.InvalidArgument(str(exc)) from None


__all__ = ["QuotaAdmin", "QuotaFollower", "read_table"]
