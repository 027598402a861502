"""The chaos suite's verdicts must catch what they claim to catch."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.chaos.consumers import drained
from tests.chaos.faults import ALL_FAULTS, BY_NAME, FAULTS, Hold
from tests.chaos.schedule import (
    CI_FAULTS,
    CI_SEED,
    HELD_PAST_LEASE,
    KINDS,
    schedule,
)
from tests.chaos.verify import (
    Ack,
    CasAck,
    Delivery,
    KeyAck,
    ReplicationEvent,
    Verdict,
    check_acks,
    check_consumption,
    check_controllers,
    check_elections,
    check_epochs,
    check_key_writes,
    check_register,
    check_replicas,
    check_watch,
    consumption_summary,
    controller_writes,
    epoch_conflicts,
    master_grants,
    masterless_spans,
    outages_by_kind,
    register_value,
    spans_by_kind,
    store_master_ends,
    summary,
)
from tests.support.damage import lose_tail, written_end


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


@given(st.integers(0, 2**32), st.integers(0, 40), st.booleans(), st.booleans())
def test_a_seed_replays_the_same_schedule(seed, count, every_kind, quick):
    first = schedule(seed, count, lease_ttl_s=5, every_kind=every_kind, quick=quick)
    assert first == schedule(seed, count, lease_ttl_s=5, every_kind=every_kind, quick=quick)
    assert len(first) == count and all(f.kind in KINDS for f in first)
    for fault in first:
        low, high = BY_NAME[fault.kind].hold.bounds(5, quick)
        assert low - 0.01 <= fault.hold_s <= high + 0.01
        assert 0.2 <= fault.settle_s <= (0.6 if quick else 1.5)
    assert all(f.hold_s > 5 for f in first if f.kind in HELD_PAST_LEASE)
    if every_kind and count >= len(KINDS):
        assert {f.kind for f in first[:len(KINDS)]} == set(KINDS)


def test_the_ci_schedule_draws_every_fault_kind():
    kinds = [f.kind for f in schedule(CI_SEED, CI_FAULTS, lease_ttl_s=5, every_kind=True,
                                      quick=True)]
    assert sorted(kinds) == sorted(KINDS)
    disk = {"wipe_slave", "wipe_master_after_kill", "drop_unflushed_tail",
            "slave_stopped_slave_wiped_master_killed"}
    # the disk rows unless CHAOS_DISK=0 (faults.FAULTS)
    assert disk <= set(kinds) if any(k.plane == "disk" for k in FAULTS) else not disk & set(kinds)


def test_quick_holds_shorten_only_the_short_range():
    assert Hold.SHORT.bounds(5, quick=True) == (0.2, 1.5)
    for hold in (Hold.PAST_LEASE, Hold.ELECTION, Hold.DETECTION, Hold.WAIT):
        assert hold.bounds(5, quick=True) == hold.bounds(5)
    assert Hold.WAIT.bounds(5)[0] >= 2.0   # past a killed master's detection (~1 s)


def test_the_fault_table_has_one_row_per_kind_with_what_it_needs():
    assert len(BY_NAME) == len(ALL_FAULTS) and len(FAULTS) == len(KINDS)
    for kind in ALL_FAULTS:
        assert kind.weight > 0 and callable(kind.apply) and callable(kind.undo)
        assert kind.plane in ("broker", "disk", "store")
    assert {kind.plane for kind in ALL_FAULTS} == {"broker", "disk", "store"}
    assert Hold.ELECTION.bounds(5) == (1.2, 2.5)   # just past etcd's 1 s election timeout
    low, high = Hold.DETECTION.bounds(5)
    assert 3.6 <= low < high < 5                    # around detection, below the lease
    assert BY_NAME["pause_master"].held_past_lease and not BY_NAME["kill_master"].held_past_lease


# -- config writes: distinct keys -----------------------------------------------------------
def test_every_acknowledged_key_present_with_its_value_and_revision_passes():
    acks = [KeyAck(0, "/k/0", b"0:0", 5), KeyAck(1, "/k/1", b"1:0", 6), KeyAck(0, "/k/2", b"0:1", 9)]
    final = {"/k/0": (b"0:0", 5), "/k/1": (b"1:0", 6), "/k/2": (b"0:1", 9), "/k/3": (b"x", 10)}
    verdict = check_key_writes(acks, final)
    assert verdict.ok and verdict.acks == 3   # an applied, unacknowledged key is no matter


def test_an_acknowledged_key_absent_or_rewritten_is_lost():
    acks = [KeyAck(0, "/k/0", b"0:0", 5), KeyAck(0, "/k/1", b"0:1", 6)]
    verdict = check_key_writes(acks, {"/k/1": (b"0:1", 8)})   # same value, another revision
    assert not verdict.ok and verdict.lost == acks


def test_revisions_acknowledged_to_one_writer_must_increase():
    acks = [KeyAck(0, "/k/0", b"a", 5), KeyAck(1, "/k/1", b"b", 4), KeyAck(0, "/k/2", b"c", 5)]
    final = {a.key: (a.value, a.revision) for a in acks}
    verdict = check_key_writes(acks, final)
    assert verdict.out_of_order == [(acks[0], acks[2])] and not verdict.ok


def test_the_key_verdict_fails_with_nothing_acknowledged():
    assert not check_key_writes([], {}).ok


# -- the compare-and-set register ---------------------------------------------------------
def _chain(*steps):
    """(writer, revision) steps, each based on the one before: history and acks."""
    history, acks, base = [], [], 0
    for n, (writer, revision) in enumerate(steps):
        value = register_value(writer, n, base)
        history.append((revision, value))
        acks.append(CasAck(writer, base, revision, value))
        base = revision
    return history, acks


def test_an_unbroken_chain_holding_every_ack_passes():
    history, acks = _chain((0, 3), (1, 7), (0, 8))
    verdict = check_register(acks[:2], history)   # the last write applied, its reply lost
    assert verdict.ok and verdict.writes == 3


def test_a_write_on_a_stale_base_breaks_the_chain_and_two_acks_on_one_base_fork():
    history, acks = _chain((0, 3), (1, 7))
    stale = register_value(0, 9, 3)          # compared against 3 although 7 was current
    history.append((9, stale))
    forked = CasAck(0, 3, 9, stale)
    verdict = check_register([*acks, forked], history)
    assert verdict.breaks == [(9, stale)] and verdict.forks == [(acks[1], forked)]
    assert not verdict.ok


def test_an_acknowledged_register_write_missing_from_the_history_is_lost():
    history, acks = _chain((0, 3), (1, 7))
    verdict = check_register(acks, history[:1])
    assert verdict.missing == [acks[1]] and not verdict.ok


def test_the_register_verdict_fails_with_nothing_acknowledged():
    history, _ = _chain((0, 3))
    assert not check_register([], history).ok


# -- watchers ------------------------------------------------------------------------------
def test_a_watcher_that_saw_every_change_up_to_its_last_passes():
    reference = [(3, "/a"), (4, "/b"), (6, "/a"), (9, "/c")]
    assert check_watch("w", reference[:3], reference).ok   # stopped before 9: not a skip


def test_a_skipped_or_repeated_revision_fails():
    reference = [(3, "/a"), (4, "/b"), (6, "/a")]
    skipped = check_watch("w", [(3, "/a"), (6, "/a")], reference)
    assert skipped.skipped == [(4, "/b")] and not skipped.ok
    repeated = check_watch("w", [(3, "/a"), (4, "/b"), (4, "/b"), (6, "/a")], reference)
    assert repeated.out_of_order == [(4, 4)] and not repeated.ok


def test_a_watcher_that_saw_nothing_fails():
    assert not check_watch("w", [], [(3, "/a")]).ok


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


def test_epochs_are_judged_on_the_store_history_and_the_brokers_logs_together():
    store = [(1, 0), (1, 0), (2, 1), (3, -1), (4, 0)]   # epoch 3: waiting, no master
    verdict = check_epochs(store, master_grants(_LOG))
    assert verdict.ok and verdict.store_grants == 3 and verdict.broker_grants == 2
    twice = check_epochs([*store, (2, 2)], [(0, 1)])
    assert twice.conflicts == {2: {1, 2}} and not twice.ok
    unrecorded = check_epochs(store, [(0, 1), (2, 4)])
    assert unrecorded.unrecorded == [(2, 4)] and not unrecorded.ok


def test_the_epoch_verdict_fails_when_either_source_shows_no_grant():
    assert not check_epochs([(1, 0)], []).ok             # the log format no longer parses
    assert not check_epochs([], [(0, 1)]).ok


_NAMESRV_LOG = """\
2026-11-25T21:53:14.256711Z [info     ] controller wrote group state   epoch=1 group=chaos-a lease=7587 master=0 revision=12
2026-11-25T21:53:19.1Z [warning  ] master fenced out before its lease expired epoch=1 group=chaos-a lease=7587 master=0 reason=fenced renewed_ago_s=3.6 revision=40
2026-11-25T21:53:19.2Z [info     ] controller wrote group state   epoch=2 group=chaos-a lease=7587 master=1 revision=41
"""


def test_controller_writes_are_read_from_their_log_lines():
    assert controller_writes(_NAMESRV_LOG) == [(12, 7587), (40, 7587), (41, 7587)]


def test_every_controller_write_must_fall_in_its_own_term():
    terms = [(10, 7587), (50, 0), (52, 9001)]   # created, lease ended (deleted), taken over
    good = check_controllers(terms, [(12, 7587), (41, 7587), (60, 9001)], [12, 41, 60, 61])
    assert good.ok and good.terms == 2 and good.writes == 3 and good.unattributed == 1
    late = check_controllers(terms, [(12, 7587), (51, 7587), (55, 7587), (60, 9001)])
    assert late.outside_term == [(51, 7587), (55, 7587)] and not late.ok


def test_the_controller_verdict_fails_with_no_term_or_no_write():
    assert not check_controllers([], [(12, 7587)]).ok
    assert not check_controllers([(10, 7587)], []).ok


# -- outages -----------------------------------------------------------------------------
def test_a_gap_counts_for_the_fault_in_whose_window_it_ends():
    acks = [0.0, 1.0, 1.1, 4.0, 4.1, 9.0, 9.2]
    faults = [("kill_master", 1.5), ("kill_etcd_follower", 4.05), ("kill_master", 8.0)]
    assert outages_by_kind(acks, faults, end=10.0) == {
        "kill_master": pytest.approx(4.9),          # 4.1 -> 9.0: the second kill_master's,
        "kill_etcd_follower": pytest.approx(0.1),   # not the kill_etcd_follower's it began in
    }
    assert outages_by_kind(acks, [("kill_slave", 9.5)], end=10.0) == {"kill_slave": 0.0}
    assert outages_by_kind([0.0, 5.0], [("pause_master", 1.0)], end=4.0) == {
        "pause_master": 0.0}   # acknowledged only after the run ended: not counted


def test_the_summary_line_names_every_verdict():
    history, acks = _chain((0, 3))
    line = summary(7, 2, Verdict(acks=5), 1.25, 0,
                   keys=check_key_writes([KeyAck(0, "/k", b"v", 2)], {"/k": (b"v", 2)}),
                   register=check_register(acks, history),
                   watches=[check_watch("watcher0", [(3, "/a")], [(3, "/a")])],
                   epochs=check_epochs([(1, 0)], [(0, 1)]),
                   controllers=check_controllers([(1, 5)], [(2, 5)], [2]),
                   outages={"kill_etcd_leader": (1.5, 2.25)},
                   elections=check_elections(history_of(
                       live(0, 0), (GROUP_KEY, state(0, 1)), live(1, 0),
                       (GROUP_KEY, state(1, 2))), GROUP_KEY, LIVE),
                   masterless={"wipe_slave": 0.0, "kill_master": 1.25})
    assert line.startswith("chaos seed=7 faults=2 acks=5 losses=0")
    assert "config_acks=1 config_lost=0 revisions_out_of_order=0" in line
    assert "register_acks=1 register_writes=1 chain_breaks=0 register_missing=0" in line
    assert "watcher0:events=1 skipped=0 out_of_order=0" in line
    assert "epoch_grants=1/1 epoch_conflicts=0 epochs_unrecorded=0" in line
    assert "controller_terms=1 controller_writes=1 writes_outside_term=0" in line
    assert "kill_etcd_leader:1.50/2.25s" in line
    assert ("elections=1 below_confirmed=0 judged_by_store=0 judged_by_incarnation=0 waits=0 "
            "deposed=0 elected_gone=0 ended_with_master=True") in line
    assert "masterless=kill_master:1.25s,wipe_slave:0.00s" in line


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


def test_a_pop_left_unacked_must_come_back():
    deliveries = [handed(b"a", 1.0), handed(b"b", 1.0, 1), handed(b"a", 3.0, 0, "%RETRY%g")]
    verdict = check_consumption("g", ACKS, deliveries, STORED, acked=[(b"b", 1.1)],
                                unacked=[(b"a", 1.0)], promotions=[(1.5, 2.5)])
    assert verdict.ok and verdict.unacked == 1 and verdict.returned_across_promotion == 1
    assert verdict.acked == 1   # what test_chaos requires non-zero for the pop group
    stuck = check_consumption("g", ACKS, deliveries[:2], STORED, unacked=[(b"a", 1.0)])
    assert not stuck.ok and stuck.not_returned == [b"a"]


def test_an_acknowledged_pop_handed_out_again_fails_unless_the_producer_stored_it_twice():
    deliveries = [handed(b"a", 1.0), handed(b"b", 1.0, 1), handed(b"b", 4.0, 1)]
    verdict = check_consumption("g", ACKS, deliveries, STORED, acked=[(b"b", 1.1)])
    assert verdict.redelivered_after_ack == [(1.1, deliveries[2])]
    assert verdict.acked_handed_again == [(1.1, deliveries[2])] and not verdict.ok
    twice = {"chaos": {(0, 0): b"a", (0, 1): b"b", (1, 0): b"b"}}   # a retried send's copy
    copy = handed(b"b", 4.0, 0)
    copied = check_consumption("g", ACKS, [*deliveries[:2], copy], twice, acked=[(b"b", 1.1)])
    assert copied.redelivered_after_ack and not copied.acked_handed_again


def test_the_consumer_summary_names_every_figure():
    line = consumption_summary([check_consumption("chaos-pop", ACKS, [handed(b"a", 1.0)],
                                                  STORED)])
    assert line.startswith("chaos-pop:deliveries=1 losses=1 phantom_reads=0 redelivered=0 "
                           "redelivered_after_ack=0 acked_handed_again=0 unacked=0 "
                           "unacked_not_returned=0")


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


def test_the_key_writers_final_read_covers_every_key_in_bounded_ranges():
    from tests.chaos.config_load import KeyWriters

    keys = {f"/chaos/keys/w{w}/{n:09d}": (f"{w}:{n}".encode(), n + 1)
            for w, count in ((0, 25_003), (1, 3)) for n in range(count)}
    asked = []

    def range_(prefix):
        asked.append(prefix)
        kvs = [SimpleNamespace(key=k, value=v, mod_revision=r) for k, (v, r) in keys.items()
               if k.startswith(prefix)]
        assert len(kvs) <= KeyWriters.CHUNK
        return SimpleNamespace(kvs=kvs)

    writers = SimpleNamespace(written=[25_003, 3], CHUNK=KeyWriters.CHUNK,
                              CHUNK_DIGITS=KeyWriters.CHUNK_DIGITS)
    assert KeyWriters.final(writers, SimpleNamespace(range=range_)) == keys
    assert len(asked) == 4


# -- disks ---------------------------------------------------------------------------------
def test_a_lost_tail_zeroes_the_end_of_the_active_segment(tmp_path):
    log = tmp_path / "commitlog"
    _write_log(log, bytes(range(1, 256)) * 12, 1024)   # 3060 bytes, no zero: 3 segments
    assert written_end(log) == 3060
    assert lose_tail(log, written_end(log), 100) == 100
    assert written_end(log) == 2960
    assert lose_tail(log, 2960, 5000) == 2960 - 2048   # only the active segment is cut
    assert written_end(log) == 2048
    assert lose_tail(tmp_path / "commitlog", 0, 10) == 0
    empty = tmp_path / "empty"
    empty.mkdir()
    assert written_end(empty) == 0


# -- elections and masterless time ----------------------------------------------------------
GROUP_KEY, LIVE = "/r/groups/g", "/r/live/g/"


def state(master, epoch, in_sync=(0, 1, 2), confirmed=0, waiting=(), incarnations=None):
    return {"master": master, "epoch": epoch, "in_sync": list(in_sync),
            "confirmed_offset": confirmed, "waiting_for": list(waiting),
            "incarnations": incarnations if incarnations is not None
            else {str(r): f"s{r}:1" for r in in_sync}}


def live(replica, log_end, incarnation=None):
    return (f"{LIVE}{replica}", {"log_end": log_end,
                                 "incarnation": incarnation or f"s{replica}:1"})


def history_of(*changes, first=1):
    """(key, value) changes -> events from revision `first`, one revision and 1 s apart each
    (revision r at time r)."""
    return [ReplicationEvent(rev, key, value, float(rev))
            for rev, (key, value) in enumerate(changes, first)]


def test_an_election_at_or_above_the_confirmed_offset_passes():
    events = history_of(live(0, 0), live(1, 0), live(2, 0), (GROUP_KEY, state(0, 1)),
                        (GROUP_KEY, state(0, 1, confirmed=500)), live(1, 500), live(2, 400),
                        (f"{LIVE}0", None), (GROUP_KEY, state(1, 2, (1, 2), confirmed=500)),
                        live(1, 700))
    verdict = check_elections(events, GROUP_KEY, LIVE)
    assert verdict.ok and verdict.elections == 1 and not verdict.gone


def test_a_wiped_replica_elected_is_below_the_confirmed_offset():
    """Issue #36: the replica back with an empty disk (another store id) elected."""
    events = history_of(live(0, 0), live(1, 0), (GROUP_KEY, state(0, 1, (0, 1))),
                        (GROUP_KEY, state(0, 1, (0, 1), confirmed=900)),
                        live(1, 0, "t1:1"), (f"{LIVE}0", None),
                        (GROUP_KEY, state(1, 2, (1,), confirmed=900)), live(1, 50, "t1:1"))
    verdict = check_elections(events, GROUP_KEY, LIVE)
    assert not verdict.ok and [(e.master, e.epoch, e.held, e.floor) for e in verdict.below] \
        == [(1, 2, 0, 900)]


