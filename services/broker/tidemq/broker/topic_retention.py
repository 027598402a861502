"""What a topic's settings (docs/topics.md) ask of the store's retention (store/retention.py)
and compaction (store/compaction.py).

`retention.ms` / `retention.bytes` apply when `cleanup.policy` includes `delete`: a topic that
sets `retention.ms` (to anything, -1 included) keeps its records by its own clock, so it holds
segments past the global age rule while it still reads them; one that leaves it unset follows
the global `retention_hours` at the segment level, as every topic did before per-topic
settings. A `compact` topic without `delete` keeps its records for ever (compaction, not
retention, bounds it), so it holds too; a compacted topic's live records are copied forward
out of a segment retention wants gone (`compact`: store/relocation.py), so it never pins one
(`compact,delete` only when it sets its own `retention.ms`: else its records go with their
segments by the global age rule, as with `delete`).
"""

from __future__ import annotations

from collections.abc import Callable

from tidemq.broker.store.compaction import CompactionPolicy
from tidemq.broker.store.retention import DEFAULT, QueueRetention
from tidemq.configclient.topics import TopicConfig


def topic_retention(topic: TopicConfig | None) -> QueueRetention:
    if topic is None or not topic.config:
        return DEFAULT
    config = dict(topic.config)
    policy = str(config.get("cleanup.policy", "delete"))
    compact = "compact" in policy
    if "delete" not in policy:
        return QueueRetention(holds=True, compact=compact)
    ms, size = config.get("retention.ms"), config.get("retention.bytes")
    # compact,delete without a retention.ms of its own follows the global age rule: its
    # records go with their segments then, so nothing of it is copied forward
    return QueueRetention(ms=ms if isinstance(ms, int) and ms >= 0 else None,
                          bytes=size if isinstance(size, int) and size >= 0 else None,
                          holds=ms is not None, compact=compact and ms is not None)


def policy_of(lookup: Callable[[str], TopicConfig | None]) -> Callable[[str], QueueRetention]:
    """The store's `topic_policy` over the broker's topic table (`TopicTable.get`)."""
    return lambda name: topic_retention(lookup(name))


def topic_compaction(topic: TopicConfig | None) -> CompactionPolicy | None:
    """The compaction a topic asks for: None unless its cleanup.policy includes compact."""
    if topic is None or not topic.config:
        return None
    config = dict(topic.config)
    if "compact" not in str(config.get("cleanup.policy", "delete")):
        return None
    return CompactionPolicy(min_lag_ms=int(topic.setting("min.compaction.lag.ms")),
                            delete_retention_ms=int(topic.setting("delete.retention.ms")))


def compaction_of(lookup: Callable[[str], TopicConfig | None]
                  ) -> Callable[[str], CompactionPolicy | None]:
    """The store's compactor `topic_policy` over the broker's topic table."""
    return lambda name: topic_compaction(lookup(name))
