"""ListGroups' merge of the coordinator's, the pop book's and the offset table's groups."""

from __future__ import annotations

from tidemq.broker.group_listing import ListedGroup, list_groups


def test_every_way_of_consuming_is_listed_once_with_the_first_of_push_pop_pull():
    listed = list_groups(
        coordinated=[("joined", "Stable"), ("both", "Empty")],
        offsets={"joined": [("orders", 0, 3)], "pulled": [("orders", 1, 5)],
                 "both": [("orders", 0, 1)], "popped": [("%RETRY%popped", 0, 1)]},
        popping={"popped", "popper"},
        defined=lambda group: group in {"joined", "popper"})
    assert listed == [
        ListedGroup("both", "Empty", "push", False),
        ListedGroup("joined", "Stable", "push", True),
        ListedGroup("popped", "", "pop", False),
        ListedGroup("popper", "", "pop", True),
        ListedGroup("pulled", "", "pull", False),
    ]


def test_broker_bookkeeping_groups_on_system_topics_are_not_listed():
    listed = list_groups(
        coordinated=[], popping=(), defined=lambda group: False,
        offsets={"CID_SYS_RMQ_POP_SNAPSHOT": [("rmq_sys_REVIVE_LOG_c", 0, 9)],
                 "CID_SYS_RMQ_TRANS": [("RMQ_SYS_TRANS_HALF_TOPIC", 0, 1)],
                 "SCHEDULE_PROGRESS": [("SCHEDULE_TOPIC_XXXX", 3, 2), ("WHEEL", 0, 5)],
                 "someone": [("SCHEDULE_TOPIC_XXXX", 0, 1)],
                 "retrying": [("%RETRY%retrying", 0, 4)]})
    assert [g.group_id for g in listed] == ["retrying"]