def test_a_lagging_live_key_of_the_counted_incarnation_is_no_failure():
    """The slave's last renewal showed 400, the master confirmed 500 since: the same process
    acknowledged it, so it holds it (`by_incarnation`) — unless its store says otherwise."""
    events = history_of(live(0, 0), live(1, 400), (GROUP_KEY, state(0, 1, (0, 1))),
                        (GROUP_KEY, state(0, 1, (0, 1), confirmed=500)), (f"{LIVE}0", None),
                        (GROUP_KEY, state(1, 2, (1,), confirmed=500)), live(1, 600))
    verdict = check_elections(events, GROUP_KEY, LIVE)
    assert verdict.ok and verdict.by_incarnation == 1
    lost = check_elections(events, GROUP_KEY, LIVE, store_ends={(1, 2): 450})
    assert lost.by_store == 1 and [e.held for e in lost.below] == [450] and not lost.ok
    held = check_elections(events, GROUP_KEY, LIVE, store_ends={(1, 2): 520})
    assert held.ok and held.by_store == 1 and held.by_incarnation == 0


def test_a_group_that_waits_is_no_failure_but_must_end_with_a_master():
    waiting = history_of(live(0, 0), live(1, 0), (GROUP_KEY, state(0, 1, (0, 1))),
                         (GROUP_KEY, state(0, 1, (0,), confirmed=900)), live(1, 0, "t1:1"),
                         (f"{LIVE}0", None),
                         (GROUP_KEY, state(0, 1, (0,), confirmed=900, waiting=(0,))))
    verdict = check_elections(waiting, GROUP_KEY, LIVE)
    assert verdict.waits == 1 and not verdict.below and not verdict.ended_with_master
    back = history_of(live(0, 900, "s0:2"), (GROUP_KEY, state(0, 1, (0,), confirmed=900)),
                      (GROUP_KEY, state(0, 2, (0,), confirmed=900)), first=len(waiting) + 1)
    verdict = check_elections(waiting + back, GROUP_KEY, LIVE)
    assert verdict.ok and verdict.waits == 1 and verdict.elections == 1


