"""Scoped configuration (WebSphere cell/node/server): cluster < broker group < broker.

A setting may be written at any scope; a service gets, for each setting name, the value of the
most specific scope that defines it and the key it came from, so an operator can see why a
broker runs with a given value.
"""

from __future__ import annotations

from dataclasses import dataclass

from tidemq.common.errors import InvalidArgument
from tidemq.configcenter.model import KeyValue

CONFIG_ROOT = "/tidemq/config"
# (scope name reported to callers, key segment), least specific first.
SCOPES = (("cluster", "cluster"), ("broker_group", "group"), ("broker", "broker"))


@dataclass(frozen=True)
class EffectiveSetting:
    name: str
    value: str
    scope: str
    source_key: str


def scope_prefix(segment: str, owner: str) -> str:
    return f"{CONFIG_ROOT}/{segment}/{owner}/"


def scope_prefixes(cluster: str, broker_group: str, broker: str) -> list[tuple[str, str]]:
    """(scope, key prefix) for each scope named, least specific first."""
    owners = {"cluster": cluster, "broker_group": broker_group, "broker": broker}
    prefixes = []
    for scope, segment in SCOPES:
        owner = owners[scope]
        if not owner:
            continue
        if "/" in owner:
            raise InvalidArgument(f"{scope} name {owner!r} must not contain '/'")
        prefixes.append((scope, scope_prefix(segment, owner)))
    if not prefixes:
        raise InvalidArgument("name at least one of cluster, broker_group or broker")
    return prefixes


def resolve(layers: list[tuple[str, str, list[KeyValue]]]) -> list[EffectiveSetting]:
    """Merge (scope, prefix, kvs) layers given least specific first; later layers win."""
    effective: dict[str, EffectiveSetting] = {}
    for scope, prefix, kvs in layers:
        for kv in kvs:
            name = kv.key[len(prefix):]
            if name:
                value = kv.value.decode("utf-8", "replace")
                effective[name] = EffectiveSetting(name, value, scope, kv.key)
    return [effective[name] for name in sorted(effective)]
