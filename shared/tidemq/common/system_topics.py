"""The names of the topics the brokers keep for themselves (RocketMQ's names where it has them).

One home for them: the broker creates and writes these topics, the clients subscribe to a
group's retry topic or list its dead letters, and readers that take "every topic" (a Spark
`subscribePattern`, a console listing) leave them out.
"""

from __future__ import annotations

RETRY_PREFIX = "%RETRY%"  # + group: messages a group gave back, redelivered after a back-off
DLQ_PREFIX = "%DLQ%"  # + group: messages past the group's retry_max_times
SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"  # delayed messages until they are due
HALF_TOPIC = "RMQ_SYS_TRANS_HALF_TOPIC"  # prepared transactional messages
OP_TOPIC = "RMQ_SYS_TRANS_OP_HALF_TOPIC"  # their commit / rollback records
REVIVE_PREFIX = "rmq_sys_REVIVE_LOG_"  # + cluster: pop checkpoints and acks
# One record per topic deletion, its body the deleted topic's name: where it stands in the
# CommitLog, every replica's dispatcher drops that topic's consume queues (store/dispatcher.py).
DELETED_TOPICS_TOPIC = "TIDEMQ_SYS_DELETED_TOPICS"
# One record per compaction decision (topic, queue id, the queue offsets it removes): where it
# stands in the CommitLog, every replica's dispatcher marks those units as gaps
# (broker/store/compaction.py).
COMPACTION_TOPIC = "TIDEMQ_SYS_COMPACTION"
# One record per relocated record of a compacted queue (the record itself, copied forward from
# a CommitLog segment retention wants to delete): where it stands, every replica's dispatcher
# repoints that queue offset's unit at the copy (broker/store/relocation.py).
RELOCATION_TOPIC = "TIDEMQ_SYS_RELOCATED"
# One record per recalled scheduled message (its unique id): the deliverer drops it when due
# (broker/schedule/recall.py).
RECALL_TOPIC = "TIDEMQ_SYS_RECALLED"

_PREFIXES = (RETRY_PREFIX, DLQ_PREFIX, REVIVE_PREFIX)
_NAMES = frozenset({SCHEDULE_TOPIC, HALF_TOPIC, OP_TOPIC, DELETED_TOPICS_TOPIC, RECALL_TOPIC,
                    COMPACTION_TOPIC, RELOCATION_TOPIC})


def retry_topic(group: str) -> str:
    return RETRY_PREFIX + group


def dlq_topic(group: str) -> str:
    return DLQ_PREFIX + group


def is_system_topic(name: str) -> bool:
    """True for a topic of the brokers' own (retry, dead letters, timer, transactions, pop,
    topic deletions, recalls)."""
    return name in _NAMES or name.startswith(_PREFIXES)
