"""The chaos run's compacted-topic verdict (tests/chaos/compacted.py): what each replica serves
of the compacted topic against every send the writer recorded — and that it fails."""

from __future__ import annotations

from tests.chaos.compacted import Write, body_of, check_compacted, settled


def write(sequence: int, key: int, offset: int | None, tombstone: bool = False) -> Write:
    return Write(sequence, key, body_of(key, sequence, tombstone), tombstone, offset)


# key 0 (queue 0): v@0, v@1 (latest); key 2 (queue 0): v@2 then a tombstone @3;
# key 1 (queue 1): v@0, then an unacknowledged send
WRITES = [write(0, 0, 0), write(1, 2, 2 - 1), write(2, 1, 0), write(3, 0, 2),
          write(4, 2, 3, tombstone=True), write(5, 1, None)]
COMPACTED = {(0, 2): WRITES[3].body, (1, 0): WRITES[2].body}


def test_latest_acknowledged_values_at_their_offsets_pass():
    verdict = check_compacted(WRITES, {"replica-0": COMPACTED, "replica-1": dict(COMPACTED)})
    assert verdict.ok, verdict.problems
    assert (verdict.acked, verdict.tombstones_acked, verdict.keys_judged) == (5, 1, 6)
    assert verdict.explained == 0 and verdict.live_served == 4


def test_a_superseded_record_kept_fails():
    kept = {**COMPACTED, (0, 0): WRITES[0].body}
    verdict = check_compacted(WRITES, {"replica-0": kept})
    assert len(verdict.problems) == 1 and "2 records kept" in verdict.problems[0]


def test_the_latest_acknowledged_value_gone_fails():
    verdict = check_compacted(WRITES, {"replica-0": {(1, 0): WRITES[2].body}})
    assert len(verdict.problems) == 1 and "key 0" in verdict.problems[0]
    assert "is gone" in verdict.problems[0]


def test_an_older_acknowledged_value_in_place_of_the_latest_fails():
    stale = {(0, 0): WRITES[0].body, (1, 0): WRITES[2].body}
    verdict = check_compacted(WRITES, {"replica-0": stale})
    assert len(verdict.problems) == 1 and "not its last acknowledged" in verdict.problems[0]


def test_a_tombstone_kept_past_delete_retention_fails():
    verdict = check_compacted(WRITES, {"replica-0": {**COMPACTED, (0, 3): WRITES[4].body}})
    assert len(verdict.problems) == 1 and "kept past delete.retention.ms" in verdict.problems[0]


def test_a_moved_offset_fails():
    moved = {(0, 1): WRITES[3].body, (1, 0): WRITES[2].body}
    verdict = check_compacted(WRITES, {"replica-0": moved})
    assert len(verdict.problems) == 1 and "acknowledged at 2" in verdict.problems[0]


def test_a_record_nobody_sent_or_in_another_queue_fails():
    verdict = check_compacted(WRITES, {"replica-0": {**COMPACTED, (0, 9): b"9:99"}})
    assert len(verdict.problems) == 1 and "not a write of that queue" in verdict.problems[0]
    verdict = check_compacted(WRITES, {"replica-0": {(1, 2): WRITES[3].body,
                                                     (1, 0): WRITES[2].body}})
    assert any("not a write of that queue" in p for p in verdict.problems)


def test_an_unacknowledged_write_stored_after_the_last_acknowledged_one_is_explained():
    stored = {(0, 2): WRITES[3].body, (1, 1): WRITES[5].body}
    verdict = check_compacted(WRITES, {"replica-0": stored})
    assert verdict.ok, verdict.problems
    assert verdict.explained == 1
    below = [write(0, 1, 5), write(1, 1, None)]          # but not below it
    verdict = check_compacted(below, {"replica-0": {(1, 3): below[1].body}})
    assert len(verdict.problems) == 1 and "below its last acknowledged" in verdict.problems[0]


def test_an_unacknowledged_tombstone_explains_a_key_gone():
    writes = [write(0, 0, 0), write(1, 0, None, tombstone=True)]
    verdict = check_compacted(writes, {"replica-0": {}})
    assert verdict.ok and verdict.explained == 1
    verdict = check_compacted(writes[:1], {"replica-0": {}})
    assert not verdict.ok


def test_replicas_that_differ_fail_and_a_silent_one_too():
    other = {(0, 2): WRITES[3].body}
    verdict = check_compacted(WRITES, {"replica-0": COMPACTED, "replica-1": other,
                                       "replica-2": None})
    assert verdict.diverged == ["replica-1"]
    assert any("replica-2 did not answer" in p for p in verdict.problems)


def test_nothing_acknowledged_judges_nothing():
    verdict = check_compacted([write(0, 0, None)], {"replica-0": {}})
    assert "nothing judged" in verdict.problems[-1]


def test_settled_needs_every_replica_alike_one_record_per_key_and_no_tombstone():
    assert settled({"a": COMPACTED, "b": dict(COMPACTED)})
    assert not settled({})
    assert not settled({"a": COMPACTED, "b": None})
    assert not settled({"a": COMPACTED, "b": {(0, 2): WRITES[3].body}})
    assert not settled({"a": {**COMPACTED, (0, 0): WRITES[0].body}})
    assert not settled({"a": {**COMPACTED, (0, 3): WRITES[4].body}})


def test_nothing_to_judge_is_not_a_pass():
    """No acknowledged write, or no replica read: nothing was judged, so the verdict fails."""
    assert not check_compacted([write(0, 0, None)], {"replica-0": {}}).ok
    assert not check_compacted(WRITES, {}).ok
