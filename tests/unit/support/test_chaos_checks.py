"""The chaos suite's verdicts must catch what they claim to catch."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.chaos.consumers import drained
from tests.chaos.schedule import (
    CI_FAULTS,
    CI_SEED,
    CONTROL_PLANE_KINDS,
    HELD_PAST_LEASE,
    KINDS,
    schedule,
)
from tests.chaos.verify import (
    Ack,
    ConfigAck,
    Delivery,
    Verdict,
    check_acks,
    check_config,
    check_config_writes,
    check_consumption,
    check_replicas,
    check_revisions,
    consumption_summary,
    epoch_conflicts,
    master_grants,
    outages_by_kind,
    summary,
)


def test_every_ack_found_is_clean_and_a_retried_copy_is_a_duplicate():
    stored = {(0, 0): b"a", (0, 1): b"b", (1, 0): b"b"}
    verdict = check_acks([Ack(0, 0, b"a"), Ack(1, 0, b"b")], stored)
    assert verdict.ok and verdict.acks == 2 and verdict.duplicates == 1


def test_a_missing_or_overwritten_ack_is_a_loss():
    stored = {(0, 0): b"other"}
    verdict = check_acks([Ack(0, 0, b"a"), Ack(0, 1, b"b")], stored)
    assert not verdict.ok
    assert [(a.queue_offset) for a in verdict.losses] == [0, 1]


def _write_log(directory, data: bytes, segment: int) -> None:
    directory.mkdir()
    for base in range(0, len(data), segment):
        (directory / f"{base:020d}").write_bytes(data[base:base + segment].ljust(segment, b"\0"))


def test_replicas_compared_byte_for_byte_below_the_confirmed_offset(tmp_path):
    data = bytes(range(256)) * 10
    _write_log(tmp_path / "a", data, 1024)
    _write_log(tmp_path / "b", data[:2000] + b"X" * 560, 1024)   # differs only past 2000
    logs = {"a": tmp_path / "a", "b": tmp_path / "b"}
    assert check_replicas(logs, 2000) == []
    assert check_replicas(logs, 2001) == ["b"]


@given(st.integers(0, 2**32), st.integers(0, 40))
def test_a_seed_replays_the_same_schedule(seed, count):
    first = schedule(seed, count, lease_ttl_s=3)
    assert first == schedule(seed, count, lease_ttl_s=3)
    assert all(f.kind in KINDS for f in first)
    assert all(f.hold_s > 3 for f in first if f.kind in HELD_PAST_LEASE)


def test_the_ci_schedule_hits_the_control_plane():
    kinds = {f.kind for f in schedule(CI_SEED, CI_FAULTS, lease_ttl_s=2)}
    assert kinds & set(CONTROL_PLANE_KINDS), kinds


# -- config writes: one writer's compare-and-set increments ----------------------------------
def _history(*pairs):
    return list(pairs)


def test_config_writes_all_in_the_history_and_below_the_final_value_are_kept():
    acks = [ConfigAck(1, 10), ConfigAck(2, 14), ConfigAck(3, 15)]
    assert check_config_writes(acks, 3, _history((10, 1), (14, 2), (15, 3))) == []
    # a put applied but never acknowledged (value 4) is in the history: no loss either
    assert check_config_writes(acks, 4, _history((10, 1), (14, 2), (15, 3), (16, 4))) == []


def test_a_final_value_below_an_acknowledged_one_is_a_lost_write():
    acks = [ConfigAck(1, 10), ConfigAck(2, 14)]
    assert check_config_writes(acks, 1, _history((10, 1))) == [ConfigAck(2, 14)]


def test_an_acknowledged_value_rewritten_at_another_revision_was_lost():
    # the store forgot value 2 at revision 14; the writer read 1 again and wrote 2 at 17
    acks = [ConfigAck(1, 10), ConfigAck(2, 14), ConfigAck(2, 17)]
    assert check_config_writes(acks, 2, _history((10, 1), (17, 2))) == [ConfigAck(2, 14)]
    # the same revision holding another value is no better
    assert check_config_writes([ConfigAck(5, 30)], 6, _history((30, 6))) == [ConfigAck(5, 30)]


def test_a_value_acknowledged_twice_proves_the_first_lost_even_past_the_history():
    acks = [ConfigAck(1, 10), ConfigAck(2, 14), ConfigAck(2, 19), ConfigAck(3, 20)]
    assert check_config_writes(acks, 3, _history((19, 2), (20, 3))) == [ConfigAck(2, 14)]


def test_writes_older_than_the_retained_history_are_superseded_by_the_final_value():
    acks = [ConfigAck(1, 10), ConfigAck(2, 14), ConfigAck(3, 15)]
    assert check_config_writes(acks, 3, _history((15, 3))) == []   # history keeps the last 1
    assert check_config_writes(acks, 3, []) == acks                # no history at all


def test_revisions_must_strictly_increase_in_acknowledgement_order():
    assert check_revisions([ConfigAck(1, 3), ConfigAck(2, 9), ConfigAck(3, 10)]) == []
    repeated = [ConfigAck(1, 3), ConfigAck(2, 9), ConfigAck(3, 9), ConfigAck(4, 5)]
    assert check_revisions(repeated) == [(ConfigAck(2, 9), ConfigAck(3, 9)),
                                         (ConfigAck(3, 9), ConfigAck(4, 5))]
    verdict = check_config(repeated, 4, [(3, 1), (9, 2)])
    assert not verdict.ok and len(verdict.out_of_order) == 2


@given(st.lists(st.integers(1, 5), max_size=30))
def test_a_clean_single_writer_run_passes_every_config_check(steps):
    revision, acks = 0, []
    for value, step in enumerate(steps, 1):   # other keys' writes take revisions in between
        revision += step
        acks.append(ConfigAck(value, revision))
    history = [(a.revision, a.value) for a in acks]
    assert check_config(acks, len(acks), history[-10:]).ok


# -- epochs ------------------------------------------------------------------------------
_LOG = """\
2026-11-25T21:53:14.250009Z [info     ] role change                    action=BecomeSlave epoch=0 group=chaos-a replica=0
2026-11-25T21:53:14.256711Z [info     ] role change                    action=BecomeMaster epoch=1 group=chaos-a replica=0
2026-11-25T21:53:16.158761Z [info     ] role change                    action=UpdateInSync epoch=1 group=chaos-a replica=0
2026-11-25T21:53:17.000000Z [warning  ] replica lease lost; stepping down if master error=x group=chaos-a replica=0
2026-11-25T21:53:19.256711Z [info     ] role change                    action=BecomeMaster epoch=4 group=chaos-a replica=0
"""


def test_master_grants_are_read_from_role_change_lines():
    assert master_grants(_LOG) == [(0, 1), (0, 4)]
    json_line = ('{"action": "BecomeMaster", "epoch": 7, "replica": 2, '
                 '"event": "role change"}')
    assert master_grants(json_line) == []   # console format only: what the brokers write


def test_one_epoch_granted_to_two_replicas_is_a_conflict():
    grants = master_grants(_LOG) + [(1, 2), (1, 2), (2, 3)]
    assert epoch_conflicts(grants) == {}   # a replica taking its epoch again is fine
    assert epoch_conflicts([*grants, (2, 4)]) == {4: {0, 2}}


# -- outages -----------------------------------------------------------------------------
def test_a_gap_counts_for_the_fault_in_whose_window_it_ends():
    acks = [0.0, 1.0, 1.1, 4.0, 4.1, 9.0, 9.2]
    faults = [("kill_master", 1.5), ("kill_sentinel", 4.05), ("kill_master", 8.0)]
    assert outages_by_kind(acks, faults, end=10.0) == {
        "kill_master": pytest.approx(4.9),     # 4.1 -> 9.0: the second kill_master's outage,
        "kill_sentinel": pytest.approx(0.1),   # not the kill_sentinel's it started under
    }
    assert outages_by_kind(acks, [("kill_slave", 9.5)], end=10.0) == {"kill_slave": 0.0}
    assert outages_by_kind([0.0, 5.0], [("pause_master", 1.0)], end=4.0) == {
        "pause_master": 0.0}   # acknowledged only after the run ended: not counted


def test_the_summary_line_names_every_verdict():
    line = summary(7, 2, Verdict(acks=5), 1.25, 0, check_config([ConfigAck(1, 2)], 1, [(2, 1)]),
                   {}, {"kill_redis_master": (1.5, 2.25)})
    assert line.startswith("chaos seed=7 faults=2 acks=5 losses=0")
    assert "config_acks=1 config_lost=0 revisions_out_of_order=0" in line
    assert "epoch_conflicts=0" in line
    assert "kill_redis_master:1.50/2.25s" in line


def handed(body: bytes, at: float, queue_offset: int = 0, topic: str = "chaos") -> Delivery:
    return Delivery(topic, 0, queue_offset, body, "chaos-a", at)


STORED = {"chaos": {(0, 0): b"a", (0, 1): b"b"}, "%RETRY%g": {(0, 0): b"a"}}
ACKS = [Ack(0, 0, b"a"), Ack(0, 1, b"b")]


def test_a_group_handed_every_acknowledged_message_as_stored_passes():
    verdict = check_consumption("g", ACKS, [handed(b"a", 1.0), handed(b"b", 1.0, 1),
                                            handed(b"a", 2.0, 0, "%RETRY%g")], STORED)
    assert verdict.ok and verdict.deliveries == 3 and verdict.redelivered == 1


def test_an_acknowledged_message_never_handed_over_is_a_loss():
    verdict = check_consumption("g", ACKS, [handed(b"a", 1.0)], STORED)
    assert not verdict.ok and verdict.losses == [b"b"]


def test_a_record_the_final_log_does_not_hold_there_is_a_phantom_read():
    """Handed b"x" at an offset that ends up holding b"b" (a truncated tail served), and a
    retry record at an offset past the final retry queue."""
    ghost, late = handed(b"x", 1.0, 1), handed(b"b", 2.0, 5, "%RETRY%g")
    verdict = check_consumption("g", ACKS, [handed(b"a", 1.0), handed(b"b", 1.0, 1), ghost,
                                            late], STORED)
    assert not verdict.ok and verdict.phantoms == [ghost, late] and not verdict.losses


def test_a_pop_left_unacked_must_come_back_and_an_acked_one_coming_back_is_counted():
    deliveries = [handed(b"a", 1.0), handed(b"b", 1.0, 1), handed(b"a", 3.0, 0, "%RETRY%g"),
                  handed(b"b", 4.0, 1)]
    verdict = check_consumption("g", ACKS, deliveries, STORED, acked=[(b"b", 1.1)],
                                unacked=[(b"a", 1.0)], promotions=[(1.5, 2.5)])
    assert verdict.ok and verdict.unacked == 1 and verdict.returned_across_promotion == 1
    assert verdict.redelivered_after_ack == [(1.1, deliveries[3])]
    stuck = check_consumption("g", ACKS, deliveries[:2], STORED, unacked=[(b"a", 1.0)])
    assert not stuck.ok and stuck.not_returned == [b"a"]


def test_the_consumer_summary_names_every_figure():
    line = consumption_summary([check_consumption("chaos-pop", ACKS, [handed(b"a", 1.0)],
                                                  STORED)])
    assert line.startswith("chaos-pop:deliveries=1 losses=1 phantom_reads=0 redelivered=0 "
                           "redelivered_after_ack=0 unacked=0 unacked_not_returned=0")


def test_the_drain_waits_for_every_ack_in_every_group_and_every_unacked_pop_back():
    def reader(deliveries, unacked=()):
        return SimpleNamespace(deliveries=deliveries, unacked=list(unacked),
                               bodies=lambda: {d.body for d in deliveries})

    both = [handed(b"a", 1.0), handed(b"b", 1.0, 1)]
    pop = reader(both, unacked=[(b"a", 1.0)])
    assert not drained([pop, reader(both)], ACKS, pop)          # b"a" not back yet
    pop.deliveries.append(handed(b"a", 5.0, 0, "%RETRY%g"))
    assert drained([pop, reader(both)], ACKS, pop)
    assert not drained([pop, reader(both[:1])], ACKS, pop)      # the other group lacks b"b"