def test_the_election_verdict_fails_with_nothing_to_judge():
    assert not check_elections(history_of(live(0, 0), (GROUP_KEY, state(0, 1))), GROUP_KEY,
                               LIVE).ok


def test_a_master_elected_from_a_dead_process_key_is_reported():
    """The controller elected replica 1 from the key its killed process left: its next key
    comes under another incarnation, with no renewal under the elected one between."""
    events = history_of(live(0, 0), live(1, 0), (GROUP_KEY, state(0, 1, (0, 1))),
                        (f"{LIVE}0", None), (GROUP_KEY, state(1, 2, (1,))),
                        live(1, 0, "t1:1"))
    verdict = check_elections(events, GROUP_KEY, LIVE)
    assert [(e.master, e.epoch) for e in verdict.gone] == [(1, 2)]


def test_store_master_ends_are_read_from_the_brokers_logs():
    text = ("2026-11-27T15:24:58.89Z [info     ] store is master                epoch=6 "
            "log_end=2214116\n"
            "2026-11-27T15:25:58.89Z [info     ] store is master                epoch=6 "
            "log_end=2300000\n"
            "2026-11-27T15:25:59.89Z [info     ] store is slave                 epoch=7 "
            "log_end=2300100\n")
    assert store_master_ends(text) == {6: 2214116}


