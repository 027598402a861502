"""The chaos run's Kafka verdict (tests.chaos.kafka_clients.check_kafka) catches what it claims
to catch."""

from __future__ import annotations

from tests.chaos.kafka_clients import KafkaAck, KafkaDelivery, check_kafka

LOG = {(0, 0): b"a", (0, 1): b"b", (1, 0): b"c"}
ENDS = {0: 2, 1: 1}
ACKS = [KafkaAck(0, 0, b"a"), KafkaAck(0, 1, b"b"), KafkaAck(1, 0, b"c")]
ALL = [KafkaDelivery(p, o, v, 0) for (p, o), v in LOG.items()]


def test_every_ack_stored_once_consumed_and_committed_passes():
    redelivered = [*ALL, KafkaDelivery(0, 0, b"a", 1)]   # after a rebalance: counted only
    verdict = check_kafka(ACKS, LOG, redelivered, {0: 2, 1: 1}, ENDS)
    assert verdict.ok and verdict.redelivered == 1 and verdict.stored == 3


def test_an_ack_without_offset_is_judged_by_its_partition():
    acks = [*ACKS[:2], KafkaAck(1, None, b"c")]
    assert check_kafka(acks, LOG, ALL, {0: 2, 1: 1}, ENDS).ok
    verdict = check_kafka([KafkaAck(0, None, b"c")], LOG, ALL, {0: 2, 1: 1}, ENDS)
    assert verdict.misplaced == [KafkaAck(0, None, b"c")] and not verdict.ok


def test_a_record_missing_misplaced_or_stored_twice_fails():
    log = {(0, 0): b"a", (0, 1): b"a", (1, 0): b"x"}
    acks = [KafkaAck(0, 0, b"a"), KafkaAck(0, 1, b"b"), KafkaAck(1, 1, b"x")]
    verdict = check_kafka(acks, log, ALL, {0: 2, 1: 2}, {0: 2, 1: 2})
    assert verdict.lost == [acks[1]]
    assert verdict.misplaced == [acks[2]]
    assert verdict.duplicated == [b"a"]
    assert not verdict.ok


def test_a_record_the_group_never_got_or_a_phantom_read_fails():
    phantom = KafkaDelivery(1, 0, b"gone", 1)
    verdict = check_kafka(ACKS, LOG, [*ALL[:2], phantom], {0: 2, 1: 1}, ENDS)
    assert verdict.not_consumed == [ACKS[2]] and verdict.phantoms == [phantom]
    assert not verdict.ok


def test_commits_short_of_the_end_fail_and_nothing_judged_fails():
    verdict = check_kafka(ACKS, LOG, ALL, {0: 1}, ENDS)
    assert verdict.uncommitted == {0: (1, 2), 1: (-1, 1)} and not verdict.ok
    assert not check_kafka([], {}, [], {}, {}).ok
