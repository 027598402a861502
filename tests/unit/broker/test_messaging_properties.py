"""Property: whatever the batch sizes, pull pagination and tag filter, a consumer walking a
queue with next_begin_offset sees every matching record exactly once, in order."""

from __future__ import annotations

import asyncio
import itertools
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st
from tidemq.broker.messaging import PullStatus
from tidemq.broker.topic_table import TopicConfig
from tidemq.common import record

from tests.support.local_broker import LocalBroker

TAGS = ["A", "B", ""]


@settings(max_examples=25, deadline=None)
@given(batches=st.lists(st.lists(st.sampled_from(TAGS), min_size=1, max_size=6), min_size=1,
                        max_size=6),
       page=st.integers(1, 7), wanted=st.sampled_from(["", "A", "A || B", "B"]))
def test_walk_sees_each_matching_record_once_in_order(batches, page, wanted):
    with tempfile.TemporaryDirectory() as tmp:
        local = LocalBroker(Path(tmp), [TopicConfig("t", 1)], segment_size=64 * 1024,
                            max_message_size=None, index_slots=16, index_entries=64)
        store, messaging = local.store, local.messaging
        try:
            counter = itertools.count()
            sent = []
            for tags in batches:
                records = []
                for tag in tags:
                    n = next(counter)
                    sent.append((n, tag))
                    records.append(record.encode_message(
                        record.OutgoingMessage("t", str(n).encode(), tags=tag))[0])
                asyncio.run(messaging.send("t", 0, b"".join(records), len(records)))
            assert store.wait_dispatched(10)
            accepted = {t.strip() for t in wanted.split("||")} if wanted else None
            expected = [n for n, tag in sent if accepted is None or tag in accepted]
            seen, offsets, offset = [], [], 0
            while offset < len(sent):
                outcome = asyncio.run(messaging.pull("t", 0, offset, page, 0, 0, wanted))
                assert outcome.status in (PullStatus.FOUND, PullStatus.NO_MATCHED_MSG)
                assert outcome.next_begin_offset > offset
                for rec in record.iter_records(outcome.records):
                    seen.append(int(bytes(rec.body)))
                    offsets.append(rec.queue_offset)
                offset = outcome.next_begin_offset
            assert seen == expected
            assert offsets == sorted(set(offsets))
            assert asyncio.run(messaging.pull("t", 0, offset, page, 0, 0, wanted)).status is PullStatus.NO_NEW_MSG
        finally:
            local.close()