def test_masterless_spans_follow_the_group_key_and_the_masters_live_key():
    events = history_of(live(0, 0), live(1, 0), (GROUP_KEY, state(0, 1)),   # t=1..3
                        (f"{LIVE}0", None),                                  # t=4: gone
                        (GROUP_KEY, state(1, 2, (1,))),                       # t=5: elected
                        (GROUP_KEY, state(1, 2, (1,), waiting=(0,))),         # t=6: waits
                        (GROUP_KEY, state(-1, 3, (1,))),                      # t=7
                        (GROUP_KEY, state(1, 4, (1,))),                       # t=8
                        (f"{LIVE}1", None))                                   # t=9
    assert masterless_spans(events, GROUP_KEY, LIVE, end=12.0) == [(4, 5), (6, 8), (9, 12.0)]
    assert masterless_spans(events, GROUP_KEY, LIVE, end=6.5) == [(4, 5), (6, 6.5)]
    faults = [("kill_master", 3.5), ("wipe_slave", 5.5), ("kill_master", 8.5)]
    assert spans_by_kind(masterless_spans(events, GROUP_KEY, LIVE, end=12.0), faults) == {
        "kill_master": 3.0, "wipe_slave": 2.0}
    assert spans_by_kind([(1.0, 2.0)], faults) == {"kill_master": 0.0, "wipe_slave": 0.0}


def test_a_killed_master_is_gone_from_its_kill_until_a_new_process_or_master_is_up():
    """Its key stays until the controller notices; a renewal written before the kill but
    handed over after it does not bring it back; its restarted process (another incarnation)
    does."""
    events = history_of(live(0, 0), live(1, 0), (GROUP_KEY, state(0, 1)),   # t=1..3
                        live(0, 10),                                          # t=4, late
                        (f"{LIVE}0", None),                                   # t=5: fenced
                        (GROUP_KEY, state(0, 1, waiting=(0,))),                # t=6: waits
                        live(0, 10, "s0:2"),                                  # t=7: back
                        (GROUP_KEY, state(0, 1)))                              # t=8
    assert masterless_spans(events, GROUP_KEY, LIVE, end=10.0, downs=[(3.5, 0)]) == [
        (3.5, 8.0)]
    assert masterless_spans(events, GROUP_KEY, LIVE, end=10.0) == [(5.0, 8.0)]
    assert masterless_spans(events, GROUP_KEY, LIVE, end=10.0, downs=[(3.5, 1)]) == [
        (5.0, 8.0)]   # a slave's kill is no master's loss
